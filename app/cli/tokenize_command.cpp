// `cubeforge-cli tokenize`: a mesh file to shape tokens and back, with the
// reconstruction's IoU against the input.
#include <nlohmann/json.hpp>

#include <iostream>
#include <unistd.h>

#include "app/cli/commands.h"
#include "app/cli/model_option.h"
#include "app/cli/progress.h"
#include "inference/cpu/ops.h"
#include "inference/geometry/mesh_io.h"
#include "inference/geometry/mesh_metrics.h"
#include "inference/geometry/surface_sampling.h"

namespace cubeforge::cli {

namespace {

struct TokenizeOptions {
  std::string model_dir, mesh, out;
  int resolution = 7;
  int iou_resolution = 6;
  int64_t samples = 8192;
  uint64_t seed = 0;
  int threads = 0;
  bool json = false;
  bool quiet = false;
};

int run_tokenize(const TokenizeOptions& o) {
  cpu::set_thread_count(o.threads);
  auto input = import_mesh(o.mesh);
  if (!input.ok()) {
    std::fprintf(stderr, "tokenize: %s\n", input.error().to_string().c_str());
    return 1;
  }
  std::optional<MeshFileFormat> out_format;
  if (!o.out.empty()) {
    auto format = mesh_file_format_from_path(o.out);
    if (!format.ok()) {
      std::fprintf(stderr, "tokenize: %s\n", format.error().to_string().c_str());
      return 2;
    }
    out_format = *format;
    if (!output_folder_writable(o.out, "tokenize")) return 1;
  }
  auto model = load_model_or_report(o.model_dir, "tokenize");
  if (!model) return 1;

  // The encoder sees the mesh as the reference prepares it: rescaled to 0.96
  // of [-1, 1]^3 and sampled by area with face normals.
  auto transform = unit_cube_transform(*input);
  if (!transform.ok()) {
    std::fprintf(stderr, "tokenize: '%s': %s\n", o.mesh.c_str(), transform.error().to_string().c_str());
    return 1;
  }
  Mesh rescaled = *input;
  apply_transform(rescaled, *transform);
  SurfaceSamplingOptions sampling;
  sampling.count = o.samples;
  sampling.seed = o.seed;
  auto cloud = sample_surface(rescaled, sampling);
  if (!cloud.ok()) {
    std::fprintf(stderr, "tokenize: %s\n", cloud.error().to_string().c_str());
    return 1;
  }
  const auto start = std::chrono::steady_clock::now();
  auto ids = model->shape().encode(*cloud);
  if (!ids.ok()) {
    std::fprintf(stderr, "tokenize: %s\n", ids.error().to_string().c_str());
    return 1;
  }
  const double encode_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::vector<int> tokens(ids->begin(), ids->end());

  MeshingOptions meshing;
  meshing.resolution = o.resolution;
  meshing.target_faces = -1;  // measure the reconstruction itself
  ProgressLine progress(!o.quiet && !o.json && isatty(STDERR_FILENO));
  auto rebuilt = tokens_to_mesh(*model, tokens, meshing, [&](const GenerationEvent& e) { progress.on_event(e); });
  progress.finish();
  if (!rebuilt.ok()) {
    std::fprintf(stderr, "tokenize: %s\n", rebuilt.error().to_string().c_str());
    return 1;
  }
  GridSpec iou_grid;
  iou_grid.resolution = o.iou_resolution;
  double iou = 0.0;
  if (!rebuilt->mesh.empty()) {
    auto measured = mesh_iou(rescaled, rebuilt->mesh, iou_grid);
    if (!measured.ok()) {
      std::fprintf(stderr, "tokenize: IoU: %s\n", measured.error().to_string().c_str());
      return 1;
    }
    iou = *measured;
  }
  if (out_format) {
    Status saved = export_mesh(rebuilt->mesh, o.out, *out_format);
    if (!saved.ok()) {
      std::fprintf(stderr, "tokenize: %s\n", saved.error().to_string().c_str());
      return 1;
    }
  }
  if (o.json) {
    nlohmann::json report = {{"mesh", o.mesh},
                             {"tokens", tokens},
                             {"encode_ms", encode_ms},
                             {"reconstruction_iou", iou},
                             {"iou_resolution", o.iou_resolution},
                             {"vertices", rebuilt->stats.vertices},
                             {"faces", rebuilt->stats.faces},
                             {"output", o.out}};
    std::cout << report.dump() << std::endl;
  } else {
    std::printf("tokens:");
    for (int t : tokens) std::printf(" %d", t);
    std::printf("\nencode %.1f ms\n", encode_ms);
    print_timing_table(*rebuilt, stdout);
    std::printf("reconstruction IoU %.4f (grid 2^%d)\n", iou, o.iou_resolution);
    if (!o.out.empty()) std::printf("wrote %s\n", o.out.c_str());
  }
  return 0;
}

}  // namespace

Action add_tokenize_command(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Encode a mesh to shape tokens and reconstruct it");
  cmd->add_option("--model", o->model_dir, "Model folder (default: the built-in model)");
  cmd->add_option("--mesh", o->mesh, "Input mesh: OBJ, GLB, STL or PLY")->required();
  cmd->add_option("--out,-o", o->out, "Write the reconstruction here (.glb, .obj, .stl, .ply)");
  cmd->add_option("--resolution", o->resolution, "Reconstruction grid resolution")->check(CLI::Range(2, 10));
  cmd->add_option("--iou-resolution", o->iou_resolution, "Grid resolution for the IoU")->check(CLI::Range(3, 9));
  cmd->add_option("--samples", o->samples, "Surface samples for the encoder")->check(CLI::Range(64, 1 << 20));
  cmd->add_option("--seed", o->seed, "Seed for surface sampling");
  cmd->add_option("--threads", o->threads, "CPU threads (0: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->add_flag("--quiet,-q", o->quiet, "No progress line");
  return [cmd, o]() -> int { return cmd->parsed() ? run_tokenize(*o) : -1; };
}

}  // namespace cubeforge::cli
