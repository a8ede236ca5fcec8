// Choosing the backend that runs the GPT: the only place that knows which
// backends this build has. `auto` takes CUDA when the build has it and a
// usable device is present (a driver new enough for the build's runtime,
// kernels for the device's architecture, enough free memory for the weights),
// else the CPU, and says why in one line. An explicit `cuda` that cannot run
// is an error naming the cause. Availability is a run-time question: a build
// with CUDA on a machine without a driver answers it, it does not crash.
#pragma once

#include <memory>
#include <string>

#include "inference/backend/token_backend.h"

namespace cubeforge {

struct BackendSelection {
  std::shared_ptr<TokenBackend> backend;
  std::string reason;  // one line: what was chosen and why
};

// Opens the chosen backend for `model` (the CUDA backend uploads the weights).
Result<BackendSelection> select_token_backend(BackendChoice choice, const DualStreamGpt& model);

// What a settings panel shows before any model is loaded: the CUDA device
// ("NVIDIA H200, compute 9.0, 132 SMs, 139.8 GiB") when generations can run on
// it, else empty with `why_not` set ("no CUDA device", "built without CUDA", ...).
struct CudaAvailability {
  bool available = false;
  std::string device;
  std::string why_not;
};
CudaAvailability cuda_availability();

}  // namespace cubeforge
