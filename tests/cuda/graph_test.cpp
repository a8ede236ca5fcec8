// A miniature decode step built from every kernel family (LayerNorm, c_qk /
// c_v matvecs, qk-norm + RoPE + cache write, attention over cond + shape
// tokens, c_proj with residual, SwiGLU, down projection, ln_f, lm_head, CFG
// sampling feeding the next input) run for several tokens eagerly and then as
// a replayed CUDA graph: tokens, logits and KV caches must agree bit for bit,
// which shows that every per-token quantity is read from device memory. Also
// the CUBEFORGE_CUDA_GRAPHS kill switch.
#include <cuda_runtime.h>

#include <cstdlib>

#include "cuda_test_support.h"
#include "inference/cuda/attention.h"
#include "inference/cuda/decode_graph.h"
#include "inference/cuda/matvec.h"
#include "inference/cuda/norm.h"
#include "inference/cuda/sampling.h"

namespace cubeforge::cuda::testing {
namespace {

constexpr int kBatch = 2, kWidth = 64, kHeads = 4, kHeadDim = 16, kHidden = 256;
constexpr int kCondLength = 5, kSteps = 12, kCapacity = kCondLength + kSteps;
constexpr int kVocab = 100, kVocabRows = kVocab + 3;

struct MiniModel {
  DeviceBuffer<std::uint16_t> c_qk, c_v, c_proj, gate, up, down, lm_head, wte;
  DeviceBuffer<float> c_v_bias, c_proj_bias, gate_bias, up_bias, down_bias, q_norm, k_norm;
  DeviceBuffer<float> x, normed, qk, v, q, attended, hidden, logits, workspace;
  DeviceBuffer<std::uint16_t> key_cache, value_cache;
  DeviceBuffer<int> step, tokens;
  std::vector<std::uint16_t> initial_cache;
  std::vector<float> bos;
};

Status allocate(MiniModel& m) {
  std::uint32_t seed = 100;
  auto weights = [&](std::size_t count, float range) { return to_bf16(random_floats(count, seed++, -range, range)); };
  auto floats = [&](std::size_t count, float low, float high) { return random_floats(count, seed++, low, high); };
  CUBEFORGE_ASSIGN_OR_RETURN(m.c_qk, upload(weights(2 * kWidth * kWidth, 0.2f), "c_qk"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.c_v, upload(weights(kWidth * kWidth, 0.2f), "c_v"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.c_proj, upload(weights(kWidth * kWidth, 0.2f), "c_proj"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.gate, upload(weights(kHidden * kWidth, 0.2f), "gate"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.up, upload(weights(kHidden * kWidth, 0.2f), "up"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.down, upload(weights(kWidth * kHidden, 0.1f), "down"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.lm_head, upload(weights(kVocabRows * kWidth, 0.5f), "lm_head"));
  const auto wte = weights(kVocabRows * kWidth, 1.0f);
  CUBEFORGE_ASSIGN_OR_RETURN(m.wte, upload(wte, "wte"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.c_v_bias, upload(floats(kWidth, -0.1f, 0.1f), "c_v.bias"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.c_proj_bias, upload(floats(kWidth, -0.1f, 0.1f), "c_proj.bias"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.gate_bias, upload(floats(kHidden, -0.1f, 0.1f), "gate.bias"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.up_bias, upload(floats(kHidden, -0.1f, 0.1f), "up.bias"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.down_bias, upload(floats(kWidth, -0.1f, 0.1f), "down.bias"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.q_norm, upload(floats(kHeadDim, 0.5f, 1.5f), "q_norm"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.k_norm, upload(floats(kHeadDim, 0.5f, 1.5f), "k_norm"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.x, DeviceBuffer<float>::allocate(kBatch * kWidth, "x"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.normed, DeviceBuffer<float>::allocate(kBatch * kWidth, "normed"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.qk, DeviceBuffer<float>::allocate(kBatch * 2 * kWidth, "qk"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.v, DeviceBuffer<float>::allocate(kBatch * kWidth, "v"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.q, DeviceBuffer<float>::allocate(kBatch * kWidth, "q"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.attended, DeviceBuffer<float>::allocate(kBatch * kWidth, "attended"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.hidden, DeviceBuffer<float>::allocate(kBatch * kHidden, "hidden"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.logits, DeviceBuffer<float>::allocate(kBatch * kVocabRows, "logits"));
  const std::size_t workspace = attention_decode_workspace_bytes(kBatch, kHeads, kHeadDim, kCapacity);
  CUBEFORGE_ASSIGN_OR_RETURN(m.workspace, DeviceBuffer<float>::allocate(workspace / 4, "workspace"));
  CUBEFORGE_TRY(attention_decode_reset_workspace(m.workspace.data(), kBatch, kHeads, nullptr));
  // The cond tokens' keys and values, as a prefill would leave them; shape slots empty.
  m.initial_cache = weights(std::size_t(kBatch) * kHeads * kCapacity * kHeadDim, 1.0f);
  CUBEFORGE_ASSIGN_OR_RETURN(m.key_cache, DeviceBuffer<std::uint16_t>::allocate(m.initial_cache.size(), "k cache"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.value_cache, DeviceBuffer<std::uint16_t>::allocate(m.initial_cache.size(), "v cache"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.step, DeviceBuffer<int>::allocate(1, "step"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.tokens, DeviceBuffer<int>::allocate(kSteps, "tokens"));
  m.bos.assign(kBatch * kWidth, 0.0f);
  for (int b = 0; b < kBatch; ++b)
    for (int d = 0; d < kWidth; ++d) m.bos[b * kWidth + d] = bf16_to_f32(wte[std::size_t(kVocab) * kWidth + d]);
  return ok_status();
}

Status reset(MiniModel& m) {
  CUBEFORGE_TRY(m.x.upload(m.bos));
  CUBEFORGE_TRY(m.key_cache.upload(m.initial_cache));
  CUBEFORGE_TRY(m.value_cache.upload(m.initial_cache));
  CUBEFORGE_TRY(m.step.upload({0}));
  return m.tokens.fill_bytes(0xff);
}

MatvecArgs projection(const DeviceBuffer<std::uint16_t>& weight, int rows, int cols, const float* input, float* output) {
  MatvecArgs args;
  args.weight = weight.data();
  args.rows = rows;
  args.cols = cols;
  args.input = input;
  args.batch = kBatch;
  args.output = output;
  return args;
}

Status record_step(MiniModel& m, Stream stream) {
  CUBEFORGE_TRY(layer_norm_rows(m.x.data(), kWidth, m.normed.data(), kWidth, kBatch, kWidth, 1e-6f, stream));
  CUBEFORGE_TRY(matvec(projection(m.c_qk, 2 * kWidth, kWidth, m.normed.data(), m.qk.data()), stream));
  MatvecArgs value = projection(m.c_v, kWidth, kWidth, m.normed.data(), m.v.data());
  value.bias = m.c_v_bias.data();
  CUBEFORGE_TRY(matvec(value, stream));

  QkNormRopeArgs rope;
  rope.batch = kBatch;
  rope.heads = kHeads;
  rope.head_dim = kHeadDim;
  rope.query = m.qk.data();
  rope.query_stride = 2 * kWidth;
  rope.key = m.qk.data() + kWidth;
  rope.key_stride = 2 * kWidth;
  rope.value = m.v.data();
  rope.value_stride = kWidth;
  rope.query_norm_weight = m.q_norm.data();
  rope.key_norm_weight = m.k_norm.data();
  rope.position = m.step.data();
  rope.cache_slot_offset = kCondLength;
  rope.query_out = m.q.data();
  rope.key_cache = m.key_cache.data();
  rope.value_cache = m.value_cache.data();
  rope.cache_capacity = kCapacity;
  CUBEFORGE_TRY(qk_norm_rope_cache_write(rope, stream));

  AttentionDecodeArgs attention;
  attention.batch = kBatch;
  attention.heads = kHeads;
  attention.head_dim = kHeadDim;
  attention.query = m.q.data();
  attention.key_cache = m.key_cache.data();
  attention.value_cache = m.value_cache.data();
  attention.cache_capacity = kCapacity;
  attention.position = m.step.data();
  attention.length_offset = kCondLength + 1;
  attention.output = m.attended.data();
  attention.workspace = m.workspace.data();
  attention.workspace_bytes = m.workspace.bytes();
  CUBEFORGE_TRY(attention_decode(attention, stream));

  MatvecArgs output_projection = projection(m.c_proj, kWidth, kWidth, m.attended.data(), m.x.data());
  output_projection.bias = m.c_proj_bias.data();
  output_projection.residual = m.x.data();
  CUBEFORGE_TRY(matvec(output_projection, stream));

  CUBEFORGE_TRY(layer_norm_rows(m.x.data(), kWidth, m.normed.data(), kWidth, kBatch, kWidth, 1e-6f, stream));
  MatvecArgs swiglu = projection(m.gate, kHidden, kWidth, m.normed.data(), m.hidden.data());
  swiglu.up_weight = m.up.data();
  swiglu.bias = m.gate_bias.data();
  swiglu.up_bias = m.up_bias.data();
  swiglu.swiglu = true;
  CUBEFORGE_TRY(matvec(swiglu, stream));
  MatvecArgs down = projection(m.down, kWidth, kHidden, m.hidden.data(), m.x.data());
  down.bias = m.down_bias.data();
  down.residual = m.x.data();
  CUBEFORGE_TRY(matvec(down, stream));

  CUBEFORGE_TRY(layer_norm_rows(m.x.data(), kWidth, m.normed.data(), kWidth, kBatch, kWidth, 1e-6f, stream));
  CUBEFORGE_TRY(matvec(projection(m.lm_head, kVocabRows, kWidth, m.normed.data(), m.logits.data()), stream));

  CfgSampleArgs sample;
  sample.logits = m.logits.data();
  sample.logits_stride = kVocabRows;
  sample.rows = kBatch;
  sample.vocab = kVocab;
  sample.total_steps = kSteps;
  sample.step = m.step.data();
  sample.sampling = {.greedy = false, .temperature = 1.0f, .top_k = 20, .top_p = 0.9f, .seed = 5};
  sample.tokens = m.tokens.data();
  sample.embedding = m.wte.data();
  sample.embedding_dim = kWidth;
  sample.next_input = m.x.data();
  sample.next_input_stride = kWidth;
  sample.next_input_rows = kBatch;
  return cfg_sample_and_embed(sample, stream);
}

struct Outcome {
  std::vector<int> tokens;
  std::vector<float> logits;
  std::vector<std::uint16_t> key_cache, value_cache;
};

class StreamHandle {
 public:
  // A blocking stream: it orders after the uploads that run on the legacy stream.
  StreamHandle() { cudaStreamCreate(&stream_); }
  ~StreamHandle() { cudaStreamDestroy(stream_); }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class DecodeGraphTest : public CudaTest {};

TEST_F(DecodeGraphTest, ReplayEqualsEagerBitForBit) {
  MiniModel model;
  CUBEFORGE_ASSERT_OK(allocate(model));
  StreamHandle stream;
  ASSERT_NE(stream.get(), nullptr);

  auto run = [&](CudaDecodeGraph::Mode mode, Outcome& outcome, int& captures) {
    CUBEFORGE_ASSERT_OK(reset(model));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(
        CudaDecodeGraph graph,
        CudaDecodeGraph::create(stream.get(), [&](Stream s) { return record_step(model, s); }, mode));
    for (int i = 0; i < kSteps; ++i) CUBEFORGE_ASSERT_OK(graph.launch());
    ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
    captures = graph.capture_count();
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(outcome.tokens, model.tokens.download());
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(outcome.logits, model.logits.download());
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(outcome.key_cache, model.key_cache.download());
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(outcome.value_cache, model.value_cache.download());
  };
  Outcome eager, replayed;
  int eager_captures = -1, graph_captures = -1;
  run(CudaDecodeGraph::Mode::kEager, eager, eager_captures);
  run(CudaDecodeGraph::Mode::kGraph, replayed, graph_captures);
  EXPECT_EQ(eager_captures, 0);
  EXPECT_EQ(graph_captures, 1) << "one capture serves every token";
  for (int token : eager.tokens) {
    ASSERT_GE(token, 0);
    ASSERT_LT(token, kVocab);
  }
  EXPECT_EQ(eager.tokens, replayed.tokens);
  EXPECT_EQ(eager.logits, replayed.logits);
  EXPECT_EQ(eager.key_cache, replayed.key_cache);
  EXPECT_EQ(eager.value_cache, replayed.value_cache);
  // Every shape slot was written during the run (they started as the random prefill pattern).
  std::size_t changed = 0;
  for (std::size_t i = 0; i < eager.key_cache.size(); ++i) changed += eager.key_cache[i] != model.initial_cache[i];
  EXPECT_GT(changed, std::size_t(kBatch) * kHeads * kSteps * kHeadDim * 9 / 10);
}

TEST_F(DecodeGraphTest, InvalidateCapturesAgain) {
  MiniModel model;
  CUBEFORGE_ASSERT_OK(allocate(model));
  CUBEFORGE_ASSERT_OK(reset(model));
  StreamHandle stream;
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(
      CudaDecodeGraph graph,
      CudaDecodeGraph::create(stream.get(), [&](Stream s) { return record_step(model, s); },
                              CudaDecodeGraph::Mode::kGraph));
  CUBEFORGE_ASSERT_OK(graph.launch());
  CUBEFORGE_ASSERT_OK(graph.launch());
  graph.invalidate();
  CUBEFORGE_ASSERT_OK(graph.launch());
  ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
  EXPECT_EQ(graph.capture_count(), 2);
}

// The kill switch and argument checks make no CUDA calls that need a device.
TEST(DecodeGraphSwitch, EnvironmentZeroRunsEagerly) {
  ::setenv("CUBEFORGE_CUDA_GRAPHS", "0", 1);
  EXPECT_FALSE(cuda_graphs_enabled_by_environment());
  int calls = 0;
  auto graph = CudaDecodeGraph::create(nullptr, [&](Stream) {
    ++calls;
    return ok_status();
  });
  ASSERT_TRUE(graph.ok()) << graph.error().to_string();
  EXPECT_FALSE(graph->uses_graph());
  EXPECT_TRUE(graph->launch().ok());
  EXPECT_TRUE(graph->launch().ok());
  EXPECT_EQ(calls, 2);
  ::unsetenv("CUBEFORGE_CUDA_GRAPHS");
  EXPECT_TRUE(cuda_graphs_enabled_by_environment());
  auto needs_stream = CudaDecodeGraph::create(nullptr, [](Stream) { return ok_status(); });
  ASSERT_FALSE(needs_stream.ok());
  EXPECT_NE(needs_stream.error().message.find("stream"), std::string::npos);
}

}  // namespace
}  // namespace cubeforge::cuda::testing
