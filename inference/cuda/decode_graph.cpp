// CUDA graph capture and replay of a decode step (see decode_graph.h).
#include "inference/cuda/decode_graph.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "inference/cuda/cuda_status.h"

namespace cubeforge::cuda {

bool cuda_graphs_enabled_by_environment() {
  const char* value = std::getenv("CUBEFORGE_CUDA_GRAPHS");
  if (!value) return true;
  const std::string text(value);
  return !(text == "0" || text == "off" || text == "OFF" || text == "false" || text == "FALSE");
}

Result<CudaDecodeGraph> CudaDecodeGraph::create(Stream stream, RecordStep record, Mode mode) {
  if (!record) return make_error(ErrorCode::kInvalidArgument, "CudaDecodeGraph: no step callback");
  CudaDecodeGraph graph;
  graph.stream_ = stream;
  graph.record_ = std::move(record);
  graph.use_graph_ = mode == Mode::kGraph || (mode == Mode::kFromEnvironment && cuda_graphs_enabled_by_environment());
  if (graph.use_graph_ && stream == nullptr)
    return make_error(ErrorCode::kInvalidArgument,
                      "CudaDecodeGraph: graphs need a created stream (cudaStreamCreate), not the default stream");
  // Device queries that kernels' launchers cache are made now, outside any capture.
  multiprocessor_count();
  return Result<CudaDecodeGraph>(std::move(graph));
}

CudaDecodeGraph::CudaDecodeGraph(CudaDecodeGraph&& other) noexcept
    : stream_(other.stream_),
      record_(std::move(other.record_)),
      use_graph_(other.use_graph_),
      executable_(std::exchange(other.executable_, nullptr)),
      capture_count_(other.capture_count_) {}

CudaDecodeGraph& CudaDecodeGraph::operator=(CudaDecodeGraph&& other) noexcept {
  if (this != &other) {
    release();
    stream_ = other.stream_;
    record_ = std::move(other.record_);
    use_graph_ = other.use_graph_;
    executable_ = std::exchange(other.executable_, nullptr);
    capture_count_ = other.capture_count_;
  }
  return *this;
}

CudaDecodeGraph::~CudaDecodeGraph() { release(); }

void CudaDecodeGraph::release() {
  if (executable_) cudaGraphExecDestroy(executable_);
  executable_ = nullptr;
}

void CudaDecodeGraph::invalidate() { release(); }

Status CudaDecodeGraph::capture() {
  release();
  Status begun = detail::cuda_status(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                                     "CUDA graph: begin capture");
  if (!begun.ok()) return begun;
  Status recorded = record_(stream_);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  if (!recorded.ok()) {
    if (graph) cudaGraphDestroy(graph);
    return recorded;
  }
  if (ended != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    return detail::cuda_status(
        ended, "CUDA graph: end capture (the step did something a capture forbids, e.g. a synchronisation)");
  }
  cudaGraphExec_t executable = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&executable, graph, 0);
  cudaGraphDestroy(graph);
  if (instantiated != cudaSuccess) return detail::cuda_status(instantiated, "CUDA graph: instantiate");
  executable_ = executable;
  ++capture_count_;
  return ok_status();
}

Status CudaDecodeGraph::launch() {
  if (!use_graph_) return record_(stream_);
  if (!executable_) CUBEFORGE_TRY(capture());
  return detail::cuda_status(cudaGraphLaunch(executable_, stream_), "CUDA graph: launch");
}

}  // namespace cubeforge::cuda
