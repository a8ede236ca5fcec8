// Backend choice (see select_backend.h). Compiled with CUBEFORGE_HAVE_CUDA set
// when the build has the CUDA backend; below planning/, nothing in inference/
// depends on it.
#include "inference/planning/select_backend.h"

#include "inference/cpu_backend/cpu_token_backend.h"

#if CUBEFORGE_HAVE_CUDA
#include "inference/cuda_backend/token_backend.h"
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

Status choice_supports(BackendChoice choice, const DualStreamGpt& model, const BackendRequest& request) {
  if (choice != BackendChoice::kCuda) return ok_status();
#if CUBEFORGE_HAVE_CUDA
  return cuda::supports(model.config(), request);
#else
  (void)model;
  (void)request;
  return option_error(ErrorCode::kUnsupported, OptionKey::kBackend,
                      std::string("the CUDA backend cannot run: ") + kBuiltWithoutCuda);
#endif
}

Result<BackendSelection> select_token_backend(BackendChoice choice, const DualStreamGpt& model,
                                              const BackendRequest& request) {
  BackendSelection selection;
  if (choice == BackendChoice::kCpu) {
    selection.backend = make_cpu_token_backend(model);
    selection.reason = "CPU backend, as asked";
    return selection;
  }
#if CUBEFORGE_HAVE_CUDA
  if (Status supported = cuda::supports(model.config(), request); !supported.ok()) {
    if (choice == BackendChoice::kCuda) return supported.take_error();
    selection.backend = make_cpu_token_backend(model);
    selection.reason = "auto: CPU, " + supported.error().message;
    selection.fallback_for_request = true;
    return selection;
  }
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
    return option_error(check.out_of_memory ? ErrorCode::kOutOfMemory : ErrorCode::kUnsupported, OptionKey::kBackend,
                        "the CUDA backend cannot run: " + check.reason);
  selection.backend = make_cpu_token_backend(model);
  selection.reason = "auto: CPU, " + check.reason;
  return selection;
#else
  (void)request;
  if (choice == BackendChoice::kCuda)
    return option_error(ErrorCode::kUnsupported, OptionKey::kBackend,
                        std::string("the CUDA backend cannot run: ") + kBuiltWithoutCuda +
                            "; rebuild with the CUDA toolkit, or run on the CPU");
  selection.backend = make_cpu_token_backend(model);
  selection.reason = std::string("auto: CPU, ") + kBuiltWithoutCuda;
  return selection;
#endif
}

}  // namespace cubeforge
