// Float32 CPU operations over plain buffers: the CPU backend's op set.
//
// Shapes follow one legend: M = rows (tokens), K = input features, N = output
// features, H = heads, D = head dim. Activations are row-major float32.
// Weights stay in their stored precision (F32, F16 or BF16) and are widened
// inside the kernels, which is exact: decode is bound by the bytes it reads,
// so half-precision checkpoints decode at half the traffic with identical math.
// Quantised weights (8-bit and 4-bit codes with scales) are likewise read as
// stored and dequantised in registers.
// Where an op has kernels per instruction set, one table chosen at run time
// picks them for every op (kernels.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "inference/tensor/dtype.h"

namespace cubeforge::cpu {

// How a weight matrix holds its values (quantize.h has the formats).
enum class Quantization {
  kNone,  // F32, F16 or BF16 values
  kQ8,    // 8-bit codes, one F16 scale per block of 32 along a row
  kQ4,    // 4-bit codes, an F16 scale and offset per group of 32 or 64 along a row
};

// A [N, K] weight matrix (PyTorch nn.Linear layout) in stored precision.
struct WeightMatrix {
  DType dtype = DType::kF32;  // kNone: the values' type; kQ8: I8 codes; kQ4: U8, two codes per byte
  const void* data = nullptr;
  int64_t rows = 0;  // N, output features
  int64_t cols = 0;  // K, input features
  Quantization quantization = Quantization::kNone;
  int64_t group = 0;                  // quantised: weights per scale along a row
  const uint16_t* scales = nullptr;   // quantised: [N, K / group] F16
  const uint16_t* offsets = nullptr;  // kQ4: [N, K / group] F16, the value of code 0

  // Bytes a product reads: values or codes, and scales and offsets.
  size_t byte_size() const;
};

// Threads of the pool every op runs on; 0 means one per core.
void set_thread_count(int threads);
int thread_count();

// C[M, N] = alpha · A[M, K] · B (+ beta · C), B being [K, N], or [N, K] used
// transposed (`transpose_b`): OpenBLAS on one thread per part, the parts
// (ranges of C's rows or columns, whichever there are more of) spread over the
// pool's threads when the product is large enough. Every BLAS product of the
// engine goes through here. OpenBLAS's own threads spin for a long while
// after each call before they sleep, and on two cores that spinning takes a
// core from whatever runs next (CLIP encoding and prefill measurably slower;
// figures in docs/performance.md); the pool's threads sleep.
void sgemm(bool transpose_b, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The instruction set whose kernels run on this CPU ("avx512", "avx2" or
// "generic"), chosen once at run time for every op (kernels.h).
const char* kernel_isa();

// y[M, N] = x[M, K] · Wᵀ (+ bias[N]). Small M (decode) streams the weights
// once with a vectorised kernel; large M goes through BLAS.
void linear(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y);

// Same, accumulating into y: y += x · Wᵀ (+ bias). Used for residual adds.
void linear_accumulate(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y);

// y[M, N] = x[M, K] · Wᵀ (+ bias), every row through the decode kernel: a row's
// values are the same bits whatever M is, and the same as linear() gives a
// one- or two-row decode. Exact parallel decoding verifies several positions
// in one evaluation and relies on it. The weights are streamed once per two
// rows, so many rows cost more than through linear().
void linear_rows(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y);
void linear_rows_accumulate(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y);

// Row-wise LayerNorm over n features; weight/bias may be null (no affine).
// Mean and variance are summed in double precision, one value at a time, and
// rounded to float32; the normalisation itself is float32. The same on every
// CPU (layer_norm_lanes is the vectorised variant).
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

// Attention of `rows` queries over `count` of the key and value rows, named
// by `key_rows` (indices into keys and values) and read where they are: a few
// queries over a chosen subset of many rows (occupancy queries over selected
// latents), where gathering the rows, or a BLAS product per subset, costs more
// than the arithmetic. Each named row is read once for all the queries.
// q, out: [rows, H·D]; keys, values: [*, H·D]; scale 1/sqrt(D); the softmax
// is softmax_rows' (vector math). `mass` (optional, [rows, count]): each
// query's weights summed over the heads.
void attention_over_rows(const float* q, int64_t rows, const float* keys, const float* values, const int32_t* key_rows,
                         int64_t count, int64_t heads, int64_t head_dim, float* out, float* mass);

// Activations, elementwise over n values, through libm: the same on every CPU.
// gelu_erf_inplace: 0.5·x·(1 + erf(x/√2)), evaluated as 0.5·x·erfc(-x/√2).
void gelu_erf_inplace(float* x, int64_t n);
void quick_gelu_inplace(float* x, int64_t n);
// gate[i] = silu(gate[i]) * up[i]
void swiglu_inplace(float* gate, const float* up, int64_t n);
void add_inplace(float* y, const float* x, int64_t n);

// Widens (or dequantises) w's row range [row_begin, row_end) into a dense
// float32 [rows, K] buffer.
void widen_rows(const WeightMatrix& w, int64_t row_begin, int64_t row_end, float* out);

// ---- Vector math: the shape tokenizer's float32 ops.
//
// An occupancy query spends as much time in exp (a softmax over every latent,
// per head), erf (the MLP), sines and cosines (the Fourier embedding) and
// LayerNorm as in its matrix products when those run one value at a time
// through libm and double-precision sums. On AVX-512 the ops below evaluate 16
// float32 lanes at once: exp, erfc, sin and cos by polynomials (Cephes' expf,
// sinf and cosf, about 1 ulp for the arguments these layers see; erfc a
// Chebyshev fit, fractional error below 1.2e-7) and sums in float32 lanes.
// Other CPUs run scalar loops: libm in float32, and for the ops named *_lanes
// the loop of their exact twin above (layer_norm, gelu_erf_inplace). The two
// paths agree to float32 rounding, not bit for bit; kernel_isa() says which
// one runs. Where an op here has an exact twin, the numbers differ on AVX-512:
// the GPT and CLIP use the exact ops, the shape tokenizer these. The fused
// occupancy decoder built from the same arithmetic is in occupancy_decoder.h.

// LayerNorm as layer_norm (rows of n values, row stride n), with mean and
// variance summed in float32 over 16 lanes.
void layer_norm_lanes(const float* x, int64_t rows, int64_t n, float eps, const float* weight, const float* bias,
                      float* y);

// GELU as gelu_erf_inplace, with a polynomial erfc over 16 lanes.
void gelu_erf_lanes(float* x, int64_t n);

// x = x / (1 + exp(-x)) over n values.
void silu_lanes(float* x, int64_t n);

// Each of `rows` rows of n values (row stride n) becomes softmax(scale · row),
// its sum in float32.
void softmax_rows(float* scores, int64_t rows, int64_t n, float scale);

// The phase-modulated Fourier embedding of `count` points (xyz rows) with F =
// num_freqs frequencies; out rows hold 3(2F+1) values:
//   [x, y, z, cos(p_i·w_if) + cos(p_i·π/2 + carrier_f) (3F), the same with sin (3F)]
// with weight [3, F] and carrier [F]; arguments are formed in float32 in the
// reference's order. Every point takes 6F sine/cosine pairs: through libm, one
// at a time, as costly as a small decoder's first matrix product.
void fourier_embed(const float* weight, const float* carrier, int64_t num_freqs, const float* points, int64_t count,
                   float* out);

}  // namespace cubeforge::cpu
