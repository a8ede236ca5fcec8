// The triangle mesh that flows from meshing to the viewport and the exporters.
//
// Plain flat arrays so the engine can upload them without conversion and the
// exporters can write them directly. Shared by inference/ (which makes meshes)
// and engine/ (which only reads them).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "inference/core/result.h"

namespace cubeforge {

struct Bounds3 {
  std::array<float, 3> min{0.f, 0.f, 0.f};
  std::array<float, 3> max{0.f, 0.f, 0.f};
  bool empty = true;
};

struct Mesh {
  std::vector<float> positions;   // [V, 3] xyz
  std::vector<float> normals;     // [V, 3] unit vertex normals, or empty
  std::vector<uint32_t> indices;  // [F, 3] counter-clockwise seen from outside

  size_t vertex_count() const { return positions.size() / 3; }
  size_t face_count() const { return indices.size() / 3; }
  bool empty() const { return indices.empty(); }
  bool has_normals() const { return normals.size() == positions.size() && !normals.empty(); }

  Bounds3 bounds() const {
    Bounds3 b;
    for (size_t i = 0; i + 2 < positions.size(); i += 3) {
      for (int a = 0; a < 3; ++a) {
        float v = positions[i + a];
        if (b.empty || v < b.min[a]) b.min[a] = v;
        if (b.empty || v > b.max[a]) b.max[a] = v;
      }
      b.empty = false;
    }
    return b;
  }
};

// The check before working on a mesh from elsewhere: positions and indices in
// whole triples, every index naming a vertex. Errors start with `what`.
Status check_mesh_indices(const Mesh& mesh, std::string_view what);

}  // namespace cubeforge
