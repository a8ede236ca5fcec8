// Measuring meshes: area, volume, topology, distances between meshes and
// overlap of the solids they bound.
//
// Tests use these to check meshing against analytic shapes and the reference;
// the tokenize command uses Chamfer distance and IoU to say how faithfully a
// mesh survives encoding and decoding.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "inference/core/result.h"
#include "inference/geometry/mesh.h"
#include "inference/geometry/occupancy_grid.h"

namespace cubeforge {

double surface_area(const Mesh& mesh);
// Positive for a closed mesh wound counter-clockwise seen from outside.
double signed_volume(const Mesh& mesh);
// Length of the diagonal of the bounding box of the vertices.
double bounding_diagonal(const Mesh& mesh);

struct MeshTopology {
  int64_t vertices = 0;            // referenced by a face
  int64_t edges = 0;               // distinct undirected edges
  int64_t faces = 0;
  int64_t boundary_edges = 0;      // used by one face
  int64_t non_manifold_edges = 0;  // used by more than two faces
  int64_t misoriented_edges = 0;   // used twice in the same direction
  int64_t components = 0;          // connected through shared vertices

  int64_t euler_characteristic() const { return vertices - edges + faces; }
  // Every edge shared by exactly two faces, wound consistently.
  bool closed_and_oriented() const { return boundary_edges == 0 && non_manifold_edges == 0 && misoriented_edges == 0; }
};
MeshTopology analyze_topology(const Mesh& mesh);

// Exact distance from points to the nearest triangle of a mesh, through a
// bounding-volume hierarchy (boxes around groups of triangles, split at the
// median along the longest side).
class TriangleDistanceIndex {
 public:
  explicit TriangleDistanceIndex(const Mesh& mesh);
  // Distance to the nearest triangle (infinity for a mesh without faces);
  // `nearest_face` receives its index.
  double distance(const float point[3], uint32_t* nearest_face = nullptr) const;

 private:
  struct Node {
    float low[3], high[3];
    uint32_t first = 0;  // leaf: faces_[first, first + count); inner: children first, first + 1
    uint32_t count = 0;  // 0 for an inner node
  };
  uint32_t build(uint32_t begin, uint32_t end, std::vector<float>& centroids);

  const Mesh& mesh_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> faces_;
};

struct ChamferOptions {
  int64_t samples = 20000;        // area-weighted samples per mesh
  uint64_t seed = 1;
  bool include_vertices = true;   // also measure from every vertex
};

struct ChamferDistance {
  double a_to_b = 0;   // mean distance from A's points to B's surface
  double b_to_a = 0;
  double symmetric = 0;  // (a_to_b + b_to_a) / 2
  double hausdorff = 0;  // largest distance seen either way
};

// Point-to-surface Chamfer distance, measured from samples (and vertices) of
// each mesh to the other mesh's triangles.
Result<ChamferDistance> chamfer_distance(const Mesh& a, const Mesh& b, const ChamferOptions& options = {});

// 1 at grid points inside a closed mesh (ray parity along +x), x-major. Each
// face visits the grid columns its extent spans and keeps a crossing in those
// it covers, so a few thousand faces each across the box cost gigabytes and
// minutes: the spans are summed first (inside_grid_coverage) and held to
// CUBEFORGE_MAX_MESH_GRID_COVERAGE before anything is stored. Callers that
// can check sooner, before other work, call check_inside_grid_coverage.
Result<std::vector<uint8_t>> mesh_inside_grid(const Mesh& mesh, const GridSpec& spec);
uint64_t inside_grid_coverage(const Mesh& mesh, const GridSpec& spec);
Status check_inside_grid_coverage(const Mesh& mesh, const GridSpec& spec);

// Intersection over union of two solids given as inside flags, or as field
// values (inside where value > level). 1 when both are empty.
double occupancy_iou(std::span<const uint8_t> a, std::span<const uint8_t> b);
double occupancy_iou(std::span<const float> a, std::span<const float> b, float level = 0.f);
// IoU of the solids bounded by two closed meshes, voxelised on `spec`.
Result<double> mesh_iou(const Mesh& a, const Mesh& b, const GridSpec& spec);

}  // namespace cubeforge
