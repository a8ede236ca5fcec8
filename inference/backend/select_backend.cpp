// Backend choice (see select_backend.h). Compiled into its own library with
// CUBEFORGE_HAVE_CUDA set when the build has the CUDA backend, so the rest of
// inference/ never depends on it.
#include "inference/backend/select_backend.h"

#if CUBEFORGE_HAVE_CUDA
#include "inference/cuda/token_backend.h"
#endif

namespace cubeforge {

namespace {
[[maybe_unused]] constexpr const char* kBuiltWithoutCuda =
    "this build has no CUDA backend (nvcc was not found when it was configured)";
}  // namespace

CudaAvailability cuda_availability() {
  CudaAvailability availability;
#if CUBEFORGE_HAVE_CUDA
  const cuda::DeviceCheck check = cuda::check_device(0);
  availability.available = check.usable;
  availability.device = check.device;
  availability.why_not = check.usable ? std::string() : check.reason;
#else
  availability.why_not = kBuiltWithoutCuda;
#endif
  return availability;
}

Result<BackendSelection> select_token_backend(BackendChoice choice, const DualStreamGpt& model) {
  BackendSelection selection;
  if (choice == BackendChoice::kCpu) {
    selection.backend = make_cpu_token_backend(model);
    selection.reason = "CPU backend, as asked";
    return selection;
  }
#if CUBEFORGE_HAVE_CUDA
  const cuda::DeviceCheck check = cuda::check_device(cuda::device_bytes_needed(model));
  if (check.usable) {
    auto opened = cuda::open_token_backend(model);
    if (opened.ok()) {
      selection.backend = std::move(*opened);
      selection.reason = std::string(choice == BackendChoice::kAuto ? "auto: " : "") + "CUDA on " + check.device;
      return selection;
    }
    if (choice == BackendChoice::kCuda) return opened.take_error();
    selection.backend = make_cpu_token_backend(model);
    selection.reason = "auto: CPU, the CUDA backend failed to start: " + opened.error().message;
    return selection;
  }
  if (choice == BackendChoice::kCuda)
    return make_error(check.out_of_memory ? ErrorCode::kOutOfMemory : ErrorCode::kUnsupported,
                      "the CUDA backend cannot run: " + check.reason);
  selection.backend = make_cpu_token_backend(model);
  selection.reason = "auto: CPU, " + check.reason;
  return selection;
#else
  if (choice == BackendChoice::kCuda)
    return make_error(ErrorCode::kUnsupported, std::string("the CUDA backend cannot run: ") + kBuiltWithoutCuda +
                                                   "; rebuild with the CUDA toolkit, or run on the CPU");
  selection.backend = make_cpu_token_backend(model);
  selection.reason = std::string("auto: CPU, ") + kBuiltWithoutCuda;
  return selection;
#endif
}

}  // namespace cubeforge
