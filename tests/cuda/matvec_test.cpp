// matvec against a double-precision CPU reference on random data, for every
// split-K, both weight and input types, batch 1 and 2, odd row counts, strides
// and each epilogue. Inputs are bf16-exact so the only difference left is the
// kernel's fp32 accumulation: a normalised error above 1e-5 is a bug (a bf16
// rounding slip alone would show as ~4e-3). Outputs start as NaN so an
// unwritten element fails, and padding past each output row must stay NaN.
#include <cmath>
#include <random>
#include <utility>

#include "cuda_test_support.h"
#include "inference/cuda/elementwise.h"
#include "inference/cuda/matvec.h"

namespace cubeforge::cuda::testing {
namespace {

struct MatvecCase {
  int rows = 64;
  int cols = 256;
  int batch = 2;
  DType weight_type = DType::kBF16;
  DType input_type = DType::kF32;
  bool bias = false;
  bool residual = false;
  bool in_place_residual = false;
  bool swiglu = false;
  int split_k = 0;
  int input_pad = 0;
  int output_pad = 0;
  bool layer_norm = false;  // the LayerNorm prologue (f32 input)
  int group = 32;           // quantised weights (I8: Q8, U8: Q4): weights per scale
};

std::string describe(const MatvecCase& c) {
  return std::to_string(c.rows) + "x" + std::to_string(c.cols) + " batch " + std::to_string(c.batch) + " W " +
         std::string(dtype_name(c.weight_type)) + (c.weight_type == DType::kU8 || c.weight_type == DType::kI8
                                                       ? " group " + std::to_string(c.group)
                                                       : std::string()) +
         " x " + std::string(dtype_name(c.input_type)) +
         (c.bias ? " +bias" : "") + (c.residual ? " +residual" : "") + (c.in_place_residual ? " (in place)" : "") +
         (c.swiglu ? " SwiGLU" : "") + (c.layer_norm ? " LayerNorm first" : "") + " split " + std::to_string(c.split_k);
}

// Uploads `values` (already exact in the target type) as bf16 bits or f32.
struct TypedBuffer {
  DeviceBuffer<std::uint16_t> bf16;
  DeviceBuffer<float> f32;
  const void* data() const { return bf16.size() ? static_cast<const void*>(bf16.data()) : f32.data(); }
};

Result<TypedBuffer> upload_typed(const std::vector<float>& values, DType type, const char* name) {
  TypedBuffer buffer;
  if (type == DType::kBF16) {
    CUBEFORGE_ASSIGN_OR_RETURN(buffer.bf16, DeviceBuffer<std::uint16_t>::from_host(to_bf16(values), name));
  } else {
    CUBEFORGE_ASSIGN_OR_RETURN(buffer.f32, DeviceBuffer<float>::from_host(values, name));
  }
  return buffer;
}

// A random matrix in a quantised format (inference/cpu/quantize.h): codes,
// F16 scales (and Q4 offsets), and the values they stand for, computed as the
// CPU's dequantize_rows computes them.
struct QuantizedMatrix {
  std::vector<std::uint8_t> codes;
  std::vector<std::uint16_t> scales, offsets;
  std::vector<float> values;  // [rows, cols]
};

QuantizedMatrix random_quantized(DType type, int rows, int cols, int group, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> q8(-127, 127), q4(0, 15);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f), offset(-0.4f, 0.0f);
  const int groups = cols / group;
  QuantizedMatrix m;
  m.values.resize(std::size_t(rows) * cols);
  for (int g = 0; g < rows * groups; ++g) {
    m.scales.push_back(f32_to_f16(scale(gen)));
    if (type == DType::kU8) m.offsets.push_back(f32_to_f16(offset(gen)));
  }
  if (type == DType::kI8) {
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < cols; ++k) {
        const int code = q8(gen);
        m.codes.push_back(std::uint8_t(std::int8_t(code)));
        m.values[std::size_t(r) * cols + k] = float(code) * f16_to_f32(m.scales[std::size_t(r) * groups + k / group]);
      }
  } else {
    m.codes.assign(std::size_t(rows) * cols / 2, 0);
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < cols; ++k) {
        const int code = q4(gen);
        const int pack = k / 32, within = k % 32;
        std::uint8_t& byte = m.codes[std::size_t(r) * (cols / 2) + std::size_t(pack) * 16 + within % 16];
        byte = std::uint8_t(byte | (within < 16 ? code : code << 4));
        const std::size_t g = std::size_t(r) * groups + k / group;
        m.values[std::size_t(r) * cols + k] = float(code) * f16_to_f32(m.scales[g]) + f16_to_f32(m.offsets[g]);
      }
  }
  return m;
}

struct QuantizedDevice {
  DeviceBuffer<std::uint8_t> codes;
  DeviceBuffer<std::uint16_t> scales, offsets;
};

Result<QuantizedDevice> upload_quantized(const QuantizedMatrix& m, const char* name) {
  QuantizedDevice device;
  CUBEFORGE_ASSIGN_OR_RETURN(device.codes, DeviceBuffer<std::uint8_t>::from_host(m.codes, name));
  CUBEFORGE_ASSIGN_OR_RETURN(device.scales, DeviceBuffer<std::uint16_t>::from_host(m.scales, name));
  if (!m.offsets.empty()) {
    CUBEFORGE_ASSIGN_OR_RETURN(device.offsets, DeviceBuffer<std::uint16_t>::from_host(m.offsets, name));
  }
  return device;
}

class MatvecTest : public CudaTest {
 protected:
  void run(const MatvecCase& c) {
    SCOPED_TRACE(describe(c));
    const int input_stride = c.cols + c.input_pad;
    const int output_stride = c.rows + c.output_pad;
    const std::uint32_t seed = std::uint32_t(c.rows * 7919 + c.cols * 31 + c.batch);

    const bool quantized = c.weight_type == DType::kI8 || c.weight_type == DType::kU8;
    QuantizedMatrix quantized_weight, quantized_up;
    if (quantized) {
      quantized_weight = random_quantized(c.weight_type, c.rows, c.cols, c.group, seed);
      quantized_up = random_quantized(c.weight_type, c.rows, c.cols, c.group, seed + 1);
    }
    const auto weight = quantized ? quantized_weight.values : bf16_exact(random_floats(std::size_t(c.rows) * c.cols, seed));
    const auto up_weight =
        quantized ? quantized_up.values : bf16_exact(random_floats(std::size_t(c.rows) * c.cols, seed + 1));
    const auto input = bf16_exact(random_floats(std::size_t(c.batch) * input_stride, seed + 2, -2.0f, 2.0f));
    const auto bias = random_floats(c.rows, seed + 3);
    const auto up_bias = random_floats(c.rows, seed + 4);
    const auto residual = random_floats(std::size_t(c.batch) * output_stride, seed + 5, -4.0f, 4.0f);

    // Reference in double, the LayerNorm (eps 1e-6, biased variance) included.
    constexpr double kNormEps = 1e-6;
    std::vector<double> row_mean(c.batch, 0.0), row_scale(c.batch, 1.0);
    if (c.layer_norm) {
      for (int b = 0; b < c.batch; ++b) {
        double sum = 0.0, squares = 0.0;
        for (int k = 0; k < c.cols; ++k) sum += input[std::size_t(b) * input_stride + k];
        row_mean[b] = sum / c.cols;
        for (int k = 0; k < c.cols; ++k) {
          const double centred = input[std::size_t(b) * input_stride + k] - row_mean[b];
          squares += centred * centred;
        }
        row_scale[b] = 1.0 / std::sqrt(squares / c.cols + kNormEps);
      }
    }
    std::vector<double> expected(std::size_t(c.batch) * output_stride, NAN);
    for (int b = 0; b < c.batch; ++b) {
      for (int n = 0; n < c.rows; ++n) {
        double sum = 0.0, up_sum = 0.0;
        for (int k = 0; k < c.cols; ++k) {
          const double x = (input[std::size_t(b) * input_stride + k] - row_mean[b]) * row_scale[b];
          sum += double(weight[std::size_t(n) * c.cols + k]) * x;
          up_sum += double(up_weight[std::size_t(n) * c.cols + k]) * x;
        }
        double value;
        if (c.swiglu) {
          const double gate = sum + (c.bias ? bias[n] : 0.0);
          const double up = up_sum + (c.bias ? up_bias[n] : 0.0);
          value = gate / (1.0 + std::exp(-gate)) * up;
        } else {
          value = sum + (c.bias ? bias[n] : 0.0);
          if (c.residual) value += residual[std::size_t(b) * output_stride + n];
        }
        expected[std::size_t(b) * output_stride + n] = value;
      }
    }

    TypedBuffer weight_device, up_device;
    QuantizedDevice quantized_device, quantized_up_device;
    if (quantized) {
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(quantized_device, upload_quantized(quantized_weight, "weight"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(quantized_up_device, upload_quantized(quantized_up, "up_weight"));
    } else {
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(weight_device, upload_typed(weight, c.weight_type, "weight"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(up_device, upload_typed(up_weight, c.weight_type, "up_weight"));
    }
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(TypedBuffer input_device, upload_typed(input, c.input_type, "input"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto bias_device, upload(bias, "bias"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto up_bias_device, upload(up_bias, "up_bias"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto residual_device, upload(residual, "residual"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto output, DeviceBuffer<float>::allocate(expected.size(), "output"));
    if (c.in_place_residual) {
      // Rows hold the residual, padding stays NaN.
      std::vector<float> start(expected.size(), NAN);
      for (int b = 0; b < c.batch; ++b)
        for (int n = 0; n < c.rows; ++n)
          start[std::size_t(b) * output_stride + n] = residual[std::size_t(b) * output_stride + n];
      CUBEFORGE_ASSERT_OK(output.upload(start));
    } else {
      CUBEFORGE_ASSERT_OK(output.fill_bytes(0xff));
    }

    MatvecArgs args;
    args.weight_type = c.weight_type;
    args.weight = quantized ? static_cast<const void*>(quantized_device.codes.data()) : weight_device.data();
    args.up_weight = !c.swiglu ? nullptr
                     : quantized ? static_cast<const void*>(quantized_up_device.codes.data())
                                 : up_device.data();
    if (quantized) {
      args.group = c.group;
      args.scales = quantized_device.scales.data();
      args.offsets = quantized_device.offsets.size() ? quantized_device.offsets.data() : nullptr;
      args.up_scales = c.swiglu ? quantized_up_device.scales.data() : nullptr;
      args.up_offsets = c.swiglu && quantized_up_device.offsets.size() ? quantized_up_device.offsets.data() : nullptr;
    }
    args.bias = c.bias ? bias_device.data() : nullptr;
    args.up_bias = c.swiglu && c.bias ? up_bias_device.data() : nullptr;
    args.rows = c.rows;
    args.cols = c.cols;
    args.input_type = c.input_type;
    args.input = input_device.data();
    args.input_stride = input_stride;
    args.batch = c.batch;
    args.residual = c.in_place_residual ? output.data() : (c.residual ? residual_device.data() : nullptr);
    args.output = output.data();
    args.output_stride = output_stride;
    args.swiglu = c.swiglu;
    args.split_k = c.split_k;
    args.input_layer_norm_eps = c.layer_norm ? float(kNormEps) : 0.0f;
    CUBEFORGE_ASSERT_OK(matvec(args, nullptr));
    CUBEFORGE_ASSERT_OK(synchronize_device());
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual, output.download());

    std::vector<float> actual_rows;
    std::vector<double> expected_rows;
    for (int b = 0; b < c.batch; ++b) {
      for (int n = 0; n < output_stride; ++n) {
        const std::size_t at = std::size_t(b) * output_stride + n;
        if (n < c.rows) {
          actual_rows.push_back(actual[at]);
          expected_rows.push_back(expected[at]);
        } else {
          EXPECT_TRUE(std::isnan(actual[at])) << "padding element " << n << " of row " << b << " was written";
        }
      }
    }
    const double error = normalised_error(actual_rows, expected_rows);
    EXPECT_LT(error, 1e-5) << "first values: " << actual_rows[0] << " vs " << expected_rows[0];
  }
};

// ln_1 / ln_3 / ln_f fused into the projection that reads them: every split,
// the epilogues, padded input rows, and a model-width row.
TEST_F(MatvecTest, LayerNormPrologue) {
  for (int split : {1, 2, 4, 8})
    for (int batch : {1, 2}) run({.rows = 96, .cols = 512, .batch = batch, .bias = true, .split_k = split, .layer_norm = true});
  run({.rows = 64, .cols = 256, .swiglu = true, .layer_norm = true});
  run({.rows = 48, .cols = 256, .weight_type = DType::kF32, .residual = true, .input_pad = 12, .layer_norm = true});
  run({.rows = 130, .cols = 1536, .bias = true, .layer_norm = true});
}

TEST_F(MatvecTest, EverySplitBatchOneAndTwo) {
  for (int batch : {1, 2})
    for (int split : {1, 2, 4, 8}) run({.rows = 64, .cols = 2048, .batch = batch, .split_k = split});
}

TEST_F(MatvecTest, WidthOfTheModelWithBiasAndResidual) {
  run({.rows = 1536, .cols = 1536, .batch = 2, .bias = true, .residual = true});
  run({.rows = 1536, .cols = 1536, .batch = 2, .bias = true, .residual = true, .in_place_residual = true});
}

TEST_F(MatvecTest, OddRowCountsAndShortRows) {
  for (int split : {1, 4, 8}) run({.rows = 37, .cols = 1536, .batch = 2, .bias = true, .split_k = split});
  run({.rows = 5, .cols = 8, .batch = 1, .split_k = 1});   // one chunk per row
  run({.rows = 3, .cols = 24, .batch = 2, .split_k = 8});  // more slices than chunks
}

TEST_F(MatvecTest, LongRowsLikeTheDownProjection) {
  run({.rows = 100, .cols = 6144, .batch = 2, .residual = true, .split_k = 8});
  run({.rows = 256, .cols = 6144, .batch = 2, .residual = true});
}

TEST_F(MatvecTest, FloatWeightsAndBf16Inputs) {
  run({.rows = 96, .cols = 512, .batch = 2, .weight_type = DType::kF32, .bias = true});
  run({.rows = 96, .cols = 516, .batch = 1, .weight_type = DType::kF32, .split_k = 2});
  run({.rows = 128, .cols = 512, .batch = 2, .input_type = DType::kBF16});
  run({.rows = 64, .cols = 256, .batch = 2, .weight_type = DType::kF32, .input_type = DType::kBF16, .split_k = 4});
}

TEST_F(MatvecTest, SwiGlu) {
  run({.rows = 300, .cols = 1536, .batch = 2, .bias = true, .swiglu = true});
  run({.rows = 300, .cols = 1536, .batch = 2, .bias = true, .swiglu = true, .split_k = 2});
  run({.rows = 77, .cols = 512, .batch = 1, .swiglu = true, .split_k = 8});
}

TEST_F(MatvecTest, StridedRows) {
  run({.rows = 200, .cols = 1024, .batch = 2, .bias = true, .residual = true, .input_pad = 8, .output_pad = 5});
  run({.rows = 200, .cols = 1024, .batch = 2, .swiglu = true, .split_k = 4, .input_pad = 4, .output_pad = 3});
}

TEST_F(MatvecTest, VocabularyHead) { run({.rows = 16387, .cols = 1536, .batch = 2}); }

// Q8 and Q4 codes widened in registers exactly as the CPU widens them: every
// split, both batches, both inputs, the epilogues and Q4's two group sizes.
TEST_F(MatvecTest, QuantisedWeights) {
  for (DType type : {DType::kI8, DType::kU8})
    for (int split : {1, 2, 8})
      for (int batch : {1, 2}) run({.rows = 70, .cols = 1024, .batch = batch, .weight_type = type, .split_k = split});
  run({.rows = 96, .cols = 512, .batch = 2, .weight_type = DType::kI8, .bias = true, .residual = true});
  run({.rows = 96, .cols = 512, .batch = 2, .weight_type = DType::kU8, .bias = true, .layer_norm = true, .group = 64});
  run({.rows = 64, .cols = 256, .batch = 2, .weight_type = DType::kI8, .swiglu = true, .layer_norm = true});
  run({.rows = 64, .cols = 256, .batch = 2, .weight_type = DType::kU8, .bias = true, .swiglu = true, .group = 64});
  run({.rows = 33, .cols = 96, .batch = 2, .weight_type = DType::kU8, .input_type = DType::kBF16, .split_k = 4});
  run({.rows = 130, .cols = 1536, .batch = 2, .weight_type = DType::kI8, .input_type = DType::kBF16});
}

// The prefill's widening of quantised matrices gives the CPU's values bit for bit.
TEST_F(MatvecTest, DequantizedRowsAreTheFormatsValues) {
  for (const auto& [type, group] : {std::pair{DType::kI8, 32}, std::pair{DType::kU8, 32}, std::pair{DType::kU8, 64}}) {
    SCOPED_TRACE(std::string(dtype_name(type)) + " group " + std::to_string(group));
    const int rows = 37, cols = 192;
    const QuantizedMatrix m = random_quantized(type, rows, cols, group, 77);
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(QuantizedDevice device, upload_quantized(m, "matrix"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto output, DeviceBuffer<float>::allocate(m.values.size(), "dequantized"));
    DequantizeArgs args;
    args.type = type;
    args.codes = device.codes.data();
    args.scales = device.scales.data();
    args.offsets = device.offsets.size() ? device.offsets.data() : nullptr;
    args.group = group;
    args.rows = rows;
    args.cols = cols;
    args.output = output.data();
    CUBEFORGE_ASSERT_OK(dequantize_rows(args, nullptr));
    CUBEFORGE_ASSERT_OK(synchronize_device());
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual, output.download());
    ASSERT_EQ(actual.size(), m.values.size());
    for (std::size_t i = 0; i < actual.size(); ++i) ASSERT_EQ(actual[i], m.values[i]) << "element " << i;
  }
}

// Argument checks run before any CUDA call, so these hold on every machine.
TEST(MatvecArguments, RejectsShapesTheKernelCannotStream) {
  alignas(16) static float storage[64];
  MatvecArgs args;
  args.weight = storage;
  args.input = storage;
  args.output = storage;
  args.rows = 4;
  args.cols = 12;  // 24 bytes of bf16: not a whole number of 16-byte chunks
  auto status = matvec(args, nullptr);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(status.error().message.find("16 bytes"), std::string::npos) << status.error().message;

  args.cols = 16;
  args.batch = 3;
  EXPECT_FALSE(matvec(args, nullptr).ok());
  args.batch = 2;
  args.swiglu = true;
  EXPECT_FALSE(matvec(args, nullptr).ok());  // no up_weight
  args.swiglu = false;
  args.weight = reinterpret_cast<const char*>(storage) + 4;
  EXPECT_FALSE(matvec(args, nullptr).ok());  // misaligned
  args.weight = storage;
  args.split_k = 3;
  EXPECT_FALSE(matvec(args, nullptr).ok());
  args.split_k = 0;

  // Quantised weights name what they lack.
  args.cols = 64;
  args.weight_type = DType::kU8;
  args.group = 32;
  status = matvec(args, nullptr);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("scales"), std::string::npos) << status.error().message;
  static const std::uint16_t scales[8] = {};
  args.scales = scales;
  args.offsets = scales;
  args.group = 16;
  status = matvec(args, nullptr);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("32 or 64"), std::string::npos) << status.error().message;
  args.weight_type = DType::kI8;
  args.group = 64;
  EXPECT_FALSE(matvec(args, nullptr).ok());  // a Q8 block has 32 weights
}

TEST(MatvecArguments, AutomaticSplitFillsAnH200) {
  // v0.5 decode shapes on 132 SMs: small matrices split, large ones do not.
  EXPECT_EQ(matvec_auto_split_k(1536, 1536, false, DType::kBF16, 132), 4);
  EXPECT_EQ(matvec_auto_split_k(3072, 1536, false, DType::kBF16, 132), 2);
  EXPECT_EQ(matvec_auto_split_k(6144, 1536, true, DType::kBF16, 132), 1);
  EXPECT_EQ(matvec_auto_split_k(1536, 6144, false, DType::kBF16, 132), 4);
  EXPECT_EQ(matvec_auto_split_k(16387, 1536, false, DType::kBF16, 132), 1);
}

}  // namespace
}  // namespace cubeforge::cuda::testing
