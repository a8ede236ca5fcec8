// Mesh measurements: sums over faces, edge bookkeeping by sorting, a bucket
// grid for nearest-triangle queries, and ray parity for inside tests.
#include "inference/geometry/mesh_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>
#include <string>

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

Status check_indices(const Mesh& mesh, const char* what) {
  if (mesh.indices.size() % 3 != 0) {
    return make_error(ErrorCode::kInvalidArgument, std::string(what) + ": index count " +
                                                       std::to_string(mesh.indices.size()) + " is not a multiple of 3");
  }
  for (uint32_t v : mesh.indices)
    if (size_t(v) >= mesh.vertex_count())
      return make_error(ErrorCode::kInvalidArgument, std::string(what) + ": index " + std::to_string(v) +
                                                         " is out of range (" + std::to_string(mesh.vertex_count()) +
                                                         " vertices)");
  return ok_status();
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
  const Bounds3 bounds = mesh.bounds();
  const size_t faces = mesh.face_count();
  if (faces == 0 || bounds.empty) {
    bucket_start_.assign(2, 0);
    return;
  }
  double extent[3];
  for (int a = 0; a < 3; ++a) extent[a] = std::max(double(bounds.max[a] - bounds.min[a]), 1e-9);
  // About two faces per bucket along a surface: cells ~ sqrt(faces) per axis
  // spread over the box's proportions.
  const double target_cells = std::max(1.0, 2.0 * std::pow(double(faces), 1.5) / 8.0);
  const double unit = std::cbrt(extent[0] * extent[1] * extent[2] / std::min(target_cells, 8.0e6));
  for (int a = 0; a < 3; ++a) {
    cells_[a] = std::clamp<int64_t>(int64_t(std::ceil(extent[a] / unit)), 1, 256);
    cell_[a] = extent[a] / double(cells_[a]);
    low_[a] = bounds.min[a];
  }
  const int64_t bucket_count = cells_[0] * cells_[1] * cells_[2];
  auto cell_range = [&](size_t f, int64_t lo[3], int64_t hi[3]) {
    for (int a = 0; a < 3; ++a) {
      double mn = INFINITY, mx = -INFINITY;
      for (int c = 0; c < 3; ++c) {
        const double v = mesh.positions[size_t(mesh.indices[f * 3 + size_t(c)]) * 3 + size_t(a)];
        mn = std::min(mn, v);
        mx = std::max(mx, v);
      }
      lo[a] = std::clamp<int64_t>(int64_t(std::floor((mn - low_[a]) / cell_[a])), 0, cells_[a] - 1);
      hi[a] = std::clamp<int64_t>(int64_t(std::floor((mx - low_[a]) / cell_[a])), 0, cells_[a] - 1);
    }
  };
  std::vector<uint32_t> counts(size_t(bucket_count) + 1, 0);
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      bucket_start_.assign(size_t(bucket_count) + 1, 0);
      for (int64_t b = 0; b < bucket_count; ++b) bucket_start_[size_t(b) + 1] = bucket_start_[size_t(b)] + counts[size_t(b)];
      bucket_faces_.resize(bucket_start_.back());
      std::fill(counts.begin(), counts.end(), 0);
    }
    for (size_t f = 0; f < faces; ++f) {
      int64_t lo[3], hi[3];
      cell_range(f, lo, hi);
      for (int64_t x = lo[0]; x <= hi[0]; ++x)
        for (int64_t y = lo[1]; y <= hi[1]; ++y)
          for (int64_t z = lo[2]; z <= hi[2]; ++z) {
            const int64_t bucket = (x * cells_[1] + y) * cells_[2] + z;
            if (pass == 0) ++counts[size_t(bucket)];
            else bucket_faces_[bucket_start_[size_t(bucket)] + counts[size_t(bucket)]++] = uint32_t(f);
          }
    }
  }
}

double TriangleDistanceIndex::distance(const float point[3], uint32_t* nearest_face) const {
  if (bucket_faces_.empty()) return INFINITY;
  const Vec3 p{point[0], point[1], point[2]};
  int64_t home[3];
  for (int a = 0; a < 3; ++a)
    home[a] = std::clamp<int64_t>(int64_t(std::floor((double(point[a]) - low_[a]) / cell_[a])), 0, cells_[a] - 1);
  const double smallest_cell = std::min({cell_[0], cell_[1], cell_[2]});
  const int64_t largest_ring = std::max({cells_[0], cells_[1], cells_[2]});
  double best = INFINITY;
  uint32_t best_face = 0;
  for (int64_t ring = 0; ring <= largest_ring; ++ring) {
    for (int64_t x = home[0] - ring; x <= home[0] + ring; ++x) {
      if (x < 0 || x >= cells_[0]) continue;
      for (int64_t y = home[1] - ring; y <= home[1] + ring; ++y) {
        if (y < 0 || y >= cells_[1]) continue;
        for (int64_t z = home[2] - ring; z <= home[2] + ring; ++z) {
          if (z < 0 || z >= cells_[2]) continue;
          if (std::max({std::abs(x - home[0]), std::abs(y - home[1]), std::abs(z - home[2])}) != ring) continue;
          const int64_t bucket = (x * cells_[1] + y) * cells_[2] + z;
          for (uint32_t i = bucket_start_[size_t(bucket)]; i < bucket_start_[size_t(bucket) + 1]; ++i) {
            const uint32_t f = bucket_faces_[i];
            const Vec3 q = closest_point_on_triangle(p, vertex(mesh_, mesh_.indices[size_t(f) * 3]),
                                                     vertex(mesh_, mesh_.indices[size_t(f) * 3 + 1]),
                                                     vertex(mesh_, mesh_.indices[size_t(f) * 3 + 2]));
            const double d = std::sqrt(dot(p - q, p - q));
            if (d < best) {
              best = d;
              best_face = f;
            }
          }
        }
      }
    }
    // Buckets beyond this ring are at least `ring` cells away from the point
    // (or from its projection onto the grid's box, which is nearer).
    if (best <= double(ring) * smallest_cell) break;
  }
  if (nearest_face) *nearest_face = best_face;
  return best;
}

Result<ChamferDistance> chamfer_distance(const Mesh& a, const Mesh& b, const ChamferOptions& options) {
  CUBEFORGE_TRY(check_indices(a, "Chamfer distance, first mesh"));
  CUBEFORGE_TRY(check_indices(b, "Chamfer distance, second mesh"));
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
#pragma omp parallel for reduction(+ : sum) reduction(max : largest) schedule(dynamic, 256)
    for (int64_t p = 0; p < count; ++p) {
      const double d = index.distance(&points[size_t(p) * 3]);
      sum += d;
      largest = std::max(largest, d);
    }
    mean = sum / double(count);
    result.hausdorff = std::max(result.hausdorff, largest);
    return ok_status();
  };
  CUBEFORGE_TRY(one_way(a, b, result.a_to_b));
  CUBEFORGE_TRY(one_way(b, a, result.b_to_a));
  result.symmetric = 0.5 * (result.a_to_b + result.b_to_a);
  return result;
}

Result<std::vector<uint8_t>> mesh_inside_grid(const Mesh& mesh, const GridSpec& spec) {
  CUBEFORGE_TRY(check_indices(mesh, "inside test"));
  const std::vector<float> axis = grid_axis_coordinates(spec);
  const int64_t n = spec.points_per_axis();
  // Rays run along +x through (y, z) columns nudged off the grid lines by an
  // irrational fraction of a cell: marching-cubes vertices lie on grid lines,
  // and a ray through a vertex or along an edge is the case to avoid.
  const double nudge_y = spec.cell_size() * 0.0137;
  const double nudge_z = spec.cell_size() * 0.0071;
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
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t column = 0; column < n * n; ++column) {
    std::vector<float>& xs = crossings[size_t(column)];
    if (xs.empty()) continue;
    std::sort(xs.begin(), xs.end());
    size_t passed = 0;
    const int64_t j = column / n, k = column % n;
    for (int64_t i = 0; i < n; ++i) {
      while (passed < xs.size() && xs[passed] < axis[size_t(i)]) ++passed;
      inside[size_t(spec.point_index(i, j, k))] = passed & 1;
    }
  }
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
