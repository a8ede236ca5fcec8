// GPU copies of the mesh the viewport shows, double-buffered so a new mesh can
// be written while the previous one is still drawn.
//
// Two slots alternate: an update goes into the slot that is not on screen,
// then becomes the one on screen. Each slot's buffers grow geometrically and
// are reused, so a stream of growing meshes during generation allocates only a
// handful of times. Every slot records the last GPU-timeline value that read
// it; a write waits for that (normally long passed) and never for the slot on
// screen. Draws wait on the mesh-ready timeline semaphore at the slot's value,
// which the staging copy (or CUDA, on the interop path) signals.
//
// Vertex buffer layout: positions [V,3] f32 then normals [V,3] f32, so Mesh
// arrays are copied as they are. Index buffer: [F,3] u32.
#pragma once

#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/cuda_interop.h"
#include "engine/gpu_resources.h"
#include "inference/core/result.h"
#include "inference/geometry/mesh.h"

namespace cubeforge::engine {

enum class UploadPath { kStaging, kCudaInterop };
const char* upload_path_name(UploadPath path);

struct UploadStatistics {
  UploadPath path = UploadPath::kStaging;
  std::string interop_unavailable_reason;  // why the staging path runs, when it does
  uint64_t uploads = 0;
  uint64_t bytes = 0;            // vertex + index bytes written
  uint64_t buffer_allocations = 0;  // slot buffers (re)allocated since creation
  double host_seconds = 0.0;     // time spent inside upload calls
};

// Device pointers into a slot's shared buffers, for CUDA kernels. Writes must
// be issued on `cuda_stream` (cudaStream_t), with `cuda_device` current (the
// CUDA device matching the Vulkan one; cudaSetDevice), before end_device_write().
struct DeviceMeshWrite {
  float* positions = nullptr;  // [V,3]
  float* normals = nullptr;    // [V,3]: the writer must fill them (flat shading ignores them)
  uint32_t* indices = nullptr; // [F,3]
  void* cuda_stream = nullptr;
  int cuda_device = -1;
};

// What a draw needs from the slot on screen.
struct DrawableMesh {
  VkBuffer vertex_buffer = VK_NULL_HANDLE;
  VkDeviceSize normals_offset = 0;
  VkBuffer index_buffer = VK_NULL_HANDLE;
  uint32_t index_count = 0;
  SemaphoreWait ready;  // wait before vertex input
  // The interop path: CUDA wrote the buffers since a draw last used them, so
  // the draw first acquires them from VK_QUEUE_FAMILY_EXTERNAL (a queue
  // family ownership transfer; the semaphore wait alone does not make an
  // external write visible to Vulkan).
  bool acquire_from_external = false;
  Bounds3 bounds;
};

// Area-weighted vertex normals ([V,3], unit length; zero-area fans give +y).
std::vector<float> compute_vertex_normals(const Mesh& mesh);

class MeshBuffers {
 public:
  // prefer_interop: use CUDA interop when create() of CudaInterop succeeds.
  static Result<std::unique_ptr<MeshBuffers>> create(Context& context, bool prefer_interop = true);
  ~MeshBuffers();
  MeshBuffers(const MeshBuffers&) = delete;
  MeshBuffers& operator=(const MeshBuffers&) = delete;

  // Validates the mesh (sizes, index range), computes normals when it has
  // none, and writes it into the back slot, which then goes on screen. An
  // empty mesh clears the view.
  Status upload(const Mesh& mesh);

  // Interop only: pointers a CUDA kernel writes the next mesh into; then
  // end_device_write() puts it on screen without a CPU round trip.
  Result<DeviceMeshWrite> begin_device_write(size_t vertex_count, size_t face_count);
  Status end_device_write(const Bounds3& bounds);

  // Blocks until every queued write (staging copy or CUDA stream) has landed.
  // Draws never need this (they wait on the mesh-ready semaphore); benchmarks do.
  Status finish();

  // Releases every slot buffer once the GPU is done with it.
  void clear();

  std::optional<DrawableMesh> drawable() const;
  // The submission with this GPU-timeline value reads the slot on screen.
  void mark_drawn(uint64_t timeline_value);

  bool interop_active() const { return interop_ != nullptr; }
  const UploadStatistics& statistics() const { return statistics_; }

 private:
  struct Slot {
    std::shared_ptr<Buffer> vertices;         // staging path
    std::shared_ptr<Buffer> indices;
    std::shared_ptr<SharedBuffer> shared_vertices;  // interop path
    std::shared_ptr<SharedBuffer> shared_indices;
    std::shared_ptr<Buffer> staging;
    VkDeviceSize vertex_capacity = 0;  // bytes
    VkDeviceSize index_capacity = 0;
    VkCommandBuffer upload_commands = VK_NULL_HANDLE;
    uint32_t vertex_count = 0;
    uint32_t index_count = 0;
    uint64_t ready_value = 0;     // mesh-ready timeline value that makes it drawable
    uint64_t acquired_value = 0;  // interop path: the ready_value whose buffers a submitted draw acquired
    uint64_t last_use_value = 0;  // GPU timeline value of the last submission that touched it
    Bounds3 bounds;
  };

  explicit MeshBuffers(Context& context) : context_(context) {}
  Status reserve(Slot& slot, VkDeviceSize vertex_bytes, VkDeviceSize index_bytes);
  Slot& back_slot();
  void release(Slot& slot);

  Context& context_;
  std::unique_ptr<CudaInterop> interop_;
  VkSemaphore owned_ready_semaphore_ = VK_NULL_HANDLE;  // staging path
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  std::array<Slot, 2> slots_;
  int front_ = -1;          // slot on screen, -1: none
  int writing_ = -1;        // slot between begin_device_write and end_device_write
  uint64_t ready_next_ = 1;
  UploadStatistics statistics_;
};

}  // namespace cubeforge::engine
