// The hooks the desktop app needs, exercised with Debian's Dear ImGui 1.86
// (glfw + vulkan backends from libimgui.a): ImGui initialised from the window
// target's handles and render pass, fonts uploaded with a one-time command
// buffer, ImGui drawn through the overlay recorder, and the offscreen viewport
// shown in an ImGui panel through a SampledImage descriptor set. Passes when
// every frame presents and the validation layer stays silent (it checks, at
// submission, that the sampled viewport image is in the layout ImGui reads).
#include <gtest/gtest.h>

#include <imgui.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_vulkan.h>

#include "analytic_shapes.h"
#include "engine/sampled_image.h"
#include "window_fixture.h"

namespace cubeforge::engine::testing {
namespace {

void abort_on_vulkan_error(VkResult result) {
  if (result != VK_SUCCESS) ::cubeforge::check_failed("ImGui Vulkan backend call", __FILE__, __LINE__, "VkResult");
}

TEST_F(WindowRender, ImGuiDrawsOverTheSceneAndShowsTheOffscreenViewport) {
  WindowOptions options;
  options.vsync = false;
  auto target = WindowTarget::create(*renderer_, window_, options);
  ASSERT_TRUE(target.ok()) << target.error().to_string();
  target_ = std::move(target).value();
  ASSERT_TRUE(renderer_->meshes().upload(make_torus(0.6f, 0.2f, 48, 16)).ok());

  // The panel's viewport: an offscreen target sampled by ImGui.
  auto panel = make_offscreen(96, 64);
  ASSERT_TRUE(panel);
  auto panel_texture = SampledImage::create(*context_, panel->color_view());
  ASSERT_TRUE(panel_texture.ok()) << panel_texture.error().to_string();

  VkDevice device = context_->device();
  VkDescriptorPoolSize pool_size{VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 4};
  VkDescriptorPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool_info.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;
  pool_info.maxSets = 4;
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &pool_size;
  VkDescriptorPool imgui_pool;
  ASSERT_EQ(vkCreateDescriptorPool(device, &pool_info, nullptr, &imgui_pool), VK_SUCCESS);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;
  ASSERT_TRUE(ImGui_ImplGlfw_InitForVulkan(window_, true));
  WindowVulkanHandles handles = target_->vulkan_handles();
  ImGui_ImplVulkan_InitInfo info{};
  info.Instance = handles.instance;
  info.PhysicalDevice = handles.physical_device;
  info.Device = handles.device;
  info.QueueFamily = handles.queue_family;
  info.Queue = handles.queue;
  info.DescriptorPool = imgui_pool;
  info.MinImageCount = handles.min_image_count;
  info.ImageCount = handles.image_count;
  info.MSAASamples = handles.samples;
  info.CheckVkResultFn = abort_on_vulkan_error;
  ASSERT_TRUE(ImGui_ImplVulkan_Init(&info, handles.render_pass));
  bool fonts = false;
  context_->run_one_time([&](VkCommandBuffer cmd) { fonts = ImGui_ImplVulkan_CreateFontsTexture(cmd); });
  ASSERT_TRUE(fonts);
  ImGui_ImplVulkan_DestroyFontUploadObjects();

  OrbitCamera camera;
  camera.pitch_degrees = 30.f;
  camera.frame(renderer_->mesh_bounds(), 160.f / 120.f);
  int presented = 0, frames_with_vertices = 0;
  for (int frame = 0; frame < 4; ++frame) {
    glfwPollEvents();
    EXPECT_TRUE(panel->render(camera, SceneSettings{}).ok());
    ImGui_ImplVulkan_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(4, 4));
    ImGui::Begin("Viewport");
    ImGui::Image(reinterpret_cast<ImTextureID>((*panel_texture)->descriptor_set()), ImVec2(96, 64));
    ImGui::Text("frame %d", frame);
    ImGui::End();
    ImGui::Render();
    ImDrawData* draw_data = ImGui::GetDrawData();
    frames_with_vertices += draw_data->TotalVtxCount > 0;
    auto status = target_->draw_frame(camera, SceneSettings{},
                                      [&](VkCommandBuffer cmd) { ImGui_ImplVulkan_RenderDrawData(draw_data, cmd); });
    EXPECT_TRUE(status.ok()) << status.error().to_string();
    presented += status.ok() && *status == FrameStatus::kPresented;
  }
  EXPECT_EQ(presented, 4);
  // ImGui lays a new window out during its first frame and draws it from the second.
  EXPECT_GE(frames_with_vertices, 3);

  context_->wait_idle();
  ImGui_ImplVulkan_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  vkDestroyDescriptorPool(device, imgui_pool, nullptr);
  panel_texture.value().reset();
  panel.reset();
}

}  // namespace
}  // namespace cubeforge::engine::testing
