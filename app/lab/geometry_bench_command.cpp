// `cubeforge-lab bench-geometry`: what coarse-to-fine evaluation saves over
// dense evaluation of the meshing grid, and how long marching cubes takes, at
// each resolution, on no model at all.
//
// The field is an analytic creature (a blobby union of spheres, capsules and
// a ring, with sinusoidal ripples that give each point a cost). The real
// decoder costs far more per point, so for it the speed-up approaches the
// ratio of evaluated points, which is reported separately from the times.
// Marching cubes is timed as the best of three runs.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/lab/bench_statistics.h"
#include "app/lab/commands.h"
#include "app/lab/lab_options.h"
#include "app/lab/lab_report.h"
#include "inference/core/thread_pool.h"
#include "inference/geometry/analytic_fields.h"
#include "inference/geometry/marching_cubes.h"
#include "inference/geometry/mesh_metrics.h"
#include "inference/geometry/occupancy_grid.h"

namespace cubeforge::cli {

namespace {

constexpr const char* kGeometryCommand = "bench-geometry";

struct GeometryBenchOptions {
  LabOptions lab;
  std::vector<int> resolutions = {6, 7, 8};
  int coarse = 5;
  int ripples = 8;
  bool skip_dense = false;
};

struct GeometryFigures {
  int resolution = 0;
  CoarseToFineStats stats;
  double coarse_to_fine_ms = 0, marching_cubes_ms = 0;
  std::optional<double> dense_ms;
  int64_t sign_disagreements = 0;
  size_t vertices = 0, faces = 0;
  bool closed = false;
  int64_t euler = 0;
};

// The creature spread over the cores batch by batch, as a batched decoder would use its device.
FieldFunction parallel_creature(int ripples) {
  return [creature = creature_field(ripples)](std::span<const float> xyz, std::span<float> values) -> Status {
    const int64_t count = int64_t(values.size());
    constexpr int64_t kSlice = 1024;
    std::atomic<bool> failed{false};
    const int64_t slices = (count + kSlice - 1) / kSlice;
    parallel_for_each(slices, true, [&](int64_t slice) {
      const int64_t start = slice * kSlice;
      const int64_t n = std::min(kSlice, count - start);
      if (!creature(xyz.subspan(size_t(start) * 3, size_t(n) * 3), values.subspan(size_t(start), size_t(n))).ok())
        failed = true;
    });
    if (failed) return make_error(ErrorCode::kInternal, "the creature field failed");
    return ok_status();
  };
}

Result<GeometryFigures> measure_resolution(const FieldFunction& field, int resolution, const GeometryBenchOptions& o) {
  GeometryFigures f;
  f.resolution = resolution;
  GridSpec spec;
  spec.resolution = resolution;
  CoarseToFineOptions options;
  options.coarse_resolution = o.coarse;
  options.evaluation.chunk_points = 1 << 18;
  auto start = std::chrono::steady_clock::now();
  CUBEFORGE_ASSIGN_OR_RETURN(CoarseToFineGrid refined, evaluate_field_coarse_to_fine(field, spec, options));
  f.coarse_to_fine_ms = ms_since(start);
  f.stats = refined.stats;
  Mesh mesh;
  for (int run = 0; run < 3; ++run) {
    start = std::chrono::steady_clock::now();
    CUBEFORGE_ASSIGN_OR_RETURN(mesh, marching_cubes(refined.grid));
    f.marching_cubes_ms = run == 0 ? ms_since(start) : std::min(f.marching_cubes_ms, ms_since(start));
  }
  const MeshTopology topology = analyze_topology(mesh);
  f.vertices = mesh.vertex_count();
  f.faces = mesh.face_count();
  f.closed = topology.closed_and_oriented();
  f.euler = topology.euler_characteristic();
  if (!o.skip_dense) {
    start = std::chrono::steady_clock::now();
    CUBEFORGE_ASSIGN_OR_RETURN(ScalarGrid dense, evaluate_field_dense(field, spec, options.evaluation));
    f.dense_ms = ms_since(start);
    f.sign_disagreements = count_sign_disagreements(dense, refined.grid);
  }
  return f;
}

nlohmann::json geometry_json(const GeometryFigures& f) {
  nlohmann::json levels = nlohmann::json::array();
  for (const CoarseToFineLevel& level : f.stats.levels)
    levels.push_back({{"resolution", level.resolution},
                      {"evaluated", level.evaluated_points},
                      {"surface_cells", level.surface_cells}});
  nlohmann::json run = {{"resolution", f.resolution},
                        {"grid_points", f.stats.dense_points},
                        {"evaluated_points", f.stats.evaluated_points},
                        {"point_ratio", double(f.stats.dense_points) / double(f.stats.evaluated_points)},
                        {"levels", levels},
                        {"coarse_to_fine_seconds", f.coarse_to_fine_ms / 1e3},
                        {"marching_cubes_seconds", f.marching_cubes_ms / 1e3},
                        {"vertices", f.vertices},
                        {"faces", f.faces},
                        {"closed", f.closed},
                        {"euler", f.euler}};
  if (f.dense_ms) {
    run["dense_seconds"] = *f.dense_ms / 1e3;
    run["time_speedup"] = *f.dense_ms / f.coarse_to_fine_ms;
    run["sign_disagreements"] = f.sign_disagreements;
  }
  return run;
}

void report_geometry(const GeometryBenchOptions& o, const std::vector<GeometryFigures>& rows) {
  if (o.lab.json) {
    nlohmann::json runs = nlohmann::json::array();
    for (const GeometryFigures& f : rows) runs.push_back(geometry_json(f));
    print_lab_report(kGeometryCommand, {{"field", "creature, " + std::to_string(o.ripples) + " ripple terms"},
                                        {"coarse_resolution", o.coarse},
                                        {"runs", runs}});
    return;
  }
  std::printf("creature, %d ripple terms; coarse level %d, %d threads\n", o.ripples, o.coarse, cpu::thread_count());
  std::printf("%10s %12s %12s %7s %14s %10s %8s %8s %10s %9s %8s\n", "resolution", "grid points", "evaluated", "ratio",
              "coarse-to-fine", "dense", "speed-up", "differ", "MC", "faces", "closed");
  for (const GeometryFigures& f : rows) {
    std::printf("%10d %12lld %12lld %7.2f %12.1f ms", f.resolution, static_cast<long long>(f.stats.dense_points),
                static_cast<long long>(f.stats.evaluated_points),
                double(f.stats.dense_points) / double(f.stats.evaluated_points), f.coarse_to_fine_ms);
    if (f.dense_ms)
      std::printf(" %7.1f ms %7.2fx %8lld", *f.dense_ms, *f.dense_ms / f.coarse_to_fine_ms,
                  static_cast<long long>(f.sign_disagreements));
    else
      std::printf(" %10s %8s %8s", "-", "-", "-");
    std::printf(" %7.1f ms %9zu %8s\n", f.marching_cubes_ms, f.faces, f.closed ? "yes" : "no");
  }
}

int run_geometry_bench(const GeometryBenchOptions& o) {
  apply_lab_threads(o.lab);
  const FieldFunction field = parallel_creature(o.ripples);
  std::vector<GeometryFigures> rows;
  for (int resolution : o.resolutions) {
    auto figures = measure_resolution(field, resolution, o);
    if (!figures.ok()) {
      std::fprintf(stderr, "%s: resolution %d: %s\n", kGeometryCommand, resolution,
                   figures.error().to_string().c_str());
      return 1;
    }
    rows.push_back(*figures);
  }
  report_geometry(o, rows);
  return 0;
}

}  // namespace

Action add_geometry_bench_command(CLI::App& app) {
  auto o = std::make_shared<GeometryBenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      kGeometryCommand, "Measure coarse-to-fine evaluation and marching cubes on an analytic field (no model)");
  add_lab_options(cmd, o->lab, kThreadsOption | kJsonOption);
  cmd->add_option("--resolutions", o->resolutions, "Grid resolutions, a comma list: (2^r + 1)^3 points each")
      ->delimiter(',')
      ->check(whole_number_in(2, 10, "8 is the reference's"));
  cmd->add_option("--coarse", o->coarse, "First, dense level of coarse-to-fine")
      ->check(whole_number_in(1, 10, "below every resolution"));
  cmd->add_option("--ripples", o->ripples, "Sinusoidal terms per point: the field's cost per point")
      ->check(whole_number_in(0, 1000, "0 is a plain blobby creature"));
  cmd->add_flag("--no-dense", o->skip_dense, "Skip the dense grid (no time or agreement figures)");
  return [cmd, o]() -> int { return cmd->parsed() ? run_geometry_bench(*o) : -1; };
}

}  // namespace cubeforge::cli
