// Marching cubes on a grid of field values: the surface value = level, inside
// where value > level.
//
// Written here rather than taken from a library: the Debian packages that
// extract isosurfaces either duplicate vertices per cell, choose ambiguous faces
// inconsistently between neighbouring cells (cracks), or come with a whole
// toolkit; we need one vertex per crossed grid edge, outward winding and a
// watertight result for a closed field, over a grid that coarse-to-fine
// evaluation fills.
//
// The triangulation is built, not transcribed: for every cube configuration the
// surface's boundary on each cube face is a set of segments between crossed
// edges, chained into loops and triangulated. A face with four crossings is
// resolved by the asymptotic decider (the sign of the bilinear saddle), which
// depends only on that face's four values, so both cubes sharing the face pick
// the same segments and the mesh has no cracks. Triangles never add an edge
// along a cube face that the neighbouring cube could also use, so every edge of
// the mesh is shared by exactly two triangles away from the grid's boundary.
#pragma once

#include <span>

#include "inference/core/result.h"
#include "inference/geometry/mesh.h"
#include "inference/geometry/occupancy_grid.h"
#include "inference/options/engine_options.h"

namespace cubeforge {

struct MarchingCubesOptions {
  float level = 0.f;
  VertexMapping mapping = VertexMapping::kCellSize;
  // The grid is cut along x into this many ranges of slabs, meshed in parallel
  // and joined; the mesh is the same for any count. 0: four per pool thread.
  int parts = 0;
};

// Triangles are counter-clockwise seen from outside, outside being the side of
// lower values (the reference's output, after its (2,1,0) reordering of
// scikit-image's faces, winds the same way). Vertices are shared: one per
// crossed grid edge, plus one at the centre of the rare loop that cannot be
// split without a chord along a cube face.
Result<Mesh> marching_cubes(std::span<const float> values, const GridSpec& spec,
                            const MarchingCubesOptions& options = {});
Result<Mesh> marching_cubes(const ScalarGrid& grid, const MarchingCubesOptions& options = {});

// How many of the 2^14 (configuration, face decision) cases need a centre
// vertex; exposed for tests.
int marching_cubes_cases_with_centre_vertex();

}  // namespace cubeforge
