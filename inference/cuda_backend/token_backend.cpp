// The CUDA backend of the token seam (see token_backend.h): a session's
// buffers, the prefill, the recorded decode step and the pinned token ring.
//
// Shapes: B = batch rows (2 with guidance), S = cond rows, N = tokens, L =
// shape rows in a prefill (1 with the KV cache: BOS; i + 1 at step i without
// it), d = width, H = heads, D = head dim, F = 4d, V = codes (vocabulary V + 3).
//
// Positions follow the CPU session: token i is sampled from the logits of
// shape position i (BOS at 0), so the decode step that produces token i feeds
// token i − 1 at position i. One device int, `step`, is both that position and
// the sampling step; the sampling kernel advances it, which is what lets one
// recorded graph serve every token. The KV cache holds, per block and batch
// row, the cond keys and values first (dual blocks), then the shape tokens'.
// A bf16, fp8 or int8 cache (kv_cache.h) is what the CPU's GptSession keeps: its
// prefill attends over the exact keys and values (an f32 scratch cache here)
// and stores them in the cache's form for the decode steps. Under a KV budget
// each decode step's attention writes the token to the slot kv_budget_update
// chose for its layer and row, and kv_budget_update then accumulates the
// step's attention and chooses the next slot, as the CPU's LayerKvCache does.
// Under a KV rank the cache holds one head of R latents per slot: the prefill
// attends exact and then compresses its rows (low_rank_kv_store); each decode
// step rotates q and k into the f32 scratch cache, compresses the new slot,
// projects the query heads into the latent space, attends every head over the
// one latent head and projects each head's output back.
#include "inference/cuda_backend/token_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include "inference/cuda/attention.h"
#include "inference/cuda/bandwidth.h"
#include "inference/cuda/cuda_status.h"
#include "inference/cuda/decode_graph.h"
#include "inference/cuda/device_memory.h"
#include "inference/cuda/elementwise.h"
#include "inference/cuda/kv_cache.h"
#include "inference/cuda/matvec.h"
#include "inference/cuda/norm.h"
#include "inference/cuda/sampling.h"
#include "inference/cuda_backend/gemm.h"
#include "inference/cuda_backend/gpt_weights.h"
#include "inference/model/kv_bases.h"

namespace cubeforge::cuda {
namespace {

constexpr float kQkNormEps = 1e-5f;  // per-head RMSNorm eps (fixed in the reference)

using detail::cuda_status;

// A non-blocking stream: it never waits for the legacy default stream, and
// capture on it is allowed.
class OwnedStream {
 public:
  OwnedStream() = default;
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  ~OwnedStream() {
    if (stream_) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }
  Status create() { return cuda_status(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

const float* data_or_null(const DeviceBuffer<float>& buffer) { return buffer.size() ? buffer.data() : nullptr; }

struct LayerCache {
  DeviceBuffer<unsigned char> keys, values;                    // [B, H, capacity, D] elements of the cache form
  DeviceBuffer<float> key_scales, value_scales, key_residual;  // fp8 and int8 (kv_cache.h)
  int capacity = 0;
  // A KV budget's per-slot state (kv_budget_update): [B, capacity] each, and
  // the slot each batch row's next token takes, [B].
  DeviceBuffer<int> slot_positions, write_slots;
  DeviceBuffer<float> attention;
  // A KV rank's bases (LowRankKv::Layer) in f32: keys and values [R, d] each;
  // key_heads [H, R, D], value_heads [H, D, R].
  DeviceBuffer<float> key_basis, value_basis, key_heads, value_heads;

  KvCacheScales scales() {
    return {key_scales.size() ? key_scales.data() : nullptr, value_scales.size() ? value_scales.data() : nullptr,
            key_residual.size() ? key_residual.data() : nullptr};
  }
};

// The form the session's options ask for.
KvCacheForm session_cache_form(const TokenSessionOptions& options) {
  switch (options.kv_cache.format) {
    case KvFormat::kBF16:
      return KvCacheForm::kBF16;
    case KvFormat::kFp8:
      return KvCacheForm::kFp8;
    case KvFormat::kInt8:
      return KvCacheForm::kInt8;
    case KvFormat::kF32:
      break;
  }
  return KvCacheForm::kF32;
}

class CudaTokenBackend;

class CudaTokenSession final : public TokenSession {
 public:
  CudaTokenSession(const GptWeights& weights, const TokenSessionOptions& options)
      : w_(weights),
        c_(weights.config),
        options_(options),
        batch_(options.batch()),
        cond_(options.cond_length),
        tokens_(options.tokens),
        form_(session_cache_form(options)) {}

  ~CudaTokenSession() override {
    if (stream_.get()) cudaStreamSynchronize(stream_.get());
  }

  Status open();
  Status prefill(std::span<const float> cond_rows) override;
  Status enqueue_steps(int count) override;
  Status wait_for_token() override;
  Status read_tokens(std::vector<int>& tokens) override;
  Result<StepLogits> step_logits(int step) override;
  TokenSessionStats stats() const override { return stats_; }

 private:
  int d() const { return c_.width; }
  int head_dim() const { return c_.head_dim(); }
  int vocab_rows() const { return c_.vocab_size(); }
  int landed() const { return __atomic_load_n(ring_count_.host_data(), __ATOMIC_ACQUIRE); }
  // The CPU's bf16, fp8 and int8 forms (kv_cache.format): the prefill writes
  // and attends over the f32 scratch cache, as the CPU's prefill attends over
  // the exact keys and values, and then stores them in the form.
  bool scratch_prefill() const { return options_.kv_cache.format != KvFormat::kF32 || low_rank(); }
  // A KV rank (options.kv_cache.low_rank): the cache is [B, 1, capacity, R].
  bool low_rank() const { return options_.kv_cache.low_rank != nullptr; }
  int rank() const { return low_rank() ? options_.kv_cache.low_rank->rank() : 0; }
  // H2O eviction (options.kv_cache.budget): each decode step's attention
  // writes the token to the slot kv_budget_update chose and records the
  // scores it accumulates.
  bool evicting() const { return options_.kv_cache.budget > 0; }

  template <class T>
  Status allocate(DeviceBuffer<T>& buffer, std::size_t count, const char* name) {
    CUBEFORGE_ASSIGN_OR_RETURN(buffer, DeviceBuffer<T>::allocate(count, name));
    stats_.device_memory_bytes += double(buffer.bytes());
    return ok_status();
  }

  MatvecArgs matvec_args(const DeviceMatrix& weight, const DeviceBuffer<float>& bias, const float* input,
                         float* output) const {
    MatvecArgs args;
    args.weight_type = weight.type;
    args.weight = weight.data();
    args.scales = weight.scales_from(0);
    args.offsets = weight.offsets_from(0);
    args.group = weight.group;
    args.rows = weight.rows;
    args.cols = weight.cols;
    args.bias = data_or_null(bias);
    args.input = input;
    args.batch = batch_;
    args.output = output;
    return args;
  }

  QkNormRopeArgs rope_args(const PreAttentionWeights& pre, const float* qkv, int tokens, LayerCache& cache) {
    QkNormRopeArgs args;
    args.batch = batch_;
    args.heads = c_.heads;
    args.head_dim = head_dim();
    args.tokens = tokens;
    const int stride = pre.qkv.rows;
    if (pre.has_query) {
      args.query = qkv;
      args.query_stride = stride;
      args.query_norm_weight = pre.q_norm.data();
    }
    args.key = qkv + (pre.has_query ? d() : 0);
    args.key_stride = stride;
    args.value = args.key + d();
    args.value_stride = stride;
    args.key_norm_weight = pre.k_norm.data();
    args.eps = kQkNormEps;
    args.rope_theta = c_.rope_theta;
    if (scratch_prefill()) {
      args.cache_type = DType::kF32;
      args.key_cache = prefill_keys_.data();
      args.value_cache = prefill_values_.data();
      args.cache_capacity = prefill_capacity_;
    } else {
      args.cache_type = DType::kF32;
      args.key_cache = cache.keys.data();
      args.value_cache = cache.values.data();
      args.cache_capacity = cache.capacity;
    }
    return args;
  }

  // Prefill attention over the cache's first kv_length slots (the f32
  // scratch cache for the CPU's forms: its prefill attends exact).
  AttentionPrefillArgs prefill_attention_args(LayerCache& cache, const float* query, int rows, int causal_base,
                                              int kv_length, float* output) {
    AttentionPrefillArgs args;
    args.batch = batch_;
    args.heads = c_.heads;
    args.head_dim = head_dim();
    args.query = query;
    args.query_rows = rows;
    args.causal_base = causal_base;
    args.kv_length = kv_length;
    args.output = output;
    if (scratch_prefill()) {
      args.cache_form = KvCacheForm::kF32;
      args.key_cache = prefill_keys_.data();
      args.value_cache = prefill_values_.data();
      args.cache_capacity = prefill_capacity_;
    } else {
      args.cache_form = form_;
      args.key_cache = cache.keys.data();
      args.value_cache = cache.values.data();
      args.cache_capacity = cache.capacity;
    }
    return args;
  }

  // x (+)= input · Wᵀ + bias over `rows` rows, through cuBLASLt.
  Status linear(const DeviceMatrix& weight, const DeviceBuffer<float>& bias, const float* input, int rows,
                float* output, bool accumulate, Stream stream) {
    const float* f32 = weight.f32.data();
    if (weight.type == DType::kBF16) {
      CUBEFORGE_TRY(widen_bf16(weight.bf16.data(), widened_.data(), std::size_t(weight.rows) * weight.cols, stream));
      f32 = widened_.data();
    } else if (weight.quantized()) {
      DequantizeArgs dequantize;
      dequantize.type = weight.type;
      dequantize.codes = weight.data();
      dequantize.scales = weight.scales_from(0);
      dequantize.offsets = weight.offsets_from(0);
      dequantize.group = weight.group;
      dequantize.rows = weight.rows;
      dequantize.cols = weight.cols;
      dequantize.output = widened_.data();
      CUBEFORGE_TRY(dequantize_rows(dequantize, stream));
      f32 = widened_.data();
    }
    LinearRowsArgs args;
    args.input = input;
    args.weight = f32;
    args.bias = data_or_null(bias);
    args.rows = rows;
    args.in_features = weight.cols;
    args.out_features = weight.rows;
    args.output = output;
    args.accumulate = accumulate;
    return gemm_->linear_rows(args, stream);
  }

  Status post_attention_rows(const PostAttentionWeights& post, float* rows_data, const float* attended, int rows,
                             Stream stream);
  Status run_prefill(int length, Stream stream);
  Status record_decode_step(Stream stream);
  Status low_rank_attention(const BlockWeights& block, LayerCache& cache, Stream stream);
  LowRankStoreArgs low_rank_store_args(LayerCache& cache) const;
  Status sample(Stream stream);
  Status enqueue_one_step();

  const GptWeights& w_;
  const GptConfig& c_;
  const TokenSessionOptions options_;
  const int batch_, cond_, tokens_;
  const KvCacheForm form_;

  OwnedStream stream_;  // declared first: destroyed after every buffer below
  std::optional<GemmContext> gemm_;
  std::vector<LayerCache> caches_;
  // Decode: [B, d] rows unless noted.
  DeviceBuffer<float> x_, qkv_ /*[B, 3d]*/, attended_, hidden_ /*[B, F]*/, logits_ /*[B, V+3]*/;
  DeviceBuffer<float> workspace_;
  DeviceBuffer<float> scores_;  // a budget: one layer's attention scores, [B, H, dual capacity]
  // A KV rank: the rotated query [B, d], the query heads' latents and the
  // attention's latent outputs, [B, H·R] each.
  DeviceBuffer<float> rotated_query_, latent_query_, latent_out_;
  DeviceBuffer<int> step_, tokens_out_ /*[N]*/, input_tokens_ /*[N + 1]*/, forced_ /*[N]*/;
  PinnedHostBuffer<int> ring_ /*[N]*/, ring_count_ /*[1]*/;
  DeviceBuffer<float> logits_history_ /*[N, B, V+3]*/, combined_history_ /*[N, V]*/;
  // Prefill: R = B·max(S, L) rows.
  DeviceBuffer<float> cond_input_ /*[B·S, d]*/, cond_rows_, shape_rows_ /*[B·L, d]*/, normed_rows_, qkv_rows_,
      query_rows_, attended_cond_, attended_shape_, gate_up_rows_ /*[R, 2F]*/, swiglu_out_ /*[R, F]*/, widened_;
  // The CPU's forms: one layer's exact prefill keys and values, [B, H, prefill_capacity_, D] f32
  // (under a KV rank also each decode step's new key and value, in its slot).
  DeviceBuffer<float> prefill_keys_, prefill_values_;
  int prefill_capacity_ = 0;
  int max_shape_rows_ = 1;

  std::optional<CudaDecodeGraph> graph_;
  TokenSessionStats stats_;
  int requested_ = 0;
  int read_ = 0;
};

Status CudaTokenSession::open() {
  const int B = batch_, S = cond_, N = tokens_, F = 4 * d();
  CUBEFORGE_TRY(stream_.create());
  CUBEFORGE_ASSIGN_OR_RETURN(GemmContext gemm, GemmContext::create());
  gemm_.emplace(std::move(gemm));
  max_shape_rows_ = options_.use_kv_cache ? 1 : N;

  // KV caches: dual blocks hold the cond rows first. The session's N + 1
  // shape positions, or under a budget the CPU's min(budget, N + 1) of them.
  const int shape_slots = evicting() ? std::min(options_.kv_cache.budget, N + 1) : N + 1;
  const int dual_capacity = S + shape_slots, single_capacity = shape_slots;
  for (const BlockWeights& block : w_.blocks) {
    LayerCache cache;
    cache.capacity = block.dual ? dual_capacity : single_capacity;
    const KvCacheSizes sizes = low_rank() ? kv_cache_sizes(form_, B, 1, rank(), cache.capacity)
                                          : kv_cache_sizes(form_, B, c_.heads, head_dim(), cache.capacity);
    CUBEFORGE_TRY(allocate(cache.keys, sizes.code_bytes, "KV cache keys"));
    CUBEFORGE_TRY(allocate(cache.values, sizes.code_bytes, "KV cache values"));
    if (sizes.key_scales) CUBEFORGE_TRY(allocate(cache.key_scales, sizes.key_scales, "KV cache key scales"));
    if (sizes.value_scales) CUBEFORGE_TRY(allocate(cache.value_scales, sizes.value_scales, "KV cache value scales"));
    if (sizes.key_residual) CUBEFORGE_TRY(allocate(cache.key_residual, sizes.key_residual, "KV cache key residual"));
    if (evicting()) {
      // The prefill caches the condition (position −1) and BOS (0); the first
      // decode step takes the next slot.
      const int fixed = block.dual ? S : 0, slots = cache.capacity;
      std::vector<int> positions(std::size_t(B) * slots, kKvSlotUnused);
      for (int b = 0; b < B; ++b) {
        std::fill_n(positions.begin() + std::ptrdiff_t(b) * slots, fixed, -1);
        positions[std::size_t(b) * slots + fixed] = 0;
      }
      CUBEFORGE_TRY(allocate(cache.slot_positions, positions.size(), "KV budget slot positions"));
      CUBEFORGE_TRY(cache.slot_positions.upload(positions));
      CUBEFORGE_TRY(allocate(cache.attention, positions.size(), "KV budget attention"));
      CUBEFORGE_TRY(cache.attention.fill_bytes(0));
      CUBEFORGE_TRY(allocate(cache.write_slots, std::size_t(B), "KV budget write slots"));
      CUBEFORGE_TRY(cache.write_slots.upload(std::vector<int>(std::size_t(B), fixed + 1)));
    }
    if (low_rank()) {
      const LowRankKv::Layer& bases = options_.kv_cache.low_rank->layer(caches_.size());
      const std::size_t R = std::size_t(rank()), D = std::size_t(head_dim()), W = std::size_t(d());
      auto upload_matrix = [](DeviceBuffer<float>& buffer, const cpu::WeightMatrix& matrix) {
        const auto* data = static_cast<const float*>(matrix.data);
        return buffer.upload(std::vector<float>(data, data + std::size_t(matrix.rows * matrix.cols)));
      };
      CUBEFORGE_TRY(allocate(cache.key_basis, R * W, "KV rank key basis"));
      CUBEFORGE_TRY(allocate(cache.value_basis, R * W, "KV rank value basis"));
      CUBEFORGE_TRY(upload_matrix(cache.key_basis, bases.keys));
      CUBEFORGE_TRY(upload_matrix(cache.value_basis, bases.values));
      std::vector<float> key_heads, value_heads;
      for (int h = 0; h < c_.heads; ++h) {
        const auto* into = static_cast<const float*>(bases.key_heads[std::size_t(h)].data);
        const auto* back = static_cast<const float*>(bases.value_heads[std::size_t(h)].data);
        key_heads.insert(key_heads.end(), into, into + R * D);
        value_heads.insert(value_heads.end(), back, back + D * R);
      }
      CUBEFORGE_TRY(allocate(cache.key_heads, key_heads.size(), "KV rank key heads"));
      CUBEFORGE_TRY(allocate(cache.value_heads, value_heads.size(), "KV rank value heads"));
      CUBEFORGE_TRY(cache.key_heads.upload(key_heads));
      CUBEFORGE_TRY(cache.value_heads.upload(value_heads));
    }
    caches_.push_back(std::move(cache));
  }
  if (evicting()) CUBEFORGE_TRY(allocate(scores_, std::size_t(B) * c_.heads * dual_capacity, "KV budget scores"));
  if (scratch_prefill()) {
    // A rank's decode steps write their new key and value to the scratch at their slot.
    prefill_capacity_ = low_rank() ? dual_capacity : S + max_shape_rows_;
    const std::size_t cells = std::size_t(B) * c_.heads * prefill_capacity_ * head_dim();
    CUBEFORGE_TRY(allocate(prefill_keys_, cells, "prefill keys"));
    CUBEFORGE_TRY(allocate(prefill_values_, cells, "prefill values"));
  }

  CUBEFORGE_TRY(allocate(x_, std::size_t(B) * d(), "decode x"));
  CUBEFORGE_TRY(allocate(qkv_, std::size_t(B) * 3 * d(), "decode qkv"));
  CUBEFORGE_TRY(allocate(attended_, std::size_t(B) * d(), "decode attention output"));
  CUBEFORGE_TRY(allocate(hidden_, std::size_t(B) * F, "decode MLP hidden"));
  CUBEFORGE_TRY(allocate(logits_, std::size_t(B) * vocab_rows(), "logits"));
  if (low_rank()) {
    CUBEFORGE_TRY(allocate(rotated_query_, std::size_t(B) * d(), "decode rotated query"));
    CUBEFORGE_TRY(allocate(latent_query_, std::size_t(B) * c_.heads * rank(), "decode latent queries"));
    CUBEFORGE_TRY(allocate(latent_out_, std::size_t(B) * c_.heads * rank(), "decode latent outputs"));
  }
  const std::size_t workspace =
      attention_decode_workspace_bytes(B, c_.heads, std::max(head_dim(), rank()), dual_capacity);
  CUBEFORGE_TRY(allocate(workspace_, workspace / sizeof(float) + 1, "attention workspace"));
  CUBEFORGE_TRY(attention_decode_reset_workspace(workspace_.data(), B, c_.heads, stream_.get()));
  CUBEFORGE_TRY(allocate(step_, 1, "step"));
  CUBEFORGE_TRY(allocate(tokens_out_, std::size_t(N), "tokens"));
  CUBEFORGE_TRY(allocate(input_tokens_, std::size_t(N) + 1, "fed tokens"));
  if (!options_.forced_tokens.empty()) {
    CUBEFORGE_TRY(allocate(forced_, std::size_t(N), "forced tokens"));
    CUBEFORGE_TRY(forced_.upload(std::vector<int>(options_.forced_tokens.begin(), options_.forced_tokens.begin() + N)));
  }
  CUBEFORGE_ASSIGN_OR_RETURN(ring_, PinnedHostBuffer<int>::allocate(std::size_t(N), "token ring"));
  CUBEFORGE_ASSIGN_OR_RETURN(ring_count_, PinnedHostBuffer<int>::allocate(1, "token ring count"));
  *ring_count_.host_data() = 0;
  if (options_.record_logits) {
    CUBEFORGE_TRY(allocate(logits_history_, std::size_t(N) * B * vocab_rows(), "logits history"));
    CUBEFORGE_TRY(allocate(combined_history_, std::size_t(N) * c_.codes, "combined logits history"));
  }

  const std::size_t rows = std::size_t(B) * std::max(S, max_shape_rows_);
  CUBEFORGE_TRY(allocate(cond_input_, std::size_t(B) * S * d(), "condition rows"));
  CUBEFORGE_TRY(allocate(cond_rows_, std::size_t(B) * S * d(), "prefill cond stream"));
  CUBEFORGE_TRY(allocate(shape_rows_, std::size_t(B) * max_shape_rows_ * d(), "prefill shape stream"));
  CUBEFORGE_TRY(allocate(normed_rows_, rows * d(), "prefill normed rows"));
  CUBEFORGE_TRY(allocate(qkv_rows_, rows * 3 * d(), "prefill qkv rows"));
  CUBEFORGE_TRY(allocate(query_rows_, rows * d(), "prefill query rows"));
  CUBEFORGE_TRY(allocate(attended_cond_, std::size_t(B) * S * d(), "prefill cond attention"));
  CUBEFORGE_TRY(allocate(attended_shape_, std::size_t(B) * max_shape_rows_ * d(), "prefill shape attention"));
  CUBEFORGE_TRY(allocate(gate_up_rows_, rows * 2 * F, "prefill gate and up rows"));
  CUBEFORGE_TRY(allocate(swiglu_out_, rows * F, "prefill SwiGLU rows"));
  if (w_.any_widened) CUBEFORGE_TRY(allocate(widened_, std::size_t(w_.largest_matrix), "widened weights"));
  stats_.device_memory_bytes += double(w_.bytes);

  // Shape input 0 is BOS; the sampling kernel writes the rest.
  std::vector<int> bos(1, c_.bos_id());
  CUBEFORGE_TRY(cuda_status(cudaMemcpyAsync(input_tokens_.data(), bos.data(), sizeof(int), cudaMemcpyHostToDevice,
                                               stream_.get()),
                               "upload of BOS"));
  // The uploads and memsets above (DeviceBuffer's) run on the legacy stream,
  // which the session's non-blocking stream does not wait for: a device-wide
  // synchronise orders them before the first kernel.
  CUBEFORGE_TRY(synchronize_device());

  if (options_.use_kv_cache) {
    const CudaDecodeGraph::Mode mode =
        options_.cuda_graphs ? CudaDecodeGraph::Mode::kFromEnvironment : CudaDecodeGraph::Mode::kEager;
    CUBEFORGE_ASSIGN_OR_RETURN(CudaDecodeGraph graph,
                               CudaDecodeGraph::create(stream_.get(), [this](Stream s) { return record_decode_step(s); },
                                                       mode));
    graph_.emplace(std::move(graph));
    stats_.graph_replay = graph_->uses_graph();
  }
  return ok_status();
}

Status CudaTokenSession::post_attention_rows(const PostAttentionWeights& post, float* rows_data,
                                             const float* attended, int rows, Stream stream) {
  const int F = 4 * d();
  CUBEFORGE_TRY(linear(post.proj, post.proj_bias, attended, rows, rows_data, true, stream));
  CUBEFORGE_TRY(layer_norm_rows(rows_data, d(), normed_rows_.data(), d(), rows, d(), c_.eps, stream));
  CUBEFORGE_TRY(linear(post.gate_up, post.gate_up_bias, normed_rows_.data(), rows, gate_up_rows_.data(), false, stream));
  CUBEFORGE_TRY(swiglu_rows(gate_up_rows_.data(), rows, F, swiglu_out_.data(), stream));
  return linear(post.down, post.down_bias, swiglu_out_.data(), rows, rows_data, true, stream);
}

Status CudaTokenSession::run_prefill(int length, Stream stream) {
  const int B = batch_, S = cond_, L = length;
  GatherEmbeddingArgs gather;
  gather.table_type = DType::kF32;
  gather.table = w_.token_embedding.data();
  gather.table_rows = vocab_rows();
  gather.dim = d();
  gather.ids = input_tokens_.data();
  gather.count = L;
  gather.batch = B;
  gather.output = shape_rows_.data();
  CUBEFORGE_TRY(gather_embedding_rows(gather, stream));
  CUBEFORGE_TRY(cuda_status(cudaMemcpyAsync(cond_rows_.data(), cond_input_.data(), cond_input_.bytes(),
                                               cudaMemcpyDeviceToDevice, stream),
                               "copy of the condition rows"));

  for (std::size_t l = 0; l < w_.blocks.size(); ++l) {
    const BlockWeights& block = w_.blocks[l];
    LayerCache& cache = caches_[l];
    if (block.dual) {
      // The cond stream: its keys and values fill slots 0..S-1 at rotary
      // position 0; its queries see only cond keys, so they attend now.
      CUBEFORGE_TRY(layer_norm_rows(cond_rows_.data(), d(), normed_rows_.data(), d(), B * S, d(), c_.eps, stream));
      CUBEFORGE_TRY(linear(block.pre_c.qkv, block.pre_c.qkv_bias, normed_rows_.data(), B * S, qkv_rows_.data(), false,
                           stream));
      QkNormRopeArgs cond = rope_args(block.pre_c, qkv_rows_.data(), S, cache);
      cond.first_position = 0;
      cond.position_step = 0;
      cond.cache_slot_offset = 0;
      if (block.pre_c.has_query) cond.query_out = query_rows_.data();
      CUBEFORGE_TRY(qk_norm_rope_cache_write(cond, stream));
      if (block.pre_c.has_query)
        CUBEFORGE_TRY(attention_prefill(
            prefill_attention_args(cache, query_rows_.data(), S, 0, S, attended_cond_.data()), stream));
    }
    const int slot_offset = block.dual ? S : 0;
    CUBEFORGE_TRY(layer_norm_rows(shape_rows_.data(), d(), normed_rows_.data(), d(), B * L, d(), c_.eps, stream));
    CUBEFORGE_TRY(linear(block.pre_x.qkv, block.pre_x.qkv_bias, normed_rows_.data(), B * L, qkv_rows_.data(), false,
                         stream));
    QkNormRopeArgs shape = rope_args(block.pre_x, qkv_rows_.data(), L, cache);
    shape.first_position = 0;
    shape.position_step = 1;
    shape.cache_slot_offset = slot_offset;
    shape.query_out = query_rows_.data();
    CUBEFORGE_TRY(qk_norm_rope_cache_write(shape, stream));
    CUBEFORGE_TRY(attention_prefill(
        prefill_attention_args(cache, query_rows_.data(), L, slot_offset, slot_offset + L, attended_shape_.data()),
        stream));
    if (low_rank()) {
      // The cache keeps this layer's keys and values compressed for the decode steps.
      LowRankStoreArgs store = low_rank_store_args(cache);
      store.first_slot = 0;
      store.count = slot_offset + L;
      CUBEFORGE_TRY(low_rank_kv_store(store, stream));
    } else if (scratch_prefill()) {
      // The cache keeps this layer's keys and values in its form for the decode steps.
      KvCacheStoreArgs store;
      store.batch = B;
      store.heads = c_.heads;
      store.head_dim = head_dim();
      store.source_keys = prefill_keys_.data();
      store.source_values = prefill_values_.data();
      store.source_capacity = prefill_capacity_;
      store.first_slot = 0;
      store.count = slot_offset + L;
      store.form = form_;
      store.key_cache = cache.keys.data();
      store.value_cache = cache.values.data();
      store.scales = cache.scales();
      store.cache_capacity = cache.capacity;
      CUBEFORGE_TRY(kv_cache_store(store, stream));
    }
    CUBEFORGE_TRY(post_attention_rows(block.post_x, shape_rows_.data(), attended_shape_.data(), B * L, stream));
    if (block.dual && !block.cond_pre_only)
      CUBEFORGE_TRY(post_attention_rows(block.post_c, cond_rows_.data(), attended_cond_.data(), B * S, stream));
  }
  // lm_head (ln_f in its prologue) on each batch row's last shape row.
  MatvecArgs head = matvec_args(w_.lm_head, DeviceBuffer<float>(), shape_rows_.data() + std::size_t(L - 1) * d(),
                                logits_.data());
  head.input_stride = L * d();
  head.input_layer_norm_eps = c_.eps;
  return matvec(head, stream);
}

// One token: per block the q|k|v matvec (ln_1 in its prologue), attention
// (q/k norm, RoPE and the cache write in its prologue, the split merge in its
// last block), c_proj with the residual, gate|up with SwiGLU (ln_3 in its
// prologue), down with the residual; then lm_head (ln_f in its prologue) and
// sampling, which feeds the next step's input and advances `step`.
Status CudaTokenSession::record_decode_step(Stream stream) {
  const int S = cond_, F = 4 * d();
  for (std::size_t l = 0; l < w_.blocks.size(); ++l) {
    const BlockWeights& block = w_.blocks[l];
    LayerCache& cache = caches_[l];
    const PreAttentionWeights& pre = block.pre_x;
    MatvecArgs qkv = matvec_args(pre.qkv, pre.qkv_bias, x_.data(), qkv_.data());
    qkv.input_layer_norm_eps = c_.eps;
    CUBEFORGE_TRY(matvec(qkv, stream));

    if (low_rank()) {
      CUBEFORGE_TRY(low_rank_attention(block, cache, stream));
    } else {
      AttentionDecodeArgs attention;
      attention.batch = batch_;
      attention.heads = c_.heads;
      attention.head_dim = head_dim();
      attention.raw_qkv = qkv_.data();
      attention.raw_stride = pre.qkv.rows;
      attention.query_norm_weight = pre.q_norm.data();
      attention.key_norm_weight = pre.k_norm.data();
      attention.eps = kQkNormEps;
      attention.rope_theta = c_.rope_theta;
      attention.write_position = step_.data();
      attention.cache_slot_offset = block.dual ? S : 0;
      attention.cache_form = form_;
      attention.key_cache = cache.keys.data();
      attention.value_cache = cache.values.data();
      attention.cache_scales = cache.scales();
      attention.cache_capacity = cache.capacity;
      // The reference's KV quirk: a single block's query sees cache slot 0 only.
      const bool quirk = !block.dual && options_.attention == AttentionMode::kReference;
      attention.position = quirk ? nullptr : step_.data();
      attention.length_offset = block.dual ? S + 1 : 1;
      attention.output = attended_.data();
      attention.workspace = workspace_.data();
      attention.workspace_bytes = workspace_.bytes();
      if (evicting()) {
        attention.write_slots = cache.write_slots.data();
        attention.scores = scores_.data();
      }
      CUBEFORGE_TRY(attention_decode(attention, stream));
      if (evicting()) {
        KvBudgetArgs budget;
        budget.batch = batch_;
        budget.heads = c_.heads;
        budget.capacity = cache.capacity;
        budget.fixed_slots = block.dual ? S : 0;
        budget.budget = options_.kv_cache.budget;
        budget.position = step_.data();
        budget.scores = scores_.data();
        budget.attention = cache.attention.data();
        budget.slot_positions = cache.slot_positions.data();
        budget.write_slots = cache.write_slots.data();
        CUBEFORGE_TRY(kv_budget_update(budget, stream));
      }
    }

    const PostAttentionWeights& post = block.post_x;
    MatvecArgs projection = matvec_args(post.proj, post.proj_bias, attended_.data(), x_.data());
    projection.residual = x_.data();
    CUBEFORGE_TRY(matvec(projection, stream));
    MatvecArgs swiglu = matvec_args(post.gate_up, post.gate_up_bias, x_.data(), hidden_.data());
    swiglu.rows = F;
    swiglu.up_weight = post.gate_up.rows_from(F);
    swiglu.up_scales = post.gate_up.scales_from(F);
    swiglu.up_offsets = post.gate_up.offsets_from(F);
    swiglu.up_bias = post.gate_up_bias.size() ? post.gate_up_bias.data() + F : nullptr;
    swiglu.swiglu = true;
    swiglu.input_layer_norm_eps = c_.eps;
    CUBEFORGE_TRY(matvec(swiglu, stream));
    MatvecArgs down = matvec_args(post.down, post.down_bias, hidden_.data(), x_.data());
    down.residual = x_.data();
    CUBEFORGE_TRY(matvec(down, stream));
  }
  MatvecArgs head = matvec_args(w_.lm_head, DeviceBuffer<float>(), x_.data(), logits_.data());
  head.input_layer_norm_eps = c_.eps;
  CUBEFORGE_TRY(matvec(head, stream));
  return sample(stream);
}

LowRankStoreArgs CudaTokenSession::low_rank_store_args(LayerCache& cache) const {
  LowRankStoreArgs store;
  store.batch = batch_;
  store.heads = c_.heads;
  store.head_dim = head_dim();
  store.rank = rank();
  store.source_keys = prefill_keys_.data();
  store.source_values = prefill_values_.data();
  store.source_capacity = prefill_capacity_;
  store.key_basis = cache.key_basis.data();
  store.value_basis = cache.value_basis.data();
  store.form = form_;
  store.key_cache = cache.keys.data();
  store.value_cache = cache.values.data();
  store.scales = cache.scales();
  store.cache_capacity = cache.capacity;
  return store;
}

// One block's attention under a KV rank, as the CPU's LayerKvCache: the new
// key and value (rotated) are compressed into the cache before the query
// attends; the query heads go into the latent space, attend over the one
// latent head at the model's 1/sqrt(D), and come back per head into attended_.
Status CudaTokenSession::low_rank_attention(const BlockWeights& block, LayerCache& cache, Stream stream) {
  const int S = cond_, R = rank(), slot_offset = block.dual ? S : 0;
  QkNormRopeArgs rope = rope_args(block.pre_x, qkv_.data(), 1, cache);
  rope.position = step_.data();
  rope.cache_slot_offset = slot_offset;
  rope.query_out = rotated_query_.data();
  CUBEFORGE_TRY(qk_norm_rope_cache_write(rope, stream));

  LowRankStoreArgs store = low_rank_store_args(cache);
  store.position = step_.data();
  store.slot_offset = slot_offset;
  CUBEFORGE_TRY(low_rank_kv_store(store, stream));

  ProjectHeadsArgs into;
  into.batch = batch_;
  into.heads = c_.heads;
  into.rows = R;
  into.cols = head_dim();
  into.weights = cache.key_heads.data();
  into.input = rotated_query_.data();
  into.output = latent_query_.data();
  CUBEFORGE_TRY(project_heads(into, stream));

  AttentionDecodeArgs attention;
  attention.batch = batch_;
  attention.heads = c_.heads;
  attention.head_dim = R;
  attention.query = latent_query_.data();
  attention.shared_kv_head = true;
  attention.scale = float(1.0 / std::sqrt(double(head_dim())));
  attention.cache_form = form_;
  attention.key_cache = cache.keys.data();
  attention.value_cache = cache.values.data();
  attention.cache_scales = cache.scales();
  attention.cache_capacity = cache.capacity;
  attention.position = step_.data();
  attention.length_offset = slot_offset + 1;
  attention.output = latent_out_.data();
  attention.workspace = workspace_.data();
  attention.workspace_bytes = workspace_.bytes();
  CUBEFORGE_TRY(attention_decode(attention, stream));

  ProjectHeadsArgs back;
  back.batch = batch_;
  back.heads = c_.heads;
  back.rows = head_dim();
  back.cols = R;
  back.weights = cache.value_heads.data();
  back.input = latent_out_.data();
  back.output = attended_.data();
  return project_heads(back, stream);
}

Status CudaTokenSession::sample(Stream stream) {
  CfgSampleArgs args;
  args.logits = logits_.data();
  args.logits_stride = vocab_rows();
  args.rows = batch_;
  args.vocab = c_.codes;
  args.guidance_scale = options_.guidance_scale;
  args.total_steps = tokens_;
  args.step = step_.data();
  args.advance_step = true;
  args.sampling = options_.sampling;
  args.tokens = tokens_out_.data();
  args.host_ring = ring_.device_data();
  args.host_ring_capacity = tokens_;
  args.host_ring_count = ring_count_.device_data();
  args.forced_tokens = forced_.size() ? forced_.data() : nullptr;
  args.input_tokens = input_tokens_.data();
  args.embedding_type = DType::kF32;
  args.embedding = w_.token_embedding.data();
  args.embedding_dim = d();
  args.next_input = x_.data();
  args.next_input_stride = d();
  args.next_input_rows = batch_;
  args.logits_history = logits_history_.size() ? logits_history_.data() : nullptr;
  args.combined_history = combined_history_.size() ? combined_history_.data() : nullptr;
  return cfg_sample_and_embed(args, stream);
}

Status CudaTokenSession::prefill(std::span<const float> cond_rows) {
  if (cond_rows.size() != cond_input_.size())
    return make_error(ErrorCode::kInvalidArgument, "the condition rows have " + std::to_string(cond_rows.size()) +
                                                       " values, the session expects " +
                                                       std::to_string(cond_input_.size()));
  if (requested_ > 0) return make_error(ErrorCode::kInvalidArgument, "prefill runs once per session");
  const Stream stream = stream_.get();
  // A pageable source: the copy is staged before this call returns.
  CUBEFORGE_TRY(cuda_status(cudaMemcpyAsync(cond_input_.data(), cond_rows.data(), cond_input_.bytes(),
                                               cudaMemcpyHostToDevice, stream),
                               "upload of the condition rows"));
  CUBEFORGE_TRY(cuda_status(cudaMemsetAsync(step_.data(), 0, sizeof(int), stream), "reset of the step"));
  CUBEFORGE_TRY(run_prefill(1, stream));
  CUBEFORGE_TRY(sample(stream));
  requested_ = 1;
  return ok_status();
}

Status CudaTokenSession::enqueue_one_step() {
  const long long before = kernel_launches();
  if (options_.use_kv_cache) {
    CUBEFORGE_TRY(graph_->launch());
  } else {
    CUBEFORGE_TRY(run_prefill(requested_ + 1, stream_.get()));
    CUBEFORGE_TRY(sample(stream_.get()));
  }
  if (stats_.kernel_launches_per_step == 0) stats_.kernel_launches_per_step = int(kernel_launches() - before);
  ++requested_;
  return ok_status();
}

Status CudaTokenSession::enqueue_steps(int count) {
  if (requested_ == 0) return make_error(ErrorCode::kInvalidArgument, "enqueue_steps before prefill");
  if (count < 0 || requested_ + count > tokens_)
    return make_error(ErrorCode::kInvalidArgument, "the session was opened for " + std::to_string(tokens_) + " tokens");
  for (int i = 0; i < count; ++i) CUBEFORGE_TRY(enqueue_one_step());
  return ok_status();
}

Status CudaTokenSession::wait_for_token() {
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  for (int round = 0;; ++round) {
    const int count = landed();
    if (count > read_ || count >= requested_) return ok_status();
    const cudaError_t state = cudaStreamQuery(stream_.get());
    if (state == cudaSuccess) {
      if (landed() > read_) return ok_status();
      return make_error(ErrorCode::kInternal, "the decode stream finished without writing token " +
                                                  std::to_string(read_) + " to the ring");
    }
    if (state != cudaErrorNotReady) return cuda_status(state, "decode step");
    // Spin briefly (a step takes well under a millisecond on a data-centre
    // GPU), then sleep in short slices so a slow step costs no core.
    if (round < 2000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (Clock::now() - started > std::chrono::minutes(10))
        return make_error(ErrorCode::kInternal, "no token for ten minutes: the device stopped making progress");
    }
  }
}

Status CudaTokenSession::read_tokens(std::vector<int>& tokens) {
  const int count = landed();  // acquire: the ring entries below it are visible
  for (int i = read_; i < count; ++i) tokens.push_back(ring_.host_data()[i]);
  read_ = std::max(read_, count);
  return ok_status();
}

Result<StepLogits> CudaTokenSession::step_logits(int step) {
  if (!options_.record_logits) return make_error(ErrorCode::kInvalidArgument, "the session does not record logits");
  if (step < 0 || step >= landed())
    return make_error(ErrorCode::kInvalidArgument, "step " + std::to_string(step) + " has not landed");
  StepLogits logits;
  logits.raw.resize(std::size_t(batch_) * vocab_rows());
  logits.combined.resize(std::size_t(c_.codes));
  const Stream stream = stream_.get();
  CUBEFORGE_TRY(cuda_status(
      cudaMemcpyAsync(logits.raw.data(), logits_history_.data() + std::size_t(step) * logits.raw.size(),
                      logits.raw.size() * sizeof(float), cudaMemcpyDeviceToHost, stream),
      "download of logits"));
  CUBEFORGE_TRY(cuda_status(
      cudaMemcpyAsync(logits.combined.data(), combined_history_.data() + std::size_t(step) * logits.combined.size(),
                      logits.combined.size() * sizeof(float), cudaMemcpyDeviceToHost, stream),
      "download of logits"));
  CUBEFORGE_TRY(cuda_status(cudaStreamSynchronize(stream), "download of logits"));
  return logits;
}

// The shape of model the kernels take: head sizes, the sampler's vocabulary,
// the width the vectorised loads need.
Status model_runs_on_cuda(const GptConfig& c) {
  if (!head_dim_supported(c.head_dim()))
    return make_error(ErrorCode::kUnsupported, "the CUDA backend runs head dimensions that are " + supported_head_dims() +
                                                   "; this model's is " + std::to_string(c.head_dim()));
  if (c.codes > kMaxSamplingVocab)
    return make_error(ErrorCode::kUnsupported, "the CUDA backend samples from at most " +
                                                   std::to_string(kMaxSamplingVocab) + " codes; this model has " +
                                                   std::to_string(c.codes));
  if (c.width % 8 != 0)
    return make_error(ErrorCode::kUnsupported, "the CUDA backend needs a width that is a multiple of 8; this model's is " +
                                                   std::to_string(c.width));
  return ok_status();
}

class CudaTokenBackend final : public TokenBackend {
 public:
  CudaTokenBackend(const DualStreamGpt& model, GptWeights weights, std::string device)
      : model_(model), weights_(std::move(weights)), device_(std::move(device)) {}

  BackendKind kind() const override { return BackendKind::kCuda; }
  std::string description() const override { return "CUDA (" + device_ + ")"; }
  const DualStreamGpt& model() const override { return model_; }
  Status supports(const BackendRequest& request) const override { return cuda::supports(model_.config(), request); }

  Result<std::unique_ptr<TokenSession>> open_session(const TokenSessionOptions& options) const override {
    CUBEFORGE_TRY(check_token_session_options(model_, options));
    CUBEFORGE_TRY(supports(BackendRequest{options, DecodingMode::kSequential, options.trace != nullptr}));
    auto session = std::make_unique<CudaTokenSession>(weights_, options);
    CUBEFORGE_TRY(session->open());
    return std::unique_ptr<TokenSession>(std::move(session));
  }

  // The decode step evaluates one position; supports() says so for every
  // parallel strategy, and is the one place that does.
  Result<std::unique_ptr<DecodingSession>> open_decoding_session(const DecodingSessionOptions& options,
                                                                 std::span<const float> cond,
                                                                 std::span<const float> uncond) const override {
    CUBEFORGE_TRY(check_decoding_session_options(model_, options, cond, uncond));
    CUBEFORGE_TRY(supports(decoding_session_request(options, !uncond.empty())));
    return make_error(ErrorCode::kInternal, std::string("the CUDA backend's supports() accepts ") +
                                                decoding_mode_name(options.decoding) +
                                                " decoding, which it has no session for");
  }

  Result<BandwidthFigures> measure_bandwidth() const override {
    CUBEFORGE_ASSIGN_OR_RETURN(BandwidthReport report, measure_device_bandwidth());
    return BandwidthFigures{report.read_gb_per_s, report.copy_gb_per_s};
  }

  double weight_bytes() const override { return double(weights_.decode_bytes); }

 private:
  const DualStreamGpt& model_;
  GptWeights weights_;
  std::string device_;
};

}  // namespace

// The CUDA backend's one statement of what it runs. The KV cache: any stored
// form (f32, bf16, fp8, int8), every position or a budget's, full rank or a
// rank its decode attention takes as a head size (every query head attends
// over one head of R latents) without a budget.
Status supports(const GptConfig& config, const BackendRequest& request) {
  CUBEFORGE_TRY(model_runs_on_cuda(config));
  const DecodeOptions& decode = request.decode;
  if (request.decoding != DecodingMode::kSequential)
    return option_error(ErrorCode::kUnsupported, OptionKey::kDecoding,
                        std::string("the CUDA backend decodes one token per step; ") +
                            (request.decoding == DecodingMode::kJacobi ? "exact parallel decoding" : "block diffusion") +
                            " runs on the CPU backend");
  if (request.trace)
    return option_error(ErrorCode::kUnsupported, OptionKey::kTrace,
                        "the CUDA backend records no named intermediates; a trace runs on the CPU backend");
  if (!decode.use_kv_cache) return ok_status();
  const KvCacheOptions& kv = decode.kv_cache;
  const int rank = kv.low_rank ? kv.low_rank->rank() : kv.rank;
  if (rank > 0 && !head_dim_supported(rank))
    return option_error(ErrorCode::kUnsupported, OptionKey::kKvRank,
                        "the CUDA backend runs KV ranks that are " + supported_head_dims() +
                            " (its attention's head sizes); a rank of " + std::to_string(rank) +
                            " runs on the CPU backend");
  if (rank > 0 && kv.budget > 0)
    return option_error(ErrorCode::kUnsupported, OptionKey::kKvBudget,
                        "the CUDA backend runs a KV rank (" + std::to_string(rank) + ") or a KV budget (" +
                            std::to_string(kv.budget) + "), not both; together they run on the CPU backend");
  return ok_status();
}

Result<std::shared_ptr<TokenBackend>> open_token_backend(const DualStreamGpt& model) {
  CUBEFORGE_TRY(model_runs_on_cuda(model.config()));
  CUBEFORGE_TRY(load_gemm_library());
  CUBEFORGE_ASSIGN_OR_RETURN(GptWeights weights, upload_gpt_weights(model));
  return std::shared_ptr<TokenBackend>(std::make_shared<CudaTokenBackend>(model, std::move(weights), device_summary()));
}

}  // namespace cubeforge::cuda
