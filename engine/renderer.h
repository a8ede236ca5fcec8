// The viewport renderer: one set of pipelines and per-frame resources that
// draws the scene (background gradient, shaded mesh, ground grid, optional
// wireframe overlay) into whichever target asks, the window's swapchain or an
// offscreen image.
//
// Frames: kFramesInFlight = 2 slots, each with its own command pool and
// buffer, uniform buffer, descriptor set and swapchain-acquire semaphore.
// Starting a frame waits for that slot's previous submission on the GPU
// timeline, then runs the deletion queue for everything that has finished.
//
// Pipelines depend on the render pass's colour format and sample count, so they
// are made per (format, samples) on first use; targets share them.
//
// Not thread-safe: one thread (the UI thread) drives the context, the
// renderer, its targets and mesh uploads; a generation thread hands meshes over.
// Destroy targets before their renderer, and the renderer before the context.
#pragma once

#include <vulkan/vulkan.h>

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "engine/camera.h"
#include "engine/context.h"
#include "engine/gpu_resources.h"
#include "engine/gpu_types.h"
#include "engine/mesh_buffers.h"
#include "inference/core/result.h"

namespace cubeforge::engine {

constexpr int kFramesInFlight = 2;

struct SceneSettings {
  ShadingMode shading = ShadingMode::kSmooth;
  bool wireframe = false;  // needs fillModeNonSolid (Renderer::supports_wireframe)
  bool grid = true;
  std::array<float, 3> base_color{0.72f, 0.72f, 0.75f};
  std::array<float, 4> wire_color{0.05f, 0.05f, 0.07f, 0.9f};  // a = opacity
  std::array<float, 3> background_top{0.32f, 0.35f, 0.40f};
  std::array<float, 3> background_bottom{0.11f, 0.12f, 0.14f};
  std::array<float, 4> grid_color{0.55f, 0.58f, 0.64f, 0.55f};  // a = opacity of a line
};

// Records extra commands inside the target's render pass after the scene
// (the desktop app's ImGui draw data).
using OverlayRecorder = std::function<void(VkCommandBuffer)>;

struct FrameResources {
  VkCommandPool command_pool = VK_NULL_HANDLE;
  VkCommandBuffer command_buffer = VK_NULL_HANDLE;
  Buffer uniforms;  // FrameUniforms, host visible
  VkDescriptorSet descriptor_set = VK_NULL_HANDLE;
  VkSemaphore image_available = VK_NULL_HANDLE;  // window targets: swapchain acquire
  uint64_t submitted_value = 0;                  // GPU timeline value of its last submission
};

// One framebuffer to draw into, described by its target.
struct RenderPassTarget {
  VkRenderPass render_pass = VK_NULL_HANDLE;
  VkFramebuffer framebuffer = VK_NULL_HANDLE;
  VkExtent2D extent{};
  VkFormat color_format = VK_FORMAT_UNDEFINED;
  VkSampleCountFlagBits samples = VK_SAMPLE_COUNT_1_BIT;
};

// A render pass with colour (multisampled when samples > 1, then resolved into
// attachment 2) and D32 depth, cleared on load. The single-sample colour
// target ends in `final_layout`. Compatible passes share pipelines.
Result<VkRenderPass> create_scene_render_pass(Context& context, VkFormat color_format, VkSampleCountFlagBits samples,
                                              VkImageLayout final_layout);

// Picks min(requested, device maximum); 0 requests 4x (what most GPUs and lavapipe offer).
VkSampleCountFlagBits choose_samples(const Context& context, VkSampleCountFlagBits requested);

class Renderer {
 public:
  struct Options {
    bool prefer_interop = true;  // CUDA interop for mesh buffers when available
  };
  static Result<std::unique_ptr<Renderer>> create(Context& context, const Options& options);
  static Result<std::unique_ptr<Renderer>> create(Context& context) { return create(context, Options{}); }
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  Context& context() { return context_; }
  MeshBuffers& meshes() { return *meshes_; }
  const MeshBuffers& meshes() const { return *meshes_; }
  bool supports_wireframe() const { return context_.has_fill_mode_non_solid(); }
  // Bounds of the mesh on screen (empty when there is none), for OrbitCamera::frame.
  Bounds3 mesh_bounds() const;

  // Builds the pipelines for a target's render pass now (targets call it when
  // created), so recording a frame cannot fail half-way through a swapchain acquire.
  Status prepare(const RenderPassTarget& target);

  // Frame protocol used by the targets: acquire -> record -> submit.
  FrameResources& acquire_frame();
  Status record(FrameResources& frame, const RenderPassTarget& target, const OrbitCamera& camera,
                const SceneSettings& settings, const OverlayRecorder& overlay,
                const std::function<void(VkCommandBuffer)>& after_pass);
  uint64_t submit(FrameResources& frame, std::vector<SemaphoreWait> waits, const std::vector<SemaphoreSignal>& signals);

  uint64_t frames_submitted() const { return frames_submitted_; }

 private:
  struct PassPipelines {
    VkFormat color_format;
    VkSampleCountFlagBits samples;
    VkPipeline background = VK_NULL_HANDLE;
    VkPipeline mesh = VK_NULL_HANDLE;
    VkPipeline grid = VK_NULL_HANDLE;
    VkPipeline wireframe = VK_NULL_HANDLE;  // null without fillModeNonSolid
  };
  explicit Renderer(Context& context) : context_(context) {}
  Status create_layouts();
  Status create_frames();
  Status create_shader_modules();
  Result<const PassPipelines*> pipelines_for(const RenderPassTarget& target);
  void fill_uniforms(FrameResources& frame, const RenderPassTarget& target, const OrbitCamera& camera,
                     const SceneSettings& settings) const;

  Context& context_;
  std::unique_ptr<MeshBuffers> meshes_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;
  VkDescriptorPool descriptor_pool_ = VK_NULL_HANDLE;
  struct ShaderModules {
    VkShaderModule background_vert = VK_NULL_HANDLE, background_frag = VK_NULL_HANDLE;
    VkShaderModule mesh_vert = VK_NULL_HANDLE, mesh_frag = VK_NULL_HANDLE;
    VkShaderModule wireframe_vert = VK_NULL_HANDLE, wireframe_frag = VK_NULL_HANDLE;
    VkShaderModule grid_vert = VK_NULL_HANDLE, grid_frag = VK_NULL_HANDLE;
  } shaders_;
  std::vector<PassPipelines> pipelines_;
  std::array<FrameResources, kFramesInFlight> frames_;
  uint64_t frame_counter_ = 0;
  uint64_t frames_submitted_ = 0;
};

}  // namespace cubeforge::engine
