// The CUDA backend of the token seam (inference/backend/token_backend.h).
//
// Opening it uploads the GPT once (gpt_weights.h); each session then holds
// its KV cache, runs the prefill with cuBLASLt and the kernel families, and
// records the decode step once as a CUDA graph (decode_graph.h) that is
// replayed per token. Guidance, sampling and the next embedding stay on the
// device; tokens reach the host through a pinned ring the host polls, so no
// token costs a host synchronisation. Three modes make the ablation: without
// the KV cache every step recomputes the sequence (eager), with it the step
// runs eagerly or as a graph (TokenSessionOptions::cuda_graphs, and
// CUBEFORGE_CUDA_GRAPHS=0).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "inference/backend/token_backend.h"
#include "inference/cuda/cuda_api.h"

namespace cubeforge::cuda {

// Whether device 0 can run generations: a driver at least as new as this
// build's runtime, a device, kernels for its architecture, and (when
// bytes_needed > 0) that much free memory. `reason` says what is missing in
// words a user can act on; `device` describes the device when there is one.
struct DeviceCheck {
  bool usable = false;
  bool out_of_memory = false;
  std::string device;
  std::string reason;
  std::size_t free_bytes = 0;
};
DeviceCheck check_device(std::size_t bytes_needed);

// Device memory the backend needs for this model: weights as uploaded plus a
// margin for one generation's cache and scratch.
std::size_t device_bytes_needed(const DualStreamGpt& model);

// Whether the CUDA backend runs `request` on a model of `config`, asked
// before any device is touched (the opened backend's supports() answers the
// same): ok, or a kUnsupported error naming the option at fault.
Status supports(const GptConfig& config, const BackendRequest& request);

Result<std::shared_ptr<TokenBackend>> open_token_backend(const DualStreamGpt& model);

}  // namespace cubeforge::cuda
