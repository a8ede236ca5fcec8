// Choosing the backend that runs the GPT: the only place that knows which
// backends this build has. `auto` takes CUDA when the build has it, a usable
// device is present (a driver new enough for the build's runtime, kernels for
// the device's architecture, enough free memory for the weights) and it
// supports the request, else the CPU, and says why in one line. An explicit
// `cuda` that cannot run is an error naming the cause. Availability is a run-time question: a build
// with CUDA on a machine without a driver answers it, it does not crash.
#pragma once

#include <memory>
#include <string>

#include "inference/backend/token_backend.h"

namespace cubeforge {

struct BackendSelection {
  std::shared_ptr<TokenBackend> backend;
  std::string reason;  // one line: what was chosen and why
  // Auto took the CPU because the backend it prefers does not run this
  // request (not for want of a device): a later request may get that one.
  bool fallback_for_request = false;
};

// Opens the chosen backend for `model` (the CUDA backend uploads the weights)
// to run `request`.
Result<BackendSelection> select_token_backend(BackendChoice choice, const DualStreamGpt& model,
                                              const BackendRequest& request = {});

// Whether `choice` runs `request` on `model`, asked without opening a backend
// or touching a device (what a control greys out, with the reason): ok for
// the CPU and for auto, which falls back to it; for cuda, whether the build
// has the backend and what it supports. Whether a device is present is
// cuda_availability()'s to say.
Status choice_supports(BackendChoice choice, const DualStreamGpt& model, const BackendRequest& request);

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
