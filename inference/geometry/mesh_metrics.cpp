// Mesh measurements: sums over faces, edge bookkeeping by sorting, a bucket
// grid for nearest-triangle queries, and ray parity for inside tests.
#include "inference/geometry/mesh_metrics.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>
#include <string>
#include <tuple>

#include "inference/core/input_budgets.h"
#include "inference/core/thread_pool.h"
#include "inference/geometry/surface_sampling.h"

namespace cubeforge {

namespace {

struct Vec3 {
  double x, y, z;
};
Vec3 operator-(Vec3 a, Vec3 b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
Vec3 operator+(Vec3 a, Vec3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
Vec3 operator*(Vec3 a, double s) { return {a.x * s, a.y * s, a.z * s}; }
double dot(Vec3 a, Vec3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
Vec3 cross(Vec3 a, Vec3 b) { return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x}; }

Vec3 vertex(const Mesh& mesh, uint32_t v) {
  const float* p = &mesh.positions[size_t(v) * 3];
  return {p[0], p[1], p[2]};
}

// The point of triangle abc nearest to p, by the Voronoi region p falls in.
Vec3 closest_point_on_triangle(Vec3 p, Vec3 a, Vec3 b, Vec3 c) {
  const Vec3 ab = b - a, ac = c - a, ap = p - a;
  const double d1 = dot(ab, ap), d2 = dot(ac, ap);
  if (d1 <= 0 && d2 <= 0) return a;
  const Vec3 bp = p - b;
  const double d3 = dot(ab, bp), d4 = dot(ac, bp);
  if (d3 >= 0 && d4 <= d3) return b;
  const double vc = d1 * d4 - d3 * d2;
  if (vc <= 0 && d1 >= 0 && d3 <= 0) return a + ab * (d1 / (d1 - d3));
  const Vec3 cp = p - c;
  const double d5 = dot(ab, cp), d6 = dot(ac, cp);
  if (d6 >= 0 && d5 <= d6) return c;
  const double vb = d5 * d2 - d1 * d6;
  if (vb <= 0 && d2 >= 0 && d6 <= 0) return a + ac * (d2 / (d2 - d6));
  const double va = d3 * d6 - d5 * d4;
  if (va <= 0 && (d4 - d3) >= 0 && (d5 - d6) >= 0) return b + (c - b) * ((d4 - d3) / ((d4 - d3) + (d5 - d6)));
  const double denominator = va + vb + vc;
  if (!(denominator > 0)) return a;  // a degenerate triangle: its vertices are as near as anything
  return a + ab * (vb / denominator) + ac * (vc / denominator);
}

}  // namespace

double surface_area(const Mesh& mesh) {
  double area = 0;
  for (size_t f = 0; f < mesh.face_count(); ++f) {
    const Vec3 a = vertex(mesh, mesh.indices[f * 3]), b = vertex(mesh, mesh.indices[f * 3 + 1]),
               c = vertex(mesh, mesh.indices[f * 3 + 2]);
    const Vec3 n = cross(b - a, c - a);
    area += 0.5 * std::sqrt(dot(n, n));
  }
  return area;
}

double signed_volume(const Mesh& mesh) {
  double volume = 0;
  for (size_t f = 0; f < mesh.face_count(); ++f) {
    const Vec3 a = vertex(mesh, mesh.indices[f * 3]), b = vertex(mesh, mesh.indices[f * 3 + 1]),
               c = vertex(mesh, mesh.indices[f * 3 + 2]);
    volume += dot(a, cross(b, c)) / 6.0;
  }
  return volume;
}

double bounding_diagonal(const Mesh& mesh) {
  const Bounds3 bounds = mesh.bounds();
  if (bounds.empty) return 0;
  double sum = 0;
  for (int a = 0; a < 3; ++a) sum += double(bounds.max[a] - bounds.min[a]) * double(bounds.max[a] - bounds.min[a]);
  return std::sqrt(sum);
}

MeshTopology analyze_topology(const Mesh& mesh) {
  MeshTopology topology;
  topology.faces = int64_t(mesh.face_count());
  // Each directed edge as (low, high, forward?), sorted so uses of one edge are adjacent.
  std::vector<uint64_t> directed;
  directed.reserve(mesh.indices.size());
  for (size_t f = 0; f < mesh.face_count(); ++f)
    for (int c = 0; c < 3; ++c) {
      const uint64_t from = mesh.indices[f * 3 + size_t(c)], to = mesh.indices[f * 3 + size_t((c + 1) % 3)];
      const uint64_t low = std::min(from, to), high = std::max(from, to);
      directed.push_back((low << 33) | (high << 1) | uint64_t(from < to));
    }
  std::sort(directed.begin(), directed.end());
  for (size_t start = 0; start < directed.size();) {
    size_t end = start;
    int64_t forward = 0;
    while (end < directed.size() && (directed[end] >> 1) == (directed[start] >> 1)) forward += directed[end++] & 1;
    const int64_t uses = int64_t(end - start);
    ++topology.edges;
    if (uses == 1) ++topology.boundary_edges;
    if (uses > 2) ++topology.non_manifold_edges;
    if (uses == 2 && forward != 1) ++topology.misoriented_edges;
    start = end;
  }

  std::vector<uint32_t> parent(mesh.vertex_count());
  std::iota(parent.begin(), parent.end(), 0u);
  auto find = [&](uint32_t v) {
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
  };
  std::vector<uint8_t> referenced(mesh.vertex_count(), 0);
  for (size_t f = 0; f < mesh.face_count(); ++f) {
    const uint32_t a = mesh.indices[f * 3], b = mesh.indices[f * 3 + 1], c = mesh.indices[f * 3 + 2];
    referenced[a] = referenced[b] = referenced[c] = 1;
    parent[find(a)] = find(b);
    parent[find(b)] = find(c);
  }
  for (uint32_t v = 0; v < mesh.vertex_count(); ++v) {
    if (!referenced[v]) continue;
    ++topology.vertices;
    topology.components += find(v) == v;
  }
  return topology;
}

TriangleDistanceIndex::TriangleDistanceIndex(const Mesh& mesh) : mesh_(mesh) {
  const size_t faces = mesh.face_count();
  if (faces == 0) return;
  faces_.resize(faces);
  std::iota(faces_.begin(), faces_.end(), 0u);
  std::vector<float> centroids(faces * 3);
  for (size_t f = 0; f < faces; ++f)
    for (int a = 0; a < 3; ++a) {
      float sum = 0;
      for (int c = 0; c < 3; ++c) sum += mesh.positions[size_t(mesh.indices[f * 3 + size_t(c)]) * 3 + size_t(a)];
      centroids[f * 3 + size_t(a)] = sum / 3.f;
    }
  nodes_.reserve(faces);
  nodes_.emplace_back();
  build(0, uint32_t(faces), centroids);
}

// Fills node `index` (already allocated) for faces_[begin, end).
uint32_t TriangleDistanceIndex::build(uint32_t begin, uint32_t end, std::vector<float>& centroids) {
  const uint32_t index = uint32_t(nodes_.size() - 1);
  std::vector<uint32_t> stack_begin{begin}, stack_end{end}, stack_node{index};
  while (!stack_node.empty()) {
    const uint32_t lo = stack_begin.back(), hi = stack_end.back(), node = stack_node.back();
    stack_begin.pop_back();
    stack_end.pop_back();
    stack_node.pop_back();
    Node box;
    for (int a = 0; a < 3; ++a) {
      box.low[a] = INFINITY;
      box.high[a] = -INFINITY;
    }
    for (uint32_t i = lo; i < hi; ++i)
      for (int c = 0; c < 3; ++c) {
        const float* p = &mesh_.positions[size_t(mesh_.indices[size_t(faces_[i]) * 3 + size_t(c)]) * 3];
        for (int a = 0; a < 3; ++a) {
          box.low[a] = std::min(box.low[a], p[a]);
          box.high[a] = std::max(box.high[a], p[a]);
        }
      }
    constexpr uint32_t kLeafFaces = 4;
    if (hi - lo <= kLeafFaces) {
      box.first = lo;
      box.count = hi - lo;
      nodes_[node] = box;
      continue;
    }
    int axis = 0;
    for (int a = 1; a < 3; ++a)
      if (box.high[a] - box.low[a] > box.high[axis] - box.low[axis]) axis = a;
    const uint32_t middle = lo + (hi - lo) / 2;
    std::nth_element(faces_.begin() + lo, faces_.begin() + middle, faces_.begin() + hi, [&](uint32_t x, uint32_t y) {
      return centroids[size_t(x) * 3 + size_t(axis)] < centroids[size_t(y) * 3 + size_t(axis)];
    });
    box.first = uint32_t(nodes_.size());
    box.count = 0;
    nodes_[node] = box;
    nodes_.emplace_back();
    nodes_.emplace_back();
    stack_begin.insert(stack_begin.end(), {lo, middle});
    stack_end.insert(stack_end.end(), {middle, hi});
    stack_node.insert(stack_node.end(), {box.first, box.first + 1});
  }
  return index;
}

double TriangleDistanceIndex::distance(const float point[3], uint32_t* nearest_face) const {
  if (nodes_.empty()) return INFINITY;
  const Vec3 p{point[0], point[1], point[2]};
  auto box_distance2 = [&](const Node& node) {
    double sum = 0;
    const double x[3] = {p.x, p.y, p.z};
    for (int a = 0; a < 3; ++a) {
      const double d = std::max({double(node.low[a]) - x[a], 0.0, x[a] - double(node.high[a])});
      sum += d * d;
    }
    return sum;
  };
  double best2 = INFINITY;
  uint32_t best_face = 0;
  std::vector<std::pair<double, uint32_t>> stack;  // (box distance², node)
  stack.reserve(64);
  stack.push_back({box_distance2(nodes_[0]), 0});
  while (!stack.empty()) {
    const auto [bound, index] = stack.back();
    stack.pop_back();
    if (bound >= best2) continue;
    const Node& node = nodes_[index];
    if (node.count > 0) {
      for (uint32_t i = node.first; i < node.first + node.count; ++i) {
        const uint32_t f = faces_[i];
        const Vec3 q = closest_point_on_triangle(p, vertex(mesh_, mesh_.indices[size_t(f) * 3]),
                                                 vertex(mesh_, mesh_.indices[size_t(f) * 3 + 1]),
                                                 vertex(mesh_, mesh_.indices[size_t(f) * 3 + 2]));
        const double d2 = dot(p - q, p - q);
        if (d2 < best2) {
          best2 = d2;
          best_face = f;
        }
      }
      continue;
    }
    // Nearer child last, so it is taken first.
    const double left = box_distance2(nodes_[node.first]), right = box_distance2(nodes_[node.first + 1]);
    if (left < right) {
      stack.push_back({right, node.first + 1});
      stack.push_back({left, node.first});
    } else {
      stack.push_back({left, node.first});
      stack.push_back({right, node.first + 1});
    }
  }
  if (nearest_face) *nearest_face = best_face;
  return std::sqrt(best2);
}

Result<ChamferDistance> chamfer_distance(const Mesh& a, const Mesh& b, const ChamferOptions& options) {
  CUBEFORGE_TRY(check_mesh_indices(a, "Chamfer distance, first mesh"));
  CUBEFORGE_TRY(check_mesh_indices(b, "Chamfer distance, second mesh"));
  if (a.empty() || b.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "Chamfer distance needs two meshes with faces (got " +
                                                       std::to_string(a.face_count()) + " and " +
                                                       std::to_string(b.face_count()) + ")");
  }
  ChamferDistance result;
  auto one_way = [&](const Mesh& from, const Mesh& to, double& mean) -> Status {
    SurfaceSamplingOptions sampling;
    sampling.count = options.samples;
    sampling.seed = options.seed;
    CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> samples, sample_surface(from, sampling));
    std::vector<float> points;
    points.reserve(size_t(options.samples) * 3 + (options.include_vertices ? from.positions.size() : 0));
    for (int64_t s = 0; s < options.samples; ++s)
      points.insert(points.end(), &samples[size_t(s) * 6], &samples[size_t(s) * 6] + 3);
    if (options.include_vertices) points.insert(points.end(), from.positions.begin(), from.positions.end());
    const TriangleDistanceIndex index(to);
    const int64_t count = int64_t(points.size() / 3);
    double sum = 0, largest = 0;
    std::mutex merge;
    parallel_for(count, 256, [&](int64_t begin, int64_t end) {
      double part_sum = 0, part_largest = 0;
      for (int64_t p = begin; p < end; ++p) {
        const double d = index.distance(&points[size_t(p) * 3]);
        part_sum += d;
        part_largest = std::max(part_largest, d);
      }
      std::lock_guard<std::mutex> lock(merge);
      sum += part_sum;
      largest = std::max(largest, part_largest);
    });
    mean = sum / double(count);
    result.hausdorff = std::max(result.hausdorff, largest);
    return ok_status();
  };
  CUBEFORGE_TRY(one_way(a, b, result.a_to_b));
  CUBEFORGE_TRY(one_way(b, a, result.b_to_a));
  result.symmetric = 0.5 * (result.a_to_b + result.b_to_a);
  return result;
}

uint64_t inside_grid_coverage(const Mesh& mesh, const GridSpec& spec) {
  const std::vector<float> axis = grid_axis_coordinates(spec);
  // The same columns, nudged the same way, as mesh_inside_grid visits.
  const double nudge_y = spec.cell_size() * 0.0137;
  const double nudge_z = spec.cell_size() * 0.0071;
  auto column_span = [&](double low, double high) -> uint64_t {
    const int64_t first =
        std::max<int64_t>(0, (std::lower_bound(axis.begin(), axis.end(), float(low)) - axis.begin()) - 1);
    const int64_t last =
        std::partition_point(axis.begin(), axis.end(), [&](float a) { return double(a) <= high + 1e-9; }) - axis.begin();
    return uint64_t(std::max<int64_t>(0, last - first));
  };
  uint64_t coverage = 0;
  for (size_t f = 0; f < mesh.face_count(); ++f) {
    double low_y = INFINITY, high_y = -INFINITY, low_z = INFINITY, high_z = -INFINITY;
    for (int c = 0; c < 3; ++c) {
      const Vec3 p = vertex(mesh, mesh.indices[f * 3 + size_t(c)]);
      low_y = std::min(low_y, p.y);
      high_y = std::max(high_y, p.y);
      low_z = std::min(low_z, p.z);
      high_z = std::max(high_z, p.z);
    }
    coverage = saturating_add(coverage, saturating_multiply(column_span(low_y - nudge_y, high_y - nudge_y),
                                                            column_span(low_z - nudge_z, high_z - nudge_z)));
  }
  return coverage;
}

Status check_inside_grid_coverage(const Mesh& mesh, const GridSpec& spec) {
  CUBEFORGE_TRY(check_mesh_indices(mesh, "inside test"));
  const int64_t n = spec.points_per_axis();
  return check_input_budget(InputBudget::kMeshGridCoverage, inside_grid_coverage(mesh, spec),
                            "measuring the inside of a mesh of " + std::to_string(mesh.face_count()) +
                                " faces on a grid of " + std::to_string(n) + " x " + std::to_string(n) + " columns");
}

Result<std::vector<uint8_t>> mesh_inside_grid(const Mesh& mesh, const GridSpec& spec) {
  CUBEFORGE_TRY(check_mesh_indices(mesh, "inside test"));
  const std::vector<float> axis = grid_axis_coordinates(spec);
  const int64_t n = spec.points_per_axis();
  // Rays run along +x through (y, z) columns nudged off the grid lines by an
  // irrational fraction of a cell: marching-cubes vertices lie on grid lines,
  // and a ray through a vertex or along an edge is the case to avoid.
  const double nudge_y = spec.cell_size() * 0.0137;
  const double nudge_z = spec.cell_size() * 0.0071;
  CUBEFORGE_TRY(check_inside_grid_coverage(mesh, spec));
  std::vector<std::vector<float>> crossings(size_t(n * n));

  struct Point2 {
    double y, z;
  };
  for (size_t f = 0; f < mesh.face_count(); ++f) {
    Vec3 corner[3];
    for (int c = 0; c < 3; ++c) corner[c] = vertex(mesh, mesh.indices[f * 3 + size_t(c)]);
    // Edge functions computed in one canonical order per edge, so two faces
    // sharing an edge get exactly opposite values and a ray on the edge is
    // counted once.
    auto edge_function = [](const Vec3& p, const Vec3& q, const Point2& x) {
      const bool canonical = std::tie(p.y, p.z) < std::tie(q.y, q.z);
      const Vec3& from = canonical ? p : q;
      const Vec3& to = canonical ? q : p;
      const double value = (to.y - from.y) * (x.z - from.z) - (to.z - from.z) * (x.y - from.y);
      return canonical ? value : -value;
    };
    const double area2 = (corner[1].y - corner[0].y) * (corner[2].z - corner[0].z) -
                         (corner[1].z - corner[0].z) * (corner[2].y - corner[0].y);
    if (area2 == 0) continue;  // seen edge-on from the rays
    if (area2 < 0) std::swap(corner[1], corner[2]);
    const double min_y = std::min({corner[0].y, corner[1].y, corner[2].y}) - nudge_y;
    const double max_y = std::max({corner[0].y, corner[1].y, corner[2].y}) - nudge_y;
    const double min_z = std::min({corner[0].z, corner[1].z, corner[2].z}) - nudge_z;
    const double max_z = std::max({corner[0].z, corner[1].z, corner[2].z}) - nudge_z;
    const int64_t j0 = std::lower_bound(axis.begin(), axis.end(), float(min_y)) - axis.begin();
    const int64_t k0 = std::lower_bound(axis.begin(), axis.end(), float(min_z)) - axis.begin();
    for (int64_t j = std::max<int64_t>(0, j0 - 1); j < n && double(axis[size_t(j)]) <= max_y + 1e-9; ++j) {
      for (int64_t k = std::max<int64_t>(0, k0 - 1); k < n && double(axis[size_t(k)]) <= max_z + 1e-9; ++k) {
        const Point2 x{double(axis[size_t(j)]) + nudge_y, double(axis[size_t(k)]) + nudge_z};
        double w[3];
        bool inside = true;
        for (int e = 0; e < 3 && inside; ++e) {
          const Vec3& p = corner[(e + 1) % 3];
          const Vec3& q = corner[(e + 2) % 3];
          w[e] = edge_function(p, q, x);  // weight of corner e
          // Ties go to the face whose edge points up (or right when level).
          const bool owns = (q.z - p.z) > 0 || ((q.z - p.z) == 0 && (q.y - p.y) < 0);
          inside = w[e] > 0 || (w[e] == 0 && owns);
        }
        if (!inside) continue;
        const double sum = w[0] + w[1] + w[2];
        const double crossing_x = (w[0] * corner[0].x + w[1] * corner[1].x + w[2] * corner[2].x) / sum;
        crossings[size_t(j * n + k)].push_back(float(crossing_x));
      }
    }
  }

  std::vector<uint8_t> inside(size_t(spec.point_count()), 0);
  parallel_for_each(n * n, true, [&](int64_t column) {
    std::vector<float>& xs = crossings[size_t(column)];
    if (xs.empty()) return;
    std::sort(xs.begin(), xs.end());
    size_t passed = 0;
    const int64_t j = column / n, k = column % n;
    for (int64_t i = 0; i < n; ++i) {
      while (passed < xs.size() && xs[passed] < axis[size_t(i)]) ++passed;
      inside[size_t(spec.point_index(i, j, k))] = passed & 1;
    }
  });
  return inside;
}

double occupancy_iou(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  CUBEFORGE_CHECK(a.size() == b.size(), "IoU of grids of different sizes");
  int64_t both = 0, either = 0;
  for (size_t p = 0; p < a.size(); ++p) {
    both += a[p] && b[p];
    either += a[p] || b[p];
  }
  return either == 0 ? 1.0 : double(both) / double(either);
}

double occupancy_iou(std::span<const float> a, std::span<const float> b, float level) {
  CUBEFORGE_CHECK(a.size() == b.size(), "IoU of grids of different sizes");
  int64_t both = 0, either = 0;
  for (size_t p = 0; p < a.size(); ++p) {
    const bool in_a = a[p] > level, in_b = b[p] > level;
    both += in_a && in_b;
    either += in_a || in_b;
  }
  return either == 0 ? 1.0 : double(both) / double(either);
}

Result<double> mesh_iou(const Mesh& a, const Mesh& b, const GridSpec& spec) {
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<uint8_t> inside_a, mesh_inside_grid(a, spec));
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<uint8_t> inside_b, mesh_inside_grid(b, spec));
  return occupancy_iou(std::span<const uint8_t>(inside_a), std::span<const uint8_t>(inside_b));
}

}  // namespace cubeforge
