// Benchmarks that print figures for the device check (lines starting with
// "[bench]"): the memory bandwidth ceiling, and a full v0.5-sized decode step
// as the CUDA token backend runs it (24 layers of q|k|v with ln_1 fused,
// attention over a full 1102-slot bf16 cache with q/k norm, RoPE and the
// cache write fused, c_proj, SwiGLU with ln_3 fused, down projection, then
// lm_head with ln_f fused and sampling; about 1.86 GB of bf16 weights, 5
// launches per layer) eager and as a replayed graph, as achieved
// weight GB/s and the fraction of the measured read bandwidth, then each
// matrix shape on its own. Weights are
// constant bytes: speed does not depend on their values. They assert only
// that the numbers are sane, so they pass wherever the kernels run.
#include <cuda_runtime.h>

#include <cstdio>

#include "cuda_test_support.h"
#include "inference/cuda/attention.h"
#include "inference/cuda/bandwidth.h"
#include "inference/cuda/decode_graph.h"
#include "inference/cuda/matvec.h"
#include "inference/cuda/norm.h"
#include "inference/cuda/sampling.h"

namespace cubeforge::cuda::testing {
namespace {

class CudaBench : public CudaTest {};

TEST_F(CudaBench, MemoryBandwidth) {
  std::printf("[bench] device: %s\n", device_summary().c_str());
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(BandwidthReport report, measure_device_bandwidth(std::size_t(1) << 30, 10));
  std::printf("[bench] bandwidth: copy %.0f GB/s (read+write), streaming read %.0f GB/s, buffer %.2f GB\n",
              report.copy_gb_per_s, report.read_gb_per_s, double(report.bytes) / 1e9);
  EXPECT_GT(report.read_gb_per_s, 50.0);
  EXPECT_GT(report.copy_gb_per_s, 50.0);
}

constexpr int kV05Layers = 24, kV05Width = 1536, kV05Heads = 12, kV05HeadDim = 128, kV05Hidden = 4 * kV05Width;
constexpr int kV05Vocab = 16384, kV05VocabRows = kV05Vocab + 3, kV05CondLength = 78, kV05Tokens = 1024;
constexpr int kV05Capacity = kV05CondLength + kV05Tokens, kV05Batch = 2;

struct LayerWeights {
  const std::uint16_t *c_qk, *c_v, *c_proj, *gate, *up, *down;
};

TEST_F(CudaBench, DecodeStepV05Shapes) {
  const std::size_t per_layer = std::size_t(kV05Width) * (2 * kV05Width + kV05Width + kV05Width + 3 * kV05Hidden);
  const std::size_t weight_count = per_layer * kV05Layers + std::size_t(kV05VocabRows) * kV05Width;
  const double weight_bytes = double(weight_count) * 2;
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto weights, DeviceBuffer<std::uint16_t>::allocate(weight_count, "weights"));
  CUBEFORGE_ASSERT_OK(weights.fill_bytes(0x3c));  // bf16 0x3c3c ≈ 0.0115 everywhere
  std::vector<LayerWeights> layers(kV05Layers);
  const std::uint16_t* cursor = weights.data();
  auto take = [&](std::size_t count) {
    const std::uint16_t* at = cursor;
    cursor += count;
    return at;
  };
  for (LayerWeights& layer : layers) {
    layer.c_qk = take(std::size_t(2) * kV05Width * kV05Width);
    layer.c_v = take(std::size_t(kV05Width) * kV05Width);
    layer.c_proj = take(std::size_t(kV05Width) * kV05Width);
    layer.gate = take(std::size_t(kV05Hidden) * kV05Width);
    layer.up = take(std::size_t(kV05Hidden) * kV05Width);
    layer.down = take(std::size_t(kV05Width) * kV05Hidden);
  }
  const std::uint16_t* lm_head = take(std::size_t(kV05VocabRows) * kV05Width);

  const std::size_t cache_per_layer = std::size_t(kV05Batch) * kV05Heads * kV05Capacity * kV05HeadDim;
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto key_cache, DeviceBuffer<std::uint16_t>::allocate(cache_per_layer * kV05Layers, "k"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto value_cache, DeviceBuffer<std::uint16_t>::allocate(cache_per_layer * kV05Layers, "v"));
  CUBEFORGE_ASSERT_OK(key_cache.fill_bytes(0x3c));
  CUBEFORGE_ASSERT_OK(value_cache.fill_bytes(0x3c));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto norms, upload(std::vector<float>(kV05HeadDim, 1.0f), "norm weights"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto bias, upload(std::vector<float>(kV05Hidden, 0.01f), "biases"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto x, upload(std::vector<float>(kV05Batch * kV05Width, 0.5f), "x"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto normed, DeviceBuffer<float>::allocate(kV05Batch * kV05Width, "normed"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto qk, DeviceBuffer<float>::allocate(kV05Batch * 3 * kV05Width, "q|k|v"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto attended, DeviceBuffer<float>::allocate(kV05Batch * kV05Width, "attended"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto hidden, DeviceBuffer<float>::allocate(kV05Batch * kV05Hidden, "hidden"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto logits, DeviceBuffer<float>::allocate(kV05Batch * kV05VocabRows, "logits"));
  const std::size_t workspace_bytes = attention_decode_workspace_bytes(kV05Batch, kV05Heads, kV05HeadDim, kV05Capacity);
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto workspace, DeviceBuffer<float>::allocate(workspace_bytes / 4, "workspace"));
  CUBEFORGE_ASSERT_OK(attention_decode_reset_workspace(workspace.data(), kV05Batch, kV05Heads, nullptr));
  // The last token of a generation: the attention reads every cache slot.
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto position, upload(std::vector<int>{kV05Tokens - 1}, "position"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto step, upload(std::vector<int>{kV05Tokens - 1}, "step"));
  const std::uint16_t* wte = lm_head;  // same shape; any embedding rows will do

  auto projection = [&](const std::uint16_t* weight, int rows, int cols, const float* input, float* output) {
    MatvecArgs args;
    args.weight = weight;
    args.rows = rows;
    args.cols = cols;
    args.input = input;
    args.batch = kV05Batch;
    args.output = output;
    return args;
  };
  // The session's decode step (inference/cuda_backend/token_backend.cpp): per layer
  // q|k|v with ln_1 fused, attention with q/k norm, RoPE, cache write and the
  // split merge fused, c_proj, gate|up SwiGLU with ln_3 fused, down; then
  // lm_head with ln_f fused and sampling. c_qk and c_v lie back to back, as
  // the upload fuses them.
  auto record = [&](Stream stream, bool weights_only) -> Status {
    for (int l = 0; l < kV05Layers; ++l) {
      const LayerWeights& w = layers[l];
      MatvecArgs qkv_projection = projection(w.c_qk, 3 * kV05Width, kV05Width, x.data(), qk.data());
      qkv_projection.bias = bias.data();
      qkv_projection.input_layer_norm_eps = weights_only ? 0.0f : 1e-6f;
      CUBEFORGE_TRY(matvec(qkv_projection, stream));
      if (!weights_only) {
        AttentionDecodeArgs attention;
        attention.batch = kV05Batch;
        attention.heads = kV05Heads;
        attention.head_dim = kV05HeadDim;
        attention.raw_qkv = qk.data();
        attention.raw_stride = 3 * kV05Width;
        attention.query_norm_weight = attention.key_norm_weight = norms.data();
        attention.write_position = position.data();
        attention.cache_slot_offset = kV05CondLength;
        attention.key_cache = key_cache.data() + cache_per_layer * l;
        attention.value_cache = value_cache.data() + cache_per_layer * l;
        attention.cache_capacity = kV05Capacity;
        attention.position = position.data();
        attention.length_offset = kV05CondLength + 1;
        attention.output = attended.data();
        attention.workspace = workspace.data();
        attention.workspace_bytes = workspace_bytes;
        CUBEFORGE_TRY(attention_decode(attention, stream));
      }
      MatvecArgs output_projection = projection(w.c_proj, kV05Width, kV05Width, attended.data(), x.data());
      output_projection.bias = bias.data();
      output_projection.residual = x.data();
      CUBEFORGE_TRY(matvec(output_projection, stream));
      MatvecArgs swiglu = projection(w.gate, kV05Hidden, kV05Width, x.data(), hidden.data());
      swiglu.up_weight = w.up;
      swiglu.bias = swiglu.up_bias = bias.data();
      swiglu.swiglu = true;
      swiglu.input_layer_norm_eps = weights_only ? 0.0f : 1e-6f;
      CUBEFORGE_TRY(matvec(swiglu, stream));
      MatvecArgs down = projection(w.down, kV05Width, kV05Hidden, hidden.data(), x.data());
      down.bias = bias.data();
      down.residual = x.data();
      CUBEFORGE_TRY(matvec(down, stream));
    }
    MatvecArgs head = projection(lm_head, kV05VocabRows, kV05Width, x.data(), logits.data());
    head.input_layer_norm_eps = weights_only ? 0.0f : 1e-6f;
    CUBEFORGE_TRY(matvec(head, stream));
    if (weights_only) return ok_status();
    CfgSampleArgs sample;
    sample.logits = logits.data();
    sample.logits_stride = kV05VocabRows;
    sample.rows = kV05Batch;
    sample.vocab = kV05Vocab;
    sample.total_steps = kV05Tokens;
    sample.step = step.data();
    sample.advance_step = false;  // stay on the last token: every replay reads the whole cache
    sample.sampling = {.greedy = false, .temperature = 1.0f, .top_k = 50, .top_p = 0.9f, .seed = 1};
    sample.embedding = wte;
    sample.embedding_dim = kV05Width;
    sample.next_input = x.data();
    sample.next_input_stride = kV05Width;
    sample.next_input_rows = kV05Batch;
    return cfg_sample_and_embed(sample, stream);
  };

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaEvent_t start = nullptr, stop = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  auto time_per_step = [&](CudaDecodeGraph& graph, int repeats) -> double {
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(graph.launch().ok());  // warm-up (and capture)
    cudaEventRecord(start, stream);
    for (int i = 0; i < repeats; ++i) EXPECT_TRUE(graph.launch().ok());
    cudaEventRecord(stop, stream);
    EXPECT_EQ(cudaEventSynchronize(stop), cudaSuccess);
    float milliseconds = 0.0f;
    cudaEventElapsedTime(&milliseconds, start, stop);
    return double(milliseconds) / repeats;
  };
  auto read_bandwidth = measure_device_bandwidth(std::size_t(1) << 30, 5);
  const double ceiling = read_bandwidth.ok() ? read_bandwidth->read_gb_per_s : 0.0;

  struct Variant {
    const char* name;
    bool weights_only;
    CudaDecodeGraph::Mode mode;
  };
  const Variant variants[] = {
      {"matvecs only, eager", true, CudaDecodeGraph::Mode::kEager},
      {"matvecs only, graph", true, CudaDecodeGraph::Mode::kGraph},
      {"full step, eager", false, CudaDecodeGraph::Mode::kEager},
      {"full step, graph", false, CudaDecodeGraph::Mode::kGraph},
  };
  for (const Variant& variant : variants) {
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(
        CudaDecodeGraph graph,
        CudaDecodeGraph::create(stream, [&, variant](Stream s) { return record(s, variant.weights_only); },
                                variant.mode));
    const long long launches_before = kernel_launches();
    CUBEFORGE_ASSERT_OK(graph.launch());  // eager: counts; graph: captures (counts too)
    const long long launches = kernel_launches() - launches_before;
    const double milliseconds = time_per_step(graph, 20);
    const double gb_per_s = weight_bytes / (milliseconds * 1e-3) / 1e9;
    std::printf("[bench] v0.5 decode, %s: %.3f ms/token, %lld launches, weights %.2f GB at %.0f GB/s = %.0f%% of the "
                "%.0f GB/s read ceiling (floor %.3f ms)\n",
                variant.name, milliseconds, launches, weight_bytes / 1e9, gb_per_s,
                ceiling > 0 ? 100.0 * gb_per_s / ceiling : 0.0, ceiling,
                ceiling > 0 ? weight_bytes / (ceiling * 1e9) * 1e3 : 0.0);
    EXPECT_GT(milliseconds, 0.0);
  }
  // Each matrix shape on its own: 24 launches over the 24 layers' copies (so
  // nothing is served from L2), eager, as achieved GB/s of weights.
  struct Shape {
    const char* name;
    int rows, cols;
    bool swiglu;
    const std::uint16_t* LayerWeights::*weight;
    std::size_t bytes_per_layer;
  };
  const Shape shapes[] = {
      {"c_qk 3072x1536", 2 * kV05Width, kV05Width, false, &LayerWeights::c_qk, std::size_t(2) * kV05Width * kV05Width * 2},
      {"c_v 1536x1536", kV05Width, kV05Width, false, &LayerWeights::c_v, std::size_t(kV05Width) * kV05Width * 2},
      {"gate+up 2x6144x1536 SwiGLU", kV05Hidden, kV05Width, true, &LayerWeights::gate, std::size_t(2) * kV05Hidden * kV05Width * 2},
      {"down 1536x6144", kV05Width, kV05Hidden, false, &LayerWeights::down, std::size_t(kV05Width) * kV05Hidden * 2},
  };
  for (const Shape& shape : shapes) {
    auto launch_all = [&]() -> Status {
      for (int l = 0; l < kV05Layers; ++l) {
        const float* input = shape.cols == kV05Width ? normed.data() : hidden.data();
        float* output = shape.swiglu ? hidden.data() : (shape.rows == 2 * kV05Width ? qk.data() : attended.data());
        MatvecArgs args = projection(layers[l].*shape.weight, shape.rows, shape.cols, input, output);
        if (shape.swiglu) {
          args.up_weight = layers[l].up;
          args.swiglu = true;
        }
        CUBEFORGE_TRY(matvec(args, stream));
      }
      return ok_status();
    };
    CUBEFORGE_ASSERT_OK(launch_all());  // warm-up
    cudaEventRecord(start, stream);
    for (int r = 0; r < 5; ++r) CUBEFORGE_ASSERT_OK(launch_all());
    cudaEventRecord(stop, stream);
    ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
    float milliseconds = 0.0f;
    cudaEventElapsedTime(&milliseconds, start, stop);
    const double per_launch_us = double(milliseconds) * 1e3 / (5 * kV05Layers);
    const double gb_per_s = double(shape.bytes_per_layer) / (per_launch_us * 1e-6) / 1e9;
    std::printf("[bench] matvec %s, batch 2, split-K %d: %.2f us/launch, %.0f GB/s\n", shape.name,
                matvec_auto_split_k(shape.rows, shape.cols, shape.swiglu, DType::kBF16, multiprocessor_count()),
                per_launch_us, gb_per_s);
  }
  CUBEFORGE_ASSERT_OK(synchronize_device());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace cubeforge::cuda::testing
