// cubeforge-gallery: renders what a model makes of a list of prompts and lays
// the renders out in a grid, each with its caption, as one PNG.
//
//   cubeforge-gallery --prompts FILE [--model DIR] [--columns 4] [--cell 256]
//                     [--resolution 7] --out gallery.png
//
// FILE holds one prompt per line (blank lines and lines starting with # are
// skipped). Generation is greedy with guidance, exactly as `cubeforge-cli
// generate`; a prompt that decodes to no surface gets an "(empty)" cell, so a
// gallery never hides a failure. Rendering is offscreen Vulkan (any device,
// lavapipe included). Exit status: 0 written, 1 failed, 2 bad arguments,
// 3 no Vulkan device.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "app/cli/model_option.h"
#include "app/gallery/caption_text.h"
#include "engine/context.h"
#include "engine/image_output.h"
#include "engine/offscreen_target.h"
#include "engine/renderer.h"
#include "inference/core/file_io.h"
#include "inference/cpu/blas_kernels.h"
#include "inference/pipeline/generation.h"

namespace cubeforge::gallery {
namespace {

constexpr const char* kName = "cubeforge-gallery";

struct Options {
  std::string model;
  std::string prompts_file;
  std::string out;
  int columns = 4;
  int cell = 256;
  int resolution = 7;
  int caption_scale = 2;
};

void usage() {
  std::fprintf(stderr,
               "usage: %s --prompts FILE --out FILE.png [--model DIR] [--columns N] [--cell PIXELS]\n"
               "       [--resolution R]\n"
               "FILE: one prompt per line; blank lines and lines starting with # are skipped.\n",
               kName);
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h" || i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (a == "--model") o.model = v;
    else if (a == "--prompts") o.prompts_file = v;
    else if (a == "--out") o.out = v;
    else if (a == "--columns") o.columns = std::atoi(v);
    else if (a == "--cell") o.cell = std::atoi(v);
    else if (a == "--resolution") o.resolution = std::atoi(v);
    else return false;
  }
  return !o.prompts_file.empty() && !o.out.empty() && o.columns > 0 && o.cell >= 64 && o.cell <= 2048 &&
         o.resolution >= 4 && o.resolution <= 9;
}

Result<std::vector<std::string>> read_prompts(const std::string& path) {
  CUBEFORGE_ASSIGN_OR_RETURN(std::string text, read_file_text(path));
  std::vector<std::string> prompts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty() && line[0] != '#') prompts.push_back(line);
  }
  if (prompts.empty()) return make_error(ErrorCode::kInvalidArgument, path + ": no prompts in the file");
  return prompts;
}

Status write_png_atomically(const Canvas& canvas, const std::string& path) {
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<std::byte> png,
                             engine::encode_png(canvas.rgba.data(), uint32_t(canvas.width), uint32_t(canvas.height)));
  return write_file_atomically(path, std::span<const std::byte>(png));
}

int run(const Options& options) {
  auto prompts = read_prompts(options.prompts_file);
  if (!prompts.ok()) {
    std::fprintf(stderr, "%s: %s\n", kName, prompts.error().to_string().c_str());
    return 2;
  }
  if (!cli::output_writable(options.out, /*force=*/false, kName)) return 1;
  const auto folder = cli::model_folder_or_report(options.model, /*given_on_command_line=*/false, kName);
  if (!folder) return 2;
  auto model = cli::load_model_or_report(*folder, kName);
  if (!model) return 1;

  engine::ContextOptions context_options;
  context_options.validation = engine::Validation::kOff;
  auto context = engine::Context::create(context_options);
  if (!context.ok()) {
    std::fprintf(stderr, "%s: %s\n", kName, context.error().to_string().c_str());
    return engine::is_no_vulkan_device(context.error()) ? 3 : 1;
  }
  auto renderer = engine::Renderer::create(**context);
  if (!renderer.ok()) {
    std::fprintf(stderr, "%s: %s\n", kName, renderer.error().to_string().c_str());
    return 1;
  }
  engine::OffscreenOptions target_options;
  target_options.width = target_options.height = static_cast<uint32_t>(options.cell);
  auto target = engine::OffscreenTarget::create(**renderer, target_options);
  if (!target.ok()) {
    std::fprintf(stderr, "%s: %s\n", kName, target.error().to_string().c_str());
    return 1;
  }

  const int count = static_cast<int>(prompts->size());
  const int columns = std::min(options.columns, count);
  const int rows = (count + columns - 1) / columns;
  const int text_width_limit = (options.cell - 12) / options.caption_scale;
  const int caption_lines = 2;
  const int caption_height = caption_lines * kLineHeight * options.caption_scale + 12;
  const int cell_height = options.cell + caption_height;
  const std::array<uint8_t, 3> paper{246, 246, 244}, ink{30, 32, 36}, muted{150, 40, 40};
  Canvas canvas(columns * options.cell, rows * cell_height, paper);

  engine::SceneSettings scene;
  scene.grid = false;
  scene.base_color = {0.78f, 0.66f, 0.50f};
  scene.background_top = {0.97f, 0.97f, 0.96f};
  scene.background_bottom = {0.84f, 0.85f, 0.87f};
  for (int i = 0; i < count; ++i) {
    const std::string& prompt = (*prompts)[i];
    const int x0 = (i % columns) * options.cell, y0 = (i / columns) * cell_height;
    GenerationRequest request;
    request.prompt = prompt;
    request.resolution = options.resolution;
    auto result = generate_shape(*model, request);
    if (!result.ok()) {
      std::fprintf(stderr, "%s: \"%s\": %s\n", kName, prompt.c_str(), result.error().to_string().c_str());
      return 1;
    }
    std::printf("%-48s %6lld faces  %7.0f ms\n", prompt.c_str(), static_cast<long long>(result->stats.faces),
                result->timings.total_ms());
    std::fflush(stdout);
    if (result->mesh.face_count() == 0) {
      draw_text(canvas, x0 + 12, y0 + options.cell / 2, "(empty)", options.caption_scale, muted);
    } else {
      if (auto s = (*renderer)->meshes().upload(result->mesh); !s.ok()) {
        std::fprintf(stderr, "%s: %s\n", kName, s.error().to_string().c_str());
        return 1;
      }
      engine::OrbitCamera camera;
      camera.yaw_degrees = 35.f;
      camera.pitch_degrees = 22.f;
      camera.frame(result->mesh.bounds(), 1.f, 1.05f);
      auto image = (*target)->render_and_read(camera, scene);
      if (!image.ok()) {
        std::fprintf(stderr, "%s: %s\n", kName, image.error().to_string().c_str());
        return 1;
      }
      for (int y = 0; y < options.cell; ++y) {
        uint8_t* row = &canvas.rgba[(size_t(y0 + y) * canvas.width + x0) * 4];
        std::memcpy(row, &image->rgba[size_t(y) * options.cell * 4], size_t(options.cell) * 4);
        for (int x = 0; x < options.cell; ++x) row[x * 4 + 3] = 255;  // alpha is mesh coverage; the gallery is opaque
      }
    }
    std::vector<std::string> lines = wrap_text(prompt, text_width_limit);
    if (lines.size() > size_t(caption_lines)) {
      lines.resize(caption_lines);
      lines.back() += "...";
    }
    for (size_t l = 0; l < lines.size(); ++l)
      draw_text(canvas, x0 + 6, y0 + options.cell + 6 + int(l) * kLineHeight * options.caption_scale, lines[l],
                options.caption_scale, ink);
  }
  if (auto s = write_png_atomically(canvas, options.out); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", kName, s.error().to_string().c_str());
    return 1;
  }
  std::printf("wrote %s (%d x %d, %d prompts)\n", options.out.c_str(), canvas.width, canvas.height, count);
  return 0;
}

}  // namespace
}  // namespace cubeforge::gallery

int main(int argc, char** argv) {
  cubeforge::cpu::reexec_with_matching_blas_kernels(argv);
  cubeforge::gallery::Options options;
  if (!cubeforge::gallery::parse(argc, argv, options)) {
    cubeforge::gallery::usage();
    return 2;
  }
  return cubeforge::gallery::run(options);
}
