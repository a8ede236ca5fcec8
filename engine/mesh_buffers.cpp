// Double-buffered mesh slots with geometric growth; staging or CUDA writes.
#include "engine/mesh_buffers.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/vk_check.h"

namespace cubeforge::engine {
namespace {

constexpr VkDeviceSize kMinimumCapacity = 64 * 1024;

VkDeviceSize grown_capacity(VkDeviceSize current, VkDeviceSize needed) {
  return std::max({needed, current * 2, kMinimumCapacity});
}

Status validate(const Mesh& mesh) {
  if (mesh.positions.size() % 3 != 0)
    return make_error(ErrorCode::kInvalidArgument, "mesh upload: positions has " +
                                                       std::to_string(mesh.positions.size()) +
                                                       " floats, not a multiple of 3 ([V,3])");
  if (mesh.indices.size() % 3 != 0)
    return make_error(ErrorCode::kInvalidArgument, "mesh upload: indices has " + std::to_string(mesh.indices.size()) +
                                                       " entries, not a multiple of 3 ([F,3])");
  if (!mesh.normals.empty() && mesh.normals.size() != mesh.positions.size())
    return make_error(ErrorCode::kInvalidArgument, "mesh upload: normals has " + std::to_string(mesh.normals.size()) +
                                                       " floats but positions has " +
                                                       std::to_string(mesh.positions.size()) +
                                                       " (give one normal per vertex, or none)");
  size_t vertex_count = mesh.vertex_count();
  if (vertex_count > std::numeric_limits<uint32_t>::max() || mesh.indices.size() > std::numeric_limits<uint32_t>::max())
    return make_error(ErrorCode::kUnsupported, "mesh upload: more than 2^32 vertices or indices");
  for (size_t i = 0; i < mesh.indices.size(); ++i) {
    if (mesh.indices[i] >= vertex_count)
      return make_error(ErrorCode::kInvalidArgument, "mesh upload: index " + std::to_string(i) + " is " +
                                                         std::to_string(mesh.indices[i]) + " but the mesh has " +
                                                         std::to_string(vertex_count) + " vertices");
  }
  return ok_status();
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

const char* upload_path_name(UploadPath path) {
  return path == UploadPath::kCudaInterop ? "cuda-interop" : "staging";
}

std::vector<float> compute_vertex_normals(const Mesh& mesh) {
  std::vector<float> normals(mesh.positions.size(), 0.f);
  const float* p = mesh.positions.data();
  for (size_t f = 0; f + 2 < mesh.indices.size(); f += 3) {
    uint32_t a = mesh.indices[f], b = mesh.indices[f + 1], c = mesh.indices[f + 2];
    float e1[3], e2[3];
    for (int k = 0; k < 3; ++k) {
      e1[k] = p[3 * b + k] - p[3 * a + k];
      e2[k] = p[3 * c + k] - p[3 * a + k];
    }
    // The unnormalised cross product weights each face by twice its area.
    float n[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]};
    for (uint32_t v : {a, b, c})
      for (int k = 0; k < 3; ++k) normals[3 * v + k] += n[k];
  }
  for (size_t v = 0; v + 2 < normals.size(); v += 3) {
    float length = std::sqrt(normals[v] * normals[v] + normals[v + 1] * normals[v + 1] + normals[v + 2] * normals[v + 2]);
    if (length > 0.f) {
      for (int k = 0; k < 3; ++k) normals[v + k] /= length;
    } else {
      normals[v] = 0.f, normals[v + 1] = 1.f, normals[v + 2] = 0.f;
    }
  }
  return normals;
}

Result<std::unique_ptr<MeshBuffers>> MeshBuffers::create(Context& context, bool prefer_interop) {
  std::unique_ptr<MeshBuffers> buffers(new MeshBuffers(context));
  if (prefer_interop) {
    auto interop = CudaInterop::create(context);
    if (interop.ok()) {
      buffers->interop_ = std::move(interop).value();
      buffers->statistics_.path = UploadPath::kCudaInterop;
    } else {
      buffers->statistics_.interop_unavailable_reason = interop.error().message;
    }
  } else {
    buffers->statistics_.interop_unavailable_reason = "interop not requested";
  }
  VkDevice device = context.device();
  if (!buffers->interop_) {
    VkSemaphoreTypeCreateInfo type_info{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
    type_info.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    VkSemaphoreCreateInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    info.pNext = &type_info;
    VK_TRY("mesh buffers", vkCreateSemaphore(device, &info, nullptr, &buffers->owned_ready_semaphore_),
           "mesh-ready timeline");
  }
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = context.queue_family();
  VK_TRY("mesh buffers", vkCreateCommandPool(device, &pool_info, nullptr, &buffers->command_pool_), "upload pool");
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = buffers->command_pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  for (auto& slot : buffers->slots_)
    VK_TRY("mesh buffers", vkAllocateCommandBuffers(device, &alloc, &slot.upload_commands), "upload commands");
  return buffers;
}

MeshBuffers::~MeshBuffers() {
  VkDevice device = context_.device();
  vkDeviceWaitIdle(device);
  if (interop_) (void)interop_->synchronize();
  for (auto& slot : slots_) {
    slot.vertices.reset();
    slot.indices.reset();
    slot.shared_vertices.reset();
    slot.shared_indices.reset();
    slot.staging.reset();
  }
  if (command_pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device, command_pool_, nullptr);
  if (owned_ready_semaphore_ != VK_NULL_HANDLE) vkDestroySemaphore(device, owned_ready_semaphore_, nullptr);
  interop_.reset();
}

MeshBuffers::Slot& MeshBuffers::back_slot() { return slots_[front_ == 0 ? 1 : 0]; }

void MeshBuffers::release(Slot& slot) {
  // Frames in flight may still read these: hand them to the deletion queue.
  auto vertices = std::move(slot.vertices);
  auto indices = std::move(slot.indices);
  auto shared_vertices = std::move(slot.shared_vertices);
  auto shared_indices = std::move(slot.shared_indices);
  auto staging = std::move(slot.staging);
  if (vertices || indices || shared_vertices || shared_indices || staging) {
    context_.defer_destruction([vertices, indices, shared_vertices, shared_indices, staging]() mutable {
      shared_vertices.reset();
      shared_indices.reset();
      vertices.reset();
      indices.reset();
      staging.reset();
    });
  }
  slot.vertex_capacity = slot.index_capacity = 0;
  slot.vertex_count = slot.index_count = 0;
}

Status MeshBuffers::reserve(Slot& slot, VkDeviceSize vertex_bytes, VkDeviceSize index_bytes) {
  constexpr VkBufferUsageFlags kVertexUsage = VK_BUFFER_USAGE_VERTEX_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  constexpr VkBufferUsageFlags kIndexUsage = VK_BUFFER_USAGE_INDEX_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bool grow_vertices = vertex_bytes > slot.vertex_capacity;
  bool grow_indices = index_bytes > slot.index_capacity;
  if (!grow_vertices && !grow_indices) return ok_status();
  VkDeviceSize vertex_capacity = grow_vertices ? grown_capacity(slot.vertex_capacity, vertex_bytes) : slot.vertex_capacity;
  VkDeviceSize index_capacity = grow_indices ? grown_capacity(slot.index_capacity, index_bytes) : slot.index_capacity;
  Slot old;
  old.vertices = grow_vertices ? std::move(slot.vertices) : nullptr;
  old.shared_vertices = grow_vertices ? std::move(slot.shared_vertices) : nullptr;
  old.indices = grow_indices ? std::move(slot.indices) : nullptr;
  old.shared_indices = grow_indices ? std::move(slot.shared_indices) : nullptr;
  old.staging = std::move(slot.staging);
  release(old);

  if (interop_) {
    if (grow_vertices) {
      CUBEFORGE_ASSIGN_OR_RETURN(SharedBuffer v, interop_->create_shared_buffer(vertex_capacity, kVertexUsage,
                                                                               "mesh vertices (shared)"));
      slot.shared_vertices = std::make_shared<SharedBuffer>(std::move(v));
      statistics_.buffer_allocations++;
    }
    if (grow_indices) {
      CUBEFORGE_ASSIGN_OR_RETURN(SharedBuffer i, interop_->create_shared_buffer(index_capacity, kIndexUsage,
                                                                               "mesh indices (shared)"));
      slot.shared_indices = std::make_shared<SharedBuffer>(std::move(i));
      statistics_.buffer_allocations++;
    }
  } else {
    if (grow_vertices) {
      CUBEFORGE_ASSIGN_OR_RETURN(Buffer v, Buffer::create(context_, vertex_capacity, kVertexUsage, false, "mesh vertices"));
      slot.vertices = std::make_shared<Buffer>(std::move(v));
      statistics_.buffer_allocations++;
    }
    if (grow_indices) {
      CUBEFORGE_ASSIGN_OR_RETURN(Buffer i, Buffer::create(context_, index_capacity, kIndexUsage, false, "mesh indices"));
      slot.indices = std::make_shared<Buffer>(std::move(i));
      statistics_.buffer_allocations++;
    }
    CUBEFORGE_ASSIGN_OR_RETURN(Buffer s, Buffer::create(context_, vertex_capacity + index_capacity,
                                                        VK_BUFFER_USAGE_TRANSFER_SRC_BIT, true, "mesh staging"));
    slot.staging = std::make_shared<Buffer>(std::move(s));
    statistics_.buffer_allocations++;
  }
  slot.vertex_capacity = vertex_capacity;
  slot.index_capacity = index_capacity;
  return ok_status();
}

Status MeshBuffers::upload(const Mesh& mesh) {
  auto start = std::chrono::steady_clock::now();
  CUBEFORGE_TRY(validate(mesh));
  if (writing_ >= 0)
    return make_error(ErrorCode::kInvalidArgument, "mesh upload: a device write is open; call end_device_write first");
  context_.collect_garbage();
  if (mesh.empty()) {
    front_ = -1;
    return ok_status();
  }
  std::vector<float> computed_normals;
  const std::vector<float>* normals = &mesh.normals;
  if (!mesh.has_normals()) {
    computed_normals = compute_vertex_normals(mesh);
    normals = &computed_normals;
  }
  const uint32_t vertex_count = static_cast<uint32_t>(mesh.vertex_count());
  const VkDeviceSize positions_bytes = VkDeviceSize(vertex_count) * 3 * sizeof(float);
  const VkDeviceSize vertex_bytes = positions_bytes * 2;
  const VkDeviceSize index_bytes = mesh.indices.size() * sizeof(uint32_t);

  int slot_index = front_ == 0 ? 1 : 0;
  Slot& slot = slots_[slot_index];
  context_.wait_for(slot.last_use_value);  // the slot is off screen: normally long finished
  CUBEFORGE_TRY(reserve(slot, vertex_bytes, index_bytes));
  uint64_t ready_value = ready_next_++;

  if (interop_) {
    auto* base = static_cast<uint8_t*>(slot.shared_vertices->device_pointer());
    CUBEFORGE_TRY(interop_->copy_from_host(base, mesh.positions.data(), positions_bytes));
    CUBEFORGE_TRY(interop_->copy_from_host(base + positions_bytes, normals->data(), positions_bytes));
    CUBEFORGE_TRY(interop_->copy_from_host(slot.shared_indices->device_pointer(), mesh.indices.data(), index_bytes));
    CUBEFORGE_TRY(interop_->signal_ready(ready_value));
  } else {
    auto* staging = static_cast<uint8_t*>(slot.staging->mapped());
    std::memcpy(staging, mesh.positions.data(), positions_bytes);
    std::memcpy(staging + positions_bytes, normals->data(), positions_bytes);
    std::memcpy(staging + slot.vertex_capacity, mesh.indices.data(), index_bytes);

    VkCommandBuffer cmd = slot.upload_commands;
    VK_CHECK(vkResetCommandBuffer(cmd, 0), "upload command buffer is idle (its slot was waited for)");
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    VK_CHECK(vkBeginCommandBuffer(cmd, &begin), "upload command buffer");
    VkBufferCopy vertex_copy{0, 0, vertex_bytes};
    vkCmdCopyBuffer(cmd, slot.staging->handle(), slot.vertices->handle(), 1, &vertex_copy);
    VkBufferCopy index_copy{slot.vertex_capacity, 0, index_bytes};
    vkCmdCopyBuffer(cmd, slot.staging->handle(), slot.indices->handle(), 1, &index_copy);
    VK_CHECK(vkEndCommandBuffer(cmd), "upload command buffer");
    // Draws wait on the mesh-ready semaphore, which makes the copies visible to vertex input.
    slot.last_use_value = context_.submit({cmd}, {}, {{owned_ready_semaphore_, ready_value}});
  }
  slot.vertex_count = vertex_count;
  slot.index_count = static_cast<uint32_t>(mesh.indices.size());
  slot.ready_value = ready_value;
  slot.bounds = mesh.bounds();
  front_ = slot_index;

  statistics_.uploads++;
  statistics_.bytes += vertex_bytes + index_bytes;
  statistics_.host_seconds += seconds_since(start);
  return ok_status();
}

Result<DeviceMeshWrite> MeshBuffers::begin_device_write(size_t vertex_count, size_t face_count) {
  if (!interop_)
    return make_error(ErrorCode::kUnsupported, "mesh device write: CUDA interop is not active (" +
                                                   statistics_.interop_unavailable_reason +
                                                   "); upload a host Mesh instead");
  if (writing_ >= 0) return make_error(ErrorCode::kInvalidArgument, "mesh device write: one is already open");
  if (vertex_count == 0 || face_count == 0 || vertex_count > std::numeric_limits<uint32_t>::max() ||
      face_count * 3 > std::numeric_limits<uint32_t>::max())
    return make_error(ErrorCode::kInvalidArgument, "mesh device write: " + std::to_string(vertex_count) +
                                                       " vertices / " + std::to_string(face_count) +
                                                       " faces is out of range (1..2^32)");
  context_.collect_garbage();
  int slot_index = front_ == 0 ? 1 : 0;
  Slot& slot = slots_[slot_index];
  context_.wait_for(slot.last_use_value);
  const VkDeviceSize positions_bytes = VkDeviceSize(vertex_count) * 3 * sizeof(float);
  CUBEFORGE_TRY(reserve(slot, positions_bytes * 2, VkDeviceSize(face_count) * 3 * sizeof(uint32_t)));
  slot.vertex_count = static_cast<uint32_t>(vertex_count);
  slot.index_count = static_cast<uint32_t>(face_count * 3);
  writing_ = slot_index;
  DeviceMeshWrite write;
  write.positions = static_cast<float*>(slot.shared_vertices->device_pointer());
  write.normals = write.positions + vertex_count * 3;
  write.indices = static_cast<uint32_t*>(slot.shared_indices->device_pointer());
  write.cuda_stream = interop_->stream();
  write.cuda_device = interop_->cuda_device();
  return write;
}

Status MeshBuffers::end_device_write(const Bounds3& bounds) {
  if (writing_ < 0) return make_error(ErrorCode::kInvalidArgument, "mesh device write: none is open");
  auto start = std::chrono::steady_clock::now();
  Slot& slot = slots_[writing_];
  uint64_t ready_value = ready_next_++;
  CUBEFORGE_TRY(interop_->signal_ready(ready_value));
  slot.ready_value = ready_value;
  slot.bounds = bounds;
  front_ = writing_;
  writing_ = -1;
  statistics_.uploads++;
  statistics_.bytes += VkDeviceSize(slot.vertex_count) * 24 + VkDeviceSize(slot.index_count) * 4;
  statistics_.host_seconds += seconds_since(start);
  return ok_status();
}

Status MeshBuffers::finish() {
  if (interop_) return interop_->synchronize();
  for (const auto& slot : slots_) context_.wait_for(slot.last_use_value);
  return ok_status();
}

void MeshBuffers::clear() {
  if (interop_) (void)interop_->synchronize();
  for (auto& slot : slots_) release(slot);
  front_ = -1;
  writing_ = -1;
}

std::optional<DrawableMesh> MeshBuffers::drawable() const {
  if (front_ < 0) return std::nullopt;
  const Slot& slot = slots_[front_];
  DrawableMesh mesh;
  mesh.vertex_buffer = interop_ ? slot.shared_vertices->buffer().handle() : slot.vertices->handle();
  mesh.index_buffer = interop_ ? slot.shared_indices->buffer().handle() : slot.indices->handle();
  mesh.normals_offset = VkDeviceSize(slot.vertex_count) * 3 * sizeof(float);
  mesh.index_count = slot.index_count;
  mesh.ready = {interop_ ? interop_->ready_semaphore() : owned_ready_semaphore_, slot.ready_value,
                VK_PIPELINE_STAGE_VERTEX_INPUT_BIT};
  mesh.acquire_from_external = interop_ && slot.acquired_value != slot.ready_value;
  mesh.bounds = slot.bounds;
  return mesh;
}

void MeshBuffers::mark_drawn(uint64_t timeline_value) {
  if (front_ < 0) return;
  slots_[front_].last_use_value = timeline_value;
  slots_[front_].acquired_value = slots_[front_].ready_value;  // the submitted draw acquired them (interop)
}

}  // namespace cubeforge::engine
