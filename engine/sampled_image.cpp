// Sampler, layout, pool and the one descriptor set of a SampledImage.
#include "engine/sampled_image.h"

#include "engine/vk_check.h"

namespace cubeforge::engine {

Result<std::unique_ptr<SampledImage>> SampledImage::create(Context& context, VkImageView view) {
  std::unique_ptr<SampledImage> image(new SampledImage(context));
  VkDevice device = context.device();
  VkSamplerCreateInfo sampler_info{VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO};
  sampler_info.magFilter = sampler_info.minFilter = VK_FILTER_LINEAR;
  sampler_info.mipmapMode = VK_SAMPLER_MIPMAP_MODE_NEAREST;
  sampler_info.addressModeU = sampler_info.addressModeV = sampler_info.addressModeW =
      VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE;
  sampler_info.maxLod = 0.f;
  VK_TRY("sampled image", vkCreateSampler(device, &sampler_info, nullptr, &image->sampler_), "sampler");

  VkDescriptorSetLayoutBinding binding{};
  binding.binding = 0;
  binding.descriptorType = VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER;
  binding.descriptorCount = 1;
  binding.stageFlags = VK_SHADER_STAGE_FRAGMENT_BIT;
  VkDescriptorSetLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  layout_info.bindingCount = 1;
  layout_info.pBindings = &binding;
  VK_TRY("sampled image", vkCreateDescriptorSetLayout(device, &layout_info, nullptr, &image->layout_), "layout");

  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 1};
  VkDescriptorPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool_info.maxSets = 1;
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &size;
  VK_TRY("sampled image", vkCreateDescriptorPool(device, &pool_info, nullptr, &image->pool_), "pool");
  VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  alloc.descriptorPool = image->pool_;
  alloc.descriptorSetCount = 1;
  alloc.pSetLayouts = &image->layout_;
  VK_TRY("sampled image", vkAllocateDescriptorSets(device, &alloc, &image->set_), "descriptor set");
  image->set_view(view);
  return image;
}

SampledImage::~SampledImage() {
  VkDevice device = context_.device();
  vkDeviceWaitIdle(device);
  if (pool_) vkDestroyDescriptorPool(device, pool_, nullptr);
  if (layout_) vkDestroyDescriptorSetLayout(device, layout_, nullptr);
  if (sampler_) vkDestroySampler(device, sampler_, nullptr);
}

void SampledImage::set_view(VkImageView view) {
  context_.wait_idle();
  VkDescriptorImageInfo image_info{sampler_, view, VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL};
  VkWriteDescriptorSet write{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
  write.dstSet = set_;
  write.dstBinding = 0;
  write.descriptorCount = 1;
  write.descriptorType = VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER;
  write.pImageInfo = &image_info;
  vkUpdateDescriptorSets(context_.device(), 1, &write, 0, nullptr);
}

}  // namespace cubeforge::engine
