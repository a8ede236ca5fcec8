// Latent selection for coarse-to-fine occupancy (see latent_selection.h):
// blocks of a batch sorted together, one selection per block from the kept
// latents of its parent cell's corners, the queries with LatentSubsets, and
// each point's heaviest latents kept for the level after.
#include "inference/model/latent_selection.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "inference/core/thread_pool.h"
#include "inference/model/occupancy_slices.h"

namespace cubeforge {

namespace {

// Latent indices are kept in 16 bits.
constexpr int64_t kMaxSelectableLatents = int64_t(1) << 16;
// What select() returns when no cell around a point has kept latents.
constexpr int kNoLatentsKept = -1;

}  // namespace

Status check_latent_top_k(int64_t top_k, int64_t latents) {
  if (top_k >= 0 && top_k <= latents) return ok_status();
  return make_error(ErrorCode::kInvalidArgument,
                    "latent top-k " + std::to_string(top_k) + " is not allowed for a model with " +
                        std::to_string(latents) + " latents; use 0 (full attention) or 1 to " +
                        std::to_string(latents) + " (latents each block of grid points attends to)");
}

LatentSelectionField::LatentSelectionField(const ShapeTokenizer& shape, const PreparedLatents& latents,
                                           const ShapeTokenizer::GridQueries& grid, const GridSpec& spec, int64_t top_k)
    : shape_(&shape),
      latents_(&latents),
      grid_(&grid),
      spec_(spec),
      top_k_(top_k),
      latent_count_(latents.latent_count) {}

Result<LatentSelectionField> LatentSelectionField::create(const ShapeTokenizer& shape, const PreparedLatents& latents,
                                                          const ShapeTokenizer::GridQueries& grid, const GridSpec& spec,
                                                          int64_t top_k) {
  CUBEFORGE_TRY(check_latent_top_k(top_k, latents.latent_count));
  if (top_k == 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "latent selection needs a top-k of at least 1 (0 is full attention)");
  if (latents.latent_count > kMaxSelectableLatents)
    return make_error(ErrorCode::kUnsupported, "latent selection handles up to " +
                                                   std::to_string(kMaxSelectableLatents) + " latents, the model has " +
                                                   std::to_string(latents.latent_count));
  if (int64_t(grid.axis.size()) != spec.points_per_axis())
    return make_error(ErrorCode::kInvalidArgument, "latent selection: the grid queries have " +
                                                       std::to_string(grid.axis.size()) + " axis points, the grid " +
                                                       std::to_string(spec.points_per_axis()));
  return LatentSelectionField(shape, latents, grid, spec, top_k);
}

void LatentSelectionField::begin_level(int resolution) {
  if (coarse_ < 0) coarse_ = resolution;
  level_ = resolution;
}

GridFieldFunction LatentSelectionField::attach(CoarseToFineOptions& options) {
  options.begin_level = [this](int resolution) { begin_level(resolution); };
  return [this](std::span<const int32_t> ijk, std::span<float> values) { return evaluate(ijk, values); };
}

int64_t LatentSelectionField::fine_index(const int32_t* ijk) const {
  const int64_t n = spec_.points_per_axis();
  return (int64_t(ijk[0]) * n + ijk[1]) * n + ijk[2];
}

int LatentSelectionField::select(const int32_t* ijk, int32_t* out, std::vector<float>& scratch_mass,
                                 std::vector<int32_t>& candidates) const {
  const int R = spec_.resolution;
  const int64_t n = spec_.points_per_axis();
  candidates.clear();
  int inherited = 0;
  // The parent cell at level_ - 1, then its ancestors while none of a cell's
  // corners was evaluated before this level.
  for (int level = level_ - 1; level >= coarse_ && candidates.empty(); --level) {
    const int64_t stride = int64_t(1) << (R - level);
    const int64_t last_cell = (int64_t(1) << level) - 1;
    int64_t cell[3];
    for (int a = 0; a < 3; ++a) cell[a] = std::min(int64_t(ijk[a]) / stride, last_cell);
    for (int c = 0; c < 8; ++c) {
      const int64_t i = (cell[0] + (c & 1)) * stride, j = (cell[1] + ((c >> 1) & 1)) * stride,
                    k = (cell[2] + ((c >> 2) & 1)) * stride;
      const auto found = slot_of_point_.find((i * n + j) * n + k);
      if (found == slot_of_point_.end() || kept_level_[size_t(found->second)] >= level_) continue;
      const size_t base = size_t(found->second) * size_t(top_k_);
      for (int64_t e = 0; e < top_k_; ++e) {
        const int32_t latent = kept_latents_[base + size_t(e)];
        if (scratch_mass[size_t(latent)] == 0.f) candidates.push_back(latent);
        // A kept weight of exactly 0 still marks its latent as a candidate.
        scratch_mass[size_t(latent)] += std::max(kept_mass_[base + size_t(e)], 1e-30f);
      }
    }
    if (candidates.empty()) inherited = 1;
  }
  // Every kept point has k latents; none kept around this point means the
  // coarse level was not evaluated everywhere.
  if (candidates.empty()) return kNoLatentsKept;
  // The k heaviest, ties to the lower index; then in ascending order.
  auto heavier = [&](int32_t a, int32_t b) {
    const float ma = scratch_mass[size_t(a)], mb = scratch_mass[size_t(b)];
    return ma > mb || (ma == mb && a < b);
  };
  std::nth_element(candidates.begin(), candidates.begin() + (top_k_ - 1), candidates.end(), heavier);
  std::copy_n(candidates.begin(), top_k_, out);
  std::sort(out, out + top_k_);
  for (int32_t latent : candidates) scratch_mass[size_t(latent)] = 0.f;
  return inherited;
}

template <class LatentsOf>
void LatentSelectionField::keep(std::span<const int32_t> ijk, std::span<const float> mass, int64_t attended,
                                const LatentsOf& latents_of) {
  const int64_t P = int64_t(ijk.size() / 3), k = top_k_;
  std::vector<uint16_t> latents(size_t(P * k));
  std::vector<float> masses(size_t(P * k));
  parallel_for(P, 64, [&](int64_t p0, int64_t p1) {
    std::vector<int32_t> order(static_cast<size_t>(attended));
    for (int64_t p = p0; p < p1; ++p) {
      const float* row = mass.data() + p * attended;
      const int32_t* row_latents = latents_of(p);
      std::iota(order.begin(), order.end(), 0);
      if (k < attended)
        std::nth_element(order.begin(), order.begin() + (k - 1), order.end(),
                         [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      for (int64_t e = 0; e < k; ++e) {
        const int32_t column = order[size_t(e)];
        latents[size_t(p * k + e)] = uint16_t(row_latents ? row_latents[column] : column);
        masses[size_t(p * k + e)] = row[column];
      }
    }
  });
  for (int64_t p = 0; p < P; ++p) {
    const auto [slot, added] = slot_of_point_.try_emplace(fine_index(ijk.data() + p * 3), int32_t(kept_level_.size()));
    if (!added) continue;  // never happens: coarse-to-fine evaluates a point once
    kept_latents_.insert(kept_latents_.end(), latents.begin() + p * k, latents.begin() + (p + 1) * k);
    kept_mass_.insert(kept_mass_.end(), masses.begin() + p * k, masses.begin() + (p + 1) * k);
    kept_level_.push_back(uint8_t(level_));
  }
  stats_.kept_points += P;
}

Status LatentSelectionField::evaluate(std::span<const int32_t> ijk, std::span<float> values) {
  if (level_ < 0)
    return make_error(ErrorCode::kInternal, "latent selection was asked for points before any level began");
  const int64_t P = int64_t(values.size());
  if (ijk.size() != size_t(P) * 3)
    return make_error(ErrorCode::kInvalidArgument, "latent selection: " + std::to_string(ijk.size()) +
                                                       " grid indices for " + std::to_string(P) + " values");
  const int64_t n = spec_.points_per_axis();
  for (int32_t index : ijk)
    if (index < 0 || index >= n)
      return make_error(ErrorCode::kInvalidArgument, "latent selection: grid index " + std::to_string(index) +
                                                         " is outside the " + std::to_string(n) + " axis points");
  const bool keep_latents = level_ < spec_.resolution;  // the target level's are never asked for

  if (level_ == coarse_) {  // every latent, and every point's heaviest kept
    std::vector<float> mass(keep_latents ? size_t(P * latent_count_) : 0);
    CUBEFORGE_TRY(occupancy_on_grid_in_slices(*shape_, *latents_, *grid_, ijk, values, LatentAttention{nullptr, mass}));
    if (keep_latents) keep(ijk, mass, latent_count_, [](int64_t) -> const int32_t* { return nullptr; });
    stats_.full_attention_points += P;
    return ok_status();
  }

  // Blocks: the points of one parent cell, next to each other in parent order.
  const int64_t parent_stride = int64_t(1) << (spec_.resolution - level_ + 1);
  const int64_t parent_cells = int64_t(1) << (level_ - 1);
  std::vector<int64_t> block_of(static_cast<size_t>(P));
  for (int64_t p = 0; p < P; ++p) {
    int64_t cell = 0;
    for (int a = 0; a < 3; ++a)
      cell = cell * parent_cells + std::min(int64_t(ijk[size_t(p * 3 + a)]) / parent_stride, parent_cells - 1);
    block_of[size_t(p)] = cell;
  }
  std::vector<int32_t> order(static_cast<size_t>(P));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return block_of[size_t(a)] < block_of[size_t(b)]; });
  std::vector<int32_t> sorted_ijk(ijk.size()), group(static_cast<size_t>(P)), first_point_of_group;
  for (int64_t q = 0; q < P; ++q) {
    const int32_t p = order[size_t(q)];
    std::copy_n(ijk.begin() + p * 3, 3, sorted_ijk.begin() + q * 3);
    if (q == 0 || block_of[size_t(p)] != block_of[size_t(order[size_t(q - 1)])])
      first_point_of_group.push_back(int32_t(q));
    group[size_t(q)] = int32_t(first_point_of_group.size()) - 1;
  }
  const int64_t groups = int64_t(first_point_of_group.size());
  std::vector<int32_t> selected(size_t(groups * top_k_));
  std::vector<int8_t> inherited(static_cast<size_t>(groups));
  parallel_for(groups, 16, [&](int64_t g0, int64_t g1) {
    std::vector<float> scratch_mass(static_cast<size_t>(latent_count_), 0.f);
    std::vector<int32_t> candidates;
    for (int64_t g = g0; g < g1; ++g)
      inherited[size_t(g)] = select(sorted_ijk.data() + int64_t(first_point_of_group[size_t(g)]) * 3,
                                    selected.data() + g * top_k_, scratch_mass, candidates);
  });

  for (int8_t from_ancestor : inherited)
    if (from_ancestor == kNoLatentsKept)
      return make_error(ErrorCode::kInternal, "latent selection at resolution " + std::to_string(level_) +
                                                  ": no cell around a point has kept latents; the coarse level (" +
                                                  std::to_string(coarse_) + ") must be evaluated at every point first");
  const LatentSubsets subsets{top_k_, selected, group};
  std::vector<float> sorted_values(static_cast<size_t>(P));
  std::vector<float> mass(keep_latents ? size_t(P * top_k_) : 0);
  CUBEFORGE_TRY(occupancy_on_grid_in_slices(*shape_, *latents_, *grid_, sorted_ijk, sorted_values,
                                            LatentAttention{&subsets, mass}));
  for (int64_t q = 0; q < P; ++q) values[size_t(order[size_t(q)])] = sorted_values[size_t(q)];
  if (keep_latents)
    keep(sorted_ijk, mass, top_k_, [&](int64_t q) { return selected.data() + int64_t(group[size_t(q)]) * top_k_; });
  stats_.selected_points += P;
  stats_.blocks += groups;
  for (int8_t from_ancestor : inherited) stats_.inherited_blocks += from_ancestor;
  return ok_status();
}

}  // namespace cubeforge
