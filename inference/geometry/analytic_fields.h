// Closed-form occupancy fields: signed distances turned into logits (inside
// positive, surface at 0). Tests check meshing against their exact areas and
// volumes, and the grid benchmark stands one in for the shape decoder.
#pragma once

#include <array>
#include <vector>

#include "inference/geometry/occupancy_grid.h"

namespace cubeforge {

// -distance to a sphere's surface (positive inside).
FieldFunction sphere_field(float radius, std::array<float, 3> centre = {0.f, 0.f, 0.f});
// A torus around the z axis: ring radius `major`, tube radius `minor`.
FieldFunction torus_field(float major, float minor, std::array<float, 3> centre = {0.f, 0.f, 0.f});
// An axis-aligned box with the given half extents.
FieldFunction box_field(std::array<float, 3> half_extents, std::array<float, 3> centre = {0.f, 0.f, 0.f});
// A box whose edges and corners are rounded with `radius` (the half extents
// include the rounding).
FieldFunction rounded_box_field(std::array<float, 3> half_extents, float radius,
                                std::array<float, 3> centre = {0.f, 0.f, 0.f});
// A capsule (rod) between two points.
FieldFunction capsule_field(std::array<float, 3> a, std::array<float, 3> b, float radius);
// The union of several fields: the largest value.
FieldFunction union_field(std::vector<FieldFunction> parts);
// Thin parts that a too coarse first level would miss: a plate, two rods and
// a small ball next to a sphere.
FieldFunction thin_shapes_field();
// A stand-in for the decoder in benchmarks: a blobby union of spheres, tori
// and capsules, with `extra_terms` damped sinusoidal ripples per point to give
// each evaluation a cost (the real decoder's per-point cost is far higher).
FieldFunction creature_field(int extra_terms);

}  // namespace cubeforge
