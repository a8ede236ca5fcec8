// OneDAutoEncoder on the CPU: weight binding, decoder, occupancy queries, encoder.
//
// Layer semantics (read off the reference):
// - Self-attention layer: x += c_proj(attn(LN(x))) with q,k = halves of c_qk,
//   per-head RMSNorm on q and k (eps 1e-5), no mask, no RoPE; x += MLP(LN(x)).
// - Cross-attention layer: x += c_proj(attn(c_q(LN(x)), c_k(LN(c)), c_v(LN(c))));
//   x += MLP(LN(x)). No qk-norm.
// - MLP: down(GELU_erf(up(x))). LayerNorms inside layers have no affine.
// - The occupancy decoder builds its cross-attention layer without passing the
//   configured eps, so its three LayerNorms use PyTorch's default 1e-6; its final
//   ln_f (affine) does use the configured eps.
#include "inference/model/shape_tokenizer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>

#include "inference/core/thread_pool.h"
#include "inference/cpu/occupancy_decoder.h"
#include "inference/cpu/ops.h"
#include "inference/model/weights.h"
#include "inference/tensor/trace.h"

namespace cubeforge {

namespace {

constexpr float kQueryKeyNormEps = 1e-5f;       // RMSNorm default in the reference
constexpr float kCodebookNormEps = 1e-5f;       // bottleneck RMSNorm
constexpr float kDefaultLayerNormEps = 1e-6f;   // layers built without an explicit eps

struct Mlp {
  Linear up, down;
};

struct SelfAttentionLayer {
  Linear query, key;  // the two halves of c_qk
  Linear value, proj;
  std::vector<float> query_norm, key_norm;  // [D]
  Mlp mlp;
};

struct CrossAttentionLayer {
  Linear query, key, value, proj;
  Mlp mlp;
};

struct EncoderLayer {
  bool is_cross = false;
  SelfAttentionLayer self;
  CrossAttentionLayer cross;
};

// Sizes every layer function needs.
struct Dims {
  int64_t width = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
};

// The layers below bind through the model's one WeightBinder (weights.h):
// errors name the file and the tensor.

Result<Mlp> bind_mlp(const WeightBinder& bind, const std::string& prefix) {
  Mlp m;
  CUBEFORGE_ASSIGN_OR_RETURN(m.up, bind.linear(prefix + ".up_proj"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.down, bind.linear(prefix + ".down_proj"));
  return m;
}

Result<SelfAttentionLayer> bind_self_attention(const WeightBinder& bind, const std::string& prefix) {
  SelfAttentionLayer layer;
  CUBEFORGE_ASSIGN_OR_RETURN(Linear query_key, bind.linear(prefix + ".attn.c_qk"));
  // c_qk's rows [0, W) produce q and rows [W, 2W) produce k: two zero-copy
  // views let q and k land in separate dense buffers.
  const int64_t width = query_key.weight.rows / 2;
  const size_t half_bytes = size_t(width) * size_t(query_key.weight.cols) * dtype_size(query_key.weight.dtype);
  layer.query.weight = query_key.weight;
  layer.query.weight.rows = width;
  layer.key.weight = layer.query.weight;
  layer.key.weight.data = static_cast<const std::byte*>(query_key.weight.data) + half_bytes;
  layer.query.bias.assign(query_key.bias.begin(), query_key.bias.begin() + width);
  layer.key.bias.assign(query_key.bias.begin() + width, query_key.bias.end());
  CUBEFORGE_ASSIGN_OR_RETURN(layer.value, bind.linear(prefix + ".attn.c_v"));
  CUBEFORGE_ASSIGN_OR_RETURN(layer.proj, bind.linear(prefix + ".attn.c_proj"));
  CUBEFORGE_ASSIGN_OR_RETURN(layer.query_norm, bind.vector(prefix + ".attn.q_norm.weight"));
  CUBEFORGE_ASSIGN_OR_RETURN(layer.key_norm, bind.vector(prefix + ".attn.k_norm.weight"));
  CUBEFORGE_ASSIGN_OR_RETURN(layer.mlp, bind_mlp(bind, prefix + ".mlp"));
  return layer;
}

Result<CrossAttentionLayer> bind_cross_attention(const WeightBinder& bind, const std::string& prefix) {
  CrossAttentionLayer layer;
  CUBEFORGE_ASSIGN_OR_RETURN(layer.query, bind.linear(prefix + ".attn.c_q"));
  CUBEFORGE_ASSIGN_OR_RETURN(layer.key, bind.linear(prefix + ".attn.c_k"));
  CUBEFORGE_ASSIGN_OR_RETURN(layer.value, bind.linear(prefix + ".attn.c_v"));
  CUBEFORGE_ASSIGN_OR_RETURN(layer.proj, bind.linear(prefix + ".attn.c_proj"));
  CUBEFORGE_ASSIGN_OR_RETURN(layer.mlp, bind_mlp(bind, prefix + ".mlp"));
  return layer;
}

// Carrier phases of the phase-modulated Fourier embedding, rounded as PyTorch
// rounds them: float32 linspace (evaluated from whichever end is nearer), float32 pow.
std::vector<float> fourier_carrier(int num_freqs) {
  auto linspace = [num_freqs](float start, float end, int index) {
    if (num_freqs == 1) return start;
    const float step = (end - start) / float(num_freqs - 1);
    if (index < num_freqs / 2) return start + step * float(index);
    return end - step * float(num_freqs - index - 1);
  };
  const float base = float(double(num_freqs) / 8.0);
  const float pi = std::numbers::pi_v<float>;
  std::vector<float> carrier(static_cast<size_t>(num_freqs));
  for (int f = 0; f < num_freqs; ++f) {
    const float modulation = std::pow(base, linspace(1.f, 0.f, f));
    carrier[size_t(f)] = (modulation + linspace(0.f, 1.f, f)) * 2.f * pi;
  }
  return carrier;
}

// emb = [p, cos(p_i·W[i,f]) + cos(p_i·π/2 + carrier[f]), sin(…) + sin(…)], i major.
// points: [P, 3]; out: [P, 3(2F+1)].
void fourier_embed_rows(const std::vector<float>& weight, const std::vector<float>& carrier, int64_t num_freqs,
                        const float* points, int64_t count, float* out) {
  cpu::fourier_embed(weight.data(), carrier.data(), num_freqs, points, count, out);
}

// Working buffers for the layer functions, grown on demand and reused.
struct Scratch {
  std::vector<float> normed, query, key, value, attended, hidden, scores;

  static float* sized(std::vector<float>& buffer, int64_t count) {
    if (buffer.size() < size_t(count)) buffer.resize(size_t(count));
    return buffer.data();
  }
};

// Unmasked multi-head attention, q: [n, W], keys/values: [s, W], out: [n, W].
// Per head: scores = q·kᵀ/√D through BLAS, the vector softmax, then scores·v
// through BLAS, a block of query rows at a time so the scores stay small.
void attention_all_keys(const float* query, int64_t n, const float* keys, const float* values, int64_t context_len,
                        const Dims& d, float* out, Scratch& s) {
  if (n < 16 || context_len < 16) {  // too small for BLAS to pay off
    cpu::attention(query, n, d.width, keys, values, context_len, d.width, d.heads, d.head_dim, -1, out, d.width);
    return;
  }
  const int64_t W = d.width, D = d.head_dim;
  const float scale = 1.0f / std::sqrt(float(D));
  // Up to 4 M scores (16 MB) per block: few blocks means few hand-overs between
  // the pool's threads, which cost more than cache misses.
  const int64_t block = std::clamp<int64_t>((int64_t(1) << 22) / context_len, 16, n);
  float* scores = Scratch::sized(s.scores, block * context_len);
  for (int64_t row = 0; row < n; row += block) {
    const int64_t rows = std::min(block, n - row);
    for (int64_t h = 0; h < d.heads; ++h) {
      cpu::sgemm(true, rows, context_len, D, scale, query + row * W + h * D, W, keys + h * D, W, 0.f, scores,
                 context_len);
      cpu::softmax_rows(scores, rows, context_len, 1.f);
      cpu::sgemm(false, rows, D, context_len, 1.f, scores, context_len, values + h * D, W, 0.f, out + row * W + h * D,
                 W);
    }
  }
}

// attention_all_keys under a cpu::LatentAttention (occupancy_decoder.h): with
// subsets, each run of rows in one group attends over that group's latents
// where they lie (cpu::attention_over_rows: a group holds a few points, for
// which gathering its latents or a BLAS product per head costs more than the
// arithmetic); without, through BLAS as attention_all_keys does, whatever the
// row count, since the weights are needed. The weights summed over heads go
// to attention.mass when asked for.
void attention_restricted(const float* query, int64_t n, const float* keys, const float* values, int64_t context_len,
                          const Dims& d, const cpu::LatentAttention& attention, float* out, Scratch& s) {
  const int64_t W = d.width, D = d.head_dim;
  if (attention.per_group > 0) {
    const int64_t A = attention.per_group;
    for (int64_t r0 = 0; r0 < n;) {
      const int64_t group = attention.group[r0];
      int64_t r1 = r0 + 1;
      while (r1 < n && attention.group[r1] == group) ++r1;
      cpu::attention_over_rows(query + r0 * W, r1 - r0, keys, values, attention.latents + group * A, A, d.heads, D,
                               out + r0 * W, attention.mass ? attention.mass + r0 * A : nullptr);
      r0 = r1;
    }
    return;
  }
  const float scale = 1.0f / std::sqrt(float(D));
  const int64_t S = context_len;
  const int64_t block = std::clamp<int64_t>((int64_t(1) << 22) / S, 1, std::max<int64_t>(n, 1));
  float* scores = Scratch::sized(s.scores, block * S);
  for (int64_t r0 = 0; r0 < n; r0 += block) {
    const int64_t rows = std::min(block, n - r0);
    for (int64_t h = 0; h < d.heads; ++h) {
      cpu::sgemm(true, rows, S, D, scale, query + r0 * W + h * D, W, keys + h * D, W, 0.f, scores, S);
      cpu::softmax_rows(scores, rows, S, 1.f);
      if (attention.mass) {
        float* mass = attention.mass + r0 * S;
        if (h == 0)
          std::copy_n(scores, rows * S, mass);
        else
          cpu::add_inplace(mass, scores, rows * S);
      }
      cpu::sgemm(false, rows, D, S, 1.f, scores, S, values + h * D, W, 0.f, out + r0 * W + h * D, W);
    }
  }
}

// x += down(GELU(up(LN(x)))) over n rows. `trace` and `at` name the points
// when tracing (inference/tensor/trace.h), as in the layers below.
void mlp_residual(const Mlp& mlp, const Dims& d, float eps, float* x, int64_t n, Scratch& s, TraceSink* trace,
                  const TracePrefix& at) {
  float* normed = Scratch::sized(s.normed, n * d.width);
  cpu::layer_norm_lanes(x, n, d.width, eps, nullptr, nullptr, normed);
  trace_tensor(trace, at, "ln_2", normed, {n, d.width});
  const int64_t hidden_width = mlp.up.out_features();
  float* hidden = Scratch::sized(s.hidden, n * hidden_width);
  mlp.up.apply(normed, n, hidden);
  cpu::gelu_erf_lanes(hidden, n * hidden_width);
  trace_tensor(trace, at, "mlp_hidden", hidden, {n, hidden_width});
  mlp.down.accumulate(hidden, n, x);
  trace_tensor(trace, at, "out", x, {n, d.width});
}

void self_attention_layer(const SelfAttentionLayer& layer, const Dims& d, float eps, float* x, int64_t n,
                          Scratch& s, TraceSink* trace = nullptr, const TracePrefix& at = {}) {
  const int64_t W = d.width;
  float* normed = Scratch::sized(s.normed, n * W);
  cpu::layer_norm_lanes(x, n, W, eps, nullptr, nullptr, normed);
  trace_tensor(trace, at, "ln_1", normed, {n, W});
  float* query = Scratch::sized(s.query, n * W);
  float* key = Scratch::sized(s.key, n * W);
  float* value = Scratch::sized(s.value, n * W);
  layer.query.apply(normed, n, query);
  layer.key.apply(normed, n, key);
  layer.value.apply(normed, n, value);
  cpu::rms_norm_heads(query, n, d.heads, d.head_dim, W, kQueryKeyNormEps, layer.query_norm.data());
  cpu::rms_norm_heads(key, n, d.heads, d.head_dim, W, kQueryKeyNormEps, layer.key_norm.data());
  trace_tensor(trace, at, "q", query, {n, W});
  trace_tensor(trace, at, "k", key, {n, W});
  trace_tensor(trace, at, "v", value, {n, W});
  float* attended = Scratch::sized(s.attended, n * W);
  attention_all_keys(query, n, key, value, n, d, attended, s);
  trace_tensor(trace, at, "attn", attended, {n, W});
  layer.proj.accumulate(attended, n, x);
  trace_tensor(trace, at, "attn_residual", x, {n, W});
  mlp_residual(layer.mlp, d, eps, x, n, s, trace, at);
}

// keys, values: [n, W] from the context rows (LN without affine first).
void cross_attention_context(const CrossAttentionLayer& layer, const Dims& d, float eps, const float* context,
                             int64_t n, float* keys, float* values, Scratch& s) {
  float* normed = Scratch::sized(s.normed, n * d.width);
  cpu::layer_norm_lanes(context, n, d.width, eps, nullptr, nullptr, normed);
  layer.key.apply(normed, n, keys);
  layer.value.apply(normed, n, values);
}

// `restricted`: the occupancy decoder's subsets and attention mass for these
// n rows (cpu::LatentAttention); null or empty attends to every key.
void cross_attention_layer(const CrossAttentionLayer& layer, const Dims& d, float eps, float* x, int64_t n,
                           const float* keys, const float* values, int64_t context_len, Scratch& s,
                           TraceSink* trace = nullptr, const TracePrefix& at = {},
                           const cpu::LatentAttention* restricted = nullptr) {
  const int64_t W = d.width;
  float* normed = Scratch::sized(s.normed, n * W);
  cpu::layer_norm_lanes(x, n, W, eps, nullptr, nullptr, normed);
  trace_tensor(trace, at, "ln_1", normed, {n, W});
  float* query = Scratch::sized(s.query, n * W);
  layer.query.apply(normed, n, query);
  trace_tensor(trace, at, "q", query, {n, W});
  float* attended = Scratch::sized(s.attended, n * W);
  if (restricted && (restricted->per_group > 0 || restricted->mass))
    attention_restricted(query, n, keys, values, context_len, d, *restricted, attended, s);
  else
    attention_all_keys(query, n, keys, values, context_len, d, attended, s);
  trace_tensor(trace, at, "attn", attended, {n, W});
  layer.proj.accumulate(attended, n, x);
  trace_tensor(trace, at, "attn_residual", x, {n, W});
  mlp_residual(layer.mlp, d, eps, x, n, s, trace, at);
}

// y = out(SiLU(in(x))).
void mlp_embed(const Linear& in, const Linear& out, const float* x, int64_t n, float* hidden, float* y) {
  in.apply(x, n, hidden);
  cpu::silu_lanes(hidden, n * in.out_features());
  out.apply(hidden, n, y);
}

Error invalid(const std::string& file, const std::string& what) {
  return make_error(ErrorCode::kInvalidArgument, "shape tokenizer '" + file + "': " + what);
}

// The latents each of P points attends to under `attention` (every one of S
// without subsets), after checking that the subsets and the mass buffer fit.
Result<int64_t> checked_attended_latents(const std::string& file, const LatentAttention& attention, int64_t P,
                                         int64_t S) {
  int64_t attended = S;
  if (const LatentSubsets* subsets = attention.subsets) {
    const int64_t k = subsets->per_group;
    if (k < 1 || k > S)
      return invalid(file, "latent subsets of " + std::to_string(k) + " latents; a subset holds 1 to " +
                               std::to_string(S) + " (the model's latents)");
    if (subsets->latents.size() % size_t(k) != 0)
      return invalid(file, "latent subsets hold " + std::to_string(subsets->latents.size()) +
                               " indices, not a multiple of " + std::to_string(k));
    if (subsets->group.size() != size_t(P))
      return invalid(file, "latent subsets name a group for " + std::to_string(subsets->group.size()) + " of " +
                               std::to_string(P) + " points");
    const int64_t groups = int64_t(subsets->latents.size()) / k;
    for (int32_t group : subsets->group)
      if (group < 0 || group >= groups)
        return invalid(file, "a point's latent group " + std::to_string(group) + " is outside the " +
                                 std::to_string(groups) + " groups given");
    for (int32_t latent : subsets->latents)
      if (latent < 0 || latent >= S)
        return invalid(file, "latent index " + std::to_string(latent) + " is outside the model's " + std::to_string(S) +
                                 " latents");
    attended = k;
  }
  if (!attention.attention_mass.empty() && attention.attention_mass.size() != size_t(P * attended))
    return invalid(file, "attention mass buffer holds " + std::to_string(attention.attention_mass.size()) +
                             " values for " + std::to_string(P) + " points × " + std::to_string(attended) + " latents");
  return attended;
}

// The kernels' view of `attention` for the points from `begin` on.
cpu::LatentAttention attention_from(const LatentAttention& attention, int64_t begin, int64_t attended) {
  cpu::LatentAttention view;
  if (attention.subsets) {
    view.per_group = attention.subsets->per_group;
    view.latents = attention.subsets->latents.data();
    view.group = attention.subsets->group.data() + begin;
  }
  if (!attention.attention_mass.empty()) view.mass = attention.attention_mass.data() + begin * attended;
  return view;
}

}  // namespace

// [N, K] weights in any stored precision → float32 [K, N].
std::vector<float> transposed_f32(const cpu::WeightMatrix& w) {
  std::vector<float> rows(size_t(w.rows * w.cols)), out(rows.size());
  cpu::widen_rows(w, 0, w.rows, rows.data());
  for (int64_t n = 0; n < w.rows; ++n)
    for (int64_t k = 0; k < w.cols; ++k) out[size_t(k * w.rows + n)] = rows[size_t(n * w.cols + k)];
  return out;
}

const float* bias_or_null(const std::vector<float>& bias) { return bias.empty() ? nullptr : bias.data(); }

struct ShapeTokenizer::Model {
  SafetensorsFile file;
  ShapeModelConfig config;
  Dims dims;

  // Bottleneck.
  std::vector<float> codebook;  // [V, E] get_codebook()
  Linear codebook_in;           // c_in: W → E
  Linear codebook_out;          // c_out: E → W
  std::vector<float> codebook_norm;  // [E]

  // Decoder.
  std::vector<float> positional_encodings;  // [T, W]
  std::vector<SelfAttentionLayer> decoder_layers;

  // Occupancy decoder.
  std::vector<float> occupancy_fourier_weight;  // [3, F]
  Linear occupancy_query_in, occupancy_query_out;
  CrossAttentionLayer occupancy_attention;
  std::vector<float> occupancy_norm_weight, occupancy_norm_bias;  // [W]
  Linear occupancy_head;  // W → out_dim

  // The fused occupancy decoder's float32 [in, out] copies of the weights above,
  // when the CPU and the sizes allow it (cpu::occupancy_decoder).
  struct FusedOccupancy {
    std::vector<float> query_in, query_out, query, proj, up, down, head;
    cpu::OccupancyDecoderWeights weights;
  };
  std::optional<FusedOccupancy> fused_occupancy;

  // Encoder.
  std::vector<float> encoder_fourier_weight;  // [3, F]
  std::vector<float> encoder_query;           // [T (+1 cls), W]
  Linear encoder_feature_in, encoder_feature_out;
  std::vector<EncoderLayer> encoder_layers;
  std::vector<float> encoder_norm_weight, encoder_norm_bias;  // [W]

  std::vector<float> carrier;  // [F]

  explicit Model(SafetensorsFile f) : file(std::move(f)) {}
};

ShapeTokenizer::ShapeTokenizer(std::unique_ptr<Model> model) : model_(std::move(model)) {}

void ShapeTokenizer::prepare_fused_occupancy(Model& m) {
  const CrossAttentionLayer& attention = m.occupancy_attention;
  const int64_t hidden = attention.mlp.up.out_features();
  if (m.occupancy_head.out_features() != 1 ||
      !cpu::occupancy_decoder_supported(m.dims.width, m.dims.heads, hidden, m.config.latents, m.config.num_freqs))
    return;
  auto& fused = m.fused_occupancy.emplace();
  fused.query_in = transposed_f32(m.occupancy_query_in.weight);
  fused.query_out = transposed_f32(m.occupancy_query_out.weight);
  fused.query = transposed_f32(attention.query.weight);
  fused.proj = transposed_f32(attention.proj.weight);
  fused.up = transposed_f32(attention.mlp.up.weight);
  fused.down = transposed_f32(attention.mlp.down.weight);
  fused.head = transposed_f32(m.occupancy_head.weight);
  cpu::OccupancyDecoderWeights& w = fused.weights;
  w.width = m.dims.width;
  w.heads = m.dims.heads;
  w.hidden = hidden;
  w.num_freqs = m.config.num_freqs;
  w.layer_eps = kDefaultLayerNormEps;
  w.final_eps = m.config.eps;
  w.fourier_weight = m.occupancy_fourier_weight.data();
  w.carrier = m.carrier.data();
  w.query_in = fused.query_in.data();
  w.query_in_bias = bias_or_null(m.occupancy_query_in.bias);
  w.query_out = fused.query_out.data();
  w.query_out_bias = bias_or_null(m.occupancy_query_out.bias);
  w.query = fused.query.data();
  w.query_bias = bias_or_null(attention.query.bias);
  w.proj = fused.proj.data();
  w.proj_bias = bias_or_null(attention.proj.bias);
  w.up = fused.up.data();
  w.up_bias = bias_or_null(attention.mlp.up.bias);
  w.down = fused.down.data();
  w.down_bias = bias_or_null(attention.mlp.down.bias);
  w.final_norm_weight = m.occupancy_norm_weight.data();
  w.final_norm_bias = m.occupancy_norm_bias.data();
  w.head = fused.head.data();
  w.head_bias = m.occupancy_head.bias.empty() ? 0.f : m.occupancy_head.bias[0];
}
ShapeTokenizer::ShapeTokenizer(ShapeTokenizer&&) noexcept = default;
ShapeTokenizer& ShapeTokenizer::operator=(ShapeTokenizer&&) noexcept = default;
ShapeTokenizer::~ShapeTokenizer() = default;

Result<ShapeTokenizer> ShapeTokenizer::load(const std::filesystem::path& path, const ShapeModelConfig* config,
                                            const std::string& config_name) {
  CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  ShapeModelConfig chosen;
  if (config) {
    chosen = *config;
  } else {
    CUBEFORGE_ASSIGN_OR_RETURN(chosen, infer_shape_config(file));
  }
  return from_file(std::move(file), chosen, config ? config_name : "the sizes inferred from the tensors");
}

Result<ShapeTokenizer> ShapeTokenizer::from_file(SafetensorsFile file, const ShapeModelConfig& config,
                                                 const std::string& config_name) {
  const std::string name = file.name();
  if (config.width <= 0 || config.heads <= 0 || config.width % config.heads != 0)
    return make_error(ErrorCode::kInvalidArgument, "shape model configuration for '" + name + "': width " +
                                                       std::to_string(config.width) + " is not divisible by " +
                                                       std::to_string(config.heads) + " heads");
  if (config.num_freqs <= 0 || config.latents <= 0 || config.codes <= 0 || config.embed_dim <= 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "shape model configuration for '" + name + "' has a non-positive size (num_freqs, latents, codes or embed_dim)");
  if (config.embed_point_feats && config.point_feats != 3)
    return make_error(ErrorCode::kUnsupported, "shape model configuration for '" + name +
                                                   "': embed_point_feats needs point_feats = 3, got " +
                                                   std::to_string(config.point_feats));
  CUBEFORGE_TRY(check_shape_config(config, file, config_name.empty() ? "the shape model configuration" : config_name));

  auto model = std::make_unique<Model>(std::move(file));
  Model& m = *model;
  m.config = config;
  m.dims = Dims{config.width, config.heads, config.head_dim()};
  m.carrier = fourier_carrier(config.num_freqs);
  const WeightBinder bind(m.file);

  // Bottleneck: get_codebook() once, in float32 as the reference computes it.
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> raw_codebook, bind.vector("bottleneck.block.codebook.weight"));
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> cb_weight, bind.vector("bottleneck.block.cb_weight"));
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> cb_bias, bind.vector("bottleneck.block.cb_bias"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.codebook_norm, bind.vector("bottleneck.block.norm.weight"));
  const int64_t E = config.embed_dim;
  for (int64_t v = 0; v < config.codes; ++v)
    for (int64_t e = 0; e < E; ++e) {
      float& value = raw_codebook[size_t(v * E + e)];
      value = value * cb_weight[size_t(e)] + cb_bias[size_t(e)];
    }
  m.codebook.resize(raw_codebook.size());
  cpu::rms_norm(raw_codebook.data(), config.codes, E, kCodebookNormEps, m.codebook_norm.data(), m.codebook.data());
  CUBEFORGE_ASSIGN_OR_RETURN(m.codebook_in, bind.linear("bottleneck.block.c_in"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.codebook_out, bind.linear("bottleneck.block.c_out"));

  CUBEFORGE_ASSIGN_OR_RETURN(m.positional_encodings, bind.vector("decoder.positional_encodings"));
  for (int i = 0; i < config.decoder_layers; ++i) {
    CUBEFORGE_ASSIGN_OR_RETURN(SelfAttentionLayer layer,
                               bind_self_attention(bind, "decoder.blocks." + std::to_string(i)));
    m.decoder_layers.push_back(std::move(layer));
  }

  CUBEFORGE_ASSIGN_OR_RETURN(m.occupancy_fourier_weight, bind.vector("occupancy_decoder.embedder.weight"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.occupancy_query_in, bind.linear("occupancy_decoder.query_in.in_layer"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.occupancy_query_out, bind.linear("occupancy_decoder.query_in.out_layer"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.occupancy_attention, bind_cross_attention(bind, "occupancy_decoder.attn_out"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.occupancy_norm_weight, bind.vector("occupancy_decoder.ln_f.weight"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.occupancy_norm_bias, bind.vector("occupancy_decoder.ln_f.bias"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.occupancy_head, bind.linear("occupancy_decoder.c_head"));
  prepare_fused_occupancy(m);

  CUBEFORGE_ASSIGN_OR_RETURN(m.encoder_fourier_weight, bind.vector("encoder.embedder.weight"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.encoder_query, bind.vector("encoder.query"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.encoder_feature_in, bind.linear("encoder.feat_in.in_layer"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.encoder_feature_out, bind.linear("encoder.feat_in.out_layer"));
  const auto& cross_levels = config.encoder_cross_attention_levels;
  for (int i = 0; i < config.encoder_layers; ++i) {
    const std::string prefix = "encoder.blocks." + std::to_string(i);
    EncoderLayer layer;
    layer.is_cross = std::find(cross_levels.begin(), cross_levels.end(), i) != cross_levels.end();
    if (layer.is_cross) {
      CUBEFORGE_ASSIGN_OR_RETURN(layer.cross, bind_cross_attention(bind, prefix));
    } else {
      CUBEFORGE_ASSIGN_OR_RETURN(layer.self, bind_self_attention(bind, prefix));
    }
    m.encoder_layers.push_back(std::move(layer));
  }
  CUBEFORGE_ASSIGN_OR_RETURN(m.encoder_norm_weight, bind.vector("encoder.ln_f.weight"));
  CUBEFORGE_ASSIGN_OR_RETURN(m.encoder_norm_bias, bind.vector("encoder.ln_f.bias"));
  return ShapeTokenizer(std::move(model));
}

const ShapeModelConfig& ShapeTokenizer::config() const { return model_->config; }
bool ShapeTokenizer::fused_occupancy_available() const { return model_->fused_occupancy.has_value(); }
const std::string& ShapeTokenizer::file_name() const { return model_->file.name(); }
const std::vector<float>& ShapeTokenizer::codebook() const { return model_->codebook; }

Result<std::vector<float>> ShapeTokenizer::decode_tokens(std::span<const int64_t> tokens,
                                                         std::vector<float>* z_q_out, TraceSink* trace) const {
  const Model& m = *model_;
  const int64_t T = int64_t(tokens.size());
  const int64_t W = m.dims.width, E = m.config.embed_dim;
  if (T < 1 || T > m.config.latents)
    return invalid(file_name(), "decode needs 1 to " + std::to_string(m.config.latents) + " tokens, got " +
                                    std::to_string(T));
  std::vector<float> rows(size_t(T * E));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t id = std::clamp<int64_t>(tokens[size_t(t)], 0, m.config.codes - 1);
    std::copy_n(m.codebook.begin() + id * E, E, rows.begin() + t * E);
  }
  std::vector<float> x(size_t(T * W));
  m.codebook_out.apply(rows.data(), T, x.data());
  if (z_q_out) *z_q_out = x;
  trace_tensor(trace, "decoder.z_q", x.data(), {T, W});
  cpu::add_inplace(x.data(), m.positional_encodings.data(), T * W);
  trace_tensor(trace, "decoder.input", x.data(), {T, W});
  Scratch scratch;
  for (size_t i = 0; i < m.decoder_layers.size(); ++i)
    self_attention_layer(m.decoder_layers[i], m.dims, m.config.eps, x.data(), T, scratch, trace,
                         TracePrefix{"decoder", int(i), {}});
  trace_tensor(trace, "decoder.latents", x.data(), {T, W});
  return x;
}

Result<PreparedLatents> ShapeTokenizer::prepare_latents(std::span<const float> latents) const {
  const Model& m = *model_;
  const int64_t W = m.dims.width;
  if (latents.empty() || latents.size() % size_t(W) != 0)
    return invalid(file_name(), "latents hold " + std::to_string(latents.size()) +
                                    " values, expected a non-empty multiple of width " + std::to_string(W));
  PreparedLatents prepared;
  prepared.latent_count = int64_t(latents.size()) / W;
  prepared.width = W;
  prepared.keys.resize(latents.size());
  prepared.values.resize(latents.size());
  Scratch scratch;
  cross_attention_context(m.occupancy_attention, m.dims, kDefaultLayerNormEps, latents.data(),
                          prepared.latent_count, prepared.keys.data(), prepared.values.data(), scratch);
  return prepared;
}

Status ShapeTokenizer::occupancy(const PreparedLatents& latents, std::span<const float> points_xyz,
                                 std::span<float> logits, size_t chunk, const Progress& progress, TraceSink* trace,
                                 const LatentAttention& attention) const {
  const Model& m = *model_;
  const int64_t W = m.dims.width;
  const int64_t out_dim = m.occupancy_head.out_features();
  if (latents.width != W || latents.latent_count <= 0 ||
      latents.keys.size() != size_t(latents.latent_count * W) || latents.values.size() != latents.keys.size())
    return invalid(file_name(), "prepared latents do not belong to this model (width " + std::to_string(latents.width) +
                                    ", expected " + std::to_string(W) + ")");
  if (points_xyz.size() % 3 != 0)
    return invalid(file_name(), "query points hold " + std::to_string(points_xyz.size()) +
                                    " values, not a multiple of 3 (x, y, z)");
  const int64_t P = int64_t(points_xyz.size() / 3);
  if (logits.size() != size_t(P * out_dim))
    return invalid(file_name(), "logits buffer holds " + std::to_string(logits.size()) + " values for " +
                                    std::to_string(P) + " points × " + std::to_string(out_dim) + " outputs");
  if (chunk == 0) return invalid(file_name(), "occupancy chunk size must be positive");
  CUBEFORGE_ASSIGN_OR_RETURN(const int64_t attended,
                             checked_attended_latents(file_name(), attention, P, latents.latent_count));
  // A trace names each point once: all points in one chunk, layer at a time.
  const int64_t rows = trace ? std::max<int64_t>(P, 1) : std::min<int64_t>(int64_t(chunk), std::max<int64_t>(P, 1));
  if (m.fused_occupancy && use_fused_occupancy_ && !trace) {
    for (int64_t begin = 0; begin < P; begin += rows) {
      const int64_t n = std::min(rows, P - begin);
      cpu::occupancy_decoder(m.fused_occupancy->weights, latents.keys.data(), latents.values.data(),
                             latents.latent_count, points_xyz.data() + begin * 3, n, logits.data() + begin,
                             attention_from(attention, begin, attended));
      if (progress && !progress(begin + n, P))
        return make_error(ErrorCode::kCancelled, "occupancy query stopped after " + std::to_string(begin + n) +
                                                     " of " + std::to_string(P) + " points");
    }
    return ok_status();
  }
  const int64_t fourier_dim = m.config.fourier_dim();
  // Meshing calls this thousands of times from the pool's threads, a few thousand
  // points each. Buffers of that size are fresh pages on every allocation (page
  // faults and zeroing were about a seventh of the occupancy time), so each thread
  // keeps its own and grows them on demand.
  thread_local Scratch scratch;
  thread_local std::vector<float> embedded_buffer, x_buffer;
  float* embedded = Scratch::sized(embedded_buffer, rows * fourier_dim);
  float* x = Scratch::sized(x_buffer, rows * W);
  const TracePrefix at{"occupancy", -1, {}};
  trace_tensor(trace, "occupancy.points", points_xyz.data(), {P, 3});
  trace_tensor(trace, "occupancy.k", latents.keys.data(), {latents.latent_count, W});
  trace_tensor(trace, "occupancy.v", latents.values.data(), {latents.latent_count, W});
  for (int64_t begin = 0; begin < P; begin += rows) {
    const int64_t n = std::min(rows, P - begin);
    fourier_embed_rows(m.occupancy_fourier_weight, m.carrier, m.config.num_freqs, points_xyz.data() + begin * 3, n,
                       embedded);
    trace_tensor(trace, "occupancy.fourier", embedded, {n, fourier_dim});
    float* hidden = Scratch::sized(scratch.hidden, n * W);
    mlp_embed(m.occupancy_query_in, m.occupancy_query_out, embedded, n, hidden, x);
    trace_tensor(trace, "occupancy.query", x, {n, W});
    const cpu::LatentAttention restricted = attention_from(attention, begin, attended);
    cross_attention_layer(m.occupancy_attention, m.dims, kDefaultLayerNormEps, x, n, latents.keys.data(),
                          latents.values.data(), latents.latent_count, scratch, trace, at, &restricted);
    float* normed = Scratch::sized(scratch.normed, n * W);
    cpu::layer_norm_lanes(x, n, W, m.config.eps, m.occupancy_norm_weight.data(), m.occupancy_norm_bias.data(), normed);
    trace_tensor(trace, "occupancy.ln_f", normed, {n, W});
    m.occupancy_head.apply(normed, n, logits.data() + begin * out_dim);
    trace_tensor(trace, "occupancy.logits", logits.data() + begin * out_dim, {n, out_dim});
    if (progress && !progress(begin + n, P))
      return make_error(ErrorCode::kCancelled, "occupancy query stopped after " + std::to_string(begin + n) + " of " +
                                                   std::to_string(P) + " points");
  }
  return ok_status();
}

Status ShapeTokenizer::occupancy(std::span<const float> latents, std::span<const float> points_xyz,
                                 std::span<float> logits, size_t chunk) const {
  CUBEFORGE_ASSIGN_OR_RETURN(PreparedLatents prepared, prepare_latents(latents));
  return occupancy(prepared, points_xyz, logits, chunk);
}

ShapeTokenizer::GridQueries ShapeTokenizer::prepare_grid(std::span<const float> axis) const {
  const Model& m = *model_;
  GridQueries grid;
  grid.axis.assign(axis.begin(), axis.end());
  if (m.fused_occupancy && use_fused_occupancy_ && !axis.empty()) {
    grid.terms.resize(size_t(3 * int64_t(axis.size()) * m.dims.width));
    cpu::occupancy_axis_terms(m.fused_occupancy->weights, axis.data(), int64_t(axis.size()), grid.terms.data());
  }
  return grid;
}

Status ShapeTokenizer::occupancy_on_grid(const PreparedLatents& latents, const GridQueries& grid,
                                         std::span<const int32_t> ijk, std::span<float> logits,
                                         const LatentAttention& attention) const {
  const Model& m = *model_;
  const int64_t n = int64_t(grid.axis.size());
  if (ijk.size() % 3 != 0 || logits.size() * 3 != ijk.size() * size_t(m.occupancy_head.out_features()))
    return invalid(file_name(), "grid query of " + std::to_string(ijk.size()) + " indices for " +
                                    std::to_string(logits.size()) + " logits; expected 3 indices per point");
  for (int32_t index : ijk)
    if (index < 0 || index >= n)
      return invalid(file_name(), "grid index " + std::to_string(index) + " is outside the axis of " +
                                      std::to_string(n) + " coordinates");
  const bool fused = m.fused_occupancy && use_fused_occupancy_ && !grid.terms.empty();
  if (!fused) {
    std::vector<float> points(ijk.size());
    for (size_t p = 0; p < ijk.size(); ++p) points[p] = grid.axis[size_t(ijk[p])];
    return occupancy(latents, points, logits, 8192, nullptr, nullptr, attention);
  }
  const int64_t W = m.dims.width;
  if (latents.width != W || latents.latent_count <= 0 ||
      latents.keys.size() != size_t(latents.latent_count * W) || latents.values.size() != latents.keys.size())
    return invalid(file_name(), "prepared latents do not belong to this model (width " + std::to_string(latents.width) +
                                    ", expected " + std::to_string(W) + ")");
  if (grid.terms.size() != size_t(3 * n * W))
    return invalid(file_name(), "grid terms were prepared for another model");
  const int64_t P = int64_t(logits.size());
  CUBEFORGE_ASSIGN_OR_RETURN(const int64_t attended,
                             checked_attended_latents(file_name(), attention, P, latents.latent_count));
  cpu::occupancy_decoder_grid(m.fused_occupancy->weights, latents.keys.data(), latents.values.data(),
                              latents.latent_count, grid.terms.data(), n, ijk.data(), P, logits.data(),
                              attention_from(attention, 0, attended));
  return ok_status();
}

std::vector<float> ShapeTokenizer::fourier_embed(std::span<const float> points_xyz) const {
  const Model& m = *model_;
  const int64_t P = int64_t(points_xyz.size() / 3);
  std::vector<float> out(size_t(P * m.config.fourier_dim()));
  fourier_embed_rows(m.occupancy_fourier_weight, m.carrier, m.config.num_freqs, points_xyz.data(), P, out.data());
  return out;
}

Result<std::vector<int64_t>> ShapeTokenizer::encode(std::span<const float> surface, std::vector<float>* z_e_out) const {
  const Model& m = *model_;
  const ShapeModelConfig& c = m.config;
  const int64_t W = m.dims.width, E = c.embed_dim;
  const int64_t columns = 3 + c.point_feats;
  if (surface.empty() || surface.size() % size_t(columns) != 0)
    return invalid(file_name(), "surface samples hold " + std::to_string(surface.size()) +
                                    " values, expected a non-empty multiple of " + std::to_string(columns) +
                                    " (xyz and " + std::to_string(c.point_feats) + " features per point)");
  const int64_t P = int64_t(surface.size()) / columns;

  // Point features: [fourier(xyz), feats] or [fourier(xyz), fourier(feats)].
  const int64_t fourier_dim = c.fourier_dim();
  const int64_t feature_dim = m.encoder_feature_in.weight.cols;
  std::vector<float> xyz(size_t(P * 3)), extra(size_t(P * 3));
  for (int64_t p = 0; p < P; ++p)
    for (int i = 0; i < 3; ++i) xyz[size_t(p * 3 + i)] = surface[size_t(p * columns + i)];
  std::vector<float> embedded(size_t(P * fourier_dim));
  fourier_embed_rows(m.encoder_fourier_weight, m.carrier, c.num_freqs, xyz.data(), P, embedded.data());
  std::vector<float> features(size_t(P * feature_dim));
  std::vector<float> embedded_extra;
  if (c.embed_point_feats) {
    for (int64_t p = 0; p < P; ++p)
      for (int i = 0; i < 3; ++i) extra[size_t(p * 3 + i)] = surface[size_t(p * columns + 3 + i)];
    embedded_extra.resize(size_t(P * fourier_dim));
    fourier_embed_rows(m.encoder_fourier_weight, m.carrier, c.num_freqs, extra.data(), P, embedded_extra.data());
  }
  for (int64_t p = 0; p < P; ++p) {
    float* row = features.data() + p * feature_dim;
    std::copy_n(embedded.begin() + p * fourier_dim, fourier_dim, row);
    if (c.embed_point_feats)
      std::copy_n(embedded_extra.begin() + p * fourier_dim, fourier_dim, row + fourier_dim);
    else
      std::copy_n(surface.begin() + p * columns + 3, c.point_feats, row + fourier_dim);
  }
  std::vector<float> data(size_t(P * W)), hidden(size_t(P * W));
  mlp_embed(m.encoder_feature_in, m.encoder_feature_out, features.data(), P, hidden.data(), data.data());

  // Learned queries (cls first) through the layers.
  std::vector<float> h = m.encoder_query;
  const int64_t Q = int64_t(h.size()) / W;
  std::vector<float> keys(size_t(P * W)), values(size_t(P * W));
  Scratch scratch;
  for (const auto& layer : m.encoder_layers) {
    if (layer.is_cross) {
      cross_attention_context(layer.cross, m.dims, c.eps, data.data(), P, keys.data(), values.data(), scratch);
      cross_attention_layer(layer.cross, m.dims, c.eps, h.data(), Q, keys.data(), values.data(), P, scratch);
    } else {
      self_attention_layer(layer.self, m.dims, c.eps, h.data(), Q, scratch);
    }
  }
  std::vector<float> normed(h.size());
  cpu::layer_norm_lanes(h.data(), Q, W, c.eps, m.encoder_norm_weight.data(), m.encoder_norm_bias.data(), normed.data());
  const int64_t skip = c.encoder_with_cls_token ? 1 : 0;
  const int64_t T = Q - skip;
  const float* z_e = normed.data() + skip * W;
  if (z_e_out) z_e_out->assign(z_e, z_e + T * W);

  // Bottleneck: RMSNorm(c_in(z_e)), then the nearest codebook row (first on ties).
  std::vector<float> projected(size_t(T * E)), quantized(size_t(T * E));
  m.codebook_in.apply(z_e, T, projected.data());
  cpu::rms_norm(projected.data(), T, E, kCodebookNormEps, m.codebook_norm.data(), quantized.data());
  std::vector<int64_t> indices(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    const float* z = quantized.data() + t * E;
    double best = std::numeric_limits<double>::infinity();
    int64_t best_index = 0;
    for (int64_t v = 0; v < c.codes; ++v) {
      const float* code = m.codebook.data() + v * E;
      double distance = 0.0;
      for (int64_t e = 0; e < E; ++e) {
        const double diff = double(z[e]) - double(code[e]);
        distance += diff * diff;
      }
      if (distance < best) {
        best = distance;
        best_index = v;
      }
    }
    indices[size_t(t)] = best_index;
  }
  return indices;
}

}  // namespace cubeforge
