// Marching cubes: the case table is generated at first use from the rules in
// the header; the sweep goes slab by slab along x so that the per-edge vertex
// ids it keeps cost two planes of the grid, not the whole grid.
//
// Cube numbering. Corner c has offsets (c & 1, c >> 1 & 1, c >> 2 & 1) in
// (x, y, z). Edge e runs along axis a = e / 4; with b = (a + 1) % 3 and
// c = (a + 2) % 3 its offsets are (e & 1) along b and (e >> 1 & 1) along c.
// Face f lies on axis f / 2 at side f % 2.
#include "inference/geometry/marching_cubes.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "inference/core/thread_pool.h"

namespace cubeforge {

namespace {

constexpr int kCorners = 8;
constexpr int kEdges = 12;
constexpr int kFaces = 6;
constexpr int kCentreCode = 12;  // triangle codes >= 12 name a loop's centre vertex

int corner_of(int x, int y, int z) { return x | (y << 1) | (z << 2); }
int corner_offset(int corner, int axis) { return (corner >> axis) & 1; }

struct CubeGeometry {
  std::array<std::array<int, 2>, kEdges> edge_corners{};        // low, high end
  std::array<std::array<int, kCorners>, kCorners> edge_between{};  // -1 if none
  std::array<std::array<int, 4>, kFaces> face_corners{};        // counter-clockwise from outside
  std::array<std::array<int, 2>, kEdges> edge_faces{};

  CubeGeometry() {
    for (auto& row : edge_between) row.fill(-1);
    for (int e = 0; e < kEdges; ++e) {
      const int a = e / 4, b = (a + 1) % 3, c = (a + 2) % 3;
      int offsets[3];
      offsets[a] = 0;
      offsets[b] = e & 1;
      offsets[c] = (e >> 1) & 1;
      const int low = corner_of(offsets[0], offsets[1], offsets[2]);
      offsets[a] = 1;
      const int high = corner_of(offsets[0], offsets[1], offsets[2]);
      edge_corners[e] = {low, high};
      edge_between[low][high] = edge_between[high][low] = e;
      edge_faces[e] = {b * 2 + (e & 1), c * 2 + ((e >> 1) & 1)};
    }
    for (int f = 0; f < kFaces; ++f) {
      const int a = f / 2, side = f % 2, b = (a + 1) % 3, c = (a + 2) % 3;
      // Seen from outside, counter-clockwise runs b then c around +a (since
      // e_b x e_c = e_a), and the other way round on the low side.
      const int plus[4][2] = {{0, 0}, {1, 0}, {1, 1}, {0, 1}};
      const int minus[4][2] = {{0, 0}, {0, 1}, {1, 1}, {1, 0}};
      for (int t = 0; t < 4; ++t) {
        int offsets[3];
        offsets[a] = side;
        offsets[b] = side ? plus[t][0] : minus[t][0];
        offsets[c] = side ? plus[t][1] : minus[t][1];
        face_corners[f][t] = corner_of(offsets[0], offsets[1], offsets[2]);
      }
    }
  }

  bool edges_share_face(int e1, int e2) const {
    for (int f1 : edge_faces[e1])
      for (int f2 : edge_faces[e2])
        if (f1 == f2) return true;
    return false;
  }
};

const CubeGeometry& cube_geometry() {
  static const CubeGeometry geometry;
  return geometry;
}

struct CaseEntry {
  std::vector<std::array<uint8_t, 3>> triangles;  // edge codes, or kCentreCode + centre
  std::vector<std::vector<uint8_t>> centres;      // the edges around each centre vertex
};

// Splits a loop of edge codes into triangles without a diagonal between two
// edges of one cube face (the neighbouring cube could draw the same edge).
// Returns false when no such split exists.
bool triangulate_loop(const std::vector<int>& loop, const CubeGeometry& cube,
                      std::vector<std::array<uint8_t, 3>>& triangles) {
  const int k = int(loop.size());
  auto chord_allowed = [&](int i, int j) {
    if (j - i == 1 || (i == 0 && j == k - 1)) return true;  // a side of the loop
    return !cube.edges_share_face(loop[size_t(i)], loop[size_t(j)]);
  };
  // apex[i][j]: the third corner of the triangle on chord (i, j) in a valid
  // split of loop[i..j], -1 when there is none; -2 when j == i + 1.
  std::vector<std::vector<int>> apex(size_t(k), std::vector<int>(size_t(k), -1));
  for (int i = 0; i + 1 < k; ++i) apex[size_t(i)][size_t(i + 1)] = -2;
  for (int length = 2; length < k; ++length) {
    for (int i = 0; i + length < k; ++i) {
      const int j = i + length;
      if (!chord_allowed(i, j)) continue;
      for (int m = i + 1; m < j; ++m) {
        if (apex[size_t(i)][size_t(m)] == -1 || apex[size_t(m)][size_t(j)] == -1) continue;
        if (!chord_allowed(i, m) || !chord_allowed(m, j)) continue;
        apex[size_t(i)][size_t(j)] = m;
        break;
      }
    }
  }
  if (apex[0][size_t(k - 1)] == -1) return false;
  std::vector<std::pair<int, int>> stack{{0, k - 1}};
  while (!stack.empty()) {
    auto [i, j] = stack.back();
    stack.pop_back();
    const int m = apex[size_t(i)][size_t(j)];
    if (m < 0) continue;
    triangles.push_back({uint8_t(loop[size_t(i)]), uint8_t(loop[size_t(m)]), uint8_t(loop[size_t(j)])});
    stack.push_back({i, m});
    stack.push_back({m, j});
  }
  return true;
}

// `inside` has bit c set for corners with value > level; bit f of
// `connected` says whether the inside corners of ambiguous face f join.
CaseEntry build_case(int inside, int connected) {
  const CubeGeometry& cube = cube_geometry();
  std::array<int, kEdges> next;
  next.fill(-1);
  for (int f = 0; f < kFaces; ++f) {
    const auto& q = cube.face_corners[f];
    bool in[4];
    int crossings = 0;
    for (int t = 0; t < 4; ++t) in[t] = (inside >> q[t]) & 1;
    for (int t = 0; t < 4; ++t) crossings += in[t] != in[(t + 1) % 4];
    if (crossings == 0) continue;
    auto face_edge = [&](int t) { return cube.edge_between[q[((t % 4) + 4) % 4]][q[(((t + 1) % 4) + 4) % 4]]; };
    // Walking the face counter-clockwise from outside, a segment runs from an
    // edge where we step inside to one where we step outside, which keeps the
    // inside on its right: the triangles then face away from the inside.
    for (int t = 0; t < 4; ++t) {
      if (in[t] || !in[(t + 1) % 4]) continue;  // not an entering edge
      int leaving = -1;
      if (crossings == 2) {
        for (int u = 0; u < 4; ++u)
          if (in[u] && !in[(u + 1) % 4]) leaving = face_edge(u);
      } else {
        // Four crossings: separate inside corners are cut off one by one (the
        // next edge), joined ones leave the outside corners cut off (the
        // previous edge).
        leaving = ((connected >> f) & 1) ? face_edge(t - 1) : face_edge(t + 1);
      }
      next[size_t(face_edge(t))] = leaving;
    }
  }

  CaseEntry entry;
  std::array<bool, kEdges> used{};
  for (int start = 0; start < kEdges; ++start) {
    if (next[size_t(start)] < 0 || used[size_t(start)]) continue;
    std::vector<int> loop;
    for (int e = start; !used[size_t(e)]; e = next[size_t(e)]) {
      CUBEFORGE_CHECK(e >= 0, "marching cubes: a surface loop does not close");
      used[size_t(e)] = true;
      loop.push_back(e);
    }
    CUBEFORGE_CHECK(loop.size() >= 3, "marching cubes: a surface loop has fewer than three edges");
    if (!triangulate_loop(loop, cube, entry.triangles)) {
      const uint8_t centre = uint8_t(kCentreCode + entry.centres.size());
      entry.centres.emplace_back(loop.begin(), loop.end());
      for (size_t t = 0; t < loop.size(); ++t)
        entry.triangles.push_back({centre, uint8_t(loop[t]), uint8_t(loop[(t + 1) % loop.size()])});
    }
  }
  return entry;
}

const std::vector<CaseEntry>& case_table() {
  static const std::vector<CaseEntry> table = [] {
    std::vector<CaseEntry> cases(size_t(256) << kFaces);
    for (int connected = 0; connected < (1 << kFaces); ++connected)
      for (int inside = 0; inside < 256; ++inside) cases[size_t(inside | (connected << 8))] = build_case(inside, connected);
    return cases;
  }();
  return table;
}

}  // namespace

int marching_cubes_cases_with_centre_vertex() {
  int count = 0;
  for (const CaseEntry& entry : case_table()) count += !entry.centres.empty();
  return count;
}

namespace {

constexpr uint32_t kNoVertex = std::numeric_limits<uint32_t>::max();

// The mesh of the cells in slabs [begin, end) along x, with its own vertex ids,
// and the ids of its vertices on y- and z-edges in the planes x = begin and
// x = end: the neighbouring parts made the same vertices there.
struct SlabsMesh {
  std::vector<float> positions;
  std::vector<uint32_t> indices;
  std::vector<uint32_t> first_y, first_z, last_y, last_z;  // indexed j * n + k
  bool too_many_vertices = false;
};

SlabsMesh mesh_slabs(std::span<const float> values, const GridSpec& spec, const MarchingCubesOptions& options,
                     int64_t begin, int64_t end) {
  const CubeGeometry& cube = cube_geometry();
  const std::vector<CaseEntry>& table = case_table();
  const int64_t n = spec.points_per_axis();
  const int64_t m = spec.cells_per_axis();
  const float level = options.level;

  // Index space to world: the cell-size mapping, or the reference's.
  const double extent = double(spec.upper) - double(spec.lower);
  const double scale = options.mapping == VertexMapping::kReference ? extent / double(n) : extent / double(m);
  const double offset = double(spec.lower);

  SlabsMesh mesh;
  constexpr uint32_t kNone = kNoVertex;
  // Vertex ids of the x-edges of the current slab and of the y/z-edges in the
  // slab's low and high planes, indexed j * n + k.
  std::vector<uint32_t> x_edges(size_t(n * n)), low_y(size_t(n * n), kNone), low_z(size_t(n * n), kNone),
      high_y(size_t(n * n)), high_z(size_t(n * n));

  auto value_at = [&](int64_t i, int64_t j, int64_t k) { return values[size_t((i * n + j) * n + k)]; };
  auto add_vertex = [&](double x, double y, double z) -> uint32_t {
    const size_t id = mesh.positions.size() / 3;
    if (id >= size_t(kNone)) {
      mesh.too_many_vertices = true;
      return 0;
    }
    mesh.positions.push_back(float(x * scale + offset));
    mesh.positions.push_back(float(y * scale + offset));
    mesh.positions.push_back(float(z * scale + offset));
    return uint32_t(id);
  };
  // The vertex on the grid edge from point (i, j, k) along `axis`.
  auto edge_vertex = [&](int64_t i, int64_t j, int64_t k, int axis) -> uint32_t {
    const int64_t step[3] = {axis == 0, axis == 1, axis == 2};
    const float v0 = value_at(i, j, k);
    const float v1 = value_at(i + step[0], j + step[1], k + step[2]);
    const double t = (double(level) - double(v0)) / (double(v1) - double(v0));
    return add_vertex(double(i) + t * double(step[0]), double(j) + t * double(step[1]), double(k) + t * double(step[2]));
  };

  std::vector<uint8_t> row_inside(static_cast<size_t>(n));
  for (int64_t i = begin; i < end; ++i) {
    std::fill(x_edges.begin(), x_edges.end(), kNone);
    std::fill(high_y.begin(), high_y.end(), kNone);
    std::fill(high_z.begin(), high_z.end(), kNone);
    for (int64_t j = 0; j < m; ++j) {
      // Which of the four rows along k are inside at each k (bit = corner
      // number below 4); a cell's configuration is then two neighbouring
      // entries, and the cells the surface misses are skipped in a tight loop.
      const float* rows[4] = {&values[size_t((i * n + j) * n)], &values[size_t(((i + 1) * n + j) * n)],
                              &values[size_t((i * n + j + 1) * n)], &values[size_t(((i + 1) * n + j + 1) * n)]};
      uint8_t any_inside = 0, all_inside = 0xf;
      for (int64_t k = 0; k < n; ++k) {
        const uint8_t bits = uint8_t(int(rows[0][k] > level) | int(rows[1][k] > level) << 1 |
                                     int(rows[2][k] > level) << 2 | int(rows[3][k] > level) << 3);
        row_inside[size_t(k)] = bits;
        any_inside |= bits;
        all_inside &= bits;
      }
      if (any_inside == 0 || all_inside == 0xf) continue;
      for (int64_t k = 0; k < m; ++k) {
        const int inside = row_inside[size_t(k)] | row_inside[size_t(k + 1)] << 4;
        if (inside == 0 || inside == 255) continue;
        float corner_values[kCorners];
        for (int c = 0; c < kCorners; ++c)
          corner_values[c] = value_at(i + (c & 1), j + ((c >> 1) & 1), k + ((c >> 2) & 1)) - level;
        int connected = 0;
        for (int f = 0; f < kFaces; ++f) {
          const auto& q = cube.face_corners[f];
          const bool in0 = (inside >> q[0]) & 1, in1 = (inside >> q[1]) & 1;
          const bool in2 = (inside >> q[2]) & 1, in3 = (inside >> q[3]) & 1;
          if (in0 != in2 || in1 != in3 || in0 == in1) continue;
          // Asymptotic decider: the inside corners join through the face when
          // the bilinear saddle is inside, i.e. when the product of the inside
          // diagonal exceeds that of the outside one.
          const float diagonal02 = corner_values[q[0]] * corner_values[q[2]];
          const float diagonal13 = corner_values[q[1]] * corner_values[q[3]];
          const bool joined = in0 ? diagonal02 > diagonal13 : diagonal13 > diagonal02;
          connected |= int(joined) << f;
        }
        const CaseEntry& entry = table[size_t(inside | (connected << 8))];

        uint32_t ids[kEdges + 4];
        bool have[kEdges + 4] = {};
        auto vertex_for = [&](uint8_t code) -> uint32_t {
          if (have[code]) return ids[code];
          uint32_t id;
          if (code >= kCentreCode) {
            double sum[3] = {0, 0, 0};
            const auto& ring = entry.centres[size_t(code - kCentreCode)];
            for (uint8_t e : ring) {
              const uint32_t v = ids[e];  // every ring edge got its vertex first (see below)
              for (int a = 0; a < 3; ++a) sum[a] += (double(mesh.positions[size_t(v) * 3 + a]) - offset) / scale;
            }
            const double count = double(ring.size());
            id = add_vertex(sum[0] / count, sum[1] / count, sum[2] / count);
          } else {
            const int e = code, a = e / 4;
            const int low = cube.edge_corners[size_t(e)][0];
            const int64_t pi = i + corner_offset(low, 0), pj = j + corner_offset(low, 1), pk = k + corner_offset(low, 2);
            uint32_t* slot;
            if (a == 0) slot = &x_edges[size_t(pj * n + pk)];
            else if (a == 1) slot = corner_offset(low, 0) ? &high_y[size_t(pj * n + pk)] : &low_y[size_t(pj * n + pk)];
            else slot = corner_offset(low, 0) ? &high_z[size_t(pj * n + pk)] : &low_z[size_t(pj * n + pk)];
            if (*slot == kNone) *slot = edge_vertex(pi, pj, pk, a);
            id = *slot;
          }
          have[code] = true;
          ids[code] = id;
          return id;
        };
        // Edge vertices first, so centres can average them.
        for (const auto& triangle : entry.triangles)
          for (uint8_t code : triangle)
            if (code < kCentreCode) vertex_for(code);
        for (const auto& triangle : entry.triangles) {
          for (uint8_t code : triangle) mesh.indices.push_back(vertex_for(code));
        }
      }
    }
    if (i == begin) {
      mesh.first_y = low_y;
      mesh.first_z = low_z;
    }
    std::swap(low_y, high_y);
    std::swap(low_z, high_z);
    if (mesh.too_many_vertices) return mesh;
  }
  mesh.last_y = std::move(low_y);
  mesh.last_z = std::move(low_z);
  return mesh;
}

}  // namespace

Result<Mesh> marching_cubes(std::span<const float> values, const GridSpec& spec, const MarchingCubesOptions& options) {
  if (spec.resolution < 1 || spec.resolution > 10) {
    return make_error(ErrorCode::kInvalidArgument,
                      "marching cubes: grid resolution " + std::to_string(spec.resolution) + " is out of range 1..10");
  }
  if (int64_t(values.size()) != spec.point_count()) {
    return make_error(ErrorCode::kInvalidArgument,
                      "marching cubes: " + std::to_string(values.size()) + " values for a grid of " +
                          std::to_string(spec.points_per_axis()) + "^3 = " + std::to_string(spec.point_count()) +
                          " points");
  }
  const int64_t n = spec.points_per_axis();
  const int64_t m = spec.cells_per_axis();
  const int64_t wanted = options.parts > 0 ? options.parts : 4 * int64_t(ThreadPool::global().size());
  // At least four slabs per part: a part re-makes the vertices of its first plane.
  const int64_t parts = std::clamp<int64_t>(std::min(wanted, m / 4), 1, m);
  std::vector<SlabsMesh> slabs(static_cast<size_t>(parts));
  parallel_for_each(parts, parts > 1, [&](int64_t part) {
    slabs[size_t(part)] = mesh_slabs(values, spec, options, m * part / parts, m * (part + 1) / parts);
  });

  // Join the parts in order. A part's vertices on its first plane are the
  // previous part's on its last plane (the same edge, the same arithmetic), so
  // they are dropped and their ids taken from there; the rest keep their order,
  // which makes the mesh the same, vertex for vertex, as one sweep's.
  const auto too_many = [] {
    return make_error(ErrorCode::kUnsupported,
                      "marching cubes: the surface needs more than 2^32 vertices; use a lower grid resolution");
  };
  Mesh mesh;
  size_t total_indices = 0;
  for (const SlabsMesh& part : slabs) {
    if (part.too_many_vertices) return too_many();
    total_indices += part.indices.size();
  }
  mesh.indices.reserve(total_indices);
  std::vector<uint32_t> previous_last_y, previous_last_z;
  for (SlabsMesh& part : slabs) {
    const size_t count = part.positions.size() / 3;
    std::vector<uint32_t> global(count, kNoVertex);
    if (!previous_last_y.empty()) {
      for (size_t jk = 0; jk < size_t(n * n); ++jk) {
        if (part.first_y[jk] != kNoVertex) global[part.first_y[jk]] = previous_last_y[jk];
        if (part.first_z[jk] != kNoVertex) global[part.first_z[jk]] = previous_last_z[jk];
      }
    }
    for (size_t v = 0; v < count; ++v) {
      if (global[v] != kNoVertex) continue;
      const size_t id = mesh.positions.size() / 3;
      if (id >= size_t(kNoVertex)) return too_many();
      global[v] = uint32_t(id);
      mesh.positions.insert(mesh.positions.end(), part.positions.begin() + std::ptrdiff_t(v * 3),
                            part.positions.begin() + std::ptrdiff_t(v * 3 + 3));
    }
    for (uint32_t index : part.indices) mesh.indices.push_back(global[index]);
    const auto to_global = [&](const std::vector<uint32_t>& plane) {
      std::vector<uint32_t> ids(plane.size(), kNoVertex);
      for (size_t jk = 0; jk < plane.size(); ++jk)
        if (plane[jk] != kNoVertex) ids[jk] = global[plane[jk]];
      return ids;
    };
    previous_last_y = to_global(part.last_y);
    previous_last_z = to_global(part.last_z);
    part = SlabsMesh{};  // release the part's memory as the mesh grows
  }
  return mesh;
}

Result<Mesh> marching_cubes(const ScalarGrid& grid, const MarchingCubesOptions& options) {
  return marching_cubes(grid.values, grid.spec, options);
}

}  // namespace cubeforge
