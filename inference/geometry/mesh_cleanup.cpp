// Mesh cleanup: hashing for welding, union-find for pieces (components),
// meshoptimizer for simplification.
#include "inference/geometry/mesh_cleanup.h"

#include <meshoptimizer.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <unordered_map>

#include "inference/geometry/mesh_metrics.h"

namespace cubeforge {

namespace {

uint64_t hash_cell(int64_t x, int64_t y, int64_t z) {
  uint64_t h = uint64_t(x) * 0x9E3779B97F4A7C15ull;
  h ^= uint64_t(y) * 0xC2B2AE3D27D4EB4Full + (h << 6) + (h >> 2);
  h ^= uint64_t(z) * 0x165667B19E3779F9ull + (h << 6) + (h >> 2);
  return h;
}

// Keeps the vertices with keep[v] and renumbers indices; all indexed
// vertices must be kept.
void compact_vertices(Mesh& mesh, const std::vector<uint8_t>& keep) {
  std::vector<uint32_t> new_index(mesh.vertex_count(), 0);
  const bool with_normals = mesh.has_normals();
  size_t next = 0;
  for (size_t v = 0; v < mesh.vertex_count(); ++v) {
    if (!keep[v]) continue;
    new_index[v] = uint32_t(next);
    for (int a = 0; a < 3; ++a) {
      mesh.positions[next * 3 + size_t(a)] = mesh.positions[v * 3 + size_t(a)];
      if (with_normals) mesh.normals[next * 3 + size_t(a)] = mesh.normals[v * 3 + size_t(a)];
    }
    ++next;
  }
  mesh.positions.resize(next * 3);
  if (with_normals) mesh.normals.resize(next * 3);
  for (uint32_t& v : mesh.indices) v = new_index[v];
}

}  // namespace

int64_t remove_unreferenced_vertices(Mesh& mesh) {
  std::vector<uint8_t> used(mesh.vertex_count(), 0);
  for (uint32_t v : mesh.indices) used[v] = 1;
  const int64_t unused = int64_t(std::count(used.begin(), used.end(), uint8_t(0)));
  if (unused > 0) compact_vertices(mesh, used);
  return unused;
}

namespace {

// For each vertex, the first vertex at exactly its position (-0 and +0 are one
// position). meshoptimizer's remap hashes the bytes, so the zeros are made one first.
std::vector<uint32_t> first_vertex_at_same_position(const Mesh& mesh) {
  const size_t count = mesh.vertex_count();
  std::vector<float> positions(mesh.positions.size());
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = mesh.positions[i] + 0.f;
  std::vector<uint32_t> remap(count);
  const size_t unique =
      meshopt_generateVertexRemap(remap.data(), nullptr, count, positions.data(), count, sizeof(float) * 3);
  // New indices follow first occurrence, so the first vertex of group g is the
  // first v with remap[v] == g.
  std::vector<uint32_t> first(unique, UINT32_MAX);
  std::vector<uint32_t> representative(count);
  for (size_t v = 0; v < count; ++v) {
    if (first[remap[v]] == UINT32_MAX) first[remap[v]] = uint32_t(v);
    representative[v] = first[remap[v]];
  }
  return representative;
}

// For each vertex, the first earlier vertex within `tolerance` of it, found
// through a hash grid of cells as wide as the tolerance.
std::vector<uint32_t> first_vertex_within(const Mesh& mesh, float tolerance) {
  const size_t count = mesh.vertex_count();
  std::vector<uint32_t> representative(count);
  const double cell = double(tolerance);
  std::unordered_multimap<uint64_t, uint32_t> buckets;
  buckets.reserve(count);
  for (size_t v = 0; v < count; ++v) {
    const float* p = &mesh.positions[v * 3];
    uint32_t found = uint32_t(v);
    const int64_t c[3] = {int64_t(std::floor(p[0] / cell)), int64_t(std::floor(p[1] / cell)),
                          int64_t(std::floor(p[2] / cell))};
    for (int64_t dx = -1; dx <= 1 && found == v; ++dx)
      for (int64_t dy = -1; dy <= 1 && found == v; ++dy)
        for (int64_t dz = -1; dz <= 1 && found == v; ++dz) {
          auto [begin, end] = buckets.equal_range(hash_cell(c[0] + dx, c[1] + dy, c[2] + dz));
          for (auto it = begin; it != end; ++it) {
            const float* r = &mesh.positions[size_t(it->second) * 3];
            const double d2 = (double(r[0]) - p[0]) * (double(r[0]) - p[0]) +
                              (double(r[1]) - p[1]) * (double(r[1]) - p[1]) +
                              (double(r[2]) - p[2]) * (double(r[2]) - p[2]);
            if (d2 <= cell * cell) {
              found = it->second;
              break;
            }
          }
        }
    if (found == v) buckets.emplace(hash_cell(c[0], c[1], c[2]), uint32_t(v));
    representative[v] = found;
  }
  return representative;
}

}  // namespace

WeldReport weld_vertices(Mesh& mesh, float tolerance) {
  WeldReport report;
  const std::vector<uint32_t> representative =
      tolerance > 0.f ? first_vertex_within(mesh, tolerance) : first_vertex_at_same_position(mesh);
  for (size_t v = 0; v < representative.size(); ++v) report.merged_vertices += representative[v] != v;

  // Faces over the same three vertices (in any order) are found by sorting
  // them by their sorted vertices; the first of each run is kept. The key is
  // packed into two words (vertices a <= b <= c, then the face) so that the
  // sort compares integers.
  struct FaceKey {
    uint64_t ab, c_face;
    bool same_vertices(const FaceKey& o) const { return ab == o.ab && (c_face >> 32) == (o.c_face >> 32); }
    bool operator<(const FaceKey& o) const { return ab != o.ab ? ab < o.ab : c_face < o.c_face; }
  };
  const size_t faces = mesh.face_count();
  std::vector<FaceKey> keys;
  keys.reserve(faces);
  std::vector<uint8_t> keep(faces, 0);
  for (size_t f = 0; f < faces; ++f) {
    for (size_t c = 0; c < 3; ++c) mesh.indices[f * 3 + c] = representative[mesh.indices[f * 3 + c]];
    const uint32_t* face = &mesh.indices[f * 3];
    if (face[0] == face[1] || face[1] == face[2] || face[0] == face[2]) {
      ++report.degenerate_faces;
      continue;
    }
    std::array<uint32_t, 3> sorted = {face[0], face[1], face[2]};
    std::sort(sorted.begin(), sorted.end());
    keys.push_back({uint64_t(sorted[0]) << 32 | sorted[1], uint64_t(sorted[2]) << 32 | uint32_t(f)});
  }
  std::sort(keys.begin(), keys.end());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i > 0 && keys[i].same_vertices(keys[i - 1])) {
      ++report.duplicate_faces;
      continue;
    }
    keep[uint32_t(keys[i].c_face)] = 1;
  }
  size_t next = 0;
  for (size_t f = 0; f < faces; ++f) {
    if (!keep[f]) continue;
    for (size_t c = 0; c < 3; ++c) mesh.indices[next * 3 + c] = mesh.indices[f * 3 + c];
    ++next;
  }
  mesh.indices.resize(next * 3);
  report.unreferenced_vertices = remove_unreferenced_vertices(mesh) - report.merged_vertices;
  return report;
}

size_t MeshPieces::solid_count() const {
  return size_t(std::count(cavity.begin(), cavity.end(), uint8_t{0}));
}

double MeshPieces::largest_volume() const {
  return volume.empty() ? 0.0 : *std::max_element(volume.begin(), volume.end());
}

MeshPieces find_pieces(const Mesh& mesh) {
  const size_t vertices = mesh.vertex_count();
  std::vector<uint32_t> parent(vertices);
  std::iota(parent.begin(), parent.end(), 0u);
  auto find = [&](uint32_t v) {
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
  };
  for (size_t f = 0; f < mesh.face_count(); ++f) {
    parent[find(mesh.indices[f * 3])] = find(mesh.indices[f * 3 + 1]);
    parent[find(mesh.indices[f * 3 + 1])] = find(mesh.indices[f * 3 + 2]);
  }
  MeshPieces pieces;
  pieces.piece_of_vertex.assign(vertices, -1);
  std::vector<uint8_t> used(vertices, 0);
  for (uint32_t v : mesh.indices) used[v] = 1;
  std::vector<int32_t> piece_of_root(vertices, -1);
  for (uint32_t v = 0; v < vertices; ++v) {
    if (!used[v]) continue;
    int32_t& piece = piece_of_root[find(v)];
    if (piece < 0) {
      piece = static_cast<int32_t>(pieces.volume.size());
      pieces.bounds.push_back({INFINITY, INFINITY, INFINITY, -INFINITY, -INFINITY, -INFINITY});
      pieces.volume.push_back(0.0);
      pieces.faces.push_back(0);
    }
    pieces.piece_of_vertex[v] = piece;
    auto& b = pieces.bounds[size_t(piece)];
    for (size_t a = 0; a < 3; ++a) {
      const float x = mesh.positions[size_t(v) * 3 + a];
      b[a] = std::min(b[a], x);
      b[a + 3] = std::max(b[a + 3], x);
    }
  }
  // Volume by the divergence theorem, face by face into its piece.
  std::vector<double> signed_volume(pieces.count(), 0.0);
  for (size_t f = 0; f < mesh.face_count(); ++f) {
    const float* p = &mesh.positions[size_t(mesh.indices[f * 3]) * 3];
    const float* q = &mesh.positions[size_t(mesh.indices[f * 3 + 1]) * 3];
    const float* r = &mesh.positions[size_t(mesh.indices[f * 3 + 2]) * 3];
    const double cross[3] = {double(q[1]) * r[2] - double(q[2]) * r[1], double(q[2]) * r[0] - double(q[0]) * r[2],
                             double(q[0]) * r[1] - double(q[1]) * r[0]};
    const size_t piece = size_t(pieces.piece_of_vertex[mesh.indices[f * 3]]);
    signed_volume[piece] += (p[0] * cross[0] + p[1] * cross[1] + p[2] * cross[2]) / 6.0;
    ++pieces.faces[piece];
  }
  size_t largest = 0;
  for (size_t piece = 0; piece < pieces.count(); ++piece) {
    pieces.volume[piece] = std::abs(signed_volume[piece]);
    if (pieces.volume[piece] > pieces.volume[largest]) largest = piece;
  }
  pieces.cavity.assign(pieces.count(), 0);
  for (size_t piece = 0; piece < pieces.count(); ++piece)
    pieces.cavity[piece] = signed_volume[piece] * signed_volume[largest] < 0.0;
  return pieces;
}

namespace {

// Keeps the faces of the pieces with keep[piece], then drops unused vertices.
int64_t keep_pieces(Mesh& mesh, const MeshPieces& pieces, const std::vector<uint8_t>& keep) {
  int64_t removed_faces = 0;
  std::vector<uint32_t> kept;
  kept.reserve(mesh.indices.size());
  for (size_t f = 0; f < mesh.face_count(); ++f) {
    if (!keep[size_t(pieces.piece_of_vertex[mesh.indices[f * 3]])]) {
      ++removed_faces;
      continue;
    }
    kept.insert(kept.end(), mesh.indices.begin() + long(f * 3), mesh.indices.begin() + long(f * 3 + 3));
  }
  mesh.indices.swap(kept);
  remove_unreferenced_vertices(mesh);
  return removed_faces;
}

double diagonal(const std::array<float, 6>& b) {
  double sum = 0;
  for (size_t a = 0; a < 3; ++a) sum += double(b[a + 3] - b[a]) * double(b[a + 3] - b[a]);
  return std::sqrt(sum);
}

// The bounding box of every piece together.
std::array<float, 6> whole_bounds(const MeshPieces& pieces) {
  std::array<float, 6> whole = {INFINITY, INFINITY, INFINITY, -INFINITY, -INFINITY, -INFINITY};
  for (const auto& b : pieces.bounds)
    for (size_t a = 0; a < 3; ++a) {
      whole[a] = std::min(whole[a], b[a]);
      whole[a + 3] = std::max(whole[a + 3], b[a + 3]);
    }
  return whole;
}

}  // namespace

ComponentReport remove_small_components(Mesh& mesh, float min_diagonal_fraction) {
  ComponentReport report;
  const MeshPieces pieces = find_pieces(mesh);
  const double threshold = double(min_diagonal_fraction) * diagonal(whole_bounds(pieces));
  std::vector<uint8_t> keep(pieces.count(), 0);
  report.components = int64_t(pieces.count());
  report.solid_pieces = int64_t(pieces.solid_count());
  for (size_t piece = 0; piece < pieces.count(); ++piece) {
    keep[piece] = diagonal(pieces.bounds[piece]) >= threshold;
    report.removed_components += !keep[piece];
  }
  if (report.removed_components > 0) report.removed_faces = keep_pieces(mesh, pieces, keep);
  return report;
}

bool is_loose_piece(const MeshPieces& pieces, size_t piece, float min_volume_fraction) {
  return pieces.volume[piece] < double(min_volume_fraction) * pieces.largest_volume();
}

int64_t count_loose_pieces(const MeshPieces& pieces, float min_volume_fraction) {
  int64_t loose = 0;
  for (size_t piece = 0; piece < pieces.count(); ++piece)
    loose += !pieces.cavity[piece] && is_loose_piece(pieces, piece, min_volume_fraction);
  return loose;
}

ComponentReport remove_loose_pieces(Mesh& mesh, float min_volume_fraction) {
  ComponentReport report;
  const MeshPieces pieces = find_pieces(mesh);
  report.components = int64_t(pieces.count());
  report.solid_pieces = int64_t(pieces.solid_count());
  std::vector<uint8_t> keep(pieces.count(), 0);
  for (size_t piece = 0; piece < pieces.count(); ++piece) {
    keep[piece] = !is_loose_piece(pieces, piece, min_volume_fraction);
    report.removed_components += !keep[piece];
  }
  if (report.removed_components > 0) report.removed_faces = keep_pieces(mesh, pieces, keep);
  return report;
}

void compute_vertex_normals(Mesh& mesh) {
  std::vector<double> sum(mesh.positions.size(), 0.0);
  for (size_t f = 0; f < mesh.face_count(); ++f) {
    const uint32_t i0 = mesh.indices[f * 3], i1 = mesh.indices[f * 3 + 1], i2 = mesh.indices[f * 3 + 2];
    const float* p0 = &mesh.positions[size_t(i0) * 3];
    const float* p1 = &mesh.positions[size_t(i1) * 3];
    const float* p2 = &mesh.positions[size_t(i2) * 3];
    const double u[3] = {double(p1[0]) - p0[0], double(p1[1]) - p0[1], double(p1[2]) - p0[2]};
    const double w[3] = {double(p2[0]) - p0[0], double(p2[1]) - p0[1], double(p2[2]) - p0[2]};
    // The cross product's length is twice the area: the weighting comes free.
    const double n[3] = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]};
    for (uint32_t v : {i0, i1, i2})
      for (int a = 0; a < 3; ++a) sum[size_t(v) * 3 + size_t(a)] += n[a];
  }
  mesh.normals.resize(mesh.positions.size());
  for (size_t v = 0; v < mesh.vertex_count(); ++v) {
    const double* n = &sum[v * 3];
    const double length = std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    for (int a = 0; a < 3; ++a)
      mesh.normals[v * 3 + size_t(a)] = length > 0 ? float(n[a] / length) : (a == 2 ? 1.f : 0.f);
  }
}

int64_t remove_fins(std::vector<uint32_t>& indices) {
  // Faces sorted by their sorted vertices, so faces over the same three are
  // adjacent; `forward` tells the two windings apart (a face rotated to start
  // at its smallest vertex is forward when the other two are in order).
  struct FaceKey {
    std::array<uint32_t, 3> sorted;
    uint32_t face;
    bool forward;
    bool operator<(const FaceKey& o) const { return sorted != o.sorted ? sorted < o.sorted : face < o.face; }
  };
  const size_t faces = indices.size() / 3;
  std::vector<FaceKey> keys;
  keys.reserve(faces);
  for (size_t f = 0; f < faces; ++f) {
    std::array<uint32_t, 3> v = {indices[f * 3], indices[f * 3 + 1], indices[f * 3 + 2]};
    std::rotate(v.begin(), std::min_element(v.begin(), v.end()), v.end());
    if (v[0] == v[1] || v[1] == v[2]) continue;
    keys.push_back({{v[0], std::min(v[1], v[2]), std::max(v[1], v[2])}, uint32_t(f), v[1] < v[2]});
  }
  std::sort(keys.begin(), keys.end());
  std::vector<uint8_t> removed(faces, 0);
  int64_t pairs = 0;
  for (size_t start = 0; start < keys.size();) {
    size_t end = start;
    while (end < keys.size() && keys[end].sorted == keys[start].sorted) ++end;
    // Pair the group's forward faces with its backward ones, earliest first.
    std::vector<uint32_t> forward, backward;
    for (size_t i = start; i < end && end - start > 1; ++i) (keys[i].forward ? forward : backward).push_back(keys[i].face);
    for (size_t i = 0; i < std::min(forward.size(), backward.size()); ++i) {
      removed[forward[i]] = removed[backward[i]] = 1;
      ++pairs;
    }
    start = end;
  }
  if (pairs == 0) return 0;
  size_t next = 0;
  for (size_t f = 0; f < faces; ++f) {
    if (removed[f]) continue;
    for (size_t c = 0; c < 3; ++c) indices[next * 3 + c] = indices[f * 3 + c];
    ++next;
  }
  indices.resize(next * 3);
  return pairs;
}

int64_t split_pinched_vertices(Mesh& mesh) {
  const size_t faces = mesh.face_count();
  auto edge_key = [](uint64_t a, uint64_t b) { return (std::min(a, b) << 32) | std::max(a, b); };
  std::vector<uint64_t> edges;  // every face's three edges, sorted: uses of one edge are adjacent
  edges.reserve(faces * 3);
  for (size_t f = 0; f < faces; ++f)
    for (size_t c = 0; c < 3; ++c) edges.push_back(edge_key(mesh.indices[f * 3 + c], mesh.indices[f * 3 + (c + 1) % 3]));
  std::sort(edges.begin(), edges.end());
  auto uses = [&](uint64_t key) {
    const auto [begin, end] = std::equal_range(edges.begin(), edges.end(), key);
    return end - begin;
  };
  std::vector<uint32_t> pinched;
  for (size_t i = 0; i < edges.size();) {
    size_t j = i;
    while (j < edges.size() && edges[j] == edges[i]) ++j;
    if (j - i > 2) {
      pinched.push_back(uint32_t(edges[i] >> 32));
      pinched.push_back(uint32_t(edges[i] & 0xffffffffu));
    }
    i = j;
  }
  if (pinched.empty()) return 0;
  std::sort(pinched.begin(), pinched.end());
  pinched.erase(std::unique(pinched.begin(), pinched.end()), pinched.end());

  // The faces around each pinched vertex.
  std::unordered_map<uint32_t, std::vector<uint32_t>> around;
  for (uint32_t v : pinched) around[v];
  for (size_t f = 0; f < faces; ++f)
    for (size_t c = 0; c < 3; ++c)
      if (auto it = around.find(mesh.indices[f * 3 + c]); it != around.end()) it->second.push_back(uint32_t(f));

  const bool with_normals = mesh.has_normals();
  int64_t copies = 0;
  for (uint32_t v : pinched) {
    const std::vector<uint32_t>& fan_faces = around[v];
    // Union the faces that meet in an edge (v, x) that exactly two faces share.
    std::vector<size_t> parent(fan_faces.size());
    std::iota(parent.begin(), parent.end(), size_t(0));
    auto find = [&](size_t i) {
      while (parent[i] != i) i = parent[i] = parent[parent[i]];
      return i;
    };
    std::unordered_map<uint32_t, std::vector<size_t>> by_other_vertex;
    for (size_t i = 0; i < fan_faces.size(); ++i)
      for (size_t c = 0; c < 3; ++c) {
        const uint32_t x = mesh.indices[size_t(fan_faces[i]) * 3 + c];
        if (x != v) by_other_vertex[x].push_back(i);
      }
    for (const auto& [x, members] : by_other_vertex)
      if (members.size() == 2 && uses(edge_key(v, x)) == 2) parent[find(members[0])] = find(members[1]);
    // The fan of the first face keeps v; every other fan gets a copy.
    std::unordered_map<size_t, uint32_t> vertex_of_fan;
    vertex_of_fan[find(0)] = v;
    for (size_t i = 0; i < fan_faces.size(); ++i) {
      auto [it, added] = vertex_of_fan.emplace(find(i), uint32_t(mesh.vertex_count()));
      if (added) {
        for (size_t a = 0; a < 3; ++a) mesh.positions.push_back(mesh.positions[size_t(v) * 3 + a]);
        if (with_normals)
          for (size_t a = 0; a < 3; ++a) mesh.normals.push_back(mesh.normals[size_t(v) * 3 + a]);
        ++copies;
      }
      for (size_t c = 0; c < 3; ++c) {
        uint32_t& index = mesh.indices[size_t(fan_faces[i]) * 3 + c];
        if (index == v) index = it->second;
      }
    }
  }
  return copies;
}

namespace {

// Removes the `extra` smallest solid pieces (by volume) when every one is a
// floater by the diagonal rule; returns how many went (0: none qualified, the
// mesh is untouched). Vertices stay, so positions keep their indices.
int64_t remove_slivers(Mesh& mesh, int64_t extra, float min_diagonal_fraction) {
  const MeshPieces pieces = find_pieces(mesh);
  if (extra <= 0 || size_t(extra) >= pieces.count()) return 0;
  std::vector<size_t> order(pieces.count());
  std::iota(order.begin(), order.end(), size_t{0});
  // A cut-off sliver is solid; a hollow's wall the input already had is not what was cut off.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(pieces.cavity[a], pieces.volume[a]) < std::pair(pieces.cavity[b], pieces.volume[b]);
  });
  const double threshold = double(min_diagonal_fraction) * diagonal(whole_bounds(pieces));
  std::vector<uint8_t> keep(pieces.count(), 1);
  for (size_t i = 0; i < size_t(extra); ++i) {
    if (diagonal(pieces.bounds[order[i]]) >= threshold) return 0;
    keep[order[i]] = 0;
  }
  std::vector<uint32_t> kept;
  kept.reserve(mesh.indices.size());
  for (size_t f = 0; f < mesh.face_count(); ++f)
    if (keep[size_t(pieces.piece_of_vertex[mesh.indices[f * 3]])])
      kept.insert(kept.end(), mesh.indices.begin() + long(f * 3), mesh.indices.begin() + long(f * 3 + 3));
  mesh.indices.swap(kept);
  return extra;
}

}  // namespace

int64_t default_target_faces(int64_t faces) { return std::max<int64_t>(10000, faces / 10); }

Result<SimplifyReport> simplify_mesh(Mesh& mesh, const SimplifyOptions& options) {
  CUBEFORGE_TRY(check_mesh_indices(mesh, "simplify"));
  SimplifyReport report;
  report.faces_before = int64_t(mesh.face_count());
  const int64_t target = options.target_faces > 0 ? options.target_faces : default_target_faces(report.faces_before);
  if (report.faces_before <= target) {
    report.faces_after = report.faces_before;
    return report;
  }
  if (!(options.max_relative_error >= 0.f)) {
    return make_error(ErrorCode::kInvalidArgument, "simplify: the allowed error must not be negative");
  }
  const bool had_normals = mesh.has_normals();
  // The input is analysed (closed? in how many pieces?) only when a result is
  // open or in several pieces: analysing a large input costs a sizeable share
  // of simplifying it.
  std::optional<MeshTopology> input_topology;
  auto input = [&]() -> const MeshTopology& {
    if (!input_topology) input_topology = analyze_topology(mesh);
    return *input_topology;
  };
  std::vector<uint32_t> simplified(mesh.indices.size());
  float error = 0.f;
  // Topology is checked on a copy that shares nothing but the positions.
  Mesh candidate;
  if (options.keep_closed) candidate.positions = mesh.positions;
  int64_t budget = target;
  for (int attempt = 0;; ++attempt) {
    const size_t index_count =
        meshopt_simplify(simplified.data(), mesh.indices.data(), mesh.indices.size(), mesh.positions.data(),
                         mesh.vertex_count(), sizeof(float) * 3, size_t(budget) * 3, options.max_relative_error, 0,
                         &error);
    simplified.resize(index_count);
    if (!options.keep_closed) break;
    candidate.indices = simplified;
    const int64_t fins = remove_fins(candidate.indices);
    candidate.positions.resize(mesh.positions.size());  // without the copies of an earlier try
    MeshTopology topology = analyze_topology(candidate);
    int64_t copies = 0;
    if (topology.non_manifold_edges > 0) {
      copies = split_pinched_vertices(candidate);
      topology = analyze_topology(candidate);
    }
    int64_t slivers = 0;
    bool whole = true;
    // A result in one piece is whole whatever the input was, so the input is analysed only otherwise.
    if (options.keep_whole && topology.components > 1 && topology.components > input().components) {
      slivers = remove_slivers(candidate, topology.components - input().components, options.sliver_diagonal_fraction);
      whole = slivers > 0;
      if (whole) topology = analyze_topology(candidate);
    }
    if (topology.closed_and_oriented() && whole) {
      report.fins_removed = fins;
      report.vertices_split = copies;
      report.slivers_removed = slivers;
      simplified.swap(candidate.indices);
      if (copies > 0) mesh.positions = candidate.positions;  // the normals are recomputed below
      break;
    }
    if (!input().closed_and_oriented()) break;  // nothing to keep: meshoptimizer's result as it is
    report.retries_to_stay_closed_and_whole = attempt + 1;
    budget *= 2;
    if (attempt == 2 || budget >= report.faces_before) {
      report.left_unsimplified_to_stay_closed_and_whole = true;
      report.faces_after = report.faces_before;
      return report;
    }
    simplified.resize(mesh.indices.size());
  }
  mesh.indices.swap(simplified);
  remove_unreferenced_vertices(mesh);
  if (had_normals) compute_vertex_normals(mesh);
  report.faces_after = int64_t(mesh.face_count());
  report.relative_error = error;
  return report;
}

Result<PostprocessReport> postprocess_mesh(Mesh& mesh, const PostprocessOptions& options) {
  CUBEFORGE_TRY(check_mesh_indices(mesh, "mesh cleanup"));
  PostprocessReport report;
  report.weld = weld_vertices(mesh, options.weld_tolerance);
  report.components = remove_small_components(mesh, options.min_component_diagonal_fraction);
  if (options.simplify) {
    CUBEFORGE_ASSIGN_OR_RETURN(report.simplification, simplify_mesh(mesh, options.simplification));
  }
  compute_vertex_normals(mesh);
  return report;
}

}  // namespace cubeforge
