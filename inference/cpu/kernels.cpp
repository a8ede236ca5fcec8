// The one run-time choice of kernels for this CPU (see kernels.h).
#include "inference/cpu/kernels.h"

namespace cubeforge::cpu {

bool supports_avx512_kernels() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

bool supports_avx2_kernels() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

namespace {

Kernels choose_kernels() {
  Kernels k;  // generic: the scalar loops
  if (supports_avx512_kernels()) {
    k.isa = "avx512";
    k.matvec = matvec_avx512;
    k.kv_scores = kv_scores_avx512;
    k.kv_values = kv_values_avx512;
    k.fourier_embed = fourier_embed_avx512;
    k.layer_norm_lanes = layer_norm_lanes_avx512;
    k.softmax_rows = softmax_rows_avx512;
    k.gelu_erf_lanes = gelu_erf_lanes_avx512;
    k.silu_lanes = silu_lanes_avx512;
    k.attention_over_rows = attention_over_rows_avx512;
    k.occupancy_decoder = occupancy_decoder_avx512;
    k.occupancy_decoder_grid = occupancy_decoder_grid_avx512;
  } else if (supports_avx2_kernels()) {
    k.isa = "avx2";
    k.matvec = matvec_avx2;
  }
  return k;
}

}  // namespace

const Kernels& kernels() {
  static const Kernels chosen = choose_kernels();
  return chosen;
}

}  // namespace cubeforge::cpu
