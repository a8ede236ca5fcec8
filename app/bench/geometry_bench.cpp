// Prints, as JSON, what coarse-to-fine evaluation saves over dense evaluation
// of the meshing grid, and how long marching cubes takes, at each resolution.
//
// The field is an analytic creature (a blobby union of spheres, capsules and
// a ring, with sinusoidal ripples that give each point a cost). The real
// decoder costs far more per point, so for it the speed-up approaches the
// ratio of evaluated points, which is reported separately from the times.
//
//   cubeforge-bench-geometry [--resolutions 6,7,8] [--coarse 5] [--ripples 8]
//                            [--skip-dense] [--threads N]
//
// Marching cubes is timed as the best of three runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "inference/core/thread_pool.h"
#include "inference/geometry/analytic_fields.h"
#include "inference/geometry/marching_cubes.h"
#include "inference/geometry/mesh_metrics.h"
#include "inference/geometry/occupancy_grid.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int usage(const char* program) {
  std::fprintf(stderr, "usage: %s [--resolutions 6,7,8] [--coarse 5] [--ripples 8] [--skip-dense] [--threads N]\n", program);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cubeforge;
  std::vector<int> resolutions = {6, 7, 8};
  int coarse = 5, ripples = 8;
  bool skip_dense = false;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--resolutions" && a + 1 < argc) {
      resolutions.clear();
      std::stringstream list(argv[++a]);
      for (std::string item; std::getline(list, item, ',');) resolutions.push_back(std::atoi(item.c_str()));
    } else if (arg == "--coarse" && a + 1 < argc) {
      coarse = std::atoi(argv[++a]);
    } else if (arg == "--ripples" && a + 1 < argc) {
      ripples = std::atoi(argv[++a]);
    } else if (arg == "--skip-dense") {
      skip_dense = true;
    } else if (arg == "--threads" && a + 1 < argc) {
      const int threads = std::atoi(argv[++a]);
      if (threads < 1) return usage(argv[0]);
      ThreadPool::set_global_threads(threads);
    } else {
      return usage(argv[0]);
    }
  }

  const FieldFunction creature = creature_field(ripples);
  // Spread each batch over the cores, as a batched decoder would use its device.
  const FieldFunction field = [&creature](std::span<const float> xyz, std::span<float> values) -> Status {
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
    if (failed) return make_error(ErrorCode::kInternal, "creature field failed");
    return ok_status();
  };

  std::printf("{\n  \"field\": \"creature, %d ripple terms\",\n  \"coarse_resolution\": %d,\n  \"runs\": [\n", ripples, coarse);
  for (size_t r = 0; r < resolutions.size(); ++r) {
    GridSpec spec;
    spec.resolution = resolutions[r];
    CoarseToFineOptions options;
    options.coarse_resolution = coarse;
    options.evaluation.chunk_points = 1 << 18;

    auto start = Clock::now();
    auto refined = evaluate_field_coarse_to_fine(field, spec, options);
    const double refined_seconds = seconds_since(start);
    if (!refined.ok()) {
      std::fprintf(stderr, "coarse-to-fine evaluation failed: %s\n", refined.error().to_string().c_str());
      return 1;
    }
    Result<Mesh> mesh = Mesh{};
    double marching_seconds = 0;
    for (int run = 0; run < 3 && mesh.ok(); ++run) {
      start = Clock::now();
      mesh = marching_cubes(refined->grid);
      const double seconds = seconds_since(start);
      marching_seconds = run == 0 ? seconds : std::min(marching_seconds, seconds);
    }
    if (!mesh.ok()) {
      std::fprintf(stderr, "marching cubes failed: %s\n", mesh.error().to_string().c_str());
      return 1;
    }
    const MeshTopology topology = analyze_topology(*mesh);

    std::printf("    {\"resolution\": %d, \"grid_points\": %lld, \"evaluated_points\": %lld, \"point_ratio\": %.2f,\n",
                spec.resolution, (long long)refined->stats.dense_points, (long long)refined->stats.evaluated_points,
                double(refined->stats.dense_points) / double(refined->stats.evaluated_points));
    std::printf("     \"levels\": [");
    for (size_t l = 0; l < refined->stats.levels.size(); ++l) {
      const auto& level = refined->stats.levels[l];
      std::printf("%s{\"resolution\": %d, \"evaluated\": %lld, \"surface_cells\": %lld}", l ? ", " : "", level.resolution,
                  (long long)level.evaluated_points, (long long)level.surface_cells);
    }
    std::printf("],\n     \"coarse_to_fine_seconds\": %.3f,\n", refined_seconds);
    if (!skip_dense) {
      start = Clock::now();
      auto dense = evaluate_field_dense(field, spec, options.evaluation);
      const double dense_seconds = seconds_since(start);
      if (!dense.ok()) {
        std::fprintf(stderr, "dense evaluation failed: %s\n", dense.error().to_string().c_str());
        return 1;
      }
      std::printf("     \"dense_seconds\": %.3f, \"time_speedup\": %.2f, \"sign_disagreements\": %lld,\n", dense_seconds,
                  dense_seconds / refined_seconds, (long long)count_sign_disagreements(*dense, refined->grid));
    }
    std::printf("     \"marching_cubes_seconds\": %.3f, \"vertices\": %zu, \"faces\": %zu, \"closed\": %s, \"euler\": %lld}%s\n",
                marching_seconds, mesh->vertex_count(), mesh->face_count(),
                topology.closed_and_oriented() ? "true" : "false", (long long)topology.euler_characteristic(),
                r + 1 < resolutions.size() ? "," : "");
    std::fflush(stdout);
  }
  std::printf("  ]\n}\n");
  return 0;
}
