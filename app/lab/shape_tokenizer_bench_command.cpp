// `cubeforge-lab bench-shape-tokenizer`: the shape tokenizer's throughput on
// the CPU: occupancy points per second (the hot path of meshing, in chunks as
// the generic path takes them), the time to decode a shape's tokens into
// latents, and the time to encode 8192 surface samples into tokens. On a model
// folder's tokenizer (the built-in model's by default), or on random weights
// of a preset's sizes (`--shape v05`: width 768, 12 heads, 1024 latents, 128
// frequencies, 16384 codes). Occupancy does not depend on the decoder depth;
// --decoder-layers shortens a random-weight run when only points/s matter.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "app/lab/bench_statistics.h"
#include "app/lab/commands.h"
#include "app/lab/lab_models.h"
#include "app/lab/lab_options.h"
#include "app/lab/lab_report.h"

namespace cubeforge::cli {

namespace {

constexpr const char* kShapeTokenizerCommand = "bench-shape-tokenizer";

struct ShapeTokenizerBenchOptions {
  LabOptions lab;
  std::string shape;       // random weights of these sizes instead of a model folder
  int decoder_layers = 0;  // with --shape: 0 keeps the preset's
  int64_t points = 16384;
  int64_t chunk = 4096;
};

struct ShapeTokenizerUnderTest {
  std::optional<ShapeTokenizer> tokenizer;
  std::string name;
  double build_ms = 0;
};

Result<ShapeTokenizerUnderTest> load_shape_tokenizer_under_test(const ShapeTokenizerBenchOptions& o,
                                                                const std::filesystem::path& folder) {
  ShapeTokenizerUnderTest loaded;
  const auto start = std::chrono::steady_clock::now();
  if (o.shape.empty()) {
    CUBEFORGE_ASSIGN_OR_RETURN(loaded.tokenizer, load_folder_shape_tokenizer(folder));
    loaded.name = readable_untrusted(folder.string());
  } else {
    CUBEFORGE_ASSIGN_OR_RETURN(ModelConfig preset, preset_model_config(o.shape));
    ShapeModelConfig config = preset.shape;
    if (o.decoder_layers > 0) config.decoder_layers = o.decoder_layers;
    CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsFile file,
                               random_weights_file(expected_shape_tensors(config), 2024, DType::kF32,
                                                   "random " + o.shape + " shape tokenizer"));
    CUBEFORGE_ASSIGN_OR_RETURN(loaded.tokenizer, ShapeTokenizer::from_file(std::move(file), config));
    loaded.name = "random " + o.shape + "-size shape tokenizer";
  }
  loaded.build_ms = ms_since(start);
  return loaded;
}

struct ShapeTokenizerFigures {
  double decode_ms = 0, decode_cpu_ms = 0;
  double prepare_ms = 0;
  double occupancy_ms = 0, occupancy_cpu_ms = 0;
  double logit_mean = 0;
  double encode_ms = 0, encode_cpu_ms = 0;
  int64_t samples = 8192;
  size_t encoded_tokens = 0;
};

// Points spread over the bounding box and a little beyond it.
std::vector<float> query_points(int64_t points) {
  std::vector<float> query(size_t(points) * 3);
  uint64_t state = 1;
  for (auto& v : query) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = float(double(state >> 40) / double(1ull << 24) * 2.1 - 1.05);
  }
  return query;
}

// Samples on a sphere of radius 0.96 with their normals, as the reference samples a mesh.
std::vector<float> sphere_surface(int64_t samples) {
  std::vector<float> surface(size_t(samples) * 6);
  for (int64_t i = 0; i < samples; ++i) {
    const double z = 1.0 - 2.0 * (double(i) + 0.5) / double(samples);
    const double radius = std::sqrt(1.0 - z * z), angle = 2.39996322972865332 * double(i);
    const float p[3] = {float(radius * std::cos(angle)), float(radius * std::sin(angle)), float(z)};
    for (int k = 0; k < 3; ++k) surface[size_t(i * 6 + k)] = 0.96f * p[k];
    for (int k = 0; k < 3; ++k) surface[size_t(i * 6 + 3 + k)] = p[k];
  }
  return surface;
}

Result<ShapeTokenizerFigures> measure_shape_tokenizer(const ShapeTokenizer& tokenizer, int64_t points, int64_t chunk) {
  const ShapeModelConfig& config = tokenizer.config();
  ShapeTokenizerFigures f;
  std::vector<int64_t> tokens(size_t(config.latents));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int64_t((i * 7919) % size_t(config.codes));
  auto start = std::chrono::steady_clock::now();
  double cpu_start = process_cpu_ms();
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> latents, tokenizer.decode_tokens(tokens));
  f.decode_ms = ms_since(start);
  f.decode_cpu_ms = process_cpu_ms() - cpu_start;

  start = std::chrono::steady_clock::now();
  CUBEFORGE_ASSIGN_OR_RETURN(PreparedLatents prepared, tokenizer.prepare_latents(latents));
  f.prepare_ms = ms_since(start);

  const std::vector<float> query = query_points(points);
  std::vector<float> logits(static_cast<size_t>(points));
  const size_t warm = size_t(std::min(points, chunk));  // one warm-up chunk, then the timed run
  CUBEFORGE_TRY(tokenizer.occupancy(prepared, std::span<const float>(query).first(warm * 3),
                                    std::span<float>(logits).first(warm), size_t(chunk)));
  start = std::chrono::steady_clock::now();
  cpu_start = process_cpu_ms();
  CUBEFORGE_TRY(tokenizer.occupancy(prepared, query, logits, size_t(chunk)));
  f.occupancy_ms = ms_since(start);
  f.occupancy_cpu_ms = process_cpu_ms() - cpu_start;
  double sum = 0.0;
  for (float v : logits) sum += v;
  f.logit_mean = sum / double(points);

  const std::vector<float> surface = sphere_surface(f.samples);
  start = std::chrono::steady_clock::now();
  cpu_start = process_cpu_ms();
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<int64_t> encoded, tokenizer.encode(surface));
  f.encode_ms = ms_since(start);
  f.encode_cpu_ms = process_cpu_ms() - cpu_start;
  f.encoded_tokens = encoded.size();
  return f;
}

void report_shape_tokenizer(const ShapeTokenizerBenchOptions& o, const ShapeTokenizerUnderTest& loaded,
                            const ShapeTokenizerFigures& f) {
  const ShapeModelConfig& config = loaded.tokenizer->config();
  const double points = double(o.points);
  const double gflops = points * occupancy_flops_per_point(config, false, config.latents) / (f.occupancy_ms * 1e6);
  if (o.lab.json) {
    print_lab_report(kShapeTokenizerCommand, {{"model", loaded.name},
                                              {"width", config.width},
                                              {"latents", config.latents},
                                              {"decoder_layers", config.decoder_layers},
                                              {"build_ms", loaded.build_ms},
                                              {"decode_ms", f.decode_ms},
                                              {"decode_cpu_ms", f.decode_cpu_ms},
                                              {"prepare_ms", f.prepare_ms},
                                              {"points", o.points},
                                              {"chunk", o.chunk},
                                              {"occupancy_ms", f.occupancy_ms},
                                              {"occupancy_cpu_ms", f.occupancy_cpu_ms},
                                              {"points_per_second", points / (f.occupancy_ms / 1e3)},
                                              {"points_per_cpu_second", points / (f.occupancy_cpu_ms / 1e3)},
                                              {"gflops", gflops},
                                              {"logit_mean", f.logit_mean},
                                              {"encode_samples", f.samples},
                                              {"encoded_tokens", f.encoded_tokens},
                                              {"encode_ms", f.encode_ms},
                                              {"encode_cpu_ms", f.encode_cpu_ms}});
    return;
  }
  std::printf("%s (%d decoder layers) built in %.2f s; %d threads, %s kernels, BLAS core %s\n", loaded.name.c_str(),
              config.decoder_layers, loaded.build_ms / 1e3, cpu::thread_count(), cpu::kernel_isa(),
              cpu::blas_core_name());
  std::printf("decode %d tokens through %d layers: %.3f s (%.3f s per layer; %.3f CPU s)\n", config.latents,
              config.decoder_layers, f.decode_ms / 1e3, f.decode_ms / 1e3 / config.decoder_layers,
              f.decode_cpu_ms / 1e3);
  std::printf("prepare latents (LN, c_k, c_v over %d latents): %.4f s\n", config.latents, f.prepare_ms / 1e3);
  std::printf(
      "occupancy: %lld points in chunks of %lld: %.3f s = %.0f points/s (%.1f GFLOP/s); %.3f CPU s = %.0f "
      "points per CPU s\n",
      static_cast<long long>(o.points), static_cast<long long>(o.chunk), f.occupancy_ms / 1e3,
      points / (f.occupancy_ms / 1e3), gflops, f.occupancy_cpu_ms / 1e3, points / (f.occupancy_cpu_ms / 1e3));
  std::printf("logit mean %.4f\n", f.logit_mean);
  std::printf("encode %lld surface samples into %zu tokens: %.3f s (%.3f CPU s)\n", static_cast<long long>(f.samples),
              f.encoded_tokens, f.encode_ms / 1e3, f.encode_cpu_ms / 1e3);
}

int run_shape_tokenizer_bench(const ShapeTokenizerBenchOptions& o) {
  apply_lab_threads(o.lab);
  std::filesystem::path folder;
  if (o.shape.empty()) {
    const auto resolved = lab_model_folder(o.lab, kShapeTokenizerCommand);
    if (!resolved) return 2;
    folder = *resolved;
  }
  auto loaded = load_shape_tokenizer_under_test(o, folder);
  if (!loaded.ok()) {
    print_error(kShapeTokenizerCommand, loaded.error());
    return 1;
  }
  auto figures = measure_shape_tokenizer(*loaded->tokenizer, o.points, o.chunk);
  if (!figures.ok()) {
    print_error(kShapeTokenizerCommand, figures.error());
    return 1;
  }
  report_shape_tokenizer(o, *loaded, *figures);
  return 0;
}

}  // namespace

Action add_shape_tokenizer_bench_command(CLI::App& app) {
  auto o = std::make_shared<ShapeTokenizerBenchOptions>();
  CLI::App* cmd = app.add_subcommand(kShapeTokenizerCommand,
                                     "Measure the shape tokenizer: occupancy points/s, decoding and encoding a shape");
  CLI::Option* model = add_lab_options(cmd, o->lab, kModelOption | kThreadsOption | kJsonOption);
  CLI::Option* shape =
      add_shape_option(cmd, o->shape, model, "Random-weight shape tokenizer of these sizes instead: small, v01 or v05");
  cmd->add_option("--decoder-layers", o->decoder_layers, "With --shape: decoder layers (default: the preset's)")
      ->check(whole_number_in(1, 64, "occupancy does not depend on them"))
      ->needs(shape);
  cmd->add_option("--points", o->points, "Occupancy query points")
      ->check(whole_number_in(1, int64_t(1) << 26, "points queried in one timed run"));
  cmd->add_option("--chunk", o->chunk, "Points per occupancy chunk")
      ->check(whole_number_in(1, int64_t(1) << 26, "points the decoder takes at once"));
  return [cmd, o]() -> int { return cmd->parsed() ? run_shape_tokenizer_bench(*o) : -1; };
}

}  // namespace cubeforge::cli
