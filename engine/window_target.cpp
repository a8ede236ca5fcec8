// Surface, swapchain (re)creation, acquire/present.
#include "engine/window_target.h"

#include <algorithm>
#include <cstdlib>

#include "engine/vk_check.h"

namespace cubeforge::engine {

Status initialise_window_system() {
  if (glfwInit()) return ok_status();
  const char* description = nullptr;
  glfwGetError(&description);
  const char* display = std::getenv("DISPLAY");
  return make_error(ErrorCode::kUnsupported,
                    std::string("window: GLFW cannot reach the display (DISPLAY=") + (display ? display : "unset") +
                        "): " + (description ? description : "no reason given"));
}

Result<std::vector<std::string>> window_instance_extensions() {
  if (!glfwVulkanSupported())
    return make_error(ErrorCode::kUnsupported,
                      "window: GLFW found no Vulkan loader or no window-system support (is DISPLAY set?)");
  uint32_t count = 0;
  const char** names = glfwGetRequiredInstanceExtensions(&count);
  if (!names) return make_error(ErrorCode::kUnsupported, "window: GLFW cannot make Vulkan surfaces on this system");
  return std::vector<std::string>(names, names + count);
}

Result<std::unique_ptr<WindowTarget>> WindowTarget::create(Renderer& renderer, GLFWwindow* window,
                                                           const WindowOptions& options) {
  Context& context = renderer.context();
  if (!context.surface_enabled())
    return make_error(ErrorCode::kInvalidArgument,
                      "window: the Vulkan context was made without window-system extensions; pass "
                      "window_instance_extensions() in ContextOptions::instance_extensions");
  if (!context.has_swapchain())
    return make_error(ErrorCode::kUnsupported, "window: " + context.device_name() + " has no VK_KHR_swapchain");
  std::unique_ptr<WindowTarget> target(new WindowTarget(renderer, window));
  target->options_ = options;
  VK_TRY("window", glfwCreateWindowSurface(context.instance(), window, nullptr, &target->surface_),
         "create the context with window_instance_extensions()");
  VkBool32 can_present = VK_FALSE;
  vkGetPhysicalDeviceSurfaceSupportKHR(context.physical_device(), context.queue_family(), target->surface_,
                                       &can_present);
  if (!can_present)
    return make_error(ErrorCode::kUnsupported,
                      "window: the graphics queue of " + context.device_name() + " cannot present to this window");

  uint32_t count = 0;
  vkGetPhysicalDeviceSurfaceFormatsKHR(context.physical_device(), target->surface_, &count, nullptr);
  std::vector<VkSurfaceFormatKHR> formats(count);
  vkGetPhysicalDeviceSurfaceFormatsKHR(context.physical_device(), target->surface_, &count, formats.data());
  if (formats.empty()) return make_error(ErrorCode::kUnsupported, "window: the surface offers no formats");
  // UNORM like the offscreen target, so both show the same colours.
  target->format_ = formats[0];
  for (VkFormat wanted : {VK_FORMAT_B8G8R8A8_UNORM, VK_FORMAT_R8G8B8A8_UNORM}) {
    auto it = std::find_if(formats.begin(), formats.end(), [&](const VkSurfaceFormatKHR& f) {
      return f.format == wanted && f.colorSpace == VK_COLOR_SPACE_SRGB_NONLINEAR_KHR;
    });
    if (it != formats.end()) {
      target->format_ = *it;
      break;
    }
  }
  vkGetPhysicalDeviceSurfacePresentModesKHR(context.physical_device(), target->surface_, &count, nullptr);
  std::vector<VkPresentModeKHR> modes(count);
  vkGetPhysicalDeviceSurfacePresentModesKHR(context.physical_device(), target->surface_, &count, modes.data());
  target->present_mode_ = VK_PRESENT_MODE_FIFO_KHR;  // always available
  if (!options.vsync) {
    for (VkPresentModeKHR wanted : {VK_PRESENT_MODE_MAILBOX_KHR, VK_PRESENT_MODE_IMMEDIATE_KHR}) {
      if (std::find(modes.begin(), modes.end(), wanted) != modes.end()) {
        target->present_mode_ = wanted;
        break;
      }
    }
  }
  target->samples_ = choose_samples(context, options.samples);
  CUBEFORGE_ASSIGN_OR_RETURN(target->render_pass_,
                             create_scene_render_pass(context, target->format_.format, target->samples_,
                                                      VK_IMAGE_LAYOUT_PRESENT_SRC_KHR));
  CUBEFORGE_TRY(renderer.prepare({target->render_pass_, VK_NULL_HANDLE, {}, target->format_.format, target->samples_}));
  CUBEFORGE_TRY(target->build_swapchain());
  return target;
}

WindowTarget::~WindowTarget() {
  context_.wait_idle();
  destroy_swapchain_resources();
  if (swapchain_) vkDestroySwapchainKHR(context_.device(), swapchain_, nullptr);
  if (render_pass_) vkDestroyRenderPass(context_.device(), render_pass_, nullptr);
  if (surface_) vkDestroySurfaceKHR(context_.instance(), surface_, nullptr);
}

void WindowTarget::destroy_swapchain_resources() {
  VkDevice device = context_.device();
  for (VkFramebuffer f : framebuffers_) vkDestroyFramebuffer(device, f, nullptr);
  for (VkImageView v : image_views_) vkDestroyImageView(device, v, nullptr);
  for (VkSemaphore s : render_finished_) vkDestroySemaphore(device, s, nullptr);
  framebuffers_.clear();
  image_views_.clear();
  render_finished_.clear();
  images_.clear();
  multisampled_.reset();
  depth_.reset();
}

Result<bool> WindowTarget::build_swapchain() {
  int width = 0, height = 0;
  glfwGetFramebufferSize(window_, &width, &height);
  if (width == 0 || height == 0) return false;

  VkDevice device = context_.device();
  // Rebuilds are rare (resize); waiting for the GPU keeps the old images' users simple.
  context_.wait_idle();
  VkSurfaceCapabilitiesKHR caps;
  VK_TRY("swapchain", vkGetPhysicalDeviceSurfaceCapabilitiesKHR(context_.physical_device(), surface_, &caps), "");
  VkExtent2D extent = caps.currentExtent;
  if (extent.width == UINT32_MAX) {
    extent.width = std::clamp(uint32_t(width), caps.minImageExtent.width, caps.maxImageExtent.width);
    extent.height = std::clamp(uint32_t(height), caps.minImageExtent.height, caps.maxImageExtent.height);
  }
  if (extent.width == 0 || extent.height == 0) return false;
  min_image_count_ = std::max(caps.minImageCount + 1, 2u);
  if (caps.maxImageCount > 0) min_image_count_ = std::min(min_image_count_, caps.maxImageCount);

  VkSwapchainCreateInfoKHR info{VK_STRUCTURE_TYPE_SWAPCHAIN_CREATE_INFO_KHR};
  info.surface = surface_;
  info.minImageCount = min_image_count_;
  info.imageFormat = format_.format;
  info.imageColorSpace = format_.colorSpace;
  info.imageExtent = extent;
  info.imageArrayLayers = 1;
  info.imageUsage = VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT;
  info.imageSharingMode = VK_SHARING_MODE_EXCLUSIVE;
  info.preTransform = caps.currentTransform;
  // The background writes alpha 0 (coverage); the window must ignore alpha.
  info.compositeAlpha = VK_COMPOSITE_ALPHA_OPAQUE_BIT_KHR;
  if (!(caps.supportedCompositeAlpha & VK_COMPOSITE_ALPHA_OPAQUE_BIT_KHR)) {
    for (auto mode : {VK_COMPOSITE_ALPHA_INHERIT_BIT_KHR, VK_COMPOSITE_ALPHA_PRE_MULTIPLIED_BIT_KHR,
                      VK_COMPOSITE_ALPHA_POST_MULTIPLIED_BIT_KHR}) {
      if (caps.supportedCompositeAlpha & mode) {
        info.compositeAlpha = mode;
        break;
      }
    }
  }
  info.presentMode = present_mode_;
  info.clipped = VK_TRUE;
  info.oldSwapchain = swapchain_;
  VkSwapchainKHR swapchain;
  VK_TRY("swapchain", vkCreateSwapchainKHR(device, &info, nullptr, &swapchain),
         std::to_string(extent.width) + "x" + std::to_string(extent.height));
  destroy_swapchain_resources();
  if (swapchain_) vkDestroySwapchainKHR(device, swapchain_, nullptr);
  swapchain_ = swapchain;
  extent_ = extent;

  uint32_t count = 0;
  vkGetSwapchainImagesKHR(device, swapchain_, &count, nullptr);
  images_.resize(count);
  vkGetSwapchainImagesKHR(device, swapchain_, &count, images_.data());

  const bool multisampled = samples_ != VK_SAMPLE_COUNT_1_BIT;
  if (multisampled) {
    CUBEFORGE_ASSIGN_OR_RETURN(
        multisampled_, Image::create(context_,
                                     {extent_, format_.format,
                                      VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | VK_IMAGE_USAGE_TRANSIENT_ATTACHMENT_BIT,
                                      samples_, VK_IMAGE_ASPECT_COLOR_BIT},
                                     "window multisampled colour"));
  }
  CUBEFORGE_ASSIGN_OR_RETURN(depth_, Image::create(context_,
                                                   {extent_, context_.depth_format(),
                                                    VK_IMAGE_USAGE_DEPTH_STENCIL_ATTACHMENT_BIT, samples_,
                                                    VK_IMAGE_ASPECT_DEPTH_BIT},
                                                   "window depth"));
  for (VkImage image : images_) {
    VkImageViewCreateInfo view_info{VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO};
    view_info.image = image;
    view_info.viewType = VK_IMAGE_VIEW_TYPE_2D;
    view_info.format = format_.format;
    view_info.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
    VkImageView view;
    VK_TRY("swapchain", vkCreateImageView(device, &view_info, nullptr, &view), "swapchain image view");
    image_views_.push_back(view);

    std::vector<VkImageView> attachments;
    attachments.push_back(multisampled ? multisampled_.view() : view);
    attachments.push_back(depth_.view());
    if (multisampled) attachments.push_back(view);
    VkFramebufferCreateInfo fb_info{VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO};
    fb_info.renderPass = render_pass_;
    fb_info.attachmentCount = static_cast<uint32_t>(attachments.size());
    fb_info.pAttachments = attachments.data();
    fb_info.width = extent_.width;
    fb_info.height = extent_.height;
    fb_info.layers = 1;
    VkFramebuffer framebuffer;
    VK_TRY("swapchain", vkCreateFramebuffer(device, &fb_info, nullptr, &framebuffer), "swapchain framebuffer");
    framebuffers_.push_back(framebuffer);

    VkSemaphoreCreateInfo semaphore_info{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    VkSemaphore semaphore;
    VK_TRY("swapchain", vkCreateSemaphore(device, &semaphore_info, nullptr, &semaphore), "render-finished semaphore");
    render_finished_.push_back(semaphore);
  }
  rebuild_needed_ = false;
  swapchain_builds_++;
  return true;
}

Result<FrameStatus> WindowTarget::draw_frame(const OrbitCamera& camera, const SceneSettings& settings,
                                             const OverlayRecorder& overlay) {
  int width = 0, height = 0;
  glfwGetFramebufferSize(window_, &width, &height);
  if (width == 0 || height == 0) return FrameStatus::kMinimised;
  if (rebuild_needed_ || swapchain_ == VK_NULL_HANDLE || images_.empty() || uint32_t(width) != extent_.width ||
      uint32_t(height) != extent_.height) {
    CUBEFORGE_ASSIGN_OR_RETURN(bool built, build_swapchain());
    if (!built) return FrameStatus::kMinimised;
  }

  FrameResources& frame = renderer_.acquire_frame();
  uint32_t image_index = 0;
  VkResult acquired = vkAcquireNextImageKHR(context_.device(), swapchain_, UINT64_MAX, frame.image_available,
                                            VK_NULL_HANDLE, &image_index);
  if (acquired == VK_ERROR_OUT_OF_DATE_KHR) {
    rebuild_needed_ = true;
    return FrameStatus::kSkipped;
  }
  if (acquired == VK_SUBOPTIMAL_KHR) rebuild_needed_ = true;  // still usable: draw this one, rebuild after
  else if (acquired != VK_SUCCESS)
    return vulkan_error("window frame", "vkAcquireNextImageKHR", acquired, "the window surface was lost");

  RenderPassTarget target{render_pass_, framebuffers_[image_index], extent_, format_.format, samples_};
  CUBEFORGE_TRY(renderer_.record(frame, target, camera, settings, overlay, {}));
  renderer_.submit(frame, {{frame.image_available, 0, VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT}},
                   {{render_finished_[image_index], 0}});

  VkPresentInfoKHR present{VK_STRUCTURE_TYPE_PRESENT_INFO_KHR};
  present.waitSemaphoreCount = 1;
  present.pWaitSemaphores = &render_finished_[image_index];
  present.swapchainCount = 1;
  present.pSwapchains = &swapchain_;
  present.pImageIndices = &image_index;
  VkResult presented = vkQueuePresentKHR(context_.queue(), &present);
  if (presented == VK_ERROR_OUT_OF_DATE_KHR || presented == VK_SUBOPTIMAL_KHR)
    rebuild_needed_ = true;
  else if (presented != VK_SUCCESS)
    return vulkan_error("window frame", "vkQueuePresentKHR", presented, "the window surface was lost");
  return FrameStatus::kPresented;
}

WindowVulkanHandles WindowTarget::vulkan_handles() const {
  return {context_.instance(), context_.physical_device(), context_.device(), context_.queue_family(),
          context_.queue(),    min_image_count_,           image_count(),      samples_,
          render_pass_};
}

}  // namespace cubeforge::engine
