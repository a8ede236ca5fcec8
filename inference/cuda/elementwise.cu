// Prefill's elementwise kernels (see elementwise.h). Grid-stride loops over
// plain buffers; none of them is on the per-token path.
#include "inference/cuda/cuda_internal.cuh"
#include "inference/cuda/elementwise.h"

namespace cubeforge::cuda {
namespace {

using namespace detail;

constexpr int kElementwiseThreads = 256;

int blocks_for(std::size_t count) {
  const std::size_t blocks = (count + kElementwiseThreads - 1) / kElementwiseThreads;
  return int(std::min<std::size_t>(std::max<std::size_t>(blocks, 1), 4096));
}

__global__ void __launch_bounds__(kElementwiseThreads) widen_kernel(const uint16_t* input, float* output, size_t count) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    output[i] = __uint_as_float(uint32_t(input[i]) << 16);
}

// Element k of a row: Q8 code · scale, or Q4 code · scale + offset (the
// nibble layout of inference/cpu/quantize.h), as dequantize_rows gives it.
__global__ void __launch_bounds__(kElementwiseThreads) dequantize_kernel(const uint8_t* codes, bool q4, const uint16_t* scales,
                                                              const uint16_t* offsets, int group, int rows, int cols,
                                                              float* output) {
  const size_t total = size_t(rows) * cols;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const int groups = cols / group;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const size_t row = i / cols;
    const int k = int(i % cols);
    const size_t g = row * groups + size_t(k / group);
    const float scale = f16_bits_to_float(scales[g]);
    if (q4) {
      const int pack = k / 32, within = k % 32;
      const uint32_t byte = codes[row * (cols / 2) + size_t(pack) * 16 + within % 16];
      const uint32_t code = within < 16 ? (byte & 0xfu) : (byte >> 4);
      output[i] = fmaf(float(code), scale, f16_bits_to_float(offsets[g]));
    } else {
      output[i] = float(int8_t(codes[i])) * scale;
    }
  }
}

template <class Table>
__global__ void __launch_bounds__(kElementwiseThreads) gather_kernel(const Table* table, int table_rows, int dim, const int* ids,
                                                          int count, int batch, float* output) {
  const size_t total = size_t(batch) * count * dim;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int d = int(i % dim);
    const int t = int((i / dim) % count);
    const int id = ids[t];
    float value = 0.0f;
    if (id >= 0 && id < table_rows) {
      if constexpr (sizeof(Table) == 2) {
        value = __uint_as_float(uint32_t(table[size_t(id) * dim + d]) << 16);
      } else {
        value = table[size_t(id) * dim + d];
      }
    }
    output[i] = value;
  }
}

__global__ void __launch_bounds__(kElementwiseThreads) swiglu_kernel(const float* input, int rows, int width, float* output) {
  const size_t total = size_t(rows) * width;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const size_t row = i / width;
    const size_t column = i % width;
    const float gate = input[row * 2 * width + column];
    const float up = input[row * 2 * width + width + column];
    output[i] = __fmul_rn(__fdiv_rn(gate, __fadd_rn(1.0f, expf(-gate))), up);
  }
}

}  // namespace

Status widen_bf16(const std::uint16_t* input, float* output, std::size_t count, Stream stream) {
  if (count == 0) return ok_status();
  if (!input || !output) return invalid("widen_bf16: input and output are required");
  widen_kernel<<<blocks_for(count), kElementwiseThreads, 0, stream>>>(input, output, count);
  return launch_status("widen_bf16 kernel launch");
}

Status dequantize_rows(const DequantizeArgs& args, Stream stream) {
  const bool q4 = args.type == DType::kU8;
  if (args.type != DType::kI8 && !q4) return invalid("dequantize_rows: codes must be I8 (Q8) or U8 (Q4)");
  if (!args.codes || !args.scales || (q4 && !args.offsets) || !args.output)
    return invalid("dequantize_rows: codes, scales, offsets (Q4) and output are required");
  if (q4 ? (args.group != 32 && args.group != 64) : args.group != 32)
    return invalid("dequantize_rows: group " + std::to_string(args.group) + " is not one of the format's");
  if (args.rows <= 0 || args.cols <= 0 || args.cols % args.group != 0)
    return invalid("dequantize_rows: " + std::to_string(args.rows) + "x" + std::to_string(args.cols) +
                   " is not whole groups");
  dequantize_kernel<<<blocks_for(std::size_t(args.rows) * args.cols), kElementwiseThreads, 0, stream>>>(
      static_cast<const uint8_t*>(args.codes), q4, args.scales, args.offsets, args.group, args.rows, args.cols,
      args.output);
  return launch_status("dequantize_rows kernel launch");
}

Status gather_embedding_rows(const GatherEmbeddingArgs& args, Stream stream) {
  const std::string where = "gather_embedding_rows: ";
  if (args.table_type != DType::kF32 && args.table_type != DType::kBF16)
    return invalid(where + "table type must be F32 or BF16");
  if (!args.table || !args.ids || !args.output) return invalid(where + "table, ids and output are required");
  if (args.table_rows <= 0 || args.dim <= 0 || args.count <= 0 || args.batch <= 0)
    return invalid(where + "table_rows, dim, count and batch must be positive");
  const std::size_t total = std::size_t(args.batch) * args.count * args.dim;
  if (args.table_type == DType::kBF16)
    gather_kernel<<<blocks_for(total), kElementwiseThreads, 0, stream>>>(static_cast<const uint16_t*>(args.table),
                                                               args.table_rows, args.dim, args.ids, args.count,
                                                               args.batch, args.output);
  else
    gather_kernel<<<blocks_for(total), kElementwiseThreads, 0, stream>>>(static_cast<const float*>(args.table), args.table_rows,
                                                               args.dim, args.ids, args.count, args.batch,
                                                               args.output);
  return launch_status("gather_embedding_rows kernel launch");
}

Status swiglu_rows(const float* input, int rows, int width, float* output, Stream stream) {
  if (!input || !output) return invalid("swiglu_rows: input and output are required");
  if (rows <= 0 || width <= 0) return invalid("swiglu_rows: rows and width must be positive");
  swiglu_kernel<<<blocks_for(std::size_t(rows) * width), kElementwiseThreads, 0, stream>>>(input, rows, width, output);
  return launch_status("swiglu_rows kernel launch");
}

}  // namespace cubeforge::cuda
