// Records one decode step as a CUDA graph once and replays it for every token.
//
// The step is whatever a callback enqueues on a stream (norms, matvecs,
// attention, sampling); everything that changes from token to token (the
// position, the step index, the KV-cache length, the input row) must live in
// device memory, so the captured kernels' arguments stay valid. A replay
// costs one cudaGraphLaunch instead of every kernel launch of the step.
//
// Kill switch: CUBEFORGE_CUDA_GRAPHS=0 in the environment makes every launch
// call the callback directly on the stream (eager), for debugging and for
// comparing the two. Call invalidate() when buffers or shapes change; the next
// launch captures again.
//
// The callback must only enqueue work on the stream it is given: no
// allocation, no synchronisation, no host reads of device data (those are
// illegal while a stream is being captured and would end the capture).
#pragma once

#include <functional>

#include "inference/cuda/cuda_api.h"

struct CUgraphExec_st;

namespace cubeforge::cuda {

// False when CUBEFORGE_CUDA_GRAPHS is set to "0" (or "off", "false").
bool cuda_graphs_enabled_by_environment();

class CudaDecodeGraph {
 public:
  using RecordStep = std::function<Status(Stream)>;
  enum class Mode { kFromEnvironment, kGraph, kEager };

  // `stream` must be a created stream (not the legacy default stream) when
  // graphs are used: capture is not allowed on the legacy stream.
  static Result<CudaDecodeGraph> create(Stream stream, RecordStep record, Mode mode = Mode::kFromEnvironment);

  CudaDecodeGraph(CudaDecodeGraph&& other) noexcept;
  CudaDecodeGraph& operator=(CudaDecodeGraph&& other) noexcept;
  CudaDecodeGraph(const CudaDecodeGraph&) = delete;
  CudaDecodeGraph& operator=(const CudaDecodeGraph&) = delete;
  ~CudaDecodeGraph();

  // Enqueues one step: replays the graph (capturing it first if needed), or
  // runs the callback eagerly. Asynchronous, like a kernel launch.
  Status launch();
  void invalidate();

  bool uses_graph() const { return use_graph_; }
  int capture_count() const { return capture_count_; }

 private:
  CudaDecodeGraph() = default;
  Status capture();
  void release();

  Stream stream_ = nullptr;
  RecordStep record_;
  bool use_graph_ = false;
  CUgraphExec_st* executable_ = nullptr;
  int capture_count_ = 0;
};

}  // namespace cubeforge::cuda
