// Cleaning a freshly meshed surface the way the reference post-processes
// its output: weld duplicate vertices, drop small floating pieces (the
// reference removes components whose bounding-box diagonal is under 15% of the
// whole mesh's), simplify to a face budget (the reference's default is
// max(10000, 10% of the faces), by quadric edge collapse; we use
// meshoptimizer's), and give vertices area-weighted normals.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "inference/core/result.h"
#include "inference/geometry/mesh.h"

namespace cubeforge {

struct WeldReport {
  int64_t merged_vertices = 0;       // vertices folded into another one
  int64_t degenerate_faces = 0;      // faces left with a repeated vertex, removed
  int64_t duplicate_faces = 0;       // faces over the same three vertices as an earlier one, removed
  int64_t unreferenced_vertices = 0; // vertices no face uses, removed
};

// Merges vertices closer than `tolerance` (0: identical positions only),
// then removes degenerate and duplicate faces and unused vertices. A merged
// vertex keeps the position and normal of the first vertex of its group.
WeldReport weld_vertices(Mesh& mesh, float tolerance = 0.f);

// Removes vertices no face uses; returns how many.
int64_t remove_unreferenced_vertices(Mesh& mesh);

// A mesh's connected pieces ("components"): faces joined through shared
// vertices. Every rule below that counts or drops pieces starts from this one
// labelling.
//
// A hollow sealed inside a solid (a bubble in a wall) has a surface of its
// own, so it is a component, but it is not a piece anyone could pick up: its
// surface faces inwards, so it encloses negative volume where the solid it
// sits in encloses positive. Such a component is a cavity; the count of pieces
// a person sees leaves cavities out.
struct MeshPieces {
  std::vector<int32_t> piece_of_vertex;  // by vertex; -1 for a vertex no face uses
  // By piece, numbered in the order of their first vertex:
  std::vector<std::array<float, 6>> bounds;  // min x, y, z, max x, y, z
  std::vector<double> volume;                // enclosed volume (|signed volume|; near 0 for an open sheet)
  std::vector<int64_t> faces;
  // Wound the other way from the largest piece: the inner wall of a hollow.
  std::vector<uint8_t> cavity;
  size_t count() const { return volume.size(); }
  // The pieces that are not cavities.
  size_t solid_count() const;
  // The largest piece's volume (0 without pieces).
  double largest_volume() const;
};
MeshPieces find_pieces(const Mesh& mesh);

struct ComponentReport {
  int64_t components = 0;          // before
  int64_t solid_pieces = 0;        // before, leaving out cavities (MeshPieces)
  int64_t removed_components = 0;
  int64_t removed_faces = 0;
};

// Removes connected components (through shared vertices) whose bounding-box
// diagonal is below min_diagonal_fraction of the whole mesh's.
ComponentReport remove_small_components(Mesh& mesh, float min_diagonal_fraction = 0.15f);

// Loose pieces, as mesh tools offer to remove them: solid pieces whose volume
// is below min_volume_fraction of the largest piece's. The largest piece is
// never loose, so removing them always leaves a shape. Removing also takes the
// cavities under that share: a sealed hollow filled in changes nothing seen.
inline constexpr float kDefaultLoosePieceFraction = 0.02f;
bool is_loose_piece(const MeshPieces& pieces, size_t piece, float min_volume_fraction);
int64_t count_loose_pieces(const MeshPieces& pieces, float min_volume_fraction);
ComponentReport remove_loose_pieces(Mesh& mesh, float min_volume_fraction = kDefaultLoosePieceFraction);

// Sets normals to the area-weighted average of the adjacent faces' normals.
void compute_vertex_normals(Mesh& mesh);

// The reference's face budget: max(10000, faces / 10).
int64_t default_target_faces(int64_t faces);

struct SimplifyOptions {
  int64_t target_faces = 0;  // 0: default_target_faces
  // The largest deviation allowed, relative to the mesh's extent. The default
  // lets the face budget decide, as the reference's decimation does.
  float max_relative_error = 1.f;
  // meshoptimizer may thin a part down to nothing: a fin of two faces over the
  // same three vertices, hanging on an edge that four faces then share; or it
  // presses two sheets of the surface together along an edge. Fins are
  // removed (they enclose no volume) and pressed sheets get their own copies of
  // the shared vertices, and the result is kept if that makes it closed. If
  // not, and the input was closed, it is simplified again towards a larger
  // budget (twice the faces, up to three times), and stays as it was if every
  // try opens it; an open input keeps meshoptimizer's result as it is.
  bool keep_closed = true;
  // Those pressed sheets may also cut a sliver off a thin part, leaving a
  // speck the field never had (edge collapses and fin removal rarely do it
  // too). With keep_closed, the pieces a result has beyond the input's are
  // removed when each is a floater by the cleanup's rule (bounding-box diagonal under sliver_diagonal_fraction of the whole
  // mesh's); a larger piece cut off makes the try fail, as an open result
  // does. So simplifying never breaks a shape into more pieces.
  bool keep_whole = true;
  float sliver_diagonal_fraction = 0.15f;
};

struct SimplifyReport {
  int64_t faces_before = 0;
  int64_t faces_after = 0;
  float relative_error = 0.f;  // the deviation meshoptimizer reports
  int64_t fins_removed = 0;     // pairs of opposite faces over the same vertices (see keep_closed)
  int64_t vertices_split = 0;   // copies given to sheets pressed together (see keep_closed)
  int64_t slivers_removed = 0;  // pieces those cut off, removed (see keep_whole)
  int retries_to_stay_closed_and_whole = 0;
  bool left_unsimplified_to_stay_closed_and_whole = false;
};

// Removes fins: pairs of faces over the same three vertices wound opposite
// ways, which enclose nothing. Returns how many pairs went; vertices are kept.
int64_t remove_fins(std::vector<uint32_t>& indices);

// Where more than two faces share an edge, gives each fan of faces around
// the edge's vertices (faces joined through edges exactly two faces share)
// its own copy of the vertex, appended to positions (and normals, if any).
// Two sheets pressed together along an edge then become two closed sheets
// that touch; the geometry is unchanged. Returns how many copies were made.
int64_t split_pinched_vertices(Mesh& mesh);

// Simplifies in place (normals, if any, are recomputed). A mesh already within
// the budget is left alone.
Result<SimplifyReport> simplify_mesh(Mesh& mesh, const SimplifyOptions& options = {});

struct PostprocessOptions {
  float weld_tolerance = 0.f;
  float min_component_diagonal_fraction = 0.15f;
  bool simplify = true;
  SimplifyOptions simplification;
};

struct PostprocessReport {
  WeldReport weld;
  ComponentReport components;
  SimplifyReport simplification;
};

// Weld, drop floaters, simplify, then compute vertex normals.
Result<PostprocessReport> postprocess_mesh(Mesh& mesh, const PostprocessOptions& options = {});

}  // namespace cubeforge
