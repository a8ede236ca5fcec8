// Every kernel family against the CPU backend's own ops (inference/cpu/ops.h,
// inference/sampling), on the same data, by normalised error: each kernel's
// host twin here takes the kernel's own argument struct, with host pointers,
// and computes it with the ops the CPU backend decodes with. The kernel tests
// beside this one check the kernels against double-precision references; the
// session tests check whole generations.
#include <cmath>
#include <cstring>

#include "cuda_test_support.h"
#include "inference/cpu/ops.h"
#include "inference/cuda/attention.h"
#include "inference/cuda/elementwise.h"
#include "inference/cuda/matvec.h"
#include "inference/cuda/norm.h"
#include "inference/cuda/sampling.h"
#include "inference/cuda_backend/gemm.h"
#include "inference/sampling/sampler.h"

namespace cubeforge::cuda::testing {
namespace {

// f32 throughout; only summation orders differ between the two sides.
constexpr double kTolerance = 1e-5;

// ---- Host twins: the same argument structs, computed by the CPU backend's ops.

// MatvecArgs with host pointers: weight bf16, input f32, batch rows.
std::vector<float> matvec_on_cpu(const MatvecArgs& args) {
  const int input_stride = args.input_stride ? args.input_stride : args.cols;
  const int output_stride = args.output_stride ? args.output_stride : args.rows;
  std::vector<float> x(std::size_t(args.batch) * args.cols);
  for (int b = 0; b < args.batch; ++b)
    std::memcpy(x.data() + std::size_t(b) * args.cols, static_cast<const float*>(args.input) + std::size_t(b) * input_stride,
                std::size_t(args.cols) * sizeof(float));
  if (args.input_layer_norm_eps > 0.0f)
    cpu::layer_norm(x.data(), args.batch, args.cols, args.input_layer_norm_eps, nullptr, nullptr, x.data());
  const cpu::WeightMatrix weight{args.weight_type, args.weight, args.rows, args.cols};
  std::vector<float> y(std::size_t(args.batch) * args.rows);
  cpu::linear(x.data(), args.batch, weight, args.bias, y.data());
  if (args.swiglu) {
    const cpu::WeightMatrix up{args.weight_type, args.up_weight, args.rows, args.cols};
    std::vector<float> up_values(y.size());
    cpu::linear(x.data(), args.batch, up, args.up_bias, up_values.data());
    cpu::swiglu_inplace(y.data(), up_values.data(), int64_t(y.size()));
  }
  std::vector<float> out(std::size_t(args.batch) * output_stride, 0.0f);
  for (int b = 0; b < args.batch; ++b)
    for (int n = 0; n < args.rows; ++n)
      out[std::size_t(b) * output_stride + n] =
          y[std::size_t(b) * args.rows + n] + (args.residual ? args.residual[std::size_t(b) * output_stride + n] : 0.0f);
  return out;
}

// QkNormRopeArgs with host pointers, one token per batch row: the normalised,
// rotated queries and keys.
void qk_norm_rope_on_cpu(const QkNormRopeArgs& args, int position, std::vector<float>& queries,
                         std::vector<float>& keys) {
  const int width = args.heads * args.head_dim;
  queries.assign(std::size_t(args.batch) * width, 0.0f);
  keys.assign(std::size_t(args.batch) * width, 0.0f);
  for (int b = 0; b < args.batch; ++b) {
    std::memcpy(queries.data() + std::size_t(b) * width, args.query + std::size_t(b) * args.query_stride,
                std::size_t(width) * sizeof(float));
    std::memcpy(keys.data() + std::size_t(b) * width, args.key + std::size_t(b) * args.key_stride,
                std::size_t(width) * sizeof(float));
  }
  const std::vector<int32_t> positions(std::size_t(args.batch), position);
  cpu::rms_norm_heads(queries.data(), args.batch, args.heads, args.head_dim, width, args.eps, args.query_norm_weight);
  cpu::rms_norm_heads(keys.data(), args.batch, args.heads, args.head_dim, width, args.eps, args.key_norm_weight);
  cpu::rope_interleaved(queries.data(), args.batch, args.heads, args.head_dim, width, positions.data(), args.rope_theta);
  cpu::rope_interleaved(keys.data(), args.batch, args.heads, args.head_dim, width, positions.data(), args.rope_theta);
}

// The [batch, heads, capacity, D] cache as the CPU's rows [batch][capacity, heads·D].
std::vector<float> cache_as_rows(const std::vector<float>& cache, int batch, int heads, int capacity, int head_dim) {
  std::vector<float> rows(cache.size());
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int p = 0; p < capacity; ++p)
        std::memcpy(rows.data() + ((std::size_t(b) * capacity + p) * heads + h) * head_dim,
                    cache.data() + ((std::size_t(b) * heads + h) * capacity + p) * head_dim,
                    std::size_t(head_dim) * sizeof(float));
  return rows;
}

class KernelsAgainstCpuOps : public CudaTest {};

TEST_F(KernelsAgainstCpuOps, MatvecEqualsCpuLinear) {
  struct Case {
    int rows, cols, batch;
    bool layer_norm, residual, swiglu;
  };
  for (const Case c : {Case{96, 256, 2, false, true, false}, Case{131, 64, 2, true, false, false},
                       Case{64, 128, 1, true, false, true}, Case{200, 512, 2, true, true, false}}) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + (c.layer_norm ? " LayerNorm" : "") +
                 (c.swiglu ? " SwiGLU" : ""));
    const auto weight = to_bf16(random_floats(std::size_t(c.rows) * c.cols, 1, -0.3f, 0.3f));
    const auto up = to_bf16(random_floats(std::size_t(c.rows) * c.cols, 2, -0.3f, 0.3f));
    const auto input = random_floats(std::size_t(c.batch) * c.cols, 3, -2.0f, 2.0f);
    const auto bias = random_floats(c.rows, 4);
    const auto residual = random_floats(std::size_t(c.batch) * c.rows, 5);
    MatvecArgs args;
    args.rows = c.rows;
    args.cols = c.cols;
    args.batch = c.batch;
    args.swiglu = c.swiglu;
    args.input_layer_norm_eps = c.layer_norm ? 1e-6f : 0.0f;
    MatvecArgs host = args;
    host.weight = weight.data();
    host.up_weight = up.data();
    host.bias = bias.data();
    host.up_bias = c.swiglu ? bias.data() : nullptr;
    host.input = input.data();
    host.residual = c.residual ? residual.data() : nullptr;
    const std::vector<float> expected = matvec_on_cpu(host);

    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto weight_device, upload(weight, "weight"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto up_device, upload(up, "up"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto bias_device, upload(bias, "bias"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto input_device, upload(input, "input"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto output, upload(residual, "output"));
    args.weight = weight_device.data();
    args.up_weight = up_device.data();
    args.bias = bias_device.data();
    args.up_bias = c.swiglu ? bias_device.data() : nullptr;
    args.input = input_device.data();
    args.residual = c.residual ? output.data() : nullptr;  // in place: x += W·n
    args.output = output.data();
    CUBEFORGE_ASSERT_OK(matvec(args, nullptr));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual, output.download());
    EXPECT_LT(normalised_error(actual, expected), kTolerance);
  }
}

TEST_F(KernelsAgainstCpuOps, LayerNormRowsEqualsCpuLayerNorm) {
  for (int cols : {64, 128, 1536}) {
    const auto input = random_floats(std::size_t(3) * cols, 11, -3.0f, 5.0f);
    std::vector<float> expected(input.size());
    cpu::layer_norm(input.data(), 3, cols, 1e-6f, nullptr, nullptr, expected.data());
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto device, upload(input, "rows"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto output, DeviceBuffer<float>::allocate(input.size(), "normed"));
    CUBEFORGE_ASSERT_OK(layer_norm_rows(device.data(), cols, output.data(), cols, 3, cols, 1e-6f, nullptr));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual, output.download());
    EXPECT_LT(normalised_error(actual, expected), kTolerance) << cols;
  }
}

TEST_F(KernelsAgainstCpuOps, QkNormRopeEqualsCpuRmsNormAndRope) {
  constexpr int kBatch = 2, kHeads = 4, kHeadDim = 32, kCapacity = 40, kPosition = 17, kOffset = 5;
  const int width = kHeads * kHeadDim;
  const auto qkv = random_floats(std::size_t(kBatch) * 3 * width, 21, -2.0f, 2.0f);
  const auto q_norm = random_floats(kHeadDim, 22, 0.5f, 1.5f);
  const auto k_norm = random_floats(kHeadDim, 23, 0.5f, 1.5f);
  QkNormRopeArgs args;
  args.batch = kBatch;
  args.heads = kHeads;
  args.head_dim = kHeadDim;
  args.query_stride = args.key_stride = args.value_stride = 3 * width;
  args.cache_type = DType::kF32;
  args.cache_capacity = kCapacity;
  args.cache_slot_offset = kOffset;
  QkNormRopeArgs host = args;
  host.query = qkv.data();
  host.key = qkv.data() + width;
  host.query_norm_weight = q_norm.data();
  host.key_norm_weight = k_norm.data();
  std::vector<float> expected_queries, expected_keys;
  qk_norm_rope_on_cpu(host, kPosition, expected_queries, expected_keys);

  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto qkv_device, upload(qkv, "qkv"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto q_norm_device, upload(q_norm, "q norm"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto k_norm_device, upload(k_norm, "k norm"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto position, upload(std::vector<int>{kPosition}, "position"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto queries, DeviceBuffer<float>::allocate(std::size_t(kBatch) * width, "q"));
  const std::size_t cache_elements = std::size_t(kBatch) * kHeads * kCapacity * kHeadDim;
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto keys, DeviceBuffer<float>::allocate(cache_elements, "keys"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto values, DeviceBuffer<float>::allocate(cache_elements, "values"));
  args.query = qkv_device.data();
  args.key = qkv_device.data() + width;
  args.value = qkv_device.data() + 2 * width;
  args.query_norm_weight = q_norm_device.data();
  args.key_norm_weight = k_norm_device.data();
  args.position = position.data();
  args.query_out = queries.data();
  args.key_cache = keys.data();
  args.value_cache = values.data();
  CUBEFORGE_ASSERT_OK(qk_norm_rope_cache_write(args, nullptr));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual_queries, queries.download());
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto cache, keys.download());
  std::vector<float> actual_keys(std::size_t(kBatch) * width);
  for (int b = 0; b < kBatch; ++b)
    for (int h = 0; h < kHeads; ++h)
      std::memcpy(actual_keys.data() + std::size_t(b) * width + h * kHeadDim,
                  cache.data() + ((std::size_t(b) * kHeads + h) * kCapacity + kPosition + kOffset) * kHeadDim,
                  kHeadDim * sizeof(float));
  EXPECT_LT(normalised_error(actual_queries, expected_queries), kTolerance);
  EXPECT_LT(normalised_error(actual_keys, expected_keys), kTolerance);
}

TEST_F(KernelsAgainstCpuOps, AttentionEqualsCpuAttention) {
  constexpr int kBatch = 2, kHeads = 4, kHeadDim = 64, kCapacity = 150, kLength = 131;
  const int width = kHeads * kHeadDim;
  const std::size_t cache_elements = std::size_t(kBatch) * kHeads * kCapacity * kHeadDim;
  const auto keys = random_floats(cache_elements, 31, -1.5f, 1.5f);
  const auto values = random_floats(cache_elements, 32, -1.0f, 1.0f);
  const auto query = random_floats(std::size_t(kBatch) * width, 33, -1.5f, 1.5f);
  const auto key_rows = cache_as_rows(keys, kBatch, kHeads, kCapacity, kHeadDim);
  const auto value_rows = cache_as_rows(values, kBatch, kHeads, kCapacity, kHeadDim);
  std::vector<float> expected(std::size_t(kBatch) * width);
  for (int b = 0; b < kBatch; ++b)
    cpu::attention(query.data() + std::size_t(b) * width, 1, width,
                   key_rows.data() + std::size_t(b) * kCapacity * width,
                   value_rows.data() + std::size_t(b) * kCapacity * width, kLength, width, kHeads, kHeadDim, -1,
                   expected.data() + std::size_t(b) * width, width);

  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto keys_device, upload(keys, "keys"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto values_device, upload(values, "values"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto query_device, upload(query, "query"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto output, DeviceBuffer<float>::allocate(expected.size(), "output"));
  const std::size_t workspace_bytes = attention_decode_workspace_bytes(kBatch, kHeads, kHeadDim, kCapacity);
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto workspace, DeviceBuffer<float>::allocate(workspace_bytes / 4, "workspace"));
  CUBEFORGE_ASSERT_OK(attention_decode_reset_workspace(workspace.data(), kBatch, kHeads, nullptr));
  AttentionDecodeArgs args;
  args.batch = kBatch;
  args.heads = kHeads;
  args.head_dim = kHeadDim;
  args.query = query_device.data();
  args.cache_form = KvCacheForm::kF32;
  args.key_cache = keys_device.data();
  args.value_cache = values_device.data();
  args.cache_capacity = kCapacity;
  args.length_offset = kLength;
  args.output = output.data();
  args.workspace = workspace.data();
  args.workspace_bytes = workspace_bytes;
  CUBEFORGE_ASSERT_OK(attention_decode(args, nullptr));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual, output.download());
  EXPECT_LT(normalised_error(actual, expected), kTolerance);

  // Prefill: 20 query rows at causal base 111 against the same cache.
  constexpr int kRows = 20, kBase = kLength - kRows;
  const auto rows = random_floats(std::size_t(kBatch) * kRows * width, 34, -1.5f, 1.5f);
  std::vector<float> expected_rows(rows.size());
  for (int b = 0; b < kBatch; ++b)
    cpu::attention(rows.data() + std::size_t(b) * kRows * width, kRows, width,
                   key_rows.data() + std::size_t(b) * kCapacity * width,
                   value_rows.data() + std::size_t(b) * kCapacity * width, kLength, width, kHeads, kHeadDim, kBase,
                   expected_rows.data() + std::size_t(b) * kRows * width, width);
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto rows_device, upload(rows, "query rows"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto rows_output, DeviceBuffer<float>::allocate(rows.size(), "output rows"));
  AttentionPrefillArgs prefill{kBatch,
                               kHeads,
                               kHeadDim,
                               rows_device.data(),
                               kRows,
                               kBase,
                               kLength,
                               KvCacheForm::kF32,
                               keys_device.data(),
                               values_device.data(),
                               kCapacity,
                               rows_output.data(),
                               {}};
  CUBEFORGE_ASSERT_OK(attention_prefill(prefill, nullptr));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual_rows, rows_output.download());
  EXPECT_LT(normalised_error(actual_rows, expected_rows), kTolerance);
}

TEST_F(KernelsAgainstCpuOps, LinearRowsAndPrefillElementwiseEqualCpuOps) {
  constexpr int kRows = 37, kIn = 96, kOut = 80;
  const auto weight_bits = to_bf16(random_floats(std::size_t(kOut) * kIn, 41, -0.3f, 0.3f));
  const auto input = random_floats(std::size_t(kRows) * kIn, 42, -2.0f, 2.0f);
  const auto bias = random_floats(kOut, 43);
  const auto start = random_floats(std::size_t(kRows) * kOut, 44);
  std::vector<float> expected = start;
  cpu::linear_accumulate(input.data(), kRows, cpu::WeightMatrix{DType::kBF16, weight_bits.data(), kOut, kIn},
                         bias.data(), expected.data());

  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto bits_device, upload(weight_bits, "weight bf16"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto weight_device, DeviceBuffer<float>::allocate(weight_bits.size(), "weight"));
  CUBEFORGE_ASSERT_OK(widen_bf16(bits_device.data(), weight_device.data(), weight_bits.size(), nullptr));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto input_device, upload(input, "input"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto bias_device, upload(bias, "bias"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto output, upload(start, "output"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(GemmContext gemm, GemmContext::create(std::size_t(1) << 20));
  LinearRowsArgs args;
  args.input = input_device.data();
  args.weight = weight_device.data();
  args.bias = bias_device.data();
  args.rows = kRows;
  args.in_features = kIn;
  args.out_features = kOut;
  args.output = output.data();
  args.accumulate = true;
  CUBEFORGE_ASSERT_OK(gemm.linear_rows(args, nullptr));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual, output.download());
  EXPECT_LT(normalised_error(actual, expected), kTolerance) << "cuBLASLt against cpu::linear_accumulate";

  // SwiGLU over [gate | up] rows against cpu::swiglu_inplace.
  const auto gate_up = random_floats(std::size_t(kRows) * 2 * kOut, 45, -4.0f, 4.0f);
  std::vector<float> gate(std::size_t(kRows) * kOut), up(gate.size());
  for (int r = 0; r < kRows; ++r)
    for (int j = 0; j < kOut; ++j) {
      gate[std::size_t(r) * kOut + j] = gate_up[std::size_t(r) * 2 * kOut + j];
      up[std::size_t(r) * kOut + j] = gate_up[std::size_t(r) * 2 * kOut + kOut + j];
    }
  cpu::swiglu_inplace(gate.data(), up.data(), int64_t(gate.size()));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto gate_up_device, upload(gate_up, "gate|up"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto swiglu_device, DeviceBuffer<float>::allocate(gate.size(), "swiglu"));
  CUBEFORGE_ASSERT_OK(swiglu_rows(gate_up_device.data(), kRows, kOut, swiglu_device.data(), nullptr));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual_swiglu, swiglu_device.download());
  EXPECT_LT(normalised_error(actual_swiglu, gate), kTolerance);

  // Embedding rows of device-held ids: exact copies.
  const auto table = random_floats(std::size_t(10) * kOut, 46);
  const std::vector<int> ids = {3, 0, 9, 3};
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto table_device, upload(table, "table"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto ids_device, upload(ids, "ids"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto gathered, DeviceBuffer<float>::allocate(std::size_t(2) * 4 * kOut, "gathered"));
  GatherEmbeddingArgs gather{DType::kF32, table_device.data(), 10, kOut, ids_device.data(), 4, 2, gathered.data()};
  CUBEFORGE_ASSERT_OK(gather_embedding_rows(gather, nullptr));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual_rows, gathered.download());
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 4; ++t)
      for (int d = 0; d < kOut; ++d)
        ASSERT_EQ(actual_rows[(std::size_t(b) * 4 + t) * kOut + d], table[std::size_t(ids[t]) * kOut + d]);
}

TEST_F(KernelsAgainstCpuOps, GuidanceAndGreedyChoiceEqualTheCpuSampler) {
  constexpr int kVocab = 300, kStride = 303, kSteps = 10;
  for (int step : {0, 4, 9}) {
    const auto logits = random_floats(std::size_t(2) * kStride, 51u + step, -5.0f, 5.0f);
    std::vector<float> combined(kVocab);
    combine_guidance(std::span<const float>(logits.data(), kVocab), std::span<const float>(logits.data() + kStride, kVocab),
                     3.0f, step, kSteps, combined);
    const int expected = TokenSampler(SamplingOptions{}).sample(combined);
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto logits_device, upload(logits, "logits"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto step_device, upload(std::vector<int>{step}, "step"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto tokens, DeviceBuffer<int>::allocate(kSteps, "tokens"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto combined_device, DeviceBuffer<float>::allocate(kVocab, "combined"));
    CfgSampleArgs args;
    args.logits = logits_device.data();
    args.logits_stride = kStride;
    args.rows = 2;
    args.vocab = kVocab;
    args.total_steps = kSteps;
    args.step = step_device.data();
    args.tokens = tokens.data();
    args.combined_logits = combined_device.data();
    CUBEFORGE_ASSERT_OK(cfg_sample_and_embed(args, nullptr));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual_tokens, tokens.download());
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual_combined, combined_device.download());
    EXPECT_LT(normalised_error(actual_combined, combined), 1e-6) << "step " << step;
    EXPECT_EQ(actual_tokens[std::size_t(step)], expected) << "step " << step;
  }
}

}  // namespace
}  // namespace cubeforge::cuda::testing
