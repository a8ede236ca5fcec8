// From an occupancy field to a finished mesh in one call: grid evaluation
// (coarse-to-fine by default), marching cubes, then the reference's cleanup
// (weld, floaters, simplification) and vertex normals: the same steps the
// generation pipeline's tokens_to_mesh takes one by one, for any field.
#pragma once

#include "inference/geometry/marching_cubes.h"
#include "inference/geometry/mesh_cleanup.h"
#include "inference/geometry/occupancy_grid.h"

namespace cubeforge {

struct MeshExtractionOptions {
  GridSpec grid;                    // resolution 8 over [-1.05, 1.05]^3 by default
  bool coarse_to_fine = true;       // false: evaluate every grid point
  CoarseToFineOptions refinement;   // its evaluation options also serve dense evaluation
  MarchingCubesOptions marching;
  bool postprocess = true;          // false: the raw marching-cubes mesh (no normals)
  PostprocessOptions cleanup;
};

struct MeshExtraction {
  Mesh mesh;                       // empty when the field has no surface on the grid
  CoarseToFineStats evaluation;    // points evaluated (dense: all of them)
  PostprocessReport cleanup;
};

Result<MeshExtraction> extract_mesh(const FieldFunction& field, const MeshExtractionOptions& options = {});

}  // namespace cubeforge
