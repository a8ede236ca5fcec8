// Float32 CPU operations over plain buffers: the CPU backend's op set.
//
// Shapes follow one legend: M = rows (tokens), K = input features, N = output
// features, H = heads, D = head dim. Activations are row-major float32.
// Weights stay in their stored precision (F32, F16 or BF16) and are widened
// inside the kernels, which is exact: decode is bound by the bytes it reads,
// so half-precision checkpoints decode at half the traffic with identical math.
#pragma once

#include <cstddef>
#include <cstdint>

#include "inference/tensor/dtype.h"

namespace cubeforge::cpu {

// A [N, K] weight matrix (PyTorch nn.Linear layout) in stored precision.
struct WeightMatrix {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;  // N, output features
  int64_t cols = 0;  // K, input features

  size_t byte_size() const { return size_t(rows) * size_t(cols) * dtype_size(dtype); }
};

// Threads of the pool every op runs on; 0 means one per core.
void set_thread_count(int threads);
int thread_count();

// C[M, N] = alpha · A[M, K] · B (+ beta · C), B being [K, N], or [N, K] used
// transposed (`transpose_b`): OpenBLAS on one thread per part, the parts
// (ranges of C's rows or columns, whichever there are more of) spread over the
// pool's threads when the product is large enough. Every BLAS product of the
// engine goes through here. OpenBLAS's own threads spin for about 2^28 cycles
// after each call before they sleep, and on two cores that spinning took a
// core from whatever ran next (about 25 ms more CLIP encoding and 20 ms more
// prefill per object on the built-in model, and in some runs 50 ms more);
// the pool's threads sleep.
void sgemm(bool transpose_b, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Name of the instruction set chosen at run time for the matrix-vector kernels.
const char* kernel_isa();

// y[M, N] = x[M, K] · Wᵀ (+ bias[N]). Small M (decode) streams the weights
// once with a vectorised kernel; large M goes through BLAS.
void linear(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y);

// Same, accumulating into y: y += x · Wᵀ (+ bias). Used for residual adds.
void linear_accumulate(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y);

// Row-wise LayerNorm over n features; weight/bias may be null (no affine).
// Statistics in float32, as PyTorch computes them.
void layer_norm(const float* x, int64_t m, int64_t n, float eps, const float* weight, const float* bias, float* y);

// Row-wise RMSNorm over n features with a weight: x · rsqrt(mean(x²) + eps) · w.
void rms_norm(const float* x, int64_t m, int64_t n, float eps, const float* weight, float* y);

// RMSNorm applied to each head of a [M, H·D] slab in place (per-head q/k norm).
void rms_norm_heads(float* x, int64_t m, int64_t heads, int64_t head_dim, int64_t row_stride, float eps,
                    const float* weight);

// Interleaved-pair rotary embedding in place on [M, H·D] rows; row i is at
// position positions[i]. Pairs (2j, 2j+1) rotate by pos · theta^(-2j/D).
void rope_interleaved(float* x, int64_t m, int64_t heads, int64_t head_dim, int64_t row_stride,
                      const int32_t* positions, float theta);

// Multi-head attention. q: [Lq, H·D] (row stride q_stride); k, v: [Lk, H·D]
// (row stride kv_stride); out: [Lq, H·D] (row stride out_stride).
// Query row i sees keys [0, visible(i)) where visible(i) = min(Lk, causal_base + i + 1)
// when causal_base >= 0, and all Lk keys when causal_base < 0. Scale 1/sqrt(D).
void attention(const float* q, int64_t q_len, int64_t q_stride, const float* k, const float* v, int64_t kv_len,
               int64_t kv_stride, int64_t heads, int64_t head_dim, int64_t causal_base, float* out,
               int64_t out_stride);

// Activations, elementwise over n values.
void silu_inplace(float* x, int64_t n);
void gelu_erf_inplace(float* x, int64_t n);
void quick_gelu_inplace(float* x, int64_t n);
// gate[i] = silu(gate[i]) * up[i]
void swiglu_inplace(float* gate, const float* up, int64_t n);
void add_inplace(float* y, const float* x, int64_t n);

// Widens w's row range [row_begin, row_end) into a dense float32 [rows, K] buffer.
void widen_rows(const WeightMatrix& w, int64_t row_begin, int64_t row_end, float* out);

}  // namespace cubeforge::cpu
