// Elementwise kernels of the occupancy hot path: row softmax, exact-erf GELU, SiLU.
//
// An occupancy query spends as much time in exp (softmax over 1024 latents per
// head) and erf (the 4·width MLP) as in its matrix products when those run
// through libm one value at a time. These kernels evaluate 16 lanes at once
// on AVX-512 (chosen at run time; other CPUs take the scalar libm path). The
// vector exp is Cephes' single-precision polynomial (about 1 ulp) and erf is
// Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7), so results agree
// with the scalar path to float32 rounding.
#pragma once

#include <cstdint>

namespace cubeforge::shape_kernels {

// Each of `rows` rows of n values (row stride n) becomes softmax(scale · row).
void softmax_rows(float* scores, int64_t rows, int64_t n, float scale);

// x = 0.5 · x · (1 + erf(x / √2)) over n values.
void gelu_erf(float* x, int64_t n);

// x = x / (1 + exp(-x)) over n values.
void silu(float* x, int64_t n);

// The instruction set these kernels use on this CPU ("avx512" or "scalar").
const char* isa();

// The implementations behind the dispatch, callable directly for tests. The
// vector ones are defined in shape_kernels_avx512.cpp and need AVX-512F/DQ.
void softmax_rows_scalar(float* scores, int64_t rows, int64_t n, float scale);
void gelu_erf_scalar(float* x, int64_t n);
void silu_scalar(float* x, int64_t n);
void softmax_rows_avx512(float* scores, int64_t rows, int64_t n, float scale);
void gelu_erf_avx512(float* x, int64_t n);
void silu_avx512(float* x, int64_t n);

}  // namespace cubeforge::shape_kernels
