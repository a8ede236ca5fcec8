// The kernels behind the CPU op set, one implementation per instruction set,
// and the one table that picks them for this CPU at run time.
//
// Files named *_avx512.cpp are compiled for AVX-512 F, BW, VL and DQ and
// *_avx2.cpp for AVX2, FMA and F16C (tools/layering.cmake); the compiler
// may use any of those instructions anywhere in such a file, so the table
// points into one only when the CPU has every feature it was compiled for.
// The ops (ops.cpp, occupancy_decoder.cpp) call through kernels(); tests call
// the implementations directly to compare them with each other.
#pragma once

#include <cstdint>

#include "inference/cpu/kv_cache.h"
#include "inference/cpu/occupancy_decoder.h"
#include "inference/cpu/ops.h"

namespace cubeforge::cpu {

// ---- Matrix-vector products for decode: y[b, n] (+)= Σ_k W[n, k] · x[b, k]
// for one or two activation rows, over a range of output rows.

// Computes rows [n_begin, n_end) of y for `batch` (1 or 2) activation rows.
// x: [batch, K]; y: [batch, N] with row stride N. When `accumulate`, adds into y.
using MatvecKernel = void (*)(const WeightMatrix& w, int64_t n_begin, int64_t n_end, const float* x, int batch,
                              const float* bias, float* y, bool accumulate);

void matvec_generic(const WeightMatrix& w, int64_t n_begin, int64_t n_end, const float* x, int batch,
                    const float* bias, float* y, bool accumulate);
void matvec_avx2(const WeightMatrix& w, int64_t n_begin, int64_t n_end, const float* x, int batch,
                 const float* bias, float* y, bool accumulate);
void matvec_avx512(const WeightMatrix& w, int64_t n_begin, int64_t n_end, const float* x, int batch,
                   const float* bias, float* y, bool accumulate);

// ---- Attention over a stored KV cache (kv_cache.h), over slots [begin, end)
// of H query heads grouped on the store's G heads (query head h reads head
// h / (H / G)).

// scores[(j − begin)·H + h] = scale · q_h · k_j,g   (q: [H, D])
using KvScoresKernel = void (*)(const KvStore& store, const float* q, int64_t query_heads, float scale,
                                int64_t begin, int64_t end, float* scores);
// accum[h·D + d] += Σ_j weights[(j − begin)·H + h] · v_j,g[d]
using KvValuesKernel = void (*)(const KvStore& store, const float* weights, int64_t query_heads, int64_t begin,
                                int64_t end, float* accum);

void kv_scores_generic(const KvStore& store, const float* q, int64_t query_heads, float scale, int64_t begin,
                       int64_t end, float* scores);
void kv_scores_avx512(const KvStore& store, const float* q, int64_t query_heads, float scale, int64_t begin,
                      int64_t end, float* scores);
void kv_values_generic(const KvStore& store, const float* weights, int64_t query_heads, int64_t begin, int64_t end,
                       float* accum);
void kv_values_avx512(const KvStore& store, const float* weights, int64_t query_heads, int64_t begin, int64_t end,
                      float* accum);

// ---- The vector-math ops of ops.h, with the same contracts. Their scalar
// loops are layer_norm and gelu_erf_inplace where those are the same loop,
// and these otherwise.

void fourier_embed_scalar(const float* weight, const float* carrier, int64_t num_freqs, const float* points,
                          int64_t count, float* out);
void fourier_embed_avx512(const float* weight, const float* carrier, int64_t num_freqs, const float* points,
                          int64_t count, float* out);
void layer_norm_lanes_avx512(const float* x, int64_t rows, int64_t n, float eps, const float* weight,
                             const float* bias, float* y);
void softmax_rows_scalar(float* scores, int64_t rows, int64_t n, float scale);
void softmax_rows_avx512(float* scores, int64_t rows, int64_t n, float scale);
void gelu_erf_lanes_avx512(float* x, int64_t n);
void silu_lanes_scalar(float* x, int64_t n);
void silu_lanes_avx512(float* x, int64_t n);

// ---- attention_over_rows (ops.h).

void attention_over_rows_generic(const float* q, int64_t rows, const float* keys, const float* values,
                                 const int32_t* key_rows, int64_t count, int64_t heads, int64_t head_dim, float* out,
                                 float* mass);
void attention_over_rows_avx512(const float* q, int64_t rows, const float* keys, const float* values,
                                const int32_t* key_rows, int64_t count, int64_t heads, int64_t head_dim, float* out,
                                float* mass);

// ---- The fused occupancy decoder (occupancy_decoder.h): AVX-512 only.

void occupancy_decoder_avx512(const OccupancyDecoderWeights& weights, const float* keys, const float* values,
                              int64_t latent_count, const float* points, int64_t count, float* logits,
                              const LatentAttention& attention);
void occupancy_decoder_grid_avx512(const OccupancyDecoderWeights& weights, const float* keys, const float* values,
                                   int64_t latent_count, const float* axis_terms, int64_t axis_points,
                                   const int32_t* ijk, int64_t count, float* logits, const LatentAttention& attention);

// ---- The choice for this CPU, made once.

// Whether this CPU has every feature the *_avx512.cpp (*_avx2.cpp) files are
// compiled for: the one test of the instruction set, for the table below, for
// the tests that compare the implementations, and for picking BLAS kernels.
bool supports_avx512_kernels();
bool supports_avx2_kernels();

struct Kernels {
  const char* isa = "generic";  // "avx512", "avx2" or "generic"
  MatvecKernel matvec = matvec_generic;
  KvScoresKernel kv_scores = kv_scores_generic;
  KvValuesKernel kv_values = kv_values_generic;
  void (*fourier_embed)(const float* weight, const float* carrier, int64_t num_freqs, const float* points,
                        int64_t count, float* out) = fourier_embed_scalar;
  void (*layer_norm_lanes)(const float* x, int64_t rows, int64_t n, float eps, const float* weight,
                           const float* bias, float* y) = layer_norm;
  void (*softmax_rows)(float* scores, int64_t rows, int64_t n, float scale) = softmax_rows_scalar;
  void (*gelu_erf_lanes)(float* x, int64_t n) = gelu_erf_inplace;
  void (*silu_lanes)(float* x, int64_t n) = silu_lanes_scalar;
  decltype(&attention_over_rows_generic) attention_over_rows = attention_over_rows_generic;
  // Null where the fused occupancy decoder does not run (no AVX-512).
  decltype(&occupancy_decoder_avx512) occupancy_decoder = nullptr;
  decltype(&occupancy_decoder_grid_avx512) occupancy_decoder_grid = nullptr;
};

const Kernels& kernels();

}  // namespace cubeforge::cpu
