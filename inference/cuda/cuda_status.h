// A CUDA runtime error as a Status that names what failed: the one conversion
// for the host files (.cpp, compiled against the runtime headers) and the
// kernel families (.cu, through cuda_internal.cuh).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "inference/core/result.h"

namespace cubeforge::cuda::detail {

inline Status cuda_status(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return ok_status();
  ErrorCode code = error == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : ErrorCode::kInternal;
  return make_error(code, what + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")");
}

}  // namespace cubeforge::cuda::detail
