// Flash-decoding attention against a double-precision softmax over the same
// (bf16-decoded) cache. Cache slots past the current length hold NaN, so a
// kernel that reads one fails; the workspace starts as NaN, so a split that
// forgets to write its empty partial fails too.
#include <cmath>
#include <cstring>

#include "cuda_test_support.h"
#include "inference/cuda/attention.h"
#include "inference/cuda/norm.h"

namespace cubeforge::cuda::testing {
namespace {

struct AttentionCase {
  int batch = 2;
  int heads = 12;
  int head_dim = 128;
  DType cache_type = DType::kBF16;
  int capacity = 1102;
  int position = 500;  // length = position + length_offset
  int length_offset = 79;
  bool fixed_length = false;  // position pointer left null
  int keys_per_split = 0;
  float query_scale = 1.0f;   // large values make the softmax peaky
  // fp32 rounding of a score grows with |q|·|k|, and a score error ε changes
  // the weights by a factor e^ε, so peaky cases get a proportionally wider bound.
  double tolerance = 1e-5;
};

class AttentionTest : public CudaTest {
 protected:
  void run(const AttentionCase& c) {
    const int length = std::clamp((c.fixed_length ? 0 : c.position) + c.length_offset, 0, c.capacity);
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + " length " + std::to_string(length) + "/" +
                 std::to_string(c.capacity) + " cache " + std::string(dtype_name(c.cache_type)) + " keys/split " +
                 std::to_string(c.keys_per_split));
    const int width = c.heads * c.head_dim;
    const std::size_t cache_elements = std::size_t(c.batch) * c.heads * c.capacity * c.head_dim;
    auto query = random_floats(std::size_t(c.batch) * width, 31u + c.head_dim, -c.query_scale, c.query_scale);
    auto keys = bf16_exact(random_floats(cache_elements, 32u + c.head_dim, -2.0f, 2.0f));
    auto values = bf16_exact(random_floats(cache_elements, 33u + c.head_dim, -1.0f, 1.0f));
    for (std::size_t i = 0; i < cache_elements; ++i) {
      if (int((i / c.head_dim) % c.capacity) >= length) keys[i] = values[i] = NAN;
    }

    std::vector<double> expected(std::size_t(c.batch) * width, 0.0);
    const double scale = 1.0 / std::sqrt(double(c.head_dim));
    for (int b = 0; b < c.batch; ++b) {
      for (int h = 0; h < c.heads; ++h) {
        const std::size_t head_base = (std::size_t(b) * c.heads + h) * c.capacity * c.head_dim;
        const float* q = query.data() + (std::size_t(b) * c.heads + h) * c.head_dim;
        std::vector<double> scores(length);
        double max_score = -INFINITY;
        for (int p = 0; p < length; ++p) {
          double dot = 0.0;
          for (int i = 0; i < c.head_dim; ++i) dot += double(q[i]) * keys[head_base + std::size_t(p) * c.head_dim + i];
          scores[p] = dot * scale;
          max_score = std::max(max_score, scores[p]);
        }
        double total = 0.0;
        for (double& s : scores) total += (s = std::exp(s - max_score));
        for (int p = 0; p < length; ++p)
          for (int i = 0; i < c.head_dim; ++i)
            expected[std::size_t(b) * width + h * c.head_dim + i] +=
                scores[p] / total * values[head_base + std::size_t(p) * c.head_dim + i];
      }
    }

    DeviceBuffer<std::uint16_t> key_bf16, value_bf16;
    DeviceBuffer<float> key_f32, value_f32;
    if (c.cache_type == DType::kBF16) {
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(key_bf16, upload(to_bf16(keys), "keys"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(value_bf16, upload(to_bf16(values), "values"));
    } else {
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(key_f32, upload(keys, "keys"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(value_f32, upload(values, "values"));
    }
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto query_device, upload(query, "query"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto position_device, upload(std::vector<int>{c.position}, "position"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto output, DeviceBuffer<float>::allocate(expected.size(), "output"));
    const std::size_t workspace_bytes =
        attention_decode_workspace_bytes(c.batch, c.heads, c.head_dim, c.capacity, c.keys_per_split);
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto workspace, DeviceBuffer<float>::allocate(workspace_bytes / 4, "workspace"));
    CUBEFORGE_ASSERT_OK(output.fill_bytes(0xff));
    CUBEFORGE_ASSERT_OK(workspace.fill_bytes(0xff));  // partials start as NaN
    CUBEFORGE_ASSERT_OK(attention_decode_reset_workspace(workspace.data(), c.batch, c.heads, nullptr));

    AttentionDecodeArgs args;
    args.batch = c.batch;
    args.heads = c.heads;
    args.head_dim = c.head_dim;
    args.query = query_device.data();
    args.cache_form = c.cache_type == DType::kBF16 ? KvCacheForm::kBF16 : KvCacheForm::kF32;
    args.key_cache = c.cache_type == DType::kBF16 ? static_cast<void*>(key_bf16.data()) : key_f32.data();
    args.value_cache = c.cache_type == DType::kBF16 ? static_cast<void*>(value_bf16.data()) : value_f32.data();
    args.cache_capacity = c.capacity;
    args.position = c.fixed_length ? nullptr : position_device.data();
    args.length_offset = c.length_offset;
    args.output = output.data();
    args.workspace = workspace.data();
    args.workspace_bytes = workspace_bytes;
    args.keys_per_split = c.keys_per_split;
    CUBEFORGE_ASSERT_OK(attention_decode(args, nullptr));
    // The last block of each head resets its counter: a second launch merges again.
    CUBEFORGE_ASSERT_OK(output.fill_bytes(0xff));
    CUBEFORGE_ASSERT_OK(attention_decode(args, nullptr));
    CUBEFORGE_ASSERT_OK(synchronize_device());
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual, output.download());
    if (length == 0) {
      for (float v : actual) ASSERT_EQ(v, 0.0f);
      return;
    }
    EXPECT_LT(normalised_error(actual, expected), c.tolerance) << "first values " << actual[0] << " vs " << expected[0];
    EXPECT_LT(max_abs_error(actual, expected), c.tolerance);
  }
};

TEST_F(AttentionTest, ModelShapeAcrossTheGeneration) {
  for (int position : {0, 1, 100, 500, 1022}) run({.position = position});
}

TEST_F(AttentionTest, FloatCache) { run({.cache_type = DType::kF32, .position = 333}); }

TEST_F(AttentionTest, ManySmallSplits) {
  run({.capacity = 1102, .position = 1000, .keys_per_split = 16});
  run({.capacity = 300, .position = 250, .length_offset = 1, .keys_per_split = 48});
}

TEST_F(AttentionTest, PeakySoftmax) { run({.position = 700, .query_scale = 40.0f, .tolerance = 5e-4}); }

TEST_F(AttentionTest, SmallHeadDims) {
  for (int head_dim : {16, 32, 64}) {
    run({.batch = 2, .heads = 4, .head_dim = head_dim, .capacity = 300, .position = 200, .length_offset = 3});
    run({.batch = 1, .heads = 3, .head_dim = head_dim, .cache_type = DType::kF32, .capacity = 64, .position = 5,
         .length_offset = 1, .keys_per_split = 16});
  }
}

// Head sizes between the powers of two the kernels are built for (lanes past
// the head idle), and 256 (two f32 vectors per lane, two outputs per thread).
TEST_F(AttentionTest, EveryMultipleOf16) {
  for (int head_dim : {48, 80, 96, 160, 256}) {
    run({.batch = 2, .heads = 3, .head_dim = head_dim, .capacity = 300, .position = 200, .length_offset = 3});
    run({.batch = 1, .heads = 2, .head_dim = head_dim, .cache_type = DType::kF32, .capacity = 90, .position = 70,
         .length_offset = 1, .keys_per_split = 16});
  }
}

TEST_F(AttentionTest, FixedLengthAndEdges) {
  run({.heads = 2, .capacity = 50, .length_offset = 1, .fixed_length = true});     // the reference's KV quirk
  run({.heads = 2, .capacity = 50, .position = 100, .length_offset = 1});          // clamped to the capacity
  run({.heads = 2, .capacity = 50, .position = 0, .length_offset = 0});            // empty: zeros
}

// The fused prologue (q/k norm, RoPE and the cache write inside the attention
// launch) against qk_norm_rope_cache_write followed by attention on the
// normalised query: outputs and caches bit for bit, in both cache types, with
// a cond prefix, in the reference's quirk (length fixed at 1, the write still
// made) and with the slot past the cache (nothing written).
struct FusedCase {
  DType cache_type = DType::kF32;
  int heads = 4, head_dim = 64, capacity = 200, position = 90, slot_offset = 40;
  bool fixed_length = false;
};

class FusedAttentionTest : public CudaTest {
 protected:
  void run(const FusedCase& c) {
    SCOPED_TRACE(std::string(dtype_name(c.cache_type)) + " head_dim " + std::to_string(c.head_dim) + " slot " +
                 std::to_string(c.position + c.slot_offset) + (c.fixed_length ? " fixed length 1" : ""));
    constexpr int kBatch = 2;
    const int width = c.heads * c.head_dim, stride = 3 * width + 2;
    const std::size_t elements = std::size_t(kBatch) * c.heads * c.capacity * c.head_dim;
    const std::size_t element_bytes = dtype_size(c.cache_type);
    std::vector<std::uint8_t> cache_bytes(elements * element_bytes);
    {
      const auto values = bf16_exact(random_floats(elements, 71, -1.5f, 1.5f));
      if (c.cache_type == DType::kF32) {
        std::memcpy(cache_bytes.data(), values.data(), cache_bytes.size());
      } else {
        const auto bits = to_bf16(values);
        std::memcpy(cache_bytes.data(), bits.data(), cache_bytes.size());
      }
    }
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto raw, upload(random_floats(std::size_t(kBatch) * stride, 72, -2.0f, 2.0f), "raw"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto q_norm, upload(random_floats(c.head_dim, 73, 0.5f, 1.5f), "q norm"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto k_norm, upload(random_floats(c.head_dim, 74, 0.5f, 1.5f), "k norm"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto position, upload(std::vector<int>{c.position}, "position"));
    const std::size_t workspace_bytes = attention_decode_workspace_bytes(kBatch, c.heads, c.head_dim, c.capacity);

    struct Outcome {
      std::vector<float> output;
      std::vector<std::uint8_t> keys, values;
    };
    auto run_one = [&](bool fused, Outcome& outcome) {
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto keys, upload(cache_bytes, "keys"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto values, upload(cache_bytes, "values"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto query, DeviceBuffer<float>::allocate(std::size_t(kBatch) * width, "query"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto output, DeviceBuffer<float>::allocate(std::size_t(kBatch) * width, "output"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto workspace, DeviceBuffer<float>::allocate(workspace_bytes / 4, "workspace"));
      CUBEFORGE_ASSERT_OK(workspace.fill_bytes(0xff));
      CUBEFORGE_ASSERT_OK(attention_decode_reset_workspace(workspace.data(), kBatch, c.heads, nullptr));
      AttentionDecodeArgs args;
      args.batch = kBatch;
      args.heads = c.heads;
      args.head_dim = c.head_dim;
      args.cache_form = c.cache_type == DType::kBF16 ? KvCacheForm::kBF16 : KvCacheForm::kF32;
      args.key_cache = keys.data();
      args.value_cache = values.data();
      args.cache_capacity = c.capacity;
      args.position = c.fixed_length ? nullptr : position.data();
      args.length_offset = c.fixed_length ? 1 : c.slot_offset + 1;
      args.output = output.data();
      args.workspace = workspace.data();
      args.workspace_bytes = workspace_bytes;
      if (fused) {
        args.raw_qkv = raw.data();
        args.raw_stride = stride;
        args.query_norm_weight = q_norm.data();
        args.key_norm_weight = k_norm.data();
        args.write_position = position.data();
        args.cache_slot_offset = c.slot_offset;
      } else {
        QkNormRopeArgs rope;
        rope.batch = kBatch;
        rope.heads = c.heads;
        rope.head_dim = c.head_dim;
        rope.query = raw.data();
        rope.query_stride = stride;
        rope.key = raw.data() + width;
        rope.key_stride = stride;
        rope.value = raw.data() + 2 * width;
        rope.value_stride = stride;
        rope.query_norm_weight = q_norm.data();
        rope.key_norm_weight = k_norm.data();
        rope.position = position.data();
        rope.cache_slot_offset = c.slot_offset;
        rope.query_out = query.data();
        rope.cache_type = c.cache_type;
        rope.key_cache = keys.data();
        rope.value_cache = values.data();
        rope.cache_capacity = c.capacity;
        CUBEFORGE_ASSERT_OK(qk_norm_rope_cache_write(rope, nullptr));
        args.query = query.data();
      }
      CUBEFORGE_ASSERT_OK(attention_decode(args, nullptr));
      CUBEFORGE_ASSERT_OK(synchronize_device());
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(outcome.output, output.download());
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(outcome.keys, keys.download());
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(outcome.values, values.download());
    };
    Outcome separate, fused;
    run_one(false, separate);
    run_one(true, fused);
    for (float value : fused.output) ASSERT_TRUE(std::isfinite(value));
    EXPECT_EQ(fused.output, separate.output);
    EXPECT_EQ(fused.keys, separate.keys);
    EXPECT_EQ(fused.values, separate.values);
    const bool written = c.position + c.slot_offset < c.capacity;
    EXPECT_EQ(fused.keys != cache_bytes, written) << "the new key is written exactly when its slot is in the cache";
  }
};

TEST_F(FusedAttentionTest, EqualsTheSeparateKernelsBitForBit) {
  run({});
  run({.cache_type = DType::kBF16});
  run({.head_dim = 128, .capacity = 1102, .position = 1000, .slot_offset = 78});
  run({.cache_type = DType::kBF16, .head_dim = 16, .capacity = 64, .position = 20, .slot_offset = 0});
  run({.position = 150, .slot_offset = 0, .fixed_length = true});  // the reference's KV quirk
  run({.capacity = 100, .position = 90, .slot_offset = 40});        // slot past the cache
  run({.head_dim = 48, .capacity = 120, .position = 60, .slot_offset = 20});
  run({.cache_type = DType::kBF16, .heads = 2, .head_dim = 256, .capacity = 90, .position = 50, .slot_offset = 8});
}

TEST(AttentionArguments, WorkspaceAndSplits) {
  EXPECT_EQ(attention_decode_keys_per_split(2, 12, 1102) % 16, 0);
  const int keys = attention_decode_keys_per_split(2, 12, 1102);
  const int splits = (1102 + keys - 1) / keys;
  EXPECT_GE(2 * 12 * splits, 128) << "too few blocks to fill an H200";
  EXPECT_GE(keys, 32);
  EXPECT_LE(keys, 64) << "keys in flight late in a generation: 32 to 64 per split";
  EXPECT_EQ(attention_decode_workspace_bytes(2, 12, 128, 1102),
            (std::size_t(2) * 12 + std::size_t(2) * 12 * splits * (128 + 2)) * sizeof(float));
  alignas(16) static float storage[16];
  AttentionDecodeArgs args;
  args.heads = 1;
  args.head_dim = 128;
  args.query = args.output = args.workspace = storage;
  args.key_cache = args.value_cache = storage;
  args.cache_capacity = 16;
  args.workspace_bytes = 4;
  EXPECT_FALSE(attention_decode(args, nullptr).ok());  // workspace too small
}

}  // namespace
}  // namespace cubeforge::cuda::testing
