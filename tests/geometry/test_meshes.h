// Meshes the geometry tests share: marching cubes of analytic fields.
#pragma once

#include <gtest/gtest.h>

#include "inference/geometry/analytic_fields.h"
#include "inference/geometry/marching_cubes.h"

namespace cubeforge::testing {

inline Mesh mesh_of_field(const FieldFunction& field, int resolution) {
  GridSpec spec;
  spec.resolution = resolution;
  auto grid = evaluate_field_dense(field, spec);
  EXPECT_TRUE(grid.ok());
  auto mesh = marching_cubes(*grid);
  EXPECT_TRUE(mesh.ok());
  return std::move(mesh).value();
}

}  // namespace cubeforge::testing
