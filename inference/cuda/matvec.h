// Matrix-vector products for decode: y[b, n] = Σ_k W[n, k] · x[b, k], for one
// or two activation rows (the CFG batch), with fused epilogues.
//
// Shapes (N = rows of W = outputs, K = cols = inputs, B = batch ≤ 2):
//   weight   [N, K] row-major, bf16 or f32, 16-byte aligned, K·sizeof % 16 == 0;
//            or quantised (inference/cpu/quantize.h): Q8 codes (I8) with an F16
//            scale per block of 32, Q4 codes (U8, two per byte) with an F16
//            scale and offset per group of 32 or 64, widened exactly as the
//            CPU's kernels widen them
//   input    [B, input_stride] f32 or bf16
//   output   [B, output_stride] f32
// Epilogues, in the order PyTorch applies them:
//   plain:   y = W·x (+ bias[n]) (+ residual[b, n])     residual may alias y (x += proj(a));
//                                                        the input must not alias y
//   SwiGLU:  y = silu(Wg·x + bg[n]) · (Wu·x + bu[n])     gate and up as two [N, K] row ranges
// Prologue (optional): LayerNorm of each input row before the product.
// Accumulation is fp32; the order of the sum is fixed, so results are
// deterministic. Decode is purely bandwidth-bound (each weight byte is used
// once per token per CFG row pair), so the kernel is built to stream W at the
// HBM rate; see matvec.cu for the layout of work.
#pragma once

#include <cstdint>

#include "inference/cuda/cuda_api.h"

namespace cubeforge::cuda {

struct MatvecArgs {
  DType weight_type = DType::kBF16;  // kBF16, kF32, kI8 (Q8 codes) or kU8 (Q4 codes)
  const void* weight = nullptr;      // [rows, cols]; the gate rows for SwiGLU
  const void* up_weight = nullptr;   // SwiGLU only: [rows, cols] up rows (may be weight + rows·cols)
  // Quantised weights: F16 bits [rows, cols / group] (the up rows' own for SwiGLU).
  const std::uint16_t* scales = nullptr;
  const std::uint16_t* offsets = nullptr;  // Q4 only
  const std::uint16_t* up_scales = nullptr;
  const std::uint16_t* up_offsets = nullptr;
  int group = 0;  // weights per scale: 32 for Q8, 32 or 64 for Q4
  const float* bias = nullptr;       // [rows] or nullptr
  const float* up_bias = nullptr;    // SwiGLU only: [rows] or nullptr
  int rows = 0;
  int cols = 0;

  DType input_type = DType::kF32;  // kF32 or kBF16
  const void* input = nullptr;     // [batch, input_stride]
  int input_stride = 0;            // elements between batch rows; 0 means cols
  int batch = 1;                   // 1 or 2

  const float* residual = nullptr;  // [batch, output_stride] or nullptr; not with SwiGLU
  float* output = nullptr;          // [batch, output_stride]
  int output_stride = 0;            // 0 means rows
  bool swiglu = false;
  // > 0: LayerNorm without affine on each input row first, with this eps
  // ((x − mean) / sqrt(var + eps), as layer_norm_rows); f32 input only.
  float input_layer_norm_eps = 0.0f;

  // How many warps share one row's K range: 1, 2, 4 or 8; 0 picks from the
  // shape and the device's multiprocessor count. Tests force each value.
  int split_k = 0;
};

Status matvec(const MatvecArgs& args, Stream stream);

// The split the automatic choice makes for this shape on `multiprocessors` SMs
// (exposed for tests and the benchmark's report).
int matvec_auto_split_k(int rows, int cols, bool swiglu, DType weight_type, int multiprocessors);

}  // namespace cubeforge::cuda
