// Interop twin for builds without the CUDA toolkit: interop is never
// available, so mesh buffers always take the staging path.
#include "engine/cuda_interop.h"

namespace cubeforge::engine {

SharedBuffer& SharedBuffer::operator=(SharedBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

void SharedBuffer::reset() { buffer_.reset(); }

Result<std::unique_ptr<CudaInterop>> CudaInterop::create(Context& /*context*/) {
  return make_error(ErrorCode::kUnsupported, "CUDA interop: this build has no CUDA (configure with nvcc on PATH)");
}

CudaInterop::~CudaInterop() = default;

Result<SharedBuffer> CudaInterop::create_shared_buffer(VkDeviceSize, VkBufferUsageFlags, const char*) {
  return make_error(ErrorCode::kUnsupported, "CUDA interop: this build has no CUDA");
}
Status CudaInterop::copy_from_host(void*, const void*, size_t) {
  return make_error(ErrorCode::kUnsupported, "CUDA interop: this build has no CUDA");
}
Status CudaInterop::signal_ready(uint64_t) {
  return make_error(ErrorCode::kUnsupported, "CUDA interop: this build has no CUDA");
}
Status CudaInterop::synchronize() { return ok_status(); }

}  // namespace cubeforge::engine
