// Pipelines, per-frame resources and scene recording.
#include "engine/renderer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <glm/gtc/type_ptr.hpp>

#include "engine/vk_check.h"

namespace cubeforge::engine {
namespace {

// SPIR-V built from shaders/ by glslc (see engine/CMakeLists.txt).
const uint32_t kBackgroundVert[] =
#include "background.vert.spv.h"
    ;
const uint32_t kBackgroundFrag[] =
#include "background.frag.spv.h"
    ;
const uint32_t kMeshVert[] =
#include "mesh.vert.spv.h"
    ;
const uint32_t kMeshFrag[] =
#include "mesh.frag.spv.h"
    ;
const uint32_t kWireframeVert[] =
#include "wireframe.vert.spv.h"
    ;
const uint32_t kWireframeFrag[] =
#include "wireframe.frag.spv.h"
    ;
const uint32_t kGridVert[] =
#include "grid.vert.spv.h"
    ;
const uint32_t kGridFrag[] =
#include "grid.frag.spv.h"
    ;

template <size_t N>
Result<VkShaderModule> make_module(VkDevice device, const uint32_t (&words)[N], const char* name) {
  VkShaderModuleCreateInfo info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  info.codeSize = N * sizeof(uint32_t);
  info.pCode = words;
  VkShaderModule module;
  VK_TRY("pipelines", vkCreateShaderModule(device, &info, nullptr, &module), name);
  return module;
}

void set_vec4(float (&out)[4], glm::vec3 v, float w) {
  out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = w;
}
void set_vec4(float (&out)[4], const std::array<float, 3>& v, float w) {
  out[0] = v[0], out[1] = v[1], out[2] = v[2], out[3] = w;
}

// A grid spacing of 1, 2 or 5 times a power of ten, about a fifth of the size.
float nice_cell_size(float size) {
  float raw = std::max(size / 5.f, 1e-6f);
  float power = std::pow(10.f, std::floor(std::log10(raw)));
  for (float m : {1.f, 2.f, 5.f})
    if (m * power >= raw) return m * power;
  return 10.f * power;
}

struct PipelineDescription {
  VkShaderModule vertex;
  VkShaderModule fragment;
  bool mesh_vertex_input;
  bool positions_only = false;  // binding 0 only (the wireframe needs no normals)
  VkPolygonMode polygon_mode = VK_POLYGON_MODE_FILL;
  bool depth_test = true;
  bool depth_write = true;
  VkCompareOp depth_compare = VK_COMPARE_OP_LESS;
  float depth_bias = 0.f;  // constant and slope factor
  bool blend = false;
  VkColorComponentFlags write_mask =
      VK_COLOR_COMPONENT_R_BIT | VK_COLOR_COMPONENT_G_BIT | VK_COLOR_COMPONENT_B_BIT | VK_COLOR_COMPONENT_A_BIT;
};

}  // namespace

VkSampleCountFlagBits choose_samples(const Context& context, VkSampleCountFlagBits requested) {
  if (requested == 0) requested = VK_SAMPLE_COUNT_4_BIT;
  VkSampleCountFlags supported = context.properties().limits.framebufferColorSampleCounts &
                                 context.properties().limits.framebufferDepthSampleCounts;
  for (auto s : {VK_SAMPLE_COUNT_8_BIT, VK_SAMPLE_COUNT_4_BIT, VK_SAMPLE_COUNT_2_BIT})
    if (s <= requested && (supported & s)) return s;
  return VK_SAMPLE_COUNT_1_BIT;
}

Result<VkRenderPass> create_scene_render_pass(Context& context, VkFormat color_format, VkSampleCountFlagBits samples,
                                              VkImageLayout final_layout) {
  const bool multisampled = samples != VK_SAMPLE_COUNT_1_BIT;
  std::vector<VkAttachmentDescription> attachments;
  VkAttachmentDescription color{};
  color.format = color_format;
  color.samples = samples;
  color.loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR;
  color.storeOp = multisampled ? VK_ATTACHMENT_STORE_OP_DONT_CARE : VK_ATTACHMENT_STORE_OP_STORE;
  color.stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE;
  color.stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE;
  color.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
  color.finalLayout = multisampled ? VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL : final_layout;
  attachments.push_back(color);

  VkAttachmentDescription depth{};
  depth.format = context.depth_format();
  depth.samples = samples;
  depth.loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR;
  // Kept so a single-sample offscreen target can read depth back.
  depth.storeOp = VK_ATTACHMENT_STORE_OP_STORE;
  depth.stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE;
  depth.stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE;
  depth.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
  depth.finalLayout = VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL;
  attachments.push_back(depth);

  if (multisampled) {
    VkAttachmentDescription resolve{};
    resolve.format = color_format;
    resolve.samples = VK_SAMPLE_COUNT_1_BIT;
    resolve.loadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE;
    resolve.storeOp = VK_ATTACHMENT_STORE_OP_STORE;
    resolve.stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE;
    resolve.stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE;
    resolve.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
    resolve.finalLayout = final_layout;
    attachments.push_back(resolve);
  }
  VkAttachmentReference color_ref{0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
  VkAttachmentReference depth_ref{1, VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL};
  VkAttachmentReference resolve_ref{2, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
  VkSubpassDescription subpass{};
  subpass.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS;
  subpass.colorAttachmentCount = 1;
  subpass.pColorAttachments = &color_ref;
  subpass.pDepthStencilAttachment = &depth_ref;
  subpass.pResolveAttachments = multisampled ? &resolve_ref : nullptr;

  // Before: earlier frames' attachment writes and reads (sampling, copies,
  // presentation via the acquire semaphore) of the same images.
  // After: copies and shader reads of the result.
  constexpr VkPipelineStageFlags kAttachmentStages = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT |
                                                     VK_PIPELINE_STAGE_EARLY_FRAGMENT_TESTS_BIT |
                                                     VK_PIPELINE_STAGE_LATE_FRAGMENT_TESTS_BIT;
  constexpr VkAccessFlags kAttachmentWrites =
      VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT | VK_ACCESS_DEPTH_STENCIL_ATTACHMENT_WRITE_BIT;
  std::array<VkSubpassDependency, 2> dependencies{};
  dependencies[0].srcSubpass = VK_SUBPASS_EXTERNAL;
  dependencies[0].dstSubpass = 0;
  dependencies[0].srcStageMask = kAttachmentStages | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT;
  dependencies[0].srcAccessMask = kAttachmentWrites;
  dependencies[0].dstStageMask = kAttachmentStages;
  dependencies[0].dstAccessMask = kAttachmentWrites | VK_ACCESS_COLOR_ATTACHMENT_READ_BIT |
                                  VK_ACCESS_DEPTH_STENCIL_ATTACHMENT_READ_BIT;
  dependencies[1].srcSubpass = 0;
  dependencies[1].dstSubpass = VK_SUBPASS_EXTERNAL;
  dependencies[1].srcStageMask = kAttachmentStages;
  dependencies[1].srcAccessMask = kAttachmentWrites;
  dependencies[1].dstStageMask = VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT;
  dependencies[1].dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_SHADER_READ_BIT;

  VkRenderPassCreateInfo info{VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO};
  info.attachmentCount = static_cast<uint32_t>(attachments.size());
  info.pAttachments = attachments.data();
  info.subpassCount = 1;
  info.pSubpasses = &subpass;
  info.dependencyCount = static_cast<uint32_t>(dependencies.size());
  info.pDependencies = dependencies.data();
  VkRenderPass pass;
  VK_TRY("render pass", vkCreateRenderPass(context.device(), &info, nullptr, &pass), "scene render pass");
  return pass;
}

Result<std::unique_ptr<Renderer>> Renderer::create(Context& context, const Options& options) {
  std::unique_ptr<Renderer> renderer(new Renderer(context));
  CUBEFORGE_ASSIGN_OR_RETURN(renderer->meshes_, MeshBuffers::create(context, options.prefer_interop));
  CUBEFORGE_TRY(renderer->create_layouts());
  CUBEFORGE_TRY(renderer->create_shader_modules());
  CUBEFORGE_TRY(renderer->create_frames());
  return renderer;
}

Status Renderer::create_layouts() {
  VkDevice device = context_.device();
  VkDescriptorSetLayoutBinding binding{};
  binding.binding = 0;
  binding.descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
  binding.descriptorCount = 1;
  binding.stageFlags = VK_SHADER_STAGE_VERTEX_BIT | VK_SHADER_STAGE_FRAGMENT_BIT;
  VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set_info.bindingCount = 1;
  set_info.pBindings = &binding;
  VK_TRY("pipelines", vkCreateDescriptorSetLayout(device, &set_info, nullptr, &set_layout_), "frame uniforms");
  VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout_;
  VK_TRY("pipelines", vkCreatePipelineLayout(device, &layout_info, nullptr, &pipeline_layout_), "scene layout");
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, kFramesInFlight};
  VkDescriptorPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool_info.maxSets = kFramesInFlight;
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &size;
  VK_TRY("pipelines", vkCreateDescriptorPool(device, &pool_info, nullptr, &descriptor_pool_), "frame descriptors");
  return ok_status();
}

Status Renderer::create_shader_modules() {
  VkDevice device = context_.device();
  CUBEFORGE_ASSIGN_OR_RETURN(shaders_.background_vert, make_module(device, kBackgroundVert, "background.vert"));
  CUBEFORGE_ASSIGN_OR_RETURN(shaders_.background_frag, make_module(device, kBackgroundFrag, "background.frag"));
  CUBEFORGE_ASSIGN_OR_RETURN(shaders_.mesh_vert, make_module(device, kMeshVert, "mesh.vert"));
  CUBEFORGE_ASSIGN_OR_RETURN(shaders_.mesh_frag, make_module(device, kMeshFrag, "mesh.frag"));
  CUBEFORGE_ASSIGN_OR_RETURN(shaders_.wireframe_vert, make_module(device, kWireframeVert, "wireframe.vert"));
  CUBEFORGE_ASSIGN_OR_RETURN(shaders_.wireframe_frag, make_module(device, kWireframeFrag, "wireframe.frag"));
  CUBEFORGE_ASSIGN_OR_RETURN(shaders_.grid_vert, make_module(device, kGridVert, "grid.vert"));
  CUBEFORGE_ASSIGN_OR_RETURN(shaders_.grid_frag, make_module(device, kGridFrag, "grid.frag"));
  return ok_status();
}

Status Renderer::create_frames() {
  VkDevice device = context_.device();
  for (auto& frame : frames_) {
    VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool_info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
    pool_info.queueFamilyIndex = context_.queue_family();
    VK_TRY("frames", vkCreateCommandPool(device, &pool_info, nullptr, &frame.command_pool), "frame command pool");
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = frame.command_pool;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    VK_TRY("frames", vkAllocateCommandBuffers(device, &alloc, &frame.command_buffer), "frame command buffer");
    CUBEFORGE_ASSIGN_OR_RETURN(frame.uniforms, Buffer::create(context_, sizeof(FrameUniforms),
                                                              VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT, true, "frame uniforms"));
    VkDescriptorSetAllocateInfo set_alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    set_alloc.descriptorPool = descriptor_pool_;
    set_alloc.descriptorSetCount = 1;
    set_alloc.pSetLayouts = &set_layout_;
    VK_TRY("frames", vkAllocateDescriptorSets(device, &set_alloc, &frame.descriptor_set), "frame descriptor set");
    VkDescriptorBufferInfo buffer_info{frame.uniforms.handle(), 0, sizeof(FrameUniforms)};
    VkWriteDescriptorSet write{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    write.dstSet = frame.descriptor_set;
    write.dstBinding = 0;
    write.descriptorCount = 1;
    write.descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
    write.pBufferInfo = &buffer_info;
    vkUpdateDescriptorSets(device, 1, &write, 0, nullptr);
    VkSemaphoreCreateInfo semaphore_info{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    VK_TRY("frames", vkCreateSemaphore(device, &semaphore_info, nullptr, &frame.image_available), "acquire semaphore");
  }
  return ok_status();
}

Renderer::~Renderer() {
  VkDevice device = context_.device();
  vkDeviceWaitIdle(device);
  for (auto& frame : frames_) {
    frame.uniforms.reset();
    if (frame.command_pool) vkDestroyCommandPool(device, frame.command_pool, nullptr);
    if (frame.image_available) vkDestroySemaphore(device, frame.image_available, nullptr);
  }
  for (auto& p : pipelines_) {
    for (VkPipeline pipeline : {p.background, p.mesh, p.grid, p.wireframe})
      if (pipeline) vkDestroyPipeline(device, pipeline, nullptr);
  }
  for (VkShaderModule m : {shaders_.background_vert, shaders_.background_frag, shaders_.mesh_vert, shaders_.mesh_frag,
                           shaders_.wireframe_vert, shaders_.wireframe_frag, shaders_.grid_vert, shaders_.grid_frag})
    if (m) vkDestroyShaderModule(device, m, nullptr);
  if (descriptor_pool_) vkDestroyDescriptorPool(device, descriptor_pool_, nullptr);
  if (pipeline_layout_) vkDestroyPipelineLayout(device, pipeline_layout_, nullptr);
  if (set_layout_) vkDestroyDescriptorSetLayout(device, set_layout_, nullptr);
  meshes_.reset();
  context_.collect_garbage();
}

Bounds3 Renderer::mesh_bounds() const {
  auto mesh = meshes_->drawable();
  return mesh ? mesh->bounds : Bounds3{};
}

Result<const Renderer::PassPipelines*> Renderer::pipelines_for(const RenderPassTarget& target) {
  for (const auto& p : pipelines_)
    if (p.color_format == target.color_format && p.samples == target.samples) return &p;

  VkDevice device = context_.device();
  auto build = [&](const PipelineDescription& d, VkPipeline* out) -> Status {
    VkPipelineShaderStageCreateInfo stages[2]{};
    stages[0].sType = stages[1].sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    stages[0].stage = VK_SHADER_STAGE_VERTEX_BIT;
    stages[0].module = d.vertex;
    stages[0].pName = "main";
    stages[1].stage = VK_SHADER_STAGE_FRAGMENT_BIT;
    stages[1].module = d.fragment;
    stages[1].pName = "main";

    VkVertexInputBindingDescription bindings[2] = {{0, kVertexStride, VK_VERTEX_INPUT_RATE_VERTEX},
                                                   {1, kVertexStride, VK_VERTEX_INPUT_RATE_VERTEX}};
    VkVertexInputAttributeDescription attributes[2] = {{0, 0, VK_FORMAT_R32G32B32_SFLOAT, 0},
                                                       {1, 1, VK_FORMAT_R32G32B32_SFLOAT, 0}};
    VkPipelineVertexInputStateCreateInfo vertex_input{VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO};
    if (d.mesh_vertex_input) {
      vertex_input.vertexBindingDescriptionCount = d.positions_only ? 1 : 2;
      vertex_input.pVertexBindingDescriptions = bindings;
      vertex_input.vertexAttributeDescriptionCount = d.positions_only ? 1 : 2;
      vertex_input.pVertexAttributeDescriptions = attributes;
    }
    VkPipelineInputAssemblyStateCreateInfo assembly{VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO};
    assembly.topology = VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST;
    VkPipelineViewportStateCreateInfo viewport{VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO};
    viewport.viewportCount = 1;
    viewport.scissorCount = 1;
    VkPipelineRasterizationStateCreateInfo raster{VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO};
    raster.polygonMode = d.polygon_mode;
    raster.cullMode = VK_CULL_MODE_NONE;  // generated meshes may be open or inconsistently wound
    raster.frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE;
    raster.lineWidth = 1.f;
    raster.depthBiasEnable = d.depth_bias != 0.f;
    raster.depthBiasConstantFactor = d.depth_bias;
    raster.depthBiasSlopeFactor = d.depth_bias;
    VkPipelineMultisampleStateCreateInfo multisample{VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO};
    multisample.rasterizationSamples = target.samples;
    VkPipelineDepthStencilStateCreateInfo depth{VK_STRUCTURE_TYPE_PIPELINE_DEPTH_STENCIL_STATE_CREATE_INFO};
    depth.depthTestEnable = d.depth_test;
    depth.depthWriteEnable = d.depth_write;
    depth.depthCompareOp = d.depth_compare;
    VkPipelineColorBlendAttachmentState blend_attachment{};
    blend_attachment.colorWriteMask = d.write_mask;
    blend_attachment.blendEnable = d.blend;
    blend_attachment.srcColorBlendFactor = VK_BLEND_FACTOR_SRC_ALPHA;
    blend_attachment.dstColorBlendFactor = VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA;
    blend_attachment.colorBlendOp = VK_BLEND_OP_ADD;
    blend_attachment.srcAlphaBlendFactor = VK_BLEND_FACTOR_ZERO;
    blend_attachment.dstAlphaBlendFactor = VK_BLEND_FACTOR_ONE;
    blend_attachment.alphaBlendOp = VK_BLEND_OP_ADD;
    VkPipelineColorBlendStateCreateInfo blend{VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO};
    blend.attachmentCount = 1;
    blend.pAttachments = &blend_attachment;
    VkDynamicState dynamic_states[] = {VK_DYNAMIC_STATE_VIEWPORT, VK_DYNAMIC_STATE_SCISSOR};
    VkPipelineDynamicStateCreateInfo dynamic{VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO};
    dynamic.dynamicStateCount = 2;
    dynamic.pDynamicStates = dynamic_states;

    VkGraphicsPipelineCreateInfo info{VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO};
    info.stageCount = 2;
    info.pStages = stages;
    info.pVertexInputState = &vertex_input;
    info.pInputAssemblyState = &assembly;
    info.pViewportState = &viewport;
    info.pRasterizationState = &raster;
    info.pMultisampleState = &multisample;
    info.pDepthStencilState = &depth;
    info.pColorBlendState = &blend;
    info.pDynamicState = &dynamic;
    info.layout = pipeline_layout_;
    info.renderPass = target.render_pass;
    info.subpass = 0;
    VK_TRY("pipelines", vkCreateGraphicsPipelines(device, VK_NULL_HANDLE, 1, &info, nullptr, out), "scene pipeline");
    return ok_status();
  };

  constexpr VkColorComponentFlags kRgb = VK_COLOR_COMPONENT_R_BIT | VK_COLOR_COMPONENT_G_BIT | VK_COLOR_COMPONENT_B_BIT;
  PassPipelines p{target.color_format, target.samples};
  PipelineDescription background{shaders_.background_vert, shaders_.background_frag, false};
  background.depth_test = background.depth_write = false;
  PipelineDescription mesh{shaders_.mesh_vert, shaders_.mesh_frag, true};
  // The grid and the wireframe never touch alpha: alpha stays the mesh's coverage.
  PipelineDescription grid{shaders_.grid_vert, shaders_.grid_frag, false};
  grid.depth_write = false;
  grid.blend = true;
  grid.write_mask = kRgb;
  PipelineDescription wireframe{shaders_.wireframe_vert, shaders_.wireframe_frag, true};
  // Pulls the lines towards the viewer so they win against their own faces;
  // the filled mesh keeps exact depth (depth readback, picking).
  wireframe.depth_bias = -1.f;
  wireframe.positions_only = true;
  wireframe.polygon_mode = VK_POLYGON_MODE_LINE;
  wireframe.depth_write = false;
  wireframe.depth_compare = VK_COMPARE_OP_LESS_OR_EQUAL;
  wireframe.blend = true;
  wireframe.write_mask = kRgb;

  Status status = build(background, &p.background);
  if (status.ok()) status = build(mesh, &p.mesh);
  if (status.ok()) status = build(grid, &p.grid);
  if (status.ok() && supports_wireframe()) status = build(wireframe, &p.wireframe);
  if (!status.ok()) {
    for (VkPipeline pipeline : {p.background, p.mesh, p.grid, p.wireframe})
      if (pipeline) vkDestroyPipeline(device, pipeline, nullptr);
    return status.take_error();
  }
  pipelines_.push_back(p);
  return &pipelines_.back();
}

Status Renderer::prepare(const RenderPassTarget& target) {
  CUBEFORGE_ASSIGN_OR_RETURN(const PassPipelines* pipelines, pipelines_for(target));
  (void)pipelines;
  return ok_status();
}

FrameResources& Renderer::acquire_frame() {
  FrameResources& frame = frames_[frame_counter_++ % kFramesInFlight];
  context_.wait_for(frame.submitted_value);
  context_.collect_garbage();
  VK_CHECK(vkResetCommandPool(context_.device(), frame.command_pool, 0), "frame pool is idle after its wait");
  return frame;
}

void Renderer::fill_uniforms(FrameResources& frame, const RenderPassTarget& target, const OrbitCamera& camera,
                             const SceneSettings& settings) const {
  FrameUniforms u{};
  float aspect = float(target.extent.width) / float(std::max(target.extent.height, 1u));
  std::memcpy(u.view_projection, glm::value_ptr(camera.view_projection(aspect)), sizeof(u.view_projection));
  set_vec4(u.camera_position, camera.eye(), 1.f);

  // Studio lights are fixed to the camera, so the model is always lit from the
  // viewer's side: key from upper left, fill from the right, rim from behind.
  glm::mat3 camera_to_world = glm::transpose(glm::mat3(camera.view()));
  const glm::vec3 directions[kStudioLightCount] = {{-0.45f, 0.65f, 0.62f}, {0.7f, 0.1f, 0.7f}, {0.2f, 0.55f, -0.8f}};
  const glm::vec3 colors[kStudioLightCount] = {{0.85f, 0.82f, 0.78f}, {0.30f, 0.33f, 0.40f}, {0.45f, 0.45f, 0.50f}};
  const float specular[kStudioLightCount] = {0.35f, 0.05f, 0.25f};
  for (int i = 0; i < kStudioLightCount; ++i) {
    set_vec4(u.light_direction[i], glm::normalize(camera_to_world * directions[i]), 0.f);
    set_vec4(u.light_color[i], colors[i], specular[i]);
  }
  set_vec4(u.ambient_sky, glm::vec3(0.26f, 0.27f, 0.30f), 0.f);
  set_vec4(u.ambient_ground, glm::vec3(0.10f, 0.09f, 0.08f), 0.f);
  set_vec4(u.base_color, settings.base_color, 1.f);
  for (int k = 0; k < 4; ++k) u.wire_color[k] = settings.wire_color[k];
  set_vec4(u.background_top, settings.background_top, 1.f);
  set_vec4(u.background_bottom, settings.background_bottom, 1.f);
  for (int k = 0; k < 4; ++k) u.grid_color[k] = settings.grid_color[k];

  Bounds3 bounds = mesh_bounds();
  glm::vec3 lo(-1.f, -1.f, -1.f), hi(1.f, 1.f, 1.f);
  if (!bounds.empty) {
    lo = {bounds.min[0], bounds.min[1], bounds.min[2]};
    hi = {bounds.max[0], bounds.max[1], bounds.max[2]};
  }
  float size = std::max(glm::length(hi - lo), 1e-4f);
  // A hair below the mesh, so the grid does not fight with faces resting on the ground.
  u.grid_plane[0] = lo.y - size * 1e-3f;
  u.grid_plane[1] = nice_cell_size(size);
  u.grid_plane[2] = size * 3.f;
  u.grid_plane[3] = size * 0.75f;
  set_vec4(u.grid_center, (lo + hi) * 0.5f, 0.f);
  u.shading_mode = static_cast<uint32_t>(settings.shading);
  std::memcpy(frame.uniforms.mapped(), &u, sizeof(u));
}

Status Renderer::record(FrameResources& frame, const RenderPassTarget& target, const OrbitCamera& camera,
                        const SceneSettings& settings, const OverlayRecorder& overlay,
                        const std::function<void(VkCommandBuffer)>& after_pass) {
  CUBEFORGE_ASSIGN_OR_RETURN(const PassPipelines* pipelines, pipelines_for(target));
  fill_uniforms(frame, target, camera, settings);

  VkCommandBuffer cmd = frame.command_buffer;
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VK_CHECK(vkBeginCommandBuffer(cmd, &begin), "frame command buffer was reset");

  VkClearValue clears[3]{};
  clears[0].color = {{0.f, 0.f, 0.f, 0.f}};
  clears[1].depthStencil = {1.f, 0};
  clears[2].color = {{0.f, 0.f, 0.f, 0.f}};
  VkRenderPassBeginInfo pass{VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO};
  pass.renderPass = target.render_pass;
  pass.framebuffer = target.framebuffer;
  pass.renderArea = {{0, 0}, target.extent};
  pass.clearValueCount = target.samples == VK_SAMPLE_COUNT_1_BIT ? 2 : 3;
  pass.pClearValues = clears;

  auto mesh = meshes_->drawable();
  if (mesh && mesh->acquire_from_external) {
    // CUDA wrote the buffers: acquire them from the external queue family
    // before vertex input reads them. The submission waits on the mesh-ready
    // semaphore at vertex input, the stage this barrier starts from.
    VkBufferMemoryBarrier acquire[2]{};
    const VkBuffer shared[2] = {mesh->vertex_buffer, mesh->index_buffer};
    for (int i = 0; i < 2; ++i) {
      acquire[i].sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER;
      acquire[i].srcAccessMask = 0;
      acquire[i].dstAccessMask = i == 0 ? VK_ACCESS_VERTEX_ATTRIBUTE_READ_BIT : VK_ACCESS_INDEX_READ_BIT;
      acquire[i].srcQueueFamilyIndex = VK_QUEUE_FAMILY_EXTERNAL;
      acquire[i].dstQueueFamilyIndex = context_.queue_family();
      acquire[i].buffer = shared[i];
      acquire[i].offset = 0;
      acquire[i].size = VK_WHOLE_SIZE;
    }
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_VERTEX_INPUT_BIT, VK_PIPELINE_STAGE_VERTEX_INPUT_BIT, 0, 0, nullptr, 2,
                         acquire, 0, nullptr);
  }
  vkCmdBeginRenderPass(cmd, &pass, VK_SUBPASS_CONTENTS_INLINE);

  VkViewport viewport{0.f, 0.f, float(target.extent.width), float(target.extent.height), 0.f, 1.f};
  VkRect2D scissor{{0, 0}, target.extent};
  vkCmdSetViewport(cmd, 0, 1, &viewport);
  vkCmdSetScissor(cmd, 0, 1, &scissor);
  vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline_layout_, 0, 1, &frame.descriptor_set, 0,
                          nullptr);

  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, pipelines->background);
  vkCmdDraw(cmd, 3, 1, 0, 0);

  if (mesh) {
    VkBuffer buffers[2] = {mesh->vertex_buffer, mesh->vertex_buffer};
    VkDeviceSize offsets[2] = {0, mesh->normals_offset};
    vkCmdBindVertexBuffers(cmd, 0, 2, buffers, offsets);
    vkCmdBindIndexBuffer(cmd, mesh->index_buffer, 0, VK_INDEX_TYPE_UINT32);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, pipelines->mesh);
    vkCmdDrawIndexed(cmd, mesh->index_count, 1, 0, 0, 0);
  }
  if (settings.grid) {
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, pipelines->grid);
    vkCmdDraw(cmd, 6, 1, 0, 0);
  }
  if (mesh && settings.wireframe && pipelines->wireframe) {
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, pipelines->wireframe);
    vkCmdDrawIndexed(cmd, mesh->index_count, 1, 0, 0, 0);
  }
  if (overlay) overlay(cmd);
  vkCmdEndRenderPass(cmd);
  if (after_pass) after_pass(cmd);
  VK_CHECK(vkEndCommandBuffer(cmd), "frame command buffer");
  return ok_status();
}

uint64_t Renderer::submit(FrameResources& frame, std::vector<SemaphoreWait> waits,
                          const std::vector<SemaphoreSignal>& signals) {
  auto mesh = meshes_->drawable();
  if (mesh) waits.push_back(mesh->ready);
  frame.submitted_value = context_.submit({frame.command_buffer}, waits, signals);
  if (mesh) meshes_->mark_drawn(frame.submitted_value);
  frames_submitted_++;
  return frame.submitted_value;
}

}  // namespace cubeforge::engine
