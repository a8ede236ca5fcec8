// The Cube 3D shape tokenizer (OneDAutoEncoder) on the CPU, in float32.
//
// Decoding turns shape tokens into latents (codebook row → c_out → + positional
// encodings → self-attention layers); the occupancy decoder then answers, for any
// point in space, a logit whose zero level set is the surface. Encoding goes the
// other way: surface samples with normals → learned queries cross-attending to the
// points → nearest codebook entries. The numbers match the public reference
// implementation (see docs/design.md, "Shape tokenizer").
//
// Legend: T = tokens (latents), W = width, E = codebook vector size, V = codes,
// P = points, F = Fourier frequencies.
//
// Weights stay in the mapped file in their stored precision (F32/F16/BF16); only
// the small vectors (biases, norms, queries, positional encodings, codebook) are
// widened to float32 at load time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "inference/core/result.h"
#include "inference/model/config.h"
#include "inference/tensor/safetensors.h"

namespace cubeforge {

class TraceSink;

// The latents-side keys and values of the occupancy decoder's cross-attention.
// They depend on the latents only, so a coarse-to-fine grid evaluation computes
// them once and reuses them for every batch of query points.
struct PreparedLatents {
  int64_t latent_count = 0;   // S
  int64_t width = 0;          // W
  std::vector<float> keys;    // [S, W] c_k(LN(latents))
  std::vector<float> values;  // [S, W] c_v(LN(latents))
};

// Cross-attention of occupancy queries over some of the latents, and what it
// reports (adaptive KV selection, as in FlashVDM; both parts optional). With
// per_group > 0, point p attends only to the per_group latents listed in row
// group[p] of `latents`: its keys and values are gathered once per run of
// points in one group, then the same products run as over every latent. On
// the fused decoder a row listing every latent in ascending order gives the
// full attention's logits bit for bit; layer at a time, the products' rounding
// depends on how many points share them (BLAS), as chunk sizes already do.
// `attention_mass` ([P, attended], attended = per_group or every latent):
// each point's attention weights summed over the heads, over the latents it
// attended to, in the order they are listed.
struct LatentSubsets {
  int64_t per_group = 0;
  std::span<const int32_t> latents;  // [groups, per_group] latent indices
  std::span<const int32_t> group;    // [P] a row of `latents`
};
struct LatentAttention {
  const LatentSubsets* subsets = nullptr;
  std::span<float> attention_mass;
};

// Every query method is const and safe to call from many threads at once: the
// weights do not change once loaded, and occupancy() keeps its working buffers
// per thread. Only set_fused_occupancy() changes the tokenizer (call it before
// sharing one).
class ShapeTokenizer {
 public:
  // Opens MODEL/shape_tokenizer.safetensors (kept mapped while the tokenizer
  // lives). With no configuration, sizes are inferred from the tensors; either
  // way the tensor set must match the configuration exactly. `config_name`
  // (e.g. the config.yaml path) names the configuration in error messages.
  static Result<ShapeTokenizer> load(const std::filesystem::path& file, const ShapeModelConfig* config = nullptr,
                                     const std::string& config_name = "");
  // Takes an already open file (random-weight models, in-memory images).
  static Result<ShapeTokenizer> from_file(SafetensorsFile file, const ShapeModelConfig& config,
                                          const std::string& config_name = "");

  ShapeTokenizer(ShapeTokenizer&&) noexcept;
  ShapeTokenizer& operator=(ShapeTokenizer&&) noexcept;
  ~ShapeTokenizer();

  const ShapeModelConfig& config() const;
  const std::string& file_name() const;

  // get_codebook(): [V, E] = RMSNorm(codebook · cb_weight + cb_bias), computed at load.
  const std::vector<float>& codebook() const;

  // Tokens → latents [T, W] (1 ≤ T ≤ latents). Ids outside [0, V) are clamped,
  // as the reference does. `z_q_out` receives the codebook rows after c_out,
  // before the positional encodings ([T, W]). `trace` receives the named
  // intermediates ("decoder.…", inference/tensor/trace.h).
  Result<std::vector<float>> decode_tokens(std::span<const int64_t> tokens, std::vector<float>* z_q_out = nullptr,
                                           TraceSink* trace = nullptr) const;

  // Latents [S, W] → the occupancy cross-attention's keys and values.
  Result<PreparedLatents> prepare_latents(std::span<const float> latents) const;

  // Called after each chunk with the points done so far and the total;
  // returning false stops the query with a kCancelled status.
  using Progress = std::function<bool(int64_t points_done, int64_t points_total)>;

  // Occupancy logits for points [P, 3] into logits [P · out_dim], `chunk`
  // points at a time so memory stays bounded for any P (about 30 KB per point
  // of chunk at width 768: 250 MB for the default). With a `trace`, the named
  // intermediates ("occupancy.…") of the layer-at-a-time path over all P
  // points in one chunk: meant for a few probe points.
  // `attention` restricts and reports the cross-attention (LatentAttention).
  Status occupancy(const PreparedLatents& latents, std::span<const float> points_xyz, std::span<float> logits,
                   size_t chunk = 8192, const Progress& progress = nullptr, TraceSink* trace = nullptr,
                   const LatentAttention& attention = {}) const;
  // Convenience for a single query batch: prepares the latents, then queries.
  Status occupancy(std::span<const float> latents, std::span<const float> points_xyz, std::span<float> logits,
                   size_t chunk = 8192) const;

  // Occupancy at the points of a grid whose every axis takes the coordinates
  // `axis`: prepare_grid() evaluates the decoder's first layer once per axis
  // value (cpu::occupancy_axis_terms) where the fused decoder runs,
  // and occupancy_on_grid() answers points named by their axis indices ijk
  // [P, 3] from those terms. Where the fused decoder does not run, it queries
  // the points themselves through occupancy().
  struct GridQueries {
    std::vector<float> axis;   // [n]
    std::vector<float> terms;  // [3, n, W], or empty
  };
  GridQueries prepare_grid(std::span<const float> axis) const;
  Status occupancy_on_grid(const PreparedLatents& latents, const GridQueries& grid, std::span<const int32_t> ijk,
                           std::span<float> logits, const LatentAttention& attention = {}) const;

  // Whether occupancy() runs the fused decoder (cpu::occupancy_decoder)
  // on this CPU for this model: AVX-512, a single logit, sizes in multiples of
  // 16, a decoder small enough for the L2 cache (the built-in model's, not the
  // real Cube models'). Otherwise, or when switched off, it runs a layer at a
  // time through BLAS.
  bool fused_occupancy_available() const;
  void set_fused_occupancy(bool enabled) { use_fused_occupancy_ = enabled; }

  // The occupancy decoder's phase-modulated Fourier embedding: [P, 3(2F+1)]
  // for the P = size / 3 whole points given.
  std::vector<float> fourier_embed(std::span<const float> points_xyz) const;

  // Surface samples [P, 3 + point_feats] (xyz, then normals) → token ids [T].
  // `z_e_out` receives the encoder output without the cls token ([T, W]).
  Result<std::vector<int64_t>> encode(std::span<const float> surface, std::vector<float>* z_e_out = nullptr) const;

  struct Model;  // the weights; defined in shape_tokenizer.cpp

 private:
  explicit ShapeTokenizer(std::unique_ptr<Model> model);
  static void prepare_fused_occupancy(Model& m);
  std::unique_ptr<Model> model_;
  bool use_fused_occupancy_ = true;
};

}  // namespace cubeforge
