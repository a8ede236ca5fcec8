// Decode matrix-vector kernels (see matvec.h for the contract).
//
// Layout of work. A warp streams two weight rows at once (two output rows, or
// the gate and up rows of one SwiGLU output), so each input chunk read from
// L1 feeds two rows. Lanes take consecutive 16-byte chunks of a row (8 bf16 or
// 4 f32), a warp therefore reads 512 contiguous bytes per row per step, and
// each lane issues kUnroll chunks of both rows (8 loads of 16 bytes) before
// the first multiply, which keeps enough bytes in flight per SM to cover HBM
// latency at ~4 TB/s. Weights are loaded with the evict-first hint (ld.cs):
// they are read once per token and must not push the KV cache and the
// activations out of L2. The input vector is tiny (≤ 48 KB) and is read
// through the read-only path, where it stays in L1 for every warp of the SM.
//
// Small N. A 1536×1536 matrix has only 768 row pairs: one warp per pair gives
// 96 blocks of 8 warps on a 132-SM chip, too few loads in flight. Split-K lets
// 2, 4 or 8 warps of one block share a row pair's K range; their partial sums
// meet in shared memory in a fixed order (deterministic, no atomics). The
// automatic choice aims for at least two blocks per SM while leaving every
// lane at least one chunk.
//
// LayerNorm prologue. ln_1, ln_3 and ln_f feed exactly one projection each
// (q|k|v, gate|up, lm_head), so each block normalises the input rows on the
// fly instead of a launch of its own writing them out: every block reads the
// rows (≤ 12 KB, from L2) for their mean and variance, then scales each input
// chunk as it loads it.
//
// Not done here (possible later gains, measured first): a persistent
// multi-matrix kernel that removes the launch gaps between the matvecs of a
// layer.
#include "inference/cuda/matvec.h"

#include "inference/cuda/cuda_internal.cuh"

namespace cubeforge::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kUnroll = 4;    // chunks per row in flight per lane
constexpr int kChunkBytes = 16;

struct MatvecParams {
  const uint4* weight;     // [rows, chunks_per_row]
  const uint4* up_weight;  // SwiGLU: [rows, chunks_per_row]
  const float* bias;
  const float* up_bias;
  int rows;
  int groups;  // warp tasks: row pairs, or SwiGLU outputs
  int chunks_per_row;
  int chunks_per_slice;
  const void* input;
  int input_stride;
  const float* residual;
  float* output;
  int output_stride;
  float norm_eps;  // > 0: LayerNorm each input row first (f32 input)
  int cols;
  // Quantised weights: F16 scales (and Q4 offsets) per group along a row.
  const uint16_t* scales;
  const uint16_t* up_scales;
  const uint16_t* offsets;
  const uint16_t* up_offsets;
  int groups_per_row;
  int group;
};

// Where one weight row's quantisation scales and offsets are (unused by float weights).
struct RowQuant {
  const uint16_t* scales = nullptr;
  const uint16_t* offsets = nullptr;
  int group = 0;
};

// Tags for the quantised weight formats (inference/cpu/quantize.h): Q8 codes
// are signed bytes times their block's scale; Q4 packs 32 weights in 16 bytes,
// byte i holding weight i in its low nibble and weight i + 16 in its high one,
// each code · scale + offset.
struct Q8Code {};
struct Q4Code {};

template <class Weight>
struct WeightChunk;

template <>
struct WeightChunk<__nv_bfloat16> {
  static constexpr int kElements = 8;
  __device__ __forceinline__ static void widen(const uint4& raw, const RowQuant&, int, float (&w)[8]) {
    widen(raw, w);
  }
  __device__ __forceinline__ static void widen(const uint4& raw, float (&w)[8]) {
    w[0] = bf16_low(raw.x), w[1] = bf16_high(raw.x);
    w[2] = bf16_low(raw.y), w[3] = bf16_high(raw.y);
    w[4] = bf16_low(raw.z), w[5] = bf16_high(raw.z);
    w[6] = bf16_low(raw.w), w[7] = bf16_high(raw.w);
  }
};

template <>
struct WeightChunk<float> {
  static constexpr int kElements = 4;
  __device__ __forceinline__ static void widen(const uint4& raw, const RowQuant&, int, float (&w)[4]) {
    w[0] = __uint_as_float(raw.x), w[1] = __uint_as_float(raw.y);
    w[2] = __uint_as_float(raw.z), w[3] = __uint_as_float(raw.w);
  }
};

// 16 codes: half of a block of 32, all under one scale.
template <>
struct WeightChunk<Q8Code> {
  static constexpr int kElements = 16;
  __device__ __forceinline__ static void widen(const uint4& raw, const RowQuant& q, int chunk, float (&w)[16]) {
    const float scale = f16_bits_to_float(__ldg(q.scales + chunk * kElements / q.group));
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 16; ++i) w[i] = float(int8_t(words[i / 4] >> (8 * (i % 4)))) * scale;
  }
};

// 32 codes of one group (of 32 or 64), in the order of their weights.
template <>
struct WeightChunk<Q4Code> {
  static constexpr int kElements = 32;
  __device__ __forceinline__ static void widen(const uint4& raw, const RowQuant& q, int chunk, float (&w)[32]) {
    const int g = chunk * kElements / q.group;
    const float scale = f16_bits_to_float(__ldg(q.scales + g));
    const float offset = f16_bits_to_float(__ldg(q.offsets + g));
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const uint32_t byte = (words[i / 4] >> (8 * (i % 4))) & 0xffu;
      w[i] = fmaf(float(byte & 0xfu), scale, offset);
      w[16 + i] = fmaf(float(byte >> 4), scale, offset);
    }
  }
};


// Reads elements [chunk·E, chunk·E + E) of one input row, widened to f32.
// Longer chunks (quantised weights) are runs of the 8-element loads.
template <class Input, int E>
struct InputChunk {
  static_assert(E % 8 == 0, "chunks of quantised weights hold 16 or 32 elements");
  __device__ __forceinline__ static void load(const Input* row, int chunk, float (&x)[E]);
};

template <>
struct InputChunk<float, 8> {
  __device__ __forceinline__ static void load(const float* row, int chunk, float (&x)[8]) {
    const float4* p = reinterpret_cast<const float4*>(row) + 2 * chunk;
    float4 a = __ldg(p), b = __ldg(p + 1);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
  }
};

template <>
struct InputChunk<float, 4> {
  __device__ __forceinline__ static void load(const float* row, int chunk, float (&x)[4]) {
    float4 a = __ldg(reinterpret_cast<const float4*>(row) + chunk);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
  }
};

template <>
struct InputChunk<__nv_bfloat16, 8> {
  __device__ __forceinline__ static void load(const __nv_bfloat16* row, int chunk, float (&x)[8]) {
    uint4 raw = __ldg(reinterpret_cast<const uint4*>(row) + chunk);
    WeightChunk<__nv_bfloat16>::widen(raw, x);
  }
};

template <>
struct InputChunk<__nv_bfloat16, 4> {
  __device__ __forceinline__ static void load(const __nv_bfloat16* row, int chunk, float (&x)[4]) {
    uint2 raw = __ldg(reinterpret_cast<const uint2*>(row) + chunk);
    x[0] = bf16_low(raw.x), x[1] = bf16_high(raw.x), x[2] = bf16_low(raw.y), x[3] = bf16_high(raw.y);
  }
};

template <class Input, int E>
__device__ __forceinline__ void InputChunk<Input, E>::load(const Input* row, int chunk, float (&x)[E]) {
#pragma unroll
  for (int part = 0; part < E / 8; ++part) {
    float eight[8];
    InputChunk<Input, 8>::load(row, chunk * (E / 8) + part, eight);
#pragma unroll
    for (int e = 0; e < 8; ++e) x[part * 8 + e] = eight[e];
  }
}

// `mean` and `scale` normalise the input on the fly (LayerNorm fused into the
// projection); 0 and 1 leave every value exactly as loaded.
template <class Weight, class Input, int Batch>
__device__ __forceinline__ void accumulate_chunk(const uint4& raw0, const uint4& raw1, const RowQuant& quant0,
                                                 const RowQuant& quant1, const Input* input, int input_stride,
                                                 int chunk, const float (&mean)[Batch], const float (&scale)[Batch],
                                                 float (&acc0)[Batch], float (&acc1)[Batch]) {
  constexpr int E = WeightChunk<Weight>::kElements;
  float w0[E], w1[E];
  WeightChunk<Weight>::widen(raw0, quant0, chunk, w0);
  WeightChunk<Weight>::widen(raw1, quant1, chunk, w1);
#pragma unroll
  for (int b = 0; b < Batch; ++b) {
    float x[E];
    InputChunk<Input, E>::load(input + size_t(b) * input_stride, chunk, x);
#pragma unroll
    for (int e = 0; e < E; ++e) x[e] = (x[e] - mean[b]) * scale[b];
#pragma unroll
    for (int e = 0; e < E; ++e) {
      acc0[b] = fmaf(w0[e], x[e], acc0[b]);
      acc1[b] = fmaf(w1[e], x[e], acc1[b]);
    }
  }
}

__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }

template <class Weight, class Input, int Batch, int SplitK, bool SwiGlu>
__global__ void __launch_bounds__(kThreads) matvec_kernel(const MatvecParams p) {
  constexpr int kGroupsPerBlock = kWarps / SplitK;
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int slice = warp % SplitK;
  const int group = blockIdx.x * kGroupsPerBlock + warp / SplitK;
  const bool active = group < p.groups;

  // The two weight rows this warp streams. An odd last row pair re-reads the
  // last row instead of branching in the loop; its second result is dropped.
  int row0 = 0, row1 = 0;
  const uint4* w0 = p.weight;
  const uint4* w1 = p.weight;
  RowQuant quant0, quant1;
  if (active) {
    if constexpr (SwiGlu) {
      row0 = row1 = group;
      w0 = p.weight + size_t(group) * p.chunks_per_row;
      w1 = p.up_weight + size_t(group) * p.chunks_per_row;
    } else {
      row0 = 2 * group;
      row1 = min(row0 + 1, p.rows - 1);
      w0 = p.weight + size_t(row0) * p.chunks_per_row;
      w1 = p.weight + size_t(row1) * p.chunks_per_row;
    }
    if (p.scales) {
      const size_t at0 = size_t(row0) * p.groups_per_row, at1 = size_t(row1) * p.groups_per_row;
      quant0 = {p.scales + at0, p.offsets ? p.offsets + at0 : nullptr, p.group};
      quant1 = SwiGlu ? RowQuant{p.up_scales + at1, p.up_offsets ? p.up_offsets + at1 : nullptr, p.group}
                      : RowQuant{p.scales + at1, p.offsets ? p.offsets + at1 : nullptr, p.group};
    }
  }
  const int begin = active ? min(slice * p.chunks_per_slice, p.chunks_per_row) : 0;
  const int end = active ? min(begin + p.chunks_per_slice, p.chunks_per_row) : 0;

  const Input* input = static_cast<const Input*>(p.input);
  float acc0[Batch], acc1[Batch];
#pragma unroll
  for (int b = 0; b < Batch; ++b) acc0[b] = acc1[b] = 0.0f;

  // LayerNorm prologue (ln_1, ln_3, ln_f): every block computes the rows'
  // statistics itself, two passes over a row that stays in L1, as
  // layer_norm_rows does.
  float norm_mean[Batch], norm_scale[Batch];
#pragma unroll
  for (int b = 0; b < Batch; ++b) norm_mean[b] = 0.0f, norm_scale[b] = 1.0f;
  if constexpr (sizeof(Input) == 4) {
    if (p.norm_eps > 0.0f) {
      __shared__ float scratch[kWarpSize];
#pragma unroll
      for (int b = 0; b < Batch; ++b) {
        const float* x = reinterpret_cast<const float*>(input) + size_t(b) * p.input_stride;
        float sum = 0.0f;
        for (int i = threadIdx.x; i < p.cols; i += blockDim.x) sum += x[i];
        const float mean = block_sum(sum, scratch) / float(p.cols);
        float squares = 0.0f;
        for (int i = threadIdx.x; i < p.cols; i += blockDim.x) {
          const float centred = x[i] - mean;
          squares = fmaf(centred, centred, squares);
        }
        const float variance = block_sum(squares, scratch) / float(p.cols);
        norm_mean[b] = mean;
        norm_scale[b] = 1.0f / sqrtf(variance + p.norm_eps);
      }
    }
  }

  // Each round issues all of a lane's chunks of both rows (up to kUnroll
  // each) before the first multiply, whatever the slice's length: a short
  // slice (split-K over a narrow matrix) still has all of its bytes in flight
  // at once. A chunk past the slice is neither loaded nor added.
  for (int base = begin; base < end; base += kUnroll * kWarpSize) {
    uint4 raw0[kUnroll], raw1[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int chunk = base + lane + u * kWarpSize;
      if (chunk < end) {
        raw0[u] = __ldcs(w0 + chunk);
        raw1[u] = __ldcs(w1 + chunk);
      } else {
        raw0[u] = raw1[u] = uint4{0u, 0u, 0u, 0u};
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int chunk = base + lane + u * kWarpSize;
      if (chunk < end)
        accumulate_chunk<Weight, Input, Batch>(raw0[u], raw1[u], quant0, quant1, input, p.input_stride, chunk,
                                               norm_mean, norm_scale, acc0, acc1);
    }
  }

#pragma unroll
  for (int b = 0; b < Batch; ++b) {
    acc0[b] = warp_sum(acc0[b]);
    acc1[b] = warp_sum(acc1[b]);
  }

  // Lane i < 2·Batch finishes (row i / Batch, batch i % Batch). The loops over
  // b keep register arrays indexed by constants only.
  const int which = lane / Batch;
  const int batch_row = lane % Batch;
  float sum = 0.0f;  // this lane's output before the epilogue
  float up_sum = 0.0f;  // SwiGLU: the up row's sum for the same output
  if constexpr (SplitK == 1) {
#pragma unroll
    for (int b = 0; b < Batch; ++b) {
      if (b == batch_row) {
        sum = SwiGlu ? acc0[b] : (which == 0 ? acc0[b] : acc1[b]);
        up_sum = acc1[b];
      }
    }
  } else {
    __shared__ float partial[kWarps][2][Batch];
    if (lane == 0) {
#pragma unroll
      for (int b = 0; b < Batch; ++b) {
        partial[warp][0][b] = acc0[b];
        partial[warp][1][b] = acc1[b];
      }
    }
    __syncthreads();
    if (slice != 0 || lane >= 2 * Batch) return;
    const int first = warp;  // slices of one group are consecutive warps, slice 0 first
    for (int s = 0; s < SplitK; ++s) {
      sum += partial[first + s][SwiGlu ? 0 : which][batch_row];
      up_sum += partial[first + s][1][batch_row];
    }
  }
  if (!active || slice != 0) return;

  if constexpr (SwiGlu) {
    if (lane >= Batch) return;
    const float gate = sum + (p.bias ? p.bias[group] : 0.0f);
    const float up = up_sum + (p.up_bias ? p.up_bias[group] : 0.0f);
    p.output[size_t(batch_row) * p.output_stride + group] = silu(gate) * up;
  } else {
    if (lane >= 2 * Batch) return;
    const int row = row0 + which;
    if (row >= p.rows) return;
    float value = sum + (p.bias ? p.bias[row] : 0.0f);
    const size_t at = size_t(batch_row) * p.output_stride + row;
    if (p.residual) value = p.residual[at] + value;
    p.output[at] = value;
  }
}

template <class Weight, class Input, int Batch, bool SwiGlu>
Status launch(int split_k, const MatvecParams& params, Stream stream) {
  const int groups_per_block = kWarps / split_k;
  const int blocks = (params.groups + groups_per_block - 1) / groups_per_block;
  switch (split_k) {
    case 1: matvec_kernel<Weight, Input, Batch, 1, SwiGlu><<<blocks, kThreads, 0, stream>>>(params); break;
    case 2: matvec_kernel<Weight, Input, Batch, 2, SwiGlu><<<blocks, kThreads, 0, stream>>>(params); break;
    case 4: matvec_kernel<Weight, Input, Batch, 4, SwiGlu><<<blocks, kThreads, 0, stream>>>(params); break;
    case 8: matvec_kernel<Weight, Input, Batch, 8, SwiGlu><<<blocks, kThreads, 0, stream>>>(params); break;
    default: return invalid("matvec: split_k must be 1, 2, 4 or 8, got " + std::to_string(split_k));
  }
  return launch_status("matvec kernel launch");
}

template <class Weight, class Input>
Status dispatch_batch(const MatvecArgs& args, int split_k, const MatvecParams& params, Stream stream) {
  if (args.batch == 1)
    return args.swiglu ? launch<Weight, Input, 1, true>(split_k, params, stream)
                       : launch<Weight, Input, 1, false>(split_k, params, stream);
  return args.swiglu ? launch<Weight, Input, 2, true>(split_k, params, stream)
                     : launch<Weight, Input, 2, false>(split_k, params, stream);
}

}  // namespace

namespace {

// Bytes of one weight row: Q4 (kU8) packs two codes per byte.
int64_t weight_row_bytes(DType weight_type, int cols) {
  return weight_type == DType::kU8 ? int64_t(cols) / 2 : int64_t(cols) * int64_t(dtype_size(weight_type));
}

}  // namespace

int matvec_auto_split_k(int rows, int cols, bool swiglu, DType weight_type, int multiprocessors) {
  const int chunks = int(weight_row_bytes(weight_type, cols) / kChunkBytes);
  const int groups = swiglu ? rows : (rows + 1) / 2;
  const int target_blocks = 2 * multiprocessors;
  int split = 1;
  while (split < 8) {
    const int groups_per_block = kWarps / split;
    const int blocks = (groups + groups_per_block - 1) / groups_per_block;
    if (blocks >= target_blocks) break;
    if (chunks / (2 * split) < kWarpSize) break;  // the next split would leave lanes without a chunk
    split *= 2;
  }
  return split;
}

Status matvec(const MatvecArgs& args, Stream stream) {
  const bool q8 = args.weight_type == DType::kI8, q4 = args.weight_type == DType::kU8;
  if (args.weight_type != DType::kBF16 && args.weight_type != DType::kF32 && !q8 && !q4)
    return invalid("matvec: weight type must be BF16, F32, I8 (Q8 codes) or U8 (Q4 codes), got " +
                   std::string(dtype_name(args.weight_type)));
  if (q8 || q4) {
    if (!args.scales || (q4 && !args.offsets) || (args.swiglu && (!args.up_scales || (q4 && !args.up_offsets))))
      return invalid("matvec: quantised weights need their scales (and Q4 offsets), for the up rows too");
    if (q8 ? args.group != 32 : (args.group != 32 && args.group != 64))
      return invalid("matvec: a " + std::string(q8 ? "Q8 block has 32" : "Q4 group has 32 or 64") + " weights, not " +
                     std::to_string(args.group));
    if (args.cols % args.group != 0)
      return invalid("matvec: " + std::to_string(args.cols) + " columns are not whole groups of " +
                     std::to_string(args.group));
  }
  if (args.input_type != DType::kBF16 && args.input_type != DType::kF32)
    return invalid("matvec: input type must be BF16 or F32, got " + std::string(dtype_name(args.input_type)));
  if (args.rows <= 0 || args.cols <= 0)
    return invalid("matvec: empty matrix " + std::to_string(args.rows) + "x" + std::to_string(args.cols));
  if (args.batch != 1 && args.batch != 2)
    return invalid("matvec: batch must be 1 or 2 (the CFG pair), got " + std::to_string(args.batch));
  if (!args.weight || !args.input || !args.output) return invalid("matvec: weight, input and output are required");
  if (args.swiglu && !args.up_weight) return invalid("matvec: SwiGLU needs up_weight");
  if (args.swiglu && args.residual) return invalid("matvec: a residual cannot follow SwiGLU");
  if (args.input_layer_norm_eps < 0.0f || (args.input_layer_norm_eps > 0.0f && args.input_type != DType::kF32))
    return invalid("matvec: the LayerNorm prologue takes f32 input and a positive eps");
  if (args.input_layer_norm_eps > 0.0f && args.residual == args.input)
    return invalid("matvec: the LayerNorm prologue's input cannot be the residual it writes");

  const size_t input_size = dtype_size(args.input_type);
  const int64_t row_bytes = weight_row_bytes(args.weight_type, args.cols);
  if (row_bytes % kChunkBytes != 0)
    return invalid("matvec: a weight row must be a multiple of 16 bytes (cols " + std::to_string(args.cols) + " of " +
                   std::string(dtype_name(args.weight_type)) + "); pad the matrix");
  if (!aligned(args.weight, kChunkBytes) || (args.up_weight && !aligned(args.up_weight, kChunkBytes)))
    return invalid("matvec: weight pointers must be 16-byte aligned");

  const int input_stride = args.input_stride ? args.input_stride : args.cols;
  const int output_stride = args.output_stride ? args.output_stride : args.rows;
  if (input_stride < args.cols || output_stride < args.rows)
    return invalid("matvec: strides must cover a row (input_stride " + std::to_string(input_stride) +
                   ", output_stride " + std::to_string(output_stride) + ")");
  const int elements_per_chunk = int(int64_t(kChunkBytes) * args.cols / row_bytes);
  const size_t input_alignment = std::min<size_t>(kChunkBytes, elements_per_chunk * input_size);
  if (!aligned(args.input, input_alignment) || (size_t(input_stride) * input_size) % input_alignment != 0)
    return invalid("matvec: input rows must be " + std::to_string(input_alignment) + "-byte aligned");

  const int chunks_per_row = int(row_bytes / kChunkBytes);
  const int split_k = args.split_k ? args.split_k
                                   : matvec_auto_split_k(args.rows, args.cols, args.swiglu, args.weight_type,
                                                         multiprocessor_count());
  if (split_k != 1 && split_k != 2 && split_k != 4 && split_k != 8)
    return invalid("matvec: split_k must be 0 (automatic), 1, 2, 4 or 8, got " + std::to_string(split_k));
  int chunks_per_slice = (chunks_per_row + split_k - 1) / split_k;
  chunks_per_slice = (chunks_per_slice + 7) / 8 * 8;  // slices start on 128-byte boundaries

  MatvecParams params{};
  params.weight = static_cast<const uint4*>(args.weight);
  params.up_weight = static_cast<const uint4*>(args.up_weight);
  params.bias = args.bias;
  params.up_bias = args.up_bias;
  params.rows = args.rows;
  params.groups = args.swiglu ? args.rows : (args.rows + 1) / 2;
  params.chunks_per_row = chunks_per_row;
  params.chunks_per_slice = chunks_per_slice;
  params.input = args.input;
  params.input_stride = input_stride;
  params.residual = args.residual;
  params.output = args.output;
  params.output_stride = output_stride;
  params.norm_eps = args.input_layer_norm_eps;
  params.cols = args.cols;
  if (q8 || q4) {
    params.scales = args.scales;
    params.up_scales = args.up_scales;
    params.offsets = q4 ? args.offsets : nullptr;
    params.up_offsets = q4 ? args.up_offsets : nullptr;
    params.group = args.group;
    params.groups_per_row = args.cols / args.group;
  }

  const bool bf16_weight = args.weight_type == DType::kBF16;
  const bool bf16_input = args.input_type == DType::kBF16;
  if (q8)
    return bf16_input ? dispatch_batch<Q8Code, __nv_bfloat16>(args, split_k, params, stream)
                      : dispatch_batch<Q8Code, float>(args, split_k, params, stream);
  if (q4)
    return bf16_input ? dispatch_batch<Q4Code, __nv_bfloat16>(args, split_k, params, stream)
                      : dispatch_batch<Q4Code, float>(args, split_k, params, stream);
  if (bf16_weight)
    return bf16_input ? dispatch_batch<__nv_bfloat16, __nv_bfloat16>(args, split_k, params, stream)
                      : dispatch_batch<__nv_bfloat16, float>(args, split_k, params, stream);
  return bf16_input ? dispatch_batch<float, __nv_bfloat16>(args, split_k, params, stream)
                    : dispatch_batch<float, float>(args, split_k, params, stream);
}

}  // namespace cubeforge::cuda
