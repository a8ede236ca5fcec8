// Surface point clouds for the shape encoder: the mesh is rescaled like the
// reference does (centre of its bounding box to the origin, largest side to
// 2 * 0.96), then sampled uniformly by area, each sample carrying the unit
// normal of the face it lies on. Deterministic for a given seed.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "inference/core/result.h"
#include "inference/geometry/mesh.h"

namespace cubeforge {

struct RescaleTransform {
  std::array<float, 3> centre{0.f, 0.f, 0.f};  // subtracted first
  float scale = 1.f;                           // then multiplied
};

// The transform that puts the referenced vertices' bounding box centre at the
// origin and its largest side at 2 * mesh_scale. Fails on an empty or flat-
// to-a-point mesh.
Result<RescaleTransform> unit_cube_transform(const Mesh& mesh, float mesh_scale = 0.96f);
// Applies a transform to positions (normals are unchanged by it).
void apply_transform(Mesh& mesh, const RescaleTransform& transform);

struct SurfaceSamplingOptions {
  int64_t count = 8192;
  uint64_t seed = 0;
};

// [count, 6] floats: xyz then the unit face normal. `face_of_sample`, when
// given, receives the face each sample came from.
Result<std::vector<float>> sample_surface(const Mesh& mesh, const SurfaceSamplingOptions& options = {},
                                          std::vector<uint32_t>* face_of_sample = nullptr);

// What the encoder takes: the mesh rescaled to 0.96 of [-1, 1]^3 and sampled.
Result<std::vector<float>> encoder_point_cloud(const Mesh& mesh, const SurfaceSamplingOptions& options = {});

}  // namespace cubeforge
