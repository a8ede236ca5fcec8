// The steps of coarse-to-fine evaluation, over plain buffers.
//
// evaluate_grid_field_coarse_to_fine (occupancy_grid.cpp) runs them level by
// level, from the coarse level to the target; between steps it asks the field
// for the points a step collected. Each step reads and writes the fine grid's
// buffers and one level's state, so it can be tested on its own and a GPU
// implementation can provide the same steps.
//
// Shapes: R = the target resolution, N = 2^R + 1 fine grid points per axis
// (values and evaluated are [N^3], x-major as in GridSpec); at level l there
// are M = 2^l cells per axis, each spanning S = 2^(R - l) fine points, and a
// level's per-cell buffers are [M^3], cell (ci, cj, ck) at (ci * M + cj) * M + ck.
//
// One level, in order:
//   fill_from_parent     points new at this level take their parent cell's
//                        trilinear value (every level but the coarse one)
//   seed_children        visit the children of the coarser level's surface
//                        cells (the coarse level visits every cell)
//   grow along the surface, until the queue runs dry:
//     take_unevaluated_corners, evaluate them, grow_along_surface
//   look_around          queue crossing cells the growth missed; if it
//                        found any, grow again
//   mark_surface_cells   the cells the next level refines
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "inference/geometry/occupancy_grid.h"

namespace cubeforge {

// The cells of one level and where their corners lie on the fine grid.
struct LevelCells {
  int64_t cells_per_axis = 0;        // M = 2^level
  int64_t stride = 0;                // S = 2^(R - level): fine points per cell edge
  int64_t fine_points_per_axis = 0;  // N
  double cell_size = 0.0;            // a cell's edge in world units

  static LevelCells at(const GridSpec& spec, int level);

  int64_t count() const { return cells_per_axis * cells_per_axis * cells_per_axis; }
  int64_t cell_index(int64_t ci, int64_t cj, int64_t ck) const {
    return (ci * cells_per_axis + cj) * cells_per_axis + ck;
  }
  void cell_coords(int64_t cell, int64_t& ci, int64_t& cj, int64_t& ck) const {
    ci = cell / (cells_per_axis * cells_per_axis);
    cj = (cell / cells_per_axis) % cells_per_axis;
    ck = cell % cells_per_axis;
  }
  // The 8 corners' fine indices, corner c = (c&1, c>>1&1, c>>2&1) in (x, y, z).
  void corners(int64_t cell, int64_t out[8]) const {
    int64_t ci, cj, ck;
    cell_coords(cell, ci, cj, ck);
    const int64_t n = fine_points_per_axis;
    for (int c = 0; c < 8; ++c) {
      const int64_t i = (ci + (c & 1)) * stride;
      const int64_t j = (cj + ((c >> 1) & 1)) * stride;
      const int64_t k = (ck + ((c >> 2) & 1)) * stride;
      out[c] = (i * n + j) * n + k;
    }
  }
};

// What a level knows about a cell.
constexpr uint8_t kCellUnvisited = 0;
constexpr uint8_t kCellVisited = 1;   // queued once; its corners are or will be evaluated
constexpr uint8_t kCellCrossing = 2;  // visited, corners of both signs, all its neighbours visited

// One level's bookkeeping. Every queued cell is also appended to
// visited_cells, in the same order.
struct LevelState {
  explicit LevelState(const LevelCells& cells);

  LevelCells cells;
  std::vector<uint8_t> cell_state;     // [M^3] kCellUnvisited, kCellVisited or kCellCrossing
  std::vector<int64_t> visited_cells;  // every visited cell, in the order visited
  std::vector<int64_t> queue;          // visited cells whose corners are next to evaluate
  int64_t looked_up_to = 0;            // visited_cells before this index have been looked around
  // Look-around stamps: the round that last checked an unvisited cell, so a
  // look checks each one once however many visited cells border it. Written
  // without a lock; a cell two threads both check only costs a repeat.
  std::vector<uint8_t> checked_in_round;  // [M^3]
  uint8_t look_round = 0;
  int64_t parts = 1;                                 // slices of a parallel step: four per pool thread
  std::vector<std::vector<int64_t>> found_per_part;  // [parts] scratch of look_around
};

// Whether the surface passes through the cell: corner values on both sides
// of surface_value (inside is value > surface_value).
bool cell_crosses_surface(const LevelCells& cells, std::span<const float> values, int64_t cell, float surface_value);

// Corners of one sign, but close enough to the surface value that a thin part
// could lie between them: the smallest |value - surface_value| is at most
// margin * slope * (cell diagonal / 2), slope being the steepest change per
// unit length along the cell's edges and the edges leaving its corners (so a
// cell centred on a thin plate still sees the slope beside it). Meaningful
// only for cells whose corners and their neighbours along the axes hold
// evaluated or filled values.
bool cell_near_surface(const LevelCells& cells, std::span<const float> values, int64_t cell, float surface_value,
                       double margin);

// The level's grid points, x-major, marked evaluated and put in `points`
// (replacing its contents): the coarse level is evaluated densely.
void take_level_points(const LevelCells& cells, std::span<uint8_t> evaluated, std::vector<int64_t>& points);

// Points of this level that the coarser level did not have and that are not
// evaluated take the trilinear value of the coarser level's cell around them.
// That cell's corners are evaluated or filled; where they all have one sign,
// the filled value has it too. Rows of points are filled in parallel.
void fill_from_parent(const LevelCells& cells, std::span<const uint8_t> evaluated, std::span<float> values);

// The coarse level: every cell visited and queued, in index order.
void seed_every_cell(LevelState& level);

// Visits and queues, in parent order, the children of the coarser level's
// surface cells (parent_surface is [(M/2)^3], nonzero for a surface cell),
// widened by `dilation` cells (Chebyshev distance) at this level.
void seed_children(std::span<const uint8_t> parent_surface, int64_t dilation, LevelState& level);

// The corners of the queued cells not yet evaluated, in queue and corner
// order, marked evaluated and put in `points` (replacing its contents).
void take_unevaluated_corners(const LevelState& level, std::span<uint8_t> evaluated, std::vector<int64_t>& points);

// Once the queued cells' corners are evaluated: marks the ones the surface
// crosses kCellCrossing and visits their unvisited neighbours (of 26), which
// become the queue. A crossing cell thereby has all its neighbours visited.
void grow_along_surface(LevelState& level, std::span<const float> values, float surface_value);

// Queues the unvisited cells the surface crosses that border a visited,
// non-crossing cell visited since the last look (values change only at the
// corners of cells visited since, and a cell with such a corner is their
// neighbour). Their corners may be partly filled values. Nothing further out
// can cross: an unvisited cell lies in a coarser cell that was no surface
// cell, so its filled corners share that cell's one sign, and any other
// corner was evaluated as the corner of a visited cell, which is then a
// neighbour. Looks in parallel; the finds are queued in visited order.
void look_around(LevelState& level, std::span<const float> values, float surface_value);

// Flags the cells the next level refines in `surface` ([M^3], all zero on
// entry): the crossing cells, and with a near_surface_margin the visited cells
// cell_near_surface with that margin. Every crossing cell is visited once
// looking around finds nothing more, so only visited cells are looked at.
// Returns how many were flagged.
int64_t mark_surface_cells(const LevelState& level, std::span<const float> values, float surface_value,
                           std::optional<double> near_surface_margin, std::span<uint8_t> surface);

}  // namespace cubeforge
