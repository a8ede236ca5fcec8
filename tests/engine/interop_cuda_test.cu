// CUDA<->Vulkan interop: a CUDA kernel writes a sphere straight into the
// Vulkan vertex and index buffers; its offscreen render must equal, pixel for
// pixel, the render of the same mesh (read back from the GPU) uploaded through
// the staging path. Skips without a CUDA device matching the Vulkan device
// (fails, saying why, with CUBEFORGE_REQUIRE_CUDA=1).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "analytic_shapes.h"
#include "vulkan_fixture.h"

namespace cubeforge::engine::testing {
namespace {

// One thread per vertex, then one per quad: a UV sphere with poles on z.
__global__ void write_sphere_vertices(float* positions, float* normals, int stacks, int slices, float radius) {
  int v = blockIdx.x * blockDim.x + threadIdx.x;
  int count = (stacks + 1) * (slices + 1);
  if (v >= count) return;
  int i = v / (slices + 1), j = v % (slices + 1);
  float theta = 3.14159265f * i / stacks, phi = 2.f * 3.14159265f * j / slices;
  float n[3] = {sinf(theta) * cosf(phi), sinf(theta) * sinf(phi), cosf(theta)};
  for (int k = 0; k < 3; ++k) {
    positions[3 * v + k] = radius * n[k];
    normals[3 * v + k] = n[k];
  }
}

__global__ void write_sphere_indices(uint32_t* indices, int stacks, int slices) {
  int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= stacks * slices) return;
  int i = q / slices, j = q % slices;
  auto at = [&](int a, int b) { return uint32_t(a * (slices + 1) + b); };
  uint32_t* out = indices + 6 * q;
  uint32_t quad[6] = {at(i, j), at(i + 1, j), at(i, j + 1), at(i, j + 1), at(i + 1, j), at(i + 1, j + 1)};
  for (int k = 0; k < 6; ++k) out[k] = quad[k];
}

// CUBEFORGE_REQUIRE_CUDA=1 (tools/device-check.sh on the GPU machine): interop
// that cannot run there is a failure that says why, not a skip.
bool cuda_required() {
  const char* value = std::getenv("CUBEFORGE_REQUIRE_CUDA");
  return value && *value && std::string(value) != "0";
}

class InteropRender : public VulkanTest {
 protected:
  void SetUp() override {
    VulkanTest::SetUp();
    if (IsSkipped() && cuda_required())
      ADD_FAILURE() << "no Vulkan device, so no CUDA interop, where CUBEFORGE_REQUIRE_CUDA is set: is the NVIDIA "
                       "Vulkan driver installed and found (VK_DRIVER_FILES, the Vulkan loader)?";
  }
};

TEST_F(InteropRender, KernelWrittenMeshRendersLikeTheStagingUpload) {
  if (!renderer_->meshes().interop_active()) {
    const std::string why = renderer_->meshes().statistics().interop_unavailable_reason;
    if (cuda_required()) FAIL() << "CUDA interop unavailable where CUBEFORGE_REQUIRE_CUDA is set: " << why;
    GTEST_SKIP() << "CUDA interop unavailable: " << why;
  }
  EXPECT_EQ(renderer_->meshes().statistics().path, UploadPath::kCudaInterop);
  const int stacks = 48, slices = 96;
  const size_t vertex_count = size_t(stacks + 1) * (slices + 1), face_count = size_t(stacks) * slices * 2;
  auto write = renderer_->meshes().begin_device_write(vertex_count, face_count);
  ASSERT_TRUE(write.ok()) << write.error().to_string();
  ASSERT_EQ(cudaSetDevice(write->cuda_device), cudaSuccess);  // the stream's device, made current explicitly
  auto stream = static_cast<cudaStream_t>(write->cuda_stream);
  write_sphere_vertices<<<(vertex_count + 255) / 256, 256, 0, stream>>>(write->positions, write->normals, stacks,
                                                                        slices, 0.8f);
  write_sphere_indices<<<(stacks * slices + 255) / 256, 256, 0, stream>>>(write->indices, stacks, slices);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  Bounds3 bounds;
  bounds.min = {-0.8f, -0.8f, -0.8f};
  bounds.max = {0.8f, 0.8f, 0.8f};
  bounds.empty = false;
  ASSERT_TRUE(renderer_->meshes().end_device_write(bounds).ok());

  OrbitCamera camera;
  camera.yaw_degrees = 25.f;
  camera.pitch_degrees = 15.f;
  camera.frame(bounds, 1.f);
  SceneSettings settings;
  settings.wireframe = true;
  auto target = make_offscreen(128, 128);
  ASSERT_TRUE(target);
  auto interop_image = target->render_and_read(camera, settings);
  ASSERT_TRUE(interop_image.ok()) << interop_image.error().to_string();

  // The same bytes, through the host and the staging path of a second renderer.
  Mesh mesh;
  mesh.positions.resize(vertex_count * 3);
  mesh.normals.resize(vertex_count * 3);
  mesh.indices.resize(face_count * 3);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(mesh.positions.data(), write->positions, vertex_count * 12, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(mesh.normals.data(), write->normals, vertex_count * 12, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(mesh.indices.data(), write->indices, face_count * 12, cudaMemcpyDeviceToHost), cudaSuccess);
  auto staging_renderer = Renderer::create(*context_, Renderer::Options{/*prefer_interop=*/false});
  ASSERT_TRUE(staging_renderer.ok());
  ASSERT_EQ((*staging_renderer)->meshes().statistics().path, UploadPath::kStaging);
  ASSERT_TRUE((*staging_renderer)->meshes().upload(mesh).ok());
  OffscreenOptions options;
  options.width = options.height = 128;
  auto staging_target = OffscreenTarget::create(**staging_renderer, options);
  ASSERT_TRUE(staging_target.ok());
  auto staging_image = (*staging_target)->render_and_read(camera, settings);
  ASSERT_TRUE(staging_image.ok());

  size_t mismatches = 0;
  for (size_t i = 0; i < interop_image->rgba.size(); ++i) mismatches += interop_image->rgba[i] != staging_image->rgba[i];
  EXPECT_EQ(mismatches, 0u);
  EXPECT_GT(measure_coverage(interop_image->rgba, 128, 128).area_px, 1000.0);

  // A host mesh through the interop path (cudaMemcpyAsync into the shared buffers) renders the same too.
  ASSERT_TRUE(renderer_->meshes().upload(mesh).ok());
  auto host_interop = target->render_and_read(camera, settings);
  ASSERT_TRUE(host_interop.ok());
  EXPECT_EQ(host_interop->rgba, staging_image->rgba);
  staging_target.value().reset();
  staging_renderer.value().reset();
}

}  // namespace
}  // namespace cubeforge::engine::testing
