// LayerNorm and the fused qk-norm + RoPE + KV-cache write against CPU
// references. The RoPE reference rotates interleaved pairs exactly as
// cube3d's apply_rotary_emb does (view_as_complex on pairs, times
// cos + i·sin), with the inverse frequencies the kernel uses.
#include <cmath>
#include <cstring>

#include "cuda_test_support.h"
#include "inference/cuda/norm.h"

namespace cubeforge::cuda::testing {
namespace {

class NormTest : public CudaTest {};

TEST_F(NormTest, LayerNormMatchesDoubleReference) {
  for (int cols : {1536, 100, 6144}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    const int rows = 3, stride = cols + 4;
    // An offset mean checks that the variance is not computed as E[x²] − E[x]².
    auto input = random_floats(std::size_t(rows) * stride, 11u + cols, 2.0f, 4.0f);
    const float eps = 1e-6f;
    std::vector<double> expected(std::size_t(rows) * cols);
    for (int r = 0; r < rows; ++r) {
      double mean = 0.0, variance = 0.0;
      for (int i = 0; i < cols; ++i) mean += input[std::size_t(r) * stride + i];
      mean /= cols;
      for (int i = 0; i < cols; ++i) {
        const double d = input[std::size_t(r) * stride + i] - mean;
        variance += d * d;
      }
      variance /= cols;
      for (int i = 0; i < cols; ++i)
        expected[std::size_t(r) * cols + i] = (input[std::size_t(r) * stride + i] - mean) / std::sqrt(variance + eps);
    }
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto input_device, upload(input, "input"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto output, DeviceBuffer<float>::allocate(expected.size(), "output"));
    CUBEFORGE_ASSERT_OK(output.fill_bytes(0xff));
    CUBEFORGE_ASSERT_OK(layer_norm_rows(input_device.data(), stride, output.data(), cols, rows, cols, eps, nullptr));
    CUBEFORGE_ASSERT_OK(synchronize_device());
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual, output.download());
    EXPECT_LT(max_abs_error(actual, expected), 2e-5);
  }
}

TEST_F(NormTest, LayerNormInPlace) {
  const int cols = 1536;
  auto input = random_floats(2 * cols, 5u);
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto separate, DeviceBuffer<float>::allocate(input.size(), "separate"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto in_place, upload(input, "in_place"));
  CUBEFORGE_ASSERT_OK(layer_norm_rows(in_place.data(), cols, separate.data(), cols, 2, cols, 1e-6f, nullptr));
  CUBEFORGE_ASSERT_OK(layer_norm_rows(in_place.data(), cols, in_place.data(), cols, 2, cols, 1e-6f, nullptr));
  CUBEFORGE_ASSERT_OK(synchronize_device());
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto a, separate.download());
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto b, in_place.download());
  EXPECT_EQ(a, b);
}

struct QkCase {
  int batch = 2;
  int heads = 12;
  int head_dim = 128;
  DType cache_type = DType::kBF16;
  int position = 37;
  int slot_offset = 78;
  int capacity = 1200;
  bool with_query = true;
};

void rms_rope_reference(const float* x, const float* weight, int head_dim, float eps, int position, float theta,
                        float* out) {
  double squares = 0.0;
  for (int i = 0; i < head_dim; ++i) squares += double(x[i]) * x[i];
  const float inverse_rms = float(1.0 / std::sqrt(squares / head_dim + eps));
  const auto frequencies = rope_inverse_frequencies(head_dim, theta);
  for (int j = 0; j < head_dim / 2; ++j) {
    const float a = x[2 * j] * inverse_rms * weight[2 * j];
    const float b = x[2 * j + 1] * inverse_rms * weight[2 * j + 1];
    const float angle = float(position) * frequencies[j];
    const float c = std::cos(angle), s = std::sin(angle);
    out[2 * j] = a * c - b * s;
    out[2 * j + 1] = a * s + b * c;
  }
}

class QkNormRopeTest : public CudaTest {
 protected:
  void run(const QkCase& c) {
    SCOPED_TRACE("heads " + std::to_string(c.heads) + " head_dim " + std::to_string(c.head_dim) + " cache " +
                 std::string(dtype_name(c.cache_type)) + " position " + std::to_string(c.position));
    const int width = c.heads * c.head_dim;
    const int stride = 2 * width;  // q and k side by side, as c_qk produces them
    const float eps = 1e-5f, theta = 10000.0f;
    auto qk = random_floats(std::size_t(c.batch) * stride, 21u + c.head_dim, -3.0f, 3.0f);
    auto value = random_floats(std::size_t(c.batch) * width, 22u + c.head_dim);
    auto query_weight = random_floats(c.head_dim, 23u, 0.5f, 1.5f);
    auto key_weight = random_floats(c.head_dim, 24u, 0.5f, 1.5f);

    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto qk_device, upload(qk, "qk"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto value_device, upload(value, "value"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto query_weight_device, upload(query_weight, "q_norm"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto key_weight_device, upload(key_weight, "k_norm"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto position_device, upload(std::vector<int>{c.position}, "position"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto query_out, DeviceBuffer<float>::allocate(std::size_t(c.batch) * width, "q"));
    const std::size_t cache_elements = std::size_t(c.batch) * c.heads * c.capacity * c.head_dim;
    const std::size_t element_size = dtype_size(c.cache_type);
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto key_cache, DeviceBuffer<std::uint8_t>::allocate(cache_elements * element_size, "k"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto value_cache, DeviceBuffer<std::uint8_t>::allocate(cache_elements * element_size, "v"));
    CUBEFORGE_ASSERT_OK(query_out.fill_bytes(0xff));
    CUBEFORGE_ASSERT_OK(key_cache.fill_bytes(0xff));
    CUBEFORGE_ASSERT_OK(value_cache.fill_bytes(0xff));

    QkNormRopeArgs args;
    args.batch = c.batch;
    args.heads = c.heads;
    args.head_dim = c.head_dim;
    args.query = c.with_query ? qk_device.data() : nullptr;
    args.query_stride = stride;
    args.key = qk_device.data() + width;
    args.key_stride = stride;
    args.value = value_device.data();
    args.value_stride = width;
    args.query_norm_weight = query_weight_device.data();
    args.key_norm_weight = key_weight_device.data();
    args.eps = eps;
    args.rope_theta = theta;
    args.position = position_device.data();
    args.cache_slot_offset = c.slot_offset;
    args.query_out = query_out.data();
    args.cache_type = c.cache_type;
    args.key_cache = key_cache.data();
    args.value_cache = value_cache.data();
    args.cache_capacity = c.capacity;
    CUBEFORGE_ASSERT_OK(qk_norm_rope_cache_write(args, nullptr));
    CUBEFORGE_ASSERT_OK(synchronize_device());

    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto query_actual, query_out.download());
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto key_bytes, key_cache.download());
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto value_bytes, value_cache.download());
    auto cache_value = [&](const std::vector<std::uint8_t>& bytes, std::size_t index) -> float {
      if (c.cache_type == DType::kF32) {
        float f;
        std::memcpy(&f, bytes.data() + index * 4, 4);
        return f;
      }
      std::uint16_t bits;
      std::memcpy(&bits, bytes.data() + index * 2, 2);
      return bf16_to_f32(bits);
    };

    const int slot = c.position + c.slot_offset;
    std::vector<float> expected(c.head_dim);
    double worst_query = 0.0, worst_key = 0.0;
    for (int b = 0; b < c.batch; ++b) {
      for (int h = 0; h < c.heads; ++h) {
        const float* raw = qk.data() + std::size_t(b) * stride + h * c.head_dim;
        if (c.with_query) {
          rms_rope_reference(raw, query_weight.data(), c.head_dim, eps, c.position, theta, expected.data());
          for (int i = 0; i < c.head_dim; ++i)
            worst_query = std::max(worst_query, std::abs(double(query_actual[(std::size_t(b) * c.heads + h) * c.head_dim + i]) - expected[i]));
        }
        if (slot >= c.capacity) continue;
        rms_rope_reference(raw + width, key_weight.data(), c.head_dim, eps, c.position, theta, expected.data());
        const std::size_t base = ((std::size_t(b) * c.heads + h) * c.capacity + slot) * c.head_dim;
        for (int i = 0; i < c.head_dim; ++i) {
          const float key = cache_value(key_bytes, base + i);
          // bf16 storage: the kernel's f32 value rounded once; allow that rounding (2^-8 relative) and no more.
          const double allowed = c.cache_type == DType::kBF16 ? std::abs(expected[i]) * (1.0 / 256) + 1e-6 : 2e-5;
          const double error = std::abs(double(key) - expected[i]);
          ASSERT_LE(error, allowed) << "key b" << b << " h" << h << " i" << i;
          worst_key = std::max(worst_key, error);
          const float raw_value = value[std::size_t(b) * width + h * c.head_dim + i];
          const float stored_value = c.cache_type == DType::kBF16 ? bf16_to_f32(f32_to_bf16(raw_value)) : raw_value;
          ASSERT_EQ(cache_value(value_bytes, base + i), stored_value) << "value b" << b << " h" << h << " i" << i;
        }
      }
    }
    EXPECT_LT(worst_query, 2e-5);
    if (!c.with_query) {
      for (float q : query_actual) ASSERT_TRUE(std::isnan(q)) << "query written without a query input";
    }
    // Every other slot is untouched (still the NaN poison).
    std::size_t written = 0;
    for (std::size_t i = 0; i < cache_elements; ++i) {
      const bool at_slot = (i / c.head_dim) % c.capacity == std::size_t(slot);
      if (!at_slot) {
        ASSERT_TRUE(std::isnan(cache_value(key_bytes, i))) << "key cache element " << i << " written";
        ASSERT_TRUE(std::isnan(cache_value(value_bytes, i))) << "value cache element " << i << " written";
      } else {
        ++written;
      }
    }
    EXPECT_EQ(written, slot < c.capacity ? std::size_t(c.batch) * c.heads * c.head_dim : 0u);
  }
};

TEST_F(QkNormRopeTest, ModelShapeBf16Cache) { run({}); }
TEST_F(QkNormRopeTest, ModelShapeFloatCache) { run({.cache_type = DType::kF32}); }
TEST_F(QkNormRopeTest, LastPositionOfAGeneration) { run({.position = 1023, .slot_offset = 78, .capacity = 1102}); }
TEST_F(QkNormRopeTest, SmallHeads) {
  run({.batch = 1, .heads = 4, .head_dim = 16, .position = 5, .slot_offset = 0, .capacity = 32});
  run({.batch = 2, .heads = 3, .head_dim = 64, .cache_type = DType::kF32, .position = 0, .slot_offset = 9, .capacity = 40});
  run({.batch = 2, .heads = 2, .head_dim = 32, .position = 17, .slot_offset = 1, .capacity = 19});
}
// Head sizes between the powers of two the kernel is built for, and 256.
TEST_F(QkNormRopeTest, EveryMultipleOf16) {
  for (const int head_dim : {48, 80, 96, 160, 256}) {
    run({.batch = 2, .heads = 3, .head_dim = head_dim, .position = 37, .slot_offset = 5, .capacity = 50});
    run({.batch = 1, .heads = 2, .head_dim = head_dim, .cache_type = DType::kF32, .position = 3, .slot_offset = 0,
         .capacity = 8});
  }
}

TEST_F(QkNormRopeTest, KeysOnlyForTheCondPreOnlyBlock) { run({.with_query = false}); }
TEST_F(QkNormRopeTest, SlotPastTheCacheIsNotWritten) {
  run({.batch = 1, .heads = 2, .head_dim = 64, .position = 40, .slot_offset = 0, .capacity = 40, .with_query = true});
}

TEST(QkNormRopeArguments, RejectsUnsupportedHeadDim) {
  alignas(16) static float storage[1024];
  static int position = 0;
  for (const int head_dim : {8, 40, 272}) {
    QkNormRopeArgs args;
    args.heads = 1;
    args.head_dim = head_dim;
    args.key = args.value = storage;
    args.key_stride = args.value_stride = head_dim;
    args.key_norm_weight = storage;
    args.position = &position;
    args.key_cache = args.value_cache = storage;
    args.cache_capacity = 1;
    auto status = qk_norm_rope_cache_write(args, nullptr);
    ASSERT_FALSE(status.ok()) << head_dim;
    EXPECT_NE(status.error().message.find("head_dim must be a multiple of 16 from 16 to 256, got " +
                                          std::to_string(head_dim)),
              std::string::npos)
        << status.error().message;
  }
}

TEST(RopeFrequencies, MatchTheReferenceFormula) {
  const auto frequencies = rope_inverse_frequencies(128, 10000.0f);
  ASSERT_EQ(frequencies.size(), 64u);
  EXPECT_EQ(frequencies[0], 1.0f);
  // Rounded once to float: within half an ulp (2^-24 relative) of the exact value.
  for (int j : {1, 17, 63}) {
    const double exact = std::pow(10000.0, -2.0 * j / 128);
    EXPECT_NEAR(frequencies[j], exact, exact * 6e-8) << "pair " << j;
  }
}

}  // namespace
}  // namespace cubeforge::cuda::testing
