// `cubeforge-cli tokenize`: a mesh file to shape tokens and back, with the
// reconstruction's IoU against the input.
#include <nlohmann/json.hpp>

#include <iostream>
#include <unistd.h>

#include "app/cli/commands.h"
#include "app/cli/interrupt.h"
#include "app/cli/model_option.h"
#include "app/cli/option_checks.h"
#include "app/cli/progress.h"
#include "inference/core/system_info.h"
#include "inference/geometry/mesh_io.h"
#include "inference/geometry/mesh_metrics.h"
#include "inference/geometry/surface_sampling.h"

namespace cubeforge::cli {

namespace {

struct TokenizeOptions {
  std::string model_dir, mesh, out;
  bool model_given = false;
  bool force = false;
  int resolution = 7;
  int iou_resolution = 6;
  int64_t samples = 8192;
  std::string seed_text = "0";
  int threads = 0;
  bool json = false;
  bool quiet = false;
};

int run_tokenize(const TokenizeOptions& o) {
  auto input = import_mesh(o.mesh);
  if (!input.ok()) {
    print_error("tokenize", input.error());
    return 1;
  }
  // The encoder sees the mesh as the reference prepares it: rescaled to 0.96
  // of [-1, 1]^3 and sampled by area with face normals.
  auto transform = unit_cube_transform(*input);
  if (!transform.ok()) {
    std::fprintf(stderr, "tokenize: '%s': %s\n", escape_untrusted(o.mesh).c_str(), transform.error().to_string().c_str());
    return 1;
  }
  Mesh rescaled = *input;
  apply_transform(rescaled, *transform);
  GridSpec iou_grid;
  iou_grid.resolution = o.iou_resolution;
  // What measuring the reconstruction will cost, before the model is loaded.
  if (Status coverage = check_inside_grid_coverage(rescaled, iou_grid); !coverage.ok()) {
    std::fprintf(stderr, "tokenize: '%s': %s\n", escape_untrusted(o.mesh).c_str(), coverage.error().to_string().c_str());
    return 1;
  }
  std::optional<MeshFileFormat> out_format;
  if (!o.out.empty()) {
    auto format = mesh_file_format_from_path(o.out);
    if (!format.ok()) {
      print_error("tokenize", format.error());
      return 2;
    }
    out_format = *format;
    if (!output_writable(o.out, o.force, "tokenize")) return 1;
  }
  const auto folder = model_folder_or_report(o.model_dir, o.model_given, "tokenize");
  if (!folder) return 2;
  share_one_malloc_arena_under_address_limit();
  if (!set_threads_within_address_space(o.threads, *folder, o.resolution, true, "tokenize")) return 1;
  install_interrupt_handler();
  auto model = load_model_or_report(*folder, "tokenize");
  if (!model) return 1;
  const std::string mesh_shown = readable_untrusted(o.mesh), out_shown = readable_untrusted(o.out);
  auto report_cancel = [&] {
    std::string what;
    if (!o.out.empty()) {
      auto kind = file_kind(o.out);
      what = "; '" + out_shown + (kind.ok() && *kind == FileKind::kRegular ? "' was left as it was" : "' was not written");
    }
    std::fprintf(stderr, "tokenize: cancelled (%s)%s\n", cancelling_signal_name(), what.c_str());
    return cancelled_exit_code();
  };

  SurfaceSamplingOptions sampling;
  sampling.count = o.samples;
  sampling.seed = std::stoull(o.seed_text);  // checked by seed_number()
  auto cloud = sample_surface(rescaled, sampling);
  if (!cloud.ok()) {
    std::fprintf(stderr, "tokenize: '%s': %s\n", mesh_shown.c_str(), cloud.error().to_string().c_str());
    return 1;
  }
  const auto start = std::chrono::steady_clock::now();
  auto ids = model->shape().encode(*cloud);
  if (!ids.ok()) {
    print_error("tokenize", ids.error());
    return 1;
  }
  const double encode_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::vector<int> tokens(ids->begin(), ids->end());
  if (interrupted().load()) return report_cancel();

  MeshingOptions meshing;
  meshing.resolution = o.resolution;
  meshing.target_faces = -1;  // measure the reconstruction itself
  ProgressLine progress(!o.quiet && !o.json && isatty(STDERR_FILENO));
  auto rebuilt = tokens_to_mesh(*model, tokens, meshing, [&](const GenerationEvent& e) { progress.on_event(e); },
                                &interrupted());
  progress.finish();
  if (!rebuilt.ok()) {
    if (rebuilt.error().code == ErrorCode::kCancelled) return report_cancel();
    print_error("tokenize", rebuilt.error());
    return 1;
  }
  double iou = 0.0;
  if (!rebuilt->mesh.empty()) {
    auto measured = mesh_iou(rescaled, rebuilt->mesh, iou_grid);
    if (!measured.ok()) {
      std::fprintf(stderr, "tokenize: IoU: %s\n", measured.error().to_string().c_str());
      return 1;
    }
    iou = *measured;
  }
  // An empty reconstruction is a result (IoU 0), not a failure: the tokens
  // are still printed; only the mesh file is not written.
  bool written = false;
  if (out_format && !rebuilt->mesh.empty()) {
    if (interrupted().load()) return report_cancel();
    WriteOptions write = output_write_options(o.force);
    write.cancel = &interrupted();
    Status saved = export_mesh(rebuilt->mesh, o.out, *out_format, write);
    if (!saved.ok()) {
      if (saved.error().code == ErrorCode::kCancelled) return report_cancel();
      print_error("tokenize", saved.error());
      return 1;
    }
    written = true;
  }
  if (out_format && !written)
    std::fprintf(stderr, "tokenize: the reconstruction has no surface at resolution %d; no mesh was written to '%s'\n",
                 o.resolution, out_shown.c_str());
  if (o.json) {
    nlohmann::json report = {{"mesh", mesh_shown},
                             {"tokens", tokens},
                             {"encode_ms", encode_ms},
                             {"reconstruction_iou", iou},
                             {"iou_resolution", o.iou_resolution},
                             {"vertices", rebuilt->stats.vertices},
                             {"faces", rebuilt->stats.faces},
                             {"output", written ? nlohmann::json(out_shown) : nlohmann::json(nullptr)}};
    std::cout << json_line(report) << std::endl;
  } else {
    std::printf("tokens:");
    for (int t : tokens) std::printf(" %d", t);
    std::printf("\nencode %.1f ms\n", encode_ms);
    print_timing_table(*rebuilt, stdout);
    std::printf("reconstruction IoU %.4f (grid 2^%d)\n", iou, o.iou_resolution);
    if (written) std::printf("wrote %s\n", out_shown.c_str());
  }
  return 0;
}

}  // namespace

Action add_tokenize_command(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Encode a mesh to shape tokens and reconstruct it");
  CLI::Option* model = cmd->add_option("--model", o->model_dir, "Model folder (default: the built-in model)");
  cmd->add_option("--mesh", o->mesh, "Input mesh: OBJ, glTF (.gltf, .glb), STL or PLY")->required();
  cmd->add_option("--out,-o", o->out, "Write the reconstruction here (.glb, .obj, .stl, .ply)");
  cmd->add_flag("--force", o->force, "Replace the output file even if it is read-only");
  cmd->add_option("--resolution", o->resolution, "Reconstruction grid resolution")
      ->check(whole_number_in(2, 10, "7 by default"));
  cmd->add_option("--iou-resolution", o->iou_resolution, "Grid resolution for the IoU")
      ->check(whole_number_in(3, 9, "6 by default"));
  cmd->add_option("--samples", o->samples, "Surface samples for the encoder")
      ->check(whole_number_in(64, 1 << 20, "the reference takes 8192"));
  cmd->add_option("--seed", o->seed_text, "Seed for surface sampling (0 to 2^64 - 1)")->check(seed_number());
  cmd->add_option("--threads", o->threads, "CPU threads (0: all cores)")
      ->check(whole_number_in(0, 1024, "0 uses every core"));
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->add_flag("--quiet,-q", o->quiet, "No progress line");
  return [cmd, o, model]() -> int {
    if (!cmd->parsed()) return -1;
    o->model_given = model->count() > 0;
    return run_tokenize(*o);
  };
}

}  // namespace cubeforge::cli
