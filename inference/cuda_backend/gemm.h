// Row-batched linear layers for prefill through cuBLASLt: PyTorch's nn.Linear
// over many rows, all in f32.
//
//   output[m, n] = Σ_k input[m, k] · weight[n, k] (+ bias[n]) (+ output[m, n] when accumulating)
//
// Shapes: M rows, K = in_features, N = out_features; input [M, input_stride],
// weight [N, K] row-major (the checkpoint's layout), output [M, output_stride].
// In cuBLASLt's column-major terms that is D[N, M] = op(A)·B with A the weight
// read transposed (T, leading dimension K), B the input (N, leading dimension
// input_stride), C = D the output (leading dimension output_stride, beta 1 to
// accumulate), and the bias epilogue. Compute is plain f32 (no TF32), so a
// prefill reproduces the CPU's float32 products to rounding. bf16 weights are
// widened first (elementwise.h); the decode step never comes here.
#pragma once

#include <cstddef>

#include "inference/cuda/cuda_api.h"
#include "inference/cuda/device_memory.h"

struct cublasLtContext;

namespace cubeforge::cuda {

struct LinearRowsArgs {
  const float* input = nullptr;  // [rows, input_stride]
  int input_stride = 0;          // 0 means in_features
  const float* weight = nullptr;  // [out_features, in_features]
  const float* bias = nullptr;    // [out_features] or nullptr
  int rows = 0;
  int in_features = 0;
  int out_features = 0;
  float* output = nullptr;  // [rows, output_stride]
  int output_stride = 0;    // 0 means out_features
  bool accumulate = false;  // output += … (residual adds); output must not alias input
};

// A cuBLASLt handle and its workspace, for one stream at a time.
// Loads cuBLASLt (once per process); an error names the library and why.
// GemmContext::create calls it; a backend calls it first to fail early.
Status load_gemm_library();

class GemmContext {
 public:
  static Result<GemmContext> create(std::size_t workspace_bytes = std::size_t(32) << 20);
  GemmContext(GemmContext&& other) noexcept;
  GemmContext& operator=(GemmContext&& other) noexcept;
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;
  ~GemmContext();

  Status linear_rows(const LinearRowsArgs& args, Stream stream);

 private:
  GemmContext() = default;
  cublasLtContext* handle_ = nullptr;
  DeviceBuffer<unsigned char> workspace_;
};

}  // namespace cubeforge::cuda
