// Coarse-to-fine occupancy whose finer levels attend to some of the latents:
// the adaptive KV selection of FlashVDM on the hierarchy coarse-to-fine
// evaluation already has.
//
// The coarse level attends to every latent. At every finer level the points
// inside one cell of the level before (their parent cell; a point on a face
// between cells belongs to the cell on its lower side) form a block, and a
// block attends only to the k latents with the largest attention mass of its
// parent cell: the attention weights, summed over heads, of the cell's corners
// that were evaluated before this level began. A cell none of whose corners
// was evaluated (growing along the surface can leave the cells the level
// before refined) takes its own parent's latents, and so on up to the coarse
// level, which is evaluated everywhere. Nothing is evaluated twice: every
// evaluated point below the target level keeps the k latents it gave the most
// weight and their mass, and a cell's mass is the sum of its corners' lists
// (exact when k is every latent).
//
// So the decision costs no extra queries; a block's points then attend to its
// latents together (ShapeTokenizer's LatentSubsets). Where k equals the
// number of latents every block attends to all of them in order, which on the
// fused decoder gives full attention's logits bit for bit. The kept latents
// take 6 bytes per latent and point below the target level (about 80 MB for
// k = 64 on a real-size object at resolution 8).
//
// Shapes: R = the target resolution, S = latents, k = latents per block.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "inference/core/result.h"
#include "inference/geometry/occupancy_grid.h"
#include "inference/model/shape_tokenizer.h"

namespace cubeforge {

// Whether `top_k` latents per block is a valid choice for a model with
// `latents` latents: 0 (full attention) or 1 to latents; the error says which
// values are allowed.
Status check_latent_top_k(int64_t top_k, int64_t latents);

class LatentSelectionField {
 public:
  // `top_k` must be 1..S (check_latent_top_k); the tokenizer, latents and grid
  // queries must outlive the field.
  static Result<LatentSelectionField> create(const ShapeTokenizer& shape, const PreparedLatents& latents,
                                             const ShapeTokenizer::GridQueries& grid, const GridSpec& spec,
                                             int64_t top_k);

  // CoarseToFineOptions::begin_level: the first level seen is the coarse one.
  void begin_level(int resolution);
  // A GridFieldFunction for the level begun last.
  Status evaluate(std::span<const int32_t> ijk, std::span<float> values);

  // Both wired into coarse-to-fine options and a field: `options.begin_level`
  // is set; the field returned calls evaluate(). The field must outlive both.
  GridFieldFunction attach(CoarseToFineOptions& options);

  struct Stats {
    int64_t full_attention_points = 0;  // the coarse level's
    int64_t selected_points = 0;        // points that attended to their block's k latents
    int64_t blocks = 0;                 // selections made (a block split between batches counts once per batch)
    int64_t inherited_blocks = 0;       // of those, from a coarser cell (no corner of the parent evaluated)
    int64_t kept_points = 0;            // points whose latents are kept for the next level
  };
  const Stats& stats() const { return stats_; }

 private:
  LatentSelectionField(const ShapeTokenizer& shape, const PreparedLatents& latents,
                       const ShapeTokenizer::GridQueries& grid, const GridSpec& spec, int64_t top_k);

  // The k latents of the block around fine point `ijk` at the current level,
  // ascending, into `out`; `scratch_mass` [S] is zero on entry and on exit.
  // Returns 1 where they came from a coarser cell than the parent, 0 where
  // from the parent, -1 where no cell up to the coarse level has kept latents.
  int select(const int32_t* ijk, int32_t* out, std::vector<float>& scratch_mass,
             std::vector<int32_t>& candidates) const;
  // Keeps, for each of the points, its k heaviest latents ([P, attended] mass
  // over `attended` latents; row p's latents are latents_of(p)).
  template <class LatentsOf>
  void keep(std::span<const int32_t> ijk, std::span<const float> mass, int64_t attended, const LatentsOf& latents_of);
  int64_t fine_index(const int32_t* ijk) const;

  const ShapeTokenizer* shape_;
  const PreparedLatents* latents_;
  const ShapeTokenizer::GridQueries* grid_;
  GridSpec spec_;
  int64_t top_k_ = 0;
  int64_t latent_count_ = 0;
  int coarse_ = -1;  // the coarse level, once begun
  int level_ = -1;   // the level begun last

  // Kept latents, k per point: slot s holds kept_latents_[s·k ..] and
  // kept_mass_[s·k ..], for the point evaluated at level kept_level_[s].
  std::unordered_map<int64_t, int32_t> slot_of_point_;  // fine grid index → slot
  std::vector<uint16_t> kept_latents_;
  std::vector<float> kept_mass_;
  std::vector<uint8_t> kept_level_;
  Stats stats_;
};

}  // namespace cubeforge
