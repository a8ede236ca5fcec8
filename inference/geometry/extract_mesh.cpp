// Field -> grid -> marching cubes -> cleanup.
#include "inference/geometry/extract_mesh.h"

namespace cubeforge {

Result<MeshExtraction> extract_mesh(const FieldFunction& field, const MeshExtractionOptions& options) {
  MeshExtraction extraction;
  ScalarGrid grid;
  if (options.coarse_to_fine) {
    CUBEFORGE_ASSIGN_OR_RETURN(CoarseToFineGrid refined, evaluate_field_coarse_to_fine(field, options.grid, options.refinement));
    grid = std::move(refined.grid);
    extraction.evaluation = std::move(refined.stats);
  } else {
    CUBEFORGE_ASSIGN_OR_RETURN(grid, evaluate_field_dense(field, options.grid, options.refinement.evaluation));
    extraction.evaluation.evaluated_points = extraction.evaluation.dense_points = options.grid.point_count();
  }
  MarchingCubesOptions marching = options.marching;
  marching.level = options.refinement.level;  // one surface value for refinement and meshing
  CUBEFORGE_ASSIGN_OR_RETURN(extraction.mesh, marching_cubes(grid, marching));
  if (options.postprocess && !extraction.mesh.empty()) {
    CUBEFORGE_ASSIGN_OR_RETURN(extraction.cleanup, postprocess_mesh(extraction.mesh, options.cleanup));
  }
  return extraction;
}

}  // namespace cubeforge
