// The DualStreamRoformer's forward on the CPU: prefill, and the evaluation of
// new shape positions over the KV cache (one-token decode is one of them).
#include "inference/cpu_backend/gpt_session.h"

#include <algorithm>
#include <cstring>

#include "inference/cpu_backend/gpt_kv_cache.h"
#include "inference/model/gpt_layers.h"
#include "inference/tensor/trace.h"

namespace cubeforge {

namespace {

constexpr float kQkNormEps = 1e-5f;  // per-head RMSNorm eps (fixed in the reference)

}  // namespace

struct GptSession::State {
  const DualStreamGpt::Weights* w = nullptr;
  int batch = 1;
  int cond_length = 0;
  int capacity = 0;  // shape positions the session decodes
  int filled = 0;
  bool prefilled = false;  // the condition's keys and values are in the cache
  AttentionMode mode = AttentionMode::kCausal;
  KvCacheOptions kv;
  // Per layer, per batch row (index layer * batch + row): dual layers cache
  // the S cond rows first, then shape positions; single layers shape
  // positions only. Keys are stored rotated.
  std::vector<LayerKvCache> caches;
  TraceSink* trace = nullptr;  // null unless a trace was asked for
  // Scratch, sized for the largest use (prefill rows or the decode batch).
  std::vector<float> normed, qk, v, attn, mlp_gate, mlp_up, queries;
  // Prefill's keys and values of one batch row, [S + L, d]: its attention
  // reads them exact, whatever form the cache keeps.
  std::vector<float> prefill_keys, prefill_values;

  int d() const { return w->config.width; }
  LayerKvCache& cache(size_t layer, int b) { return caches[layer * size_t(batch) + size_t(b)]; }
  void reserve_rows(int rows) {
    const size_t n = size_t(rows) * size_t(d());
    if (normed.size() >= n) return;
    normed.resize(n);
    qk.resize(2 * n);
    v.resize(n);
    attn.resize(n);
    mlp_gate.resize(4 * n);
    mlp_up.resize(4 * n);
    queries.resize(n);
  }
};

GptSession::GptSession(const DualStreamGpt& model, int batch, int cond_length, int max_shape_tokens,
                       AttentionMode mode, const KvCacheOptions& kv)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.w = &model.weights();
  s.batch = batch;
  s.cond_length = cond_length;
  s.capacity = max_shape_tokens;
  s.mode = mode;
  s.kv = kv;
  const size_t layers = s.w->dual.size() + s.w->single.size();
  const GptConfig& c = s.w->config;
  s.caches.reserve(layers * size_t(batch));
  for (size_t l = 0; l < layers; ++l)
    for (int b = 0; b < batch; ++b)
      s.caches.emplace_back(s.kv, l, l < s.w->dual.size() ? cond_length : 0, max_shape_tokens, c.heads, c.head_dim());
}

GptSession::~GptSession() = default;
GptSession::GptSession(GptSession&&) noexcept = default;

int GptSession::batch() const { return state_->batch; }
int GptSession::cond_length() const { return state_->cond_length; }
int GptSession::capacity() const { return state_->capacity; }
int GptSession::filled() const { return state_->filled; }
void GptSession::set_trace(TraceSink* sink) { state_->trace = sink; }

Status GptSession::read_cache(int layer, int row, std::vector<float>* keys, std::vector<float>* values) const {
  const State& s = *state_;
  const size_t layers = s.w->dual.size() + s.w->single.size();
  if (layer < 0 || size_t(layer) >= layers || row < 0 || row >= s.batch)
    return make_error(ErrorCode::kInvalidArgument, "no KV cache for layer " + std::to_string(layer) + ", row " +
                                                       std::to_string(row));
  s.caches[size_t(layer) * size_t(s.batch) + size_t(row)].read(keys, values);
  return ok_status();
}

double GptSession::kv_cache_bytes() const {
  double bytes = 0;
  for (const LayerKvCache& cache : state_->caches) bytes += cache.bytes_read();
  return bytes;
}

namespace {

using State = GptSession::State;

// How a pass runs its products: prefill through linear() (BLAS for many
// rows), evaluated positions through linear_rows(), whose rows have the same
// bits however many run together.
struct Products {
  decltype(&cpu::linear) linear;
  decltype(&cpu::linear_accumulate) accumulate;
};
constexpr Products kPrefillProducts{cpu::linear, cpu::linear_accumulate};
constexpr Products kRowProducts{cpu::linear_rows, cpu::linear_rows_accumulate};

// x += c_proj(attn); x += down(silu(gate(ln(x))) * up(ln(x))) over
// batch * positions rows. `at` and `norm` name the points when tracing.
void post_attention(State& s, const PostAttention& post, float* x, const float* attn, int batch, int positions,
                    const TracePrefix& at, std::string_view norm, const Products& products = kPrefillProducts) {
  const int d = s.d(), rows = batch * positions;
  const float eps = s.w->config.eps;
  trace_tensor(s.trace, at, "attn", attn, {batch, positions, d});
  products.accumulate(attn, rows, post.proj.weight, post.proj.bias_data(), x);
  trace_tensor(s.trace, at, "attn_residual", x, {batch, positions, d});
  cpu::layer_norm(x, rows, d, eps, nullptr, nullptr, s.normed.data());
  trace_tensor(s.trace, at, norm, s.normed.data(), {batch, positions, d});
  products.linear(s.normed.data(), rows, post.gate.weight, post.gate.bias_data(), s.mlp_gate.data());
  products.linear(s.normed.data(), rows, post.up.weight, post.up.bias_data(), s.mlp_up.data());
  cpu::swiglu_inplace(s.mlp_gate.data(), s.mlp_up.data(), int64_t(rows) * 4 * d);
  trace_tensor(s.trace, at, "mlp_hidden", s.mlp_gate.data(), {batch, positions, 4 * d});
  products.accumulate(s.mlp_gate.data(), rows, post.down.weight, post.down.bias_data(), x);
  trace_tensor(s.trace, at, "out", x, {batch, positions, d});
}

// Projects normed rows into q (when present), k and v; applies the per-head
// norms. Output: qk [rows, 2d] (q | k) or, without a query, k in the first d
// columns of qk rows; v [rows, d].
void project_qkv(State& s, const PreAttention& pre, const float* normed, int rows, float* qk, float* v,
                 const Products& products = kPrefillProducts) {
  const int d = s.d(), hd = s.w->config.head_dim(), heads = s.w->config.heads;
  const int stride = 2 * d;
  if (pre.has_query) {
    products.linear(normed, rows, pre.qk.weight, pre.qk.bias_data(), qk);
    cpu::rms_norm_heads(qk, rows, heads, hd, stride, kQkNormEps, pre.q_norm.data());
    cpu::rms_norm_heads(qk + d, rows, heads, hd, stride, kQkNormEps, pre.k_norm.data());
  } else {
    // Keys only: write them into the k half of the [rows, 2d] layout.
    std::vector<float> keys(size_t(rows) * size_t(d));
    products.linear(normed, rows, pre.qk.weight, pre.qk.bias_data(), keys.data());
    for (int r = 0; r < rows; ++r)
      std::memcpy(qk + size_t(r) * stride + d, keys.data() + size_t(r) * d, size_t(d) * sizeof(float));
    cpu::rms_norm_heads(qk + d, rows, heads, hd, stride, kQkNormEps, pre.k_norm.data());
  }
  products.linear(normed, rows, pre.v.weight, pre.v.bias_data(), v);
}

// q (when recorded), k in a [rows, 2d] q|k layout and v [rows, d], for
// rows = batch * positions, under `at`.
void trace_qkv(State& s, const TracePrefix& at, bool with_query, const float* qk, const float* v, int batch,
               int positions) {
  if (!s.trace) return;
  const int d = s.d();
  const int64_t rows = int64_t(batch) * positions;
  if (with_query) trace_rows(s.trace, at, "q", qk, rows, d, 2 * d, {batch, positions, d});
  trace_rows(s.trace, at, "k", qk + d, rows, d, 2 * d, {batch, positions, d});
  trace_tensor(s.trace, at, "v", v, {batch, positions, d});
}

void rotate(State& s, float* rows_data, int rows, int stride, int first_position) {
  std::vector<int32_t> positions(static_cast<size_t>(rows));
  for (int i = 0; i < rows; ++i) positions[size_t(i)] = first_position + i;
  cpu::rope_interleaved(rows_data, rows, s.w->config.heads, s.w->config.head_dim(), stride, positions.data(),
                        s.w->config.rope_theta);
}

void final_logits(State& s, const float* x_rows, int batch, int rows_per_batch, float* logits) {
  const int d = s.d();
  std::vector<float> last(size_t(batch) * size_t(d));
  for (int b = 0; b < batch; ++b)
    cpu::layer_norm(x_rows + (size_t(b) * rows_per_batch + rows_per_batch - 1) * d, 1, d, s.w->config.eps, nullptr,
                    nullptr, last.data() + size_t(b) * d);
  trace_tensor(s.trace, "ln_f", last.data(), {batch, d});
  cpu::linear(last.data(), batch, s.w->lm_head.weight, nullptr, logits);
  trace_tensor(s.trace, "logits", logits, {batch, s.w->config.vocab_size()});
}

}  // namespace

Status GptSession::prefill(std::span<const float> cond, std::span<const float> shape_embeddings, int length,
                           std::span<float> logits) {
  State& s = *state_;
  const int B = s.batch, S = s.cond_length, L = length, d = s.d();
  const GptConfig& cfg = s.w->config;
  if (L < 0 || L > s.capacity)
    return make_error(ErrorCode::kInvalidArgument, "prefill of " + std::to_string(L) +
                                                       " shape positions does not fit a cache of " +
                                                       std::to_string(s.capacity));
  if (cond.size() != size_t(B) * S * d || shape_embeddings.size() != size_t(B) * L * d ||
      logits.size() != (L > 0 ? size_t(B) * cfg.vocab_size() : 0))
    return make_error(ErrorCode::kInvalidArgument, "prefill buffers do not match the session's sizes");
  CUBEFORGE_TRY(check_kv_cache_options(s.kv));
  if (!s.kv.exact() && s.mode == AttentionMode::kReference)
    return make_error(ErrorCode::kInvalidArgument,
                      "the reference's attention quirk runs with the exact KV cache only (f32, no budget, full rank)");
  if (s.kv.budget > 0 && L > s.kv.budget)
    return make_error(ErrorCode::kInvalidArgument, "prefill of " + std::to_string(L) +
                                                       " shape positions does not fit a KV budget of " +
                                                       std::to_string(s.kv.budget));
  for (LayerKvCache& cache : s.caches) cache.clear();
  s.prefill_keys.resize(size_t(S + L) * d);
  s.prefill_values.resize(size_t(S + L) * d);

  std::vector<float> c(cond.begin(), cond.end());                   // [B*S, d]
  std::vector<float> x(shape_embeddings.begin(), shape_embeddings.end());  // [B*L, d]
  s.reserve_rows(B * (S + L));
  std::vector<float> c_qk(size_t(B) * S * 2 * d), c_v(size_t(B) * S * d), c_attn(size_t(B) * S * d);
  std::vector<float> x_qk(size_t(B) * L * 2 * d), x_v(size_t(B) * L * d), x_attn(size_t(B) * L * d);
  const int heads = cfg.heads, hd = cfg.head_dim();
  trace_tensor(s.trace, "condition", c.data(), {B, S, d});
  trace_tensor(s.trace, "shape_embeddings", x.data(), {B, L, d});

  for (size_t l = 0; l < s.w->dual.size(); ++l) {
    const DualBlock& block = s.w->dual[l];
    const TracePrefix at_c{"dual", int(l), "c"}, at_x{"dual", int(l), "x"};
    cpu::layer_norm(c.data(), int64_t(B) * S, d, cfg.eps, nullptr, nullptr, s.normed.data());
    trace_tensor(s.trace, at_c, "ln_2", s.normed.data(), {B, S, d});
    project_qkv(s, block.pre_c, s.normed.data(), B * S, c_qk.data(), c_v.data());
    trace_qkv(s, at_c, block.pre_c.has_query, c_qk.data(), c_v.data(), B, S);
    cpu::layer_norm(x.data(), int64_t(B) * L, d, cfg.eps, nullptr, nullptr, s.normed.data());
    trace_tensor(s.trace, at_x, "ln_1", s.normed.data(), {B, L, d});
    project_qkv(s, block.pre_x, s.normed.data(), B * L, x_qk.data(), x_v.data());
    // Cond tokens sit at rotary position 0 (no rotation); shape rows at 0..L-1.
    for (int b = 0; b < B; ++b) {
      float* rows = x_qk.data() + size_t(b) * L * 2 * d;
      rotate(s, rows, L, 2 * d, 0);      // q
      rotate(s, rows + d, L, 2 * d, 0);  // k
    }
    trace_qkv(s, at_x, true, x_qk.data(), x_v.data(), B, L);
    for (int b = 0; b < B; ++b) {
      float* keys = s.prefill_keys.data();
      float* values = s.prefill_values.data();
      for (int i = 0; i < S; ++i) {
        std::memcpy(keys + size_t(i) * d, c_qk.data() + (size_t(b) * S + i) * 2 * d + d, d * sizeof(float));
        std::memcpy(values + size_t(i) * d, c_v.data() + (size_t(b) * S + i) * d, d * sizeof(float));
      }
      for (int i = 0; i < L; ++i) {
        std::memcpy(keys + size_t(S + i) * d, x_qk.data() + (size_t(b) * L + i) * 2 * d + d, d * sizeof(float));
        std::memcpy(values + size_t(S + i) * d, x_v.data() + (size_t(b) * L + i) * d, d * sizeof(float));
      }
      for (int i = 0; i < S + L; ++i)
        s.cache(l, b).append(i < S ? -1 : i - S, keys + size_t(i) * d, values + size_t(i) * d);
      if (block.pre_c.has_query) {
        // One causal attention over [cond ; shape]: cond rows attend causally too.
        float* q = s.queries.data();
        for (int i = 0; i < S; ++i)
          std::memcpy(q + size_t(i) * d, c_qk.data() + (size_t(b) * S + i) * 2 * d, d * sizeof(float));
        for (int i = 0; i < L; ++i)
          std::memcpy(q + size_t(S + i) * d, x_qk.data() + (size_t(b) * L + i) * 2 * d, d * sizeof(float));
        float* out = s.attn.data();
        cpu::attention(q, S + L, d, keys, values, S + L, d, heads, hd, 0, out, d);
        std::memcpy(c_attn.data() + size_t(b) * S * d, out, size_t(S) * d * sizeof(float));
        // A prefill of the condition alone (block diffusion) has no shape rows to copy.
        if (L > 0)
          std::memcpy(x_attn.data() + size_t(b) * L * d, out + size_t(S) * d, size_t(L) * d * sizeof(float));
      } else {
        cpu::attention(x_qk.data() + size_t(b) * L * 2 * d, L, 2 * d, keys, values, S + L, d, heads, hd, S,
                       x_attn.data() + size_t(b) * L * d, d);
      }
    }
    post_attention(s, block.post_1, x.data(), x_attn.data(), B, L, at_x, "ln_3");
    if (!block.cond_pre_only) post_attention(s, block.post_2, c.data(), c_attn.data(), B, S, at_c, "ln_3");
  }

  for (size_t j = 0; j < s.w->single.size(); ++j) {
    const size_t l = s.w->dual.size() + j;
    const SingleBlock& block = s.w->single[j];
    const TracePrefix at{"single", int(j), {}};
    cpu::layer_norm(x.data(), int64_t(B) * L, d, cfg.eps, nullptr, nullptr, s.normed.data());
    trace_tensor(s.trace, at, "ln_1", s.normed.data(), {B, L, d});
    project_qkv(s, block.pre, s.normed.data(), B * L, x_qk.data(), x_v.data());
    for (int b = 0; b < B; ++b) {
      float* rows = x_qk.data() + size_t(b) * L * 2 * d;
      rotate(s, rows, L, 2 * d, 0);
      rotate(s, rows + d, L, 2 * d, 0);
      float* keys = s.prefill_keys.data();
      float* values = s.prefill_values.data();
      for (int i = 0; i < L; ++i) {
        std::memcpy(keys + size_t(i) * d, rows + size_t(i) * 2 * d + d, d * sizeof(float));
        std::memcpy(values + size_t(i) * d, x_v.data() + (size_t(b) * L + i) * d, d * sizeof(float));
        s.cache(l, b).append(i, keys + size_t(i) * d, values + size_t(i) * d);
      }
      cpu::attention(rows, L, 2 * d, keys, values, L, d, heads, hd, 0, x_attn.data() + size_t(b) * L * d, d);
    }
    trace_qkv(s, at, true, x_qk.data(), x_v.data(), B, L);
    post_attention(s, block.post, x.data(), x_attn.data(), B, L, at, "ln_2");
  }
  s.filled = L;
  s.prefilled = true;
  if (L > 0) final_logits(s, x.data(), B, L, logits.data());
  return ok_status();
}

Status GptSession::decode(std::span<const float> embeddings, std::span<float> logits) {
  const int position = state_->filled;
  const int visible_end = position + 1;
  if (!state_->prefilled || position < 1) return make_error(ErrorCode::kInvalidArgument, "decode before prefill");
  return evaluate(embeddings, position, 1, std::span<const int>(&visible_end, 1), logits);
}

Status GptSession::evaluate(std::span<const float> embeddings, int first, int count, std::span<const int> visible_end,
                            std::span<float> logits) {
  State& s = *state_;
  const int B = s.batch, d = s.d();
  const GptConfig& cfg = s.w->config;
  const int vocab = cfg.vocab_size();
  if (!s.prefilled) return make_error(ErrorCode::kInvalidArgument, "evaluation before prefill");
  if (count < 1 || first < 0 || first > s.filled)
    return make_error(ErrorCode::kInvalidArgument, "evaluation of positions " + std::to_string(first) + ".." +
                                                       std::to_string(first + count - 1) + " leaves a gap after the " +
                                                       std::to_string(s.filled) + " cached positions");
  if (first + count > s.capacity)
    return make_error(ErrorCode::kInvalidArgument, "the KV cache is full (" + std::to_string(s.capacity) + " positions)");
  if (embeddings.size() != size_t(B) * count * d || logits.size() != size_t(B) * count * vocab ||
      visible_end.size() != size_t(count))
    return make_error(ErrorCode::kInvalidArgument, "evaluation buffers do not match the session's sizes");
  const int written = std::max(s.filled, first + count);
  for (int i = 0; i < count; ++i)
    if (visible_end[size_t(i)] < first + i + 1 || visible_end[size_t(i)] > written)
      return make_error(ErrorCode::kInvalidArgument,
                        "position " + std::to_string(first + i) + " cannot see the cache up to " +
                            std::to_string(visible_end[size_t(i)]) + " (itself at least, at most the " +
                            std::to_string(written) + " positions written)");
  // A compressed or evicting cache holds no position in a fixed slot: it
  // decodes one position after the last, seeing all before it.
  if (!s.kv.exact() && (count != 1 || first != s.filled || visible_end[0] != first + 1))
    return make_error(ErrorCode::kInvalidArgument,
                      "parallel decoding needs the exact KV cache (f32, no budget, full rank)");
  const int rows = B * count;  // batch-major: row b * count + i is position first + i of batch row b
  s.reserve_rows(rows);
  std::vector<float> x(embeddings.begin(), embeddings.end());
  trace_tensor(s.trace, "shape_embeddings", x.data(), {B, count, d});
  float* qk = s.qk.data();
  float* v = s.v.data();
  float* attn = s.attn.data();

  // Projects every row and stores its key and value before any row attends:
  // rows of one block see each other.
  auto project_and_store = [&](size_t l, const PreAttention& pre, bool rotate_query, const TracePrefix& at) {
    cpu::layer_norm(x.data(), rows, d, cfg.eps, nullptr, nullptr, s.normed.data());
    trace_tensor(s.trace, at, "ln_1", s.normed.data(), {B, count, d});
    project_qkv(s, pre, s.normed.data(), rows, qk, v, kRowProducts);
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < count; ++i) {
        float* row = qk + size_t(b * count + i) * 2 * d;
        if (rotate_query) rotate(s, row, 1, 2 * d, first + i);
        rotate(s, row + d, 1, 2 * d, first + i);
        s.cache(l, b).append(first + i, row + d, v + size_t(b * count + i) * d);
      }
    trace_qkv(s, at, rotate_query, qk, v, B, count);  // an unrotated query is never read
  };
  auto attend = [&](size_t l, int slot_offset) {
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < count; ++i)
        s.cache(l, b).attend(qk + size_t(b * count + i) * 2 * d, attn + size_t(b * count + i) * d,
                             slot_offset + visible_end[size_t(i)]);
  };

  for (size_t l = 0; l < s.w->dual.size(); ++l) {
    const TracePrefix at{"dual", int(l), "x"};
    project_and_store(l, s.w->dual[l].pre_x, true, at);
    attend(l, s.cond_length);
    post_attention(s, s.w->dual[l].post_1, x.data(), attn, B, count, at, "ln_3", kRowProducts);
  }
  for (size_t j = 0; j < s.w->single.size(); ++j) {
    const size_t l = s.w->dual.size() + j;
    const TracePrefix at{"single", int(j), {}};
    if (s.mode == AttentionMode::kReference) {
      // The reference's cached decode aligns its causal mask top-left, so its
      // one query sees only slot 0: the output is that slot's value.
      project_and_store(l, s.w->single[j].pre, false, at);
      for (int r = 0; r < rows; ++r) s.cache(l, r / count).first_value(attn + size_t(r) * d);
    } else {
      project_and_store(l, s.w->single[j].pre, true, at);
      attend(l, 0);
    }
    post_attention(s, s.w->single[j].post, x.data(), attn, B, count, at, "ln_2", kRowProducts);
  }
  s.filled = written;
  cpu::layer_norm(x.data(), rows, d, cfg.eps, nullptr, nullptr, s.normed.data());
  cpu::linear_rows(s.normed.data(), rows, s.w->lm_head.weight, nullptr, logits.data());
  // One position is named as the prefill's last row is, [B, d]; more are [B, count, d].
  if (count == 1) {
    trace_tensor(s.trace, "ln_f", s.normed.data(), {B, d});
    trace_tensor(s.trace, "logits", logits.data(), {B, vocab});
  } else {
    trace_tensor(s.trace, "ln_f", s.normed.data(), {B, count, d});
    trace_tensor(s.trace, "logits", logits.data(), {B, count, vocab});
  }
  return ok_status();
}

Status GptSession::truncate(int length) {
  State& s = *state_;
  if (length < 0 || length > s.filled)
    return make_error(ErrorCode::kInvalidArgument, "cannot truncate " + std::to_string(s.filled) +
                                                       " cached positions to " + std::to_string(length));
  if (!s.kv.exact())
    return make_error(ErrorCode::kInvalidArgument, "only the exact KV cache (f32, no budget, full rank) forgets positions");
  for (LayerKvCache& cache : s.caches) cache.truncate(length);
  s.filled = length;
  return ok_status();
}

}  // namespace cubeforge
