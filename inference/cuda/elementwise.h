// Small elementwise kernels of the prefill: bf16 and quantised weights widened
// for the f32 GEMMs, the embedding rows of the tokens fed so far, and SwiGLU over rows.
//
// widen_bf16: out[i] = bf16 in[i] as f32 (exact), for `count` elements.
// dequantize_rows: a Q8 or Q4 matrix (inference/cpu/quantize.h) as f32 rows,
//   the values the CPU's dequantize_rows gives, for the prefill's GEMMs.
// gather_embedding_rows: out[b, t, :] = table[ids[t], :] for b < batch rows and
//   t < count, with ids read from device memory (the tokens the sampling kernel
//   has written), so the host needs no copy of them; table rows in bf16 or f32.
// swiglu_rows: out[m, j] = silu(in[m, j]) · in[m, width + j] for rows of
//   [gate | up] (the fused gate_up projection), silu(x) = x / (1 + exp(−x)) as
//   the CPU's swiglu_inplace; out may not alias in.
#pragma once

#include <cstddef>
#include <cstdint>

#include "inference/cuda/cuda_api.h"

namespace cubeforge::cuda {

Status widen_bf16(const std::uint16_t* input, float* output, std::size_t count, Stream stream);

struct DequantizeArgs {
  DType type = DType::kI8;                 // kI8 (Q8 codes) or kU8 (Q4 codes, two per byte)
  const void* codes = nullptr;             // [rows, cols] or [rows, cols / 2]
  const std::uint16_t* scales = nullptr;   // F16 bits [rows, cols / group]
  const std::uint16_t* offsets = nullptr;  // Q4: F16 bits [rows, cols / group]
  int group = 32;
  int rows = 0;
  int cols = 0;
  float* output = nullptr;  // [rows, cols]
};

Status dequantize_rows(const DequantizeArgs& args, Stream stream);

struct GatherEmbeddingArgs {
  DType table_type = DType::kF32;  // kF32 or kBF16
  const void* table = nullptr;     // [table_rows, dim]
  int table_rows = 0;
  int dim = 0;
  const int* ids = nullptr;  // device [count]; ids outside the table give zero rows
  int count = 0;
  int batch = 1;             // every batch row gets the same tokens
  float* output = nullptr;   // [batch, count, dim]
};

Status gather_embedding_rows(const GatherEmbeddingArgs& args, Stream stream);

Status swiglu_rows(const float* input, int rows, int width, float* output, Stream stream);

}  // namespace cubeforge::cuda
