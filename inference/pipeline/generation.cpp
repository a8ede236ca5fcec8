// The text-to-mesh pipeline.
#include "inference/pipeline/generation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

#include "inference/core/system_info.h"
#include "inference/core/thread_pool.h"
#include "inference/cpu/ops.h"
#include "inference/cpu_backend/cpu_token_backend.h"
#include "inference/geometry/mesh_cleanup.h"
#include "inference/geometry/occupancy_grid.h"
#include "inference/model/latent_selection.h"
#include "inference/model/occupancy_slices.h"
#include "inference/tensor/trace.h"

namespace cubeforge {

namespace {

constexpr float kBoundingBoxMaxSide = 1.925f;

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

class StageClock {
 public:
  StageClock(const GenerationEventSink& events, Stage stage) : events_(events), stage_(stage) {
    if (events_) {
      GenerationEvent e;
      e.kind = GenerationEvent::Kind::kStageStarted;
      e.stage = stage_;
      events_(e);
    }
  }
  double finish() {
    const double ms = elapsed_ms(start_);
    if (events_) {
      GenerationEvent e;
      e.kind = GenerationEvent::Kind::kStageFinished;
      e.stage = stage_;
      e.stage_ms = ms;
      events_(e);
    }
    return ms;
  }

 private:
  const GenerationEventSink& events_;
  Stage stage_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

bool cancelled(const std::atomic<bool>* cancel) { return cancel && cancel->load(std::memory_order_relaxed); }

Error cancelled_error(const std::string& where) { return make_error(ErrorCode::kCancelled, "generation cancelled " + where); }

}  // namespace

const char* stage_name(Stage stage) {
  switch (stage) {
    case Stage::kText: return "text";
    case Stage::kPrefill: return "prefill";
    case Stage::kDecode: return "decode";
    case Stage::kShapeDecode: return "shape decode";
    case Stage::kOccupancy: return "occupancy";
    case Stage::kMeshing: return "meshing";
    case Stage::kCleanup: return "cleanup";
  }
  return "?";
}

Result<std::array<float, 3>> normalize_bbox(const std::array<float, 3>& size) {
  auto number = [](double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return std::string(text);
  };
  auto refused = [&](const std::string& why) {
    std::string message = "bounding box ";
    message.append(number(size[0])).append(" x ").append(number(size[1])).append(" x ").append(number(size[2]));
    return option_error(ErrorCode::kInvalidArgument, OptionKey::kBoundingBox, message.append(": ").append(why));
  };
  float largest = 0.f, smallest = std::numeric_limits<float>::max();
  for (float v : size) {
    // 3e38 is a finite float, but no size: every side is checked against a range, not just for being a number.
    if (!(v >= kMinBoundingBoxSide && v <= kMaxBoundingBoxSide))
      return refused(std::string("sides must be numbers from ")
                         .append(number(kMinBoundingBoxSide))
                         .append(" to ")
                         .append(number(kMaxBoundingBoxSide))
                         .append(" (any unit: only their proportions matter)"));
    largest = std::max(largest, v);
    smallest = std::min(smallest, v);
  }
  if (smallest * kBoundingBoxMostElongated < largest)
    return refused(std::string("the smallest side is under 1/")
                       .append(number(kBoundingBoxMostElongated))
                       .append(" of the largest, thinner than a cell of the finest grid; no shape fits it"));
  return std::array<float, 3>{kBoundingBoxMaxSide * size[0] / largest, kBoundingBoxMaxSide * size[1] / largest,
                              kBoundingBoxMaxSide * size[2] / largest};
}

namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;
// OpenBLAS's work buffer and a thread's stack.
constexpr uint64_t kThreadBytes = 128 * kMiB + 8 * kMiB;
// Meshing, cleanup and the rest of a run beyond the grid, for the realistic estimate.
constexpr uint64_t kRunMarginBytes = 32 * kMiB;

uint64_t grid_points(int resolution) {
  const uint64_t per_axis = (uint64_t(1) << resolution) + 1;
  return per_axis * per_axis * per_axis;
}

uint64_t grid_lower_bound_bytes(int resolution, bool coarse_to_fine) {
  return grid_points(resolution) * (coarse_to_fine ? 5 : 4);
}

uint64_t grid_realistic_bytes(int resolution, bool coarse_to_fine) {
  return grid_points(resolution) * (coarse_to_fine ? 10 : 5);
}

uint64_t file_bytes(const std::filesystem::path& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  return ec ? 0 : size;
}

std::string mib(uint64_t bytes) { return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB"; }

}  // namespace

Result<int> threads_within_address_space(int requested, const std::filesystem::path& model_folder, int resolution,
                                         bool coarse_to_fine) {
  const std::optional<uint64_t> left = address_space_left();
  if (!left) return requested;
  const uint64_t model = file_bytes(model_folder / "shape_gpt.safetensors") +
                         file_bytes(model_folder / "shape_tokenizer.safetensors") +
                         file_bytes(model_folder / "clip" / "model.safetensors");
  const uint64_t lower = model + grid_lower_bound_bytes(resolution, coarse_to_fine) + kThreadBytes;
  if (lower > *left)
    return option_error(ErrorCode::kOutOfMemory, OptionKey::kResolution,
                        "resolution " + std::to_string(resolution) + " with this model needs at least " + mib(lower) +
                            " of address space (model " + mib(model) + ", grid " +
                            mib(grid_lower_bound_bytes(resolution, coarse_to_fine)) + ", work buffers " +
                            mib(kThreadBytes) + ") but the limit (ulimit -v) leaves " + mib(*left) +
                            "; raise the limit or lower the resolution");
  int threads = std::max(1, requested);
  const uint64_t fixed = model + grid_realistic_bytes(resolution, coarse_to_fine) + kRunMarginBytes;
  while (threads > 1 && fixed + uint64_t(threads) * kThreadBytes > *left) --threads;
  return threads;
}

Status check_address_space_for_grid(int resolution, bool coarse_to_fine) {
  const std::optional<uint64_t> left = address_space_left();
  const uint64_t grid = grid_lower_bound_bytes(resolution, coarse_to_fine);
  if (!left || grid <= *left) return ok_status();
  return make_error(ErrorCode::kOutOfMemory, "a grid of resolution " + std::to_string(resolution) + " needs at least " +
                                                 mib(grid) + " more address space but the limit (ulimit -v) leaves " +
                                                 mib(*left) + "; raise the limit or lower the resolution");
}

Result<std::vector<float>> encode_prompt(const CubeModel& model, const std::string& prompt,
                                         const std::optional<std::array<float, 3>>& normalized_bbox,
                                         TraceSink* trace) {
  const TokenizedText tokens = model.tokenizer().encode(prompt);
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> hidden, model.text_encoder().encode(tokens, trace));
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> cond,
                             model.gpt().project_condition(hidden, normalized_bbox ? normalized_bbox->data() : nullptr));
  const int width = model.gpt().config().width;
  trace_tensor(trace, "condition", cond.data(), {int64_t(cond.size()) / width, width});
  return cond;
}

Status check_latent_selection(int64_t latent_top_k, bool coarse_to_fine, int64_t latents) {
  MeshingOptions meshing;
  meshing.latent_top_k = latent_top_k;
  meshing.coarse_to_fine = coarse_to_fine;
  CUBEFORGE_TRY(check_meshing_options(meshing));
  if (Status fits = check_latent_top_k(latent_top_k, latents); !fits.ok())
    return option_error(fits.error().code, OptionKey::kLatentTopK, fits.error().message);
  return ok_status();
}

Status check_generation_request(const CubeModel& model, const GenerationRequest& request) {
  CUBEFORGE_TRY(check_decode_options(request.decode()));
  CUBEFORGE_TRY(check_meshing_options(request.meshing()));
  CUBEFORGE_TRY(check_latent_selection(request.latent_top_k, request.coarse_to_fine, model.shape().config().latents));
  CUBEFORGE_TRY(check_decoding(model.gpt().config(), request.decoding, request.sampling, request.attention));
  CUBEFORGE_TRY(check_parallel_decoding(request.decode(), request.decoding, request.trace != nullptr));
  if (request.bbox) CUBEFORGE_TRY(normalize_bbox(*request.bbox));
  return ok_status();
}

std::vector<float> occupancy_probe_points() {
  GridSpec spec;
  spec.resolution = 2;
  return grid_points(spec);
}

Result<GenerationResult> tokens_to_mesh(const CubeModel& model, std::span<const int> tokens,
                                        const MeshingOptions& options, const GenerationEventSink& events,
                                        const std::atomic<bool>* cancel, TraceSink* trace) {
  CUBEFORGE_TRY(check_meshing_options(options));
  const int expected = model.shape_tokens();
  if (int(tokens.size()) != expected)
    return make_error(ErrorCode::kInvalidArgument, "the shape tokenizer needs " + std::to_string(expected) +
                                                       " tokens, got " + std::to_string(tokens.size()));
  CUBEFORGE_TRY(check_latent_selection(options.latent_top_k, options.coarse_to_fine, model.shape().config().latents));
  CUBEFORGE_TRY(check_address_space_for_grid(options.resolution, options.coarse_to_fine));
  GenerationResult result;
  result.tokens.assign(tokens.begin(), tokens.end());
  const ShapeTokenizer& shape = model.shape();

  StageClock decode_clock(events, Stage::kShapeDecode);
  std::vector<int64_t> ids(tokens.begin(), tokens.end());
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> latents, shape.decode_tokens(ids, nullptr, trace));
  CUBEFORGE_ASSIGN_OR_RETURN(PreparedLatents prepared, shape.prepare_latents(latents));
  if (trace) {
    const std::vector<float> probe = occupancy_probe_points();
    std::vector<float> probe_logits(probe.size() / 3 * size_t(shape.config().out_dim));
    CUBEFORGE_TRY(shape.occupancy(prepared, probe, probe_logits, probe.size() / 3, nullptr, trace));
  }
  result.timings.shape_decode_ms = decode_clock.finish();
  if (cancelled(cancel)) return cancelled_error("before meshing");

  StageClock occupancy_clock(events, Stage::kOccupancy);
  GridSpec spec;
  spec.resolution = options.resolution;
  const ShapeTokenizer::GridQueries grid_queries = shape.prepare_grid(grid_axis_coordinates(spec));
  GridFieldFunction field = [&](std::span<const int32_t> ijk, std::span<float> values) -> Status {
    return occupancy_on_grid_in_slices(shape, prepared, grid_queries, ijk, values);
  };
  FieldEvaluationOptions evaluation;
  evaluation.chunk_points = 8192;
  evaluation.progress = [&](int64_t done, int64_t planned) {
    if (events) {
      GenerationEvent e;
      e.kind = GenerationEvent::Kind::kOccupancyProgress;
      e.stage = Stage::kOccupancy;
      e.points_done = done;
      e.points_planned = planned;
      events(e);
    }
    return !cancelled(cancel);
  };
  ScalarGrid grid;
  if (options.coarse_to_fine) {
    CoarseToFineOptions c2f;
    c2f.evaluation = evaluation;
    std::optional<LatentSelectionField> selection;
    if (options.latent_top_k > 0) {
      CUBEFORGE_ASSIGN_OR_RETURN(
          selection, LatentSelectionField::create(shape, prepared, grid_queries, spec, options.latent_top_k));
      field = selection->attach(c2f);
    }
    CUBEFORGE_ASSIGN_OR_RETURN(CoarseToFineGrid refined, evaluate_grid_field_coarse_to_fine(field, spec, c2f));
    result.stats.occupancy_points = refined.stats.evaluated_points;
    grid = std::move(refined.grid);
  } else {
    CUBEFORGE_ASSIGN_OR_RETURN(grid, evaluate_grid_field_dense(field, spec, evaluation));
    result.stats.occupancy_points = spec.point_count();
  }
  result.stats.dense_points = spec.point_count();
  result.timings.occupancy_ms = occupancy_clock.finish();

  StageClock meshing_clock(events, Stage::kMeshing);
  MarchingCubesOptions mc;
  mc.mapping = options.vertex_mapping;
  CUBEFORGE_ASSIGN_OR_RETURN(result.mesh, marching_cubes(grid, mc));
  result.timings.meshing_ms = meshing_clock.finish();
  if (cancelled(cancel)) return cancelled_error("after meshing");
  result.stats.faces_before_cleanup = int64_t(result.mesh.face_count());
  result.stats.has_surface = !result.mesh.empty();

  StageClock cleanup_clock(events, Stage::kCleanup);
  if (!result.mesh.empty()) {
    PostprocessOptions post;
    post.min_component_diagonal_fraction = options.remove_floaters ? post.min_component_diagonal_fraction : 0.f;
    post.simplify = options.target_faces >= 0;
    post.simplification.target_faces = std::max<int64_t>(0, options.target_faces);
    CUBEFORGE_ASSIGN_OR_RETURN(PostprocessReport report, postprocess_mesh(result.mesh, post));
    result.stats.floaters_removed = report.components.removed_components;
    result.stats.pieces_as_extracted = report.components.solid_pieces;
    result.stats.simplification = report.simplification;
    if (result.mesh.empty())
      return make_error(ErrorCode::kInvalidArgument,
                        "simplifying the mesh to " + std::to_string(options.target_faces) +
                            " faces left none; ask for more faces (or 0 for the automatic budget, -1 for none)");
  }
  result.stats.pieces = int64_t(find_pieces(result.mesh).solid_count());
  result.timings.cleanup_ms = cleanup_clock.finish();
  if (cancelled(cancel)) return cancelled_error("after cleanup");
  result.stats.vertices = int64_t(result.mesh.vertex_count());
  result.stats.faces = int64_t(result.mesh.face_count());
  return result;
}

Result<GenerationResult> generate_shape(const CubeModel& model, const GenerationRequest& request,
                                        const GenerationEventSink& events, const std::atomic<bool>* cancel) {
  CUBEFORGE_ASSIGN_OR_RETURN(GenerationResult tokens, generate_shape_tokens(model, request, events, cancel));
  return mesh_shape_tokens(model, request, tokens, events, cancel);
}

Result<GenerationResult> generate_shape_tokens(const CubeModel& model, const GenerationRequest& asked,
                                               const GenerationEventSink& events, const std::atomic<bool>* cancel) {
  // What the request left to the model, settled as planning does (a planned request has nothing left).
  GenerationRequest request = asked;
  request.guidance_scale = guidance_for_model(asked.guidance_scale, model.gpt().config());
  if (request.token_backend && &request.token_backend->model() != &model.gpt())
    return make_error(ErrorCode::kInvalidArgument, "the token backend was opened for another model");
  if (request.backend == BackendChoice::kCuda &&
      (!request.token_backend || request.token_backend->kind() != BackendKind::kCuda))
    return make_error(ErrorCode::kInvalidArgument, "CUDA was asked for but no CUDA token backend was opened");
  CUBEFORGE_TRY(check_generation_request(model, request));
  CUBEFORGE_TRY(check_address_space_for_grid(request.resolution, request.coarse_to_fine));
  std::optional<std::array<float, 3>> bbox;
  if (request.bbox) {
    CUBEFORGE_ASSIGN_OR_RETURN(bbox, normalize_bbox(*request.bbox));
  }

  // Each part of a trace gets its scope (inference/tensor/trace.h).
  std::optional<ScopedTraceSink> prompt_trace, empty_prompt_trace;
  if (request.trace) {
    prompt_trace.emplace(*request.trace, "prompt");
    empty_prompt_trace.emplace(*request.trace, "empty_prompt");
  }
  auto sink = [](std::optional<ScopedTraceSink>& scoped) -> TraceSink* { return scoped ? &*scoped : nullptr; };

  StageTimings timings;
  StageClock text_clock(events, Stage::kText);
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> cond, encode_prompt(model, request.prompt, bbox, sink(prompt_trace)));
  std::vector<float> uncond;
  if (request.guidance_scale > 0.f) {
    // The unconditional branch never sees the bounding box.
    CUBEFORGE_ASSIGN_OR_RETURN(uncond, encode_prompt(model, "", std::nullopt, sink(empty_prompt_trace)));
  }
  timings.text_ms = text_clock.finish();
  if (cancelled(cancel)) return cancelled_error("before the first token");

  TokenGenerationOptions options;
  static_cast<DecodeOptions&>(options) = request.decode();
  options.sampling.seed = request.seed;
  options.trace = request.trace;
  options.trace_decode_steps = request.trace_decode_steps;
  const int count = model.shape_tokens();
  std::optional<StageClock> prefill_clock(std::in_place, events, Stage::kPrefill);
  std::optional<StageClock> decode_clock;
  auto on_token = [&](const TokenEvent& t) {
    // The first evaluation's tokens end the prefill (block diffusion's first may not be token 0).
    const bool first_evaluation = t.step == 0;
    if (first_evaluation && prefill_clock) {
      timings.prefill_ms = prefill_clock->finish();
      prefill_clock.reset();
      if (count > 1) decode_clock.emplace(events, Stage::kDecode);
    }
    if (events) {
      GenerationEvent e;
      e.kind = GenerationEvent::Kind::kToken;
      e.stage = first_evaluation ? Stage::kPrefill : Stage::kDecode;
      e.token_index = t.index;
      e.token = t.token;
      e.token_count = count;
      e.token_ms = t.step_ms;
      e.decode_step = t.step;
      events(e);
    }
    return !cancelled(cancel);
  };
  // The CPU backend when the front end opened none (GenerationRequest::token_backend).
  std::shared_ptr<const TokenBackend> backend =
      request.token_backend ? request.token_backend : make_cpu_token_backend(model.gpt());
  CUBEFORGE_ASSIGN_OR_RETURN(DecodedTokens decoded,
                             decode_tokens(*backend, cond, uncond, count, options, request.decoding, on_token));
  std::vector<int> tokens = std::move(decoded.tokens);
  if (decode_clock) timings.decode_ms = decode_clock->finish();
  if (cancelled(cancel)) return cancelled_error("after the last token");
  GenerationResult result;
  result.tokens = std::move(tokens);
  result.timings = timings;
  result.time_to_first_token_ms = timings.text_ms + timings.prefill_ms;
  const int decoded_after_prefill = count - (decoded.stats.tokens_per_step.empty() ? 1 : decoded.stats.tokens_per_step[0]);
  result.tokens_per_second =
      decoded_after_prefill > 0 && timings.decode_ms > 0 ? decoded_after_prefill / (timings.decode_ms / 1000.0) : 0.0;
  result.decoding = std::move(decoded.stats);
  return result;
}

Result<GenerationResult> mesh_shape_tokens(const CubeModel& model, const GenerationRequest& request,
                                           const GenerationResult& tokens, const GenerationEventSink& events,
                                           const std::atomic<bool>* cancel) {
  // The shape decoder's part of a generation's trace (inference/tensor/trace.h).
  std::optional<ScopedTraceSink> shape_trace;
  if (request.trace) shape_trace.emplace(*request.trace, "shape");
  CUBEFORGE_ASSIGN_OR_RETURN(GenerationResult result,
                             tokens_to_mesh(model, tokens.tokens, request.meshing(), events, cancel,
                                            shape_trace ? &*shape_trace : nullptr));
  StageTimings timings = tokens.timings;
  timings.shape_decode_ms = result.timings.shape_decode_ms;
  timings.occupancy_ms = result.timings.occupancy_ms;
  timings.meshing_ms = result.timings.meshing_ms;
  timings.cleanup_ms = result.timings.cleanup_ms;
  result.timings = timings;
  result.time_to_first_token_ms = tokens.time_to_first_token_ms;
  result.tokens_per_second = tokens.tokens_per_second;
  result.decoding = tokens.decoding;
  return result;
}

}  // namespace cubeforge
