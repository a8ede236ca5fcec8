// One generation API for the command line and the app: prompt → CLIP →
// shape tokens → latents → occupancy grid → marching cubes → cleaned mesh.
//
// Events stream as they happen (every token, every stage's start and end
// with its time); a cancel flag is checked between tokens, between occupancy
// batches and after every later stage, and a cancelled run ends with
// ErrorCode::kCancelled.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inference/core/result.h"
#include "inference/decoding/decoding.h"
#include "inference/geometry/marching_cubes.h"
#include "inference/geometry/mesh.h"
#include "inference/geometry/mesh_cleanup.h"
#include "inference/backend/generate.h"
#include "inference/pipeline/cube_model.h"

namespace cubeforge {


// One generation: the prompt and its conditions, the decode options and the
// meshing options whole (inference/options/engine_options.h), and the
// backend that runs the GPT. A front end fills the options from its controls;
// plan_generation (inference/planning/plan.h) checks them against the model,
// reads the KV bases and opens the backend.
struct GenerationRequest : DecodeOptions, MeshingOptions {
  // Guidance is left to the model unless asked (DecodeOptions::guidance_scale).
  GenerationRequest() { guidance_scale = kModelGuidance; }

  std::string prompt;
  uint64_t seed = 0;                               // sampling's seed (SamplingOptions::seed is set from it)
  std::optional<std::array<float, 3>> bbox;        // any positive size; scaled so its largest side is 1.925
  DecodingOptions decoding;                        // sequential, exact parallel or block diffusion
  // The backend that runs the GPT: `token_backend` when set (opened for this
  // model's GPT by plan_generation), else the CPU. `backend` is the choice it
  // is opened from.
  BackendChoice backend = BackendChoice::kCpu;
  std::shared_ptr<const TokenBackend> token_backend;
  // Named intermediates (inference/tensor/trace.h) of the text encoder and
  // condition of each branch, the prefill, the first `trace_decode_steps`
  // decode steps, the shape decoder and the occupancy decoder at a few probe
  // points; null: off.
  TraceSink* trace = nullptr;
  int trace_decode_steps = 2;

  const DecodeOptions& decode() const { return *this; }
  DecodeOptions& decode() { return *this; }
  const MeshingOptions& meshing() const { return *this; }
  MeshingOptions& meshing() { return *this; }
  // What it asks of the backend that runs its GPT.
  BackendRequest backend_request() const { return {decode(), decoding.mode, trace != nullptr}; }
};

enum class Stage { kText, kPrefill, kDecode, kShapeDecode, kOccupancy, kMeshing, kCleanup };
const char* stage_name(Stage stage);

struct GenerationEvent {
  enum class Kind { kStageStarted, kStageFinished, kToken, kOccupancyProgress };
  Kind kind = Kind::kStageStarted;
  Stage stage = Stage::kText;
  double stage_ms = 0;          // kStageFinished: the stage's time
  int token_index = 0;          // kToken
  int token = 0;                // kToken
  int token_count = 0;          // kToken: tokens in the whole sequence
  double token_ms = 0;          // kToken: model time of this token
  int decode_step = 0;          // kToken: the model evaluation that chose it (several tokens share one
                                // with parallel decoding, and block diffusion chooses them out of order)
  int64_t points_done = 0;      // kOccupancyProgress
  int64_t points_planned = 0;   // kOccupancyProgress
};

using GenerationEventSink = std::function<void(const GenerationEvent&)>;

struct StageTimings {
  double text_ms = 0, prefill_ms = 0, decode_ms = 0, shape_decode_ms = 0, occupancy_ms = 0, meshing_ms = 0,
         cleanup_ms = 0;
  double total_ms() const {
    return text_ms + prefill_ms + decode_ms + shape_decode_ms + occupancy_ms + meshing_ms + cleanup_ms;
  }
};

struct MeshStatistics {
  int64_t vertices = 0, faces = 0;
  int64_t faces_before_cleanup = 0;
  int64_t occupancy_points = 0;        // field evaluations
  int64_t dense_points = 0;            // what a dense grid would have cost
  int64_t floaters_removed = 0;        // components dropped
  // Solid pieces (mesh_cleanup.h's MeshPieces, cavities left out): of the
  // surface as extracted, before any cleanup, which is what the model drew;
  // and of the mesh delivered.
  int64_t pieces_as_extracted = 0;
  int64_t pieces = 0;
  SimplifyReport simplification;       // what simplifying to the face budget took
  bool has_surface = false;
};

struct GenerationResult {
  std::vector<int> tokens;
  Mesh mesh;
  StageTimings timings;
  MeshStatistics stats;
  double time_to_first_token_ms = 0;
  double tokens_per_second = 0;        // decode steps only
  DecodingStats decoding;              // model evaluations and the tokens each accepted
};

// The reference's bounding-box normalisation: largest side becomes 1.925.
// Sides are sizes in any unit, each from kMinBoundingBoxSide to
// kMaxBoundingBoxSide, the smallest at least 1/kBoundingBoxMostElongated
// of the largest (a thinner side is under a cell of the finest grid, 2^10
// cells across); anything else is an error naming the box.
inline constexpr float kMinBoundingBoxSide = 1e-6f;
inline constexpr float kMaxBoundingBoxSide = 1e6f;
inline constexpr float kBoundingBoxMostElongated = 1000.f;
Result<std::array<float, 3>> normalize_bbox(const std::array<float, 3>& size);

// Every option of `request` against the others and against `model` (its
// latents, whether it decodes by blocks): ok, or an error naming the option
// (Error::option). Generation checks this first; plan_generation before
// opening anything.
Status check_generation_request(const CubeModel& model, const GenerationRequest& request);

// Runs the whole pipeline: generate_shape_tokens() then mesh_shape_tokens().
Result<GenerationResult> generate_shape(const CubeModel& model, const GenerationRequest& request,
                                        const GenerationEventSink& events = {},
                                        const std::atomic<bool>* cancel = nullptr);

// The first half alone: prompt → shape tokens, with the text, prefill and
// decode timings, time to first token and tokens/s; no mesh. The app shows a
// coarse mesh of these tokens before the full-resolution pass.
Result<GenerationResult> generate_shape_tokens(const CubeModel& model, const GenerationRequest& request,
                                               const GenerationEventSink& events = {},
                                               const std::atomic<bool>* cancel = nullptr);
// The second half: the tokens of generate_shape_tokens() → the request's mesh,
// keeping the first half's timings.
Result<GenerationResult> mesh_shape_tokens(const CubeModel& model, const GenerationRequest& request,
                                           const GenerationResult& tokens, const GenerationEventSink& events = {},
                                           const std::atomic<bool>* cancel = nullptr);

// Whether a latent top-k fits a model of `latents` latents and the grid
// evaluation: 0, or 1 to latents with coarse-to-fine (check_latent_top_k).
Status check_latent_selection(int64_t latent_top_k, bool coarse_to_fine, int64_t latents);

// The points a traced occupancy decoder answers: the (2^2 + 1)^3 grid points
// of resolution 2, the coarsest level every grid evaluation starts from.
std::vector<float> occupancy_probe_points();

// The second half alone: shape tokens → mesh (used by tokenisation round
// trips and progressive previews). Fills timings/stats of the shape stages.
// `trace`, when set, receives the shape decoder's named intermediates, and
// the occupancy decoder's at occupancy_probe_points() ("decoder.…",
// "occupancy.…").
Result<GenerationResult> tokens_to_mesh(const CubeModel& model, std::span<const int> tokens,
                                        const MeshingOptions& options, const GenerationEventSink& events = {},
                                        const std::atomic<bool>* cancel = nullptr, TraceSink* trace = nullptr);

// Planning under a limit on address space (`ulimit -v`), where everything
// mapped counts: the model files, each thread's BLAS work buffer and stack,
// and the grid. The grid needs at least 5 bytes a point coarse-to-fine (values
// and an evaluated flag; about 10 in all with the cell maps) and 4 dense.
//
// The threads, at most `requested`, whose buffers leave room for the model in
// `model_folder` and a grid of `resolution`: fewer when the realistic need of
// more does not fit, at least 1 while the lower bound of one fits, and an
// out-of-memory error naming the figures when not even that does. `requested`
// unchanged without a limit. Call before the model is loaded.
Result<int> threads_within_address_space(int requested, const std::filesystem::path& model_folder, int resolution,
                                         bool coarse_to_fine);
// With the model loaded: an out-of-memory error when the grid's lower bound
// no longer fits, so a starved run stops before decoding, not after.
Status check_address_space_for_grid(int resolution, bool coarse_to_fine);

// The condition rows for a prompt: text_proj(CLIP(prompt)) (+ bbox token).
// `trace` receives CLIP's intermediates ("clip.…") and the rows ("condition").
Result<std::vector<float>> encode_prompt(const CubeModel& model, const std::string& prompt,
                                         const std::optional<std::array<float, 3>>& normalized_bbox,
                                         TraceSink* trace = nullptr);

}  // namespace cubeforge
