// The occupancy decoder in slices over the thread pool (occupancy_slices.h).
#include "inference/model/occupancy_slices.h"

#include <algorithm>
#include <string>
#include <vector>

#include "inference/core/thread_pool.h"
#include "inference/cpu/ops.h"

namespace cubeforge {

namespace {

// query(begin, end) answers points [begin, end) on one thread.
template <class Query>
Status in_slices(int64_t count, const Query& query) {
  const int64_t slices = std::clamp<int64_t>(count / 512, 1, cpu::thread_count());
  std::vector<Status> statuses(static_cast<size_t>(slices), ok_status());
  parallel_for_each(slices, slices > 1, [&](int64_t i) {
    statuses[size_t(i)] = query(count * i / slices, count * (i + 1) / slices);
  });
  for (Status& status : statuses)
    if (!status.ok()) return status;
  return ok_status();
}

}  // namespace

Status occupancy_in_slices(const ShapeTokenizer& shape, const PreparedLatents& prepared,
                           std::span<const float> points, std::span<float> logits) {
  return in_slices(int64_t(points.size() / 3), [&](int64_t begin, int64_t end) {
    return shape.occupancy(prepared, points.subspan(size_t(begin) * 3, size_t(end - begin) * 3),
                           logits.subspan(size_t(begin), size_t(end - begin)));
  });
}

Status occupancy_on_grid_in_slices(const ShapeTokenizer& shape, const PreparedLatents& prepared,
                                   const ShapeTokenizer::GridQueries& grid, std::span<const int32_t> ijk,
                                   std::span<float> logits, const LatentAttention& attention) {
  const int64_t count = int64_t(ijk.size() / 3);
  if (attention.subsets && attention.subsets->group.size() != size_t(count))
    return make_error(ErrorCode::kInvalidArgument, "latent subsets name a group for " +
                                                       std::to_string(attention.subsets->group.size()) + " of " +
                                                       std::to_string(count) + " points");
  const size_t attended = count == 0 ? 0 : attention.attention_mass.size() / size_t(count);
  if (attended * size_t(count) != attention.attention_mass.size())
    return make_error(ErrorCode::kInvalidArgument,
                      "an attention mass buffer of " + std::to_string(attention.attention_mass.size()) +
                          " values does not divide into " + std::to_string(count) + " points");
  return in_slices(count, [&](int64_t begin, int64_t end) {
    const size_t b = size_t(begin), n = size_t(end - begin);
    LatentSubsets subsets;
    LatentAttention slice;
    if (attention.subsets) {
      subsets = *attention.subsets;
      subsets.group = attention.subsets->group.subspan(b, n);
      slice.subsets = &subsets;
    }
    if (!attention.attention_mass.empty())
      slice.attention_mass = attention.attention_mass.subspan(b * attended, n * attended);
    return shape.occupancy_on_grid(prepared, grid, ijk.subspan(b * 3, n * 3), logits.subspan(b, n), slice);
  });
}

}  // namespace cubeforge
