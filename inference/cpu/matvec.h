// Matrix-vector kernels for decode: y[b, n] (+)= Σ_k W[n, k] · x[b, k] for one
// or two activation rows, over a range of output rows. One implementation per
// instruction set, chosen at run time (see ops.cpp).
#pragma once

#include <cstdint>

#include "inference/cpu/ops.h"

namespace cubeforge::cpu {

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

}  // namespace cubeforge::cpu
