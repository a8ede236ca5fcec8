// The engine's options, each defined, named, parsed and checked here once.
//
// A front end (the command line, the app's settings) fills these structs from
// its own controls; requests contain them (GenerationRequest holds the
// DecodeOptions and MeshingOptions it passes down whole), so a choice is never
// copied field by field on its way to the kernels. An error about an option
// carries the option's key (Error::option); the command line words it as its
// flag, the app as its control.
//
// Nothing here knows a backend or a model: whether a backend runs a choice is
// its own supports() answer (inference/backend/token_backend.h), and whether a
// model does is the plan's (inference/planning/plan.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "inference/core/result.h"

namespace cubeforge {

// Every option an error can be about. option_key() gives the one spelling
// that settings files, JSON reports and Error::option use.
enum class OptionKey {
  kWeights,
  kQ4Group,
  kKvCache,
  kKvFormat,
  kKvBudget,
  kKvRank,
  kBackend,
  kCudaGraphs,
  kAttention,
  kDecoding,
  kGuesses,
  kGuessCost,
  kThreshold,
  kFactor,
  kDiffusionCache,
  kBlockSize,
  kSubBlock,
  kGuidance,
  kSampling,
  kTemperature,
  kTopK,
  kTopP,
  kBoundingBox,
  kResolution,
  kCoarseToFine,
  kLatentTopK,
  kVertexMapping,
  kRemoveFloaters,
  kTargetFaces,
  kTrace,
};
const char* option_key(OptionKey key);  // "kv_cache_format", "kv_budget", ...
std::optional<OptionKey> option_key_from_name(std::string_view name);

// An error about one option: the message says what is wrong in words that
// name no front end's control; Error::option says which option.
Error option_error(ErrorCode code, OptionKey option, std::string message);
// The option an error is about, if it names one.
std::optional<OptionKey> error_option(const Error& error);

// ---- Weights: the format the decode matrices are read in.
enum class WeightFormat { kStored, kBF16, kQ8, kQ4 };
std::string_view weight_format_name(WeightFormat format);  // "stored", "bf16", "q8", "q4"
std::optional<WeightFormat> weight_format_from_name(std::string_view name);

struct WeightOptions {
  WeightFormat format = WeightFormat::kStored;
  int64_t q4_group = 32;  // weights per Q4 scale and offset: 32 or 64
};
Status check_weight_options(const WeightOptions& options);

// ---- The KV cache: how it stores and keeps keys and values.
enum class KvFormat { kF32, kBF16, kFp8, kInt8 };
std::string_view kv_format_name(KvFormat format);  // "f32", "bf16", "fp8", "int8"
std::optional<KvFormat> kv_format_from_name(std::string_view name);

class LowRankKv;  // inference/model/kv_bases.h

inline constexpr int kMaxKvSize = 1 << 20;  // the largest budget or rank taken

struct KvCacheOptions {
  KvFormat format = KvFormat::kF32;
  int budget = 0;  // H2O: shape slots per layer and row; 0: all
  int rank = 0;    // low-rank keys and values of this rank; 0: full
  // The model folder's bases at `rank`, read when a generation is planned
  // (inference/planning/plan.h); null at full rank.
  std::shared_ptr<const LowRankKv> low_rank;

  // The default: every position, float32, full rank (exact against the reference).
  bool exact() const { return format == KvFormat::kF32 && budget == 0 && rank == 0 && !low_rank; }
  std::string label() const;  // "f32", "fp8/budget 64/rank 32"
};
// The file of low-rank bases beside a model's GPT.
inline constexpr const char* kKvBasesFile = "kv_bases.safetensors";
// Why the options cannot run on any backend, or ok.
Status check_kv_cache_options(const KvCacheOptions& options);

// ---- Which backend runs the GPT: auto picks CUDA when a usable device is
// present and it supports the request.
enum class BackendChoice { kAuto, kCpu, kCuda };
const char* backend_choice_name(BackendChoice choice);  // "auto", "cpu", "cuda"
Result<BackendChoice> parse_backend_choice(std::string_view text);

// ---- How one-token decode attends in the single-stream blocks.
enum class AttentionMode {
  kCausal,     // correct causal attention (identical to the uncached forward)
  kReference,  // reproduces the reference's KV-cache decode: the query sees cache slot 0 only
};
const char* attention_mode_name(AttentionMode mode);  // "causal", "reference"
std::optional<AttentionMode> parse_attention_mode(std::string_view name);

// ---- Sampling. Greedy (the reference's) unless asked; the knobs apply only then.
struct SamplingOptions {
  bool greedy = true;
  float temperature = 1.0f;
  int top_k = 0;       // 0 = off
  float top_p = 1.0f;  // 1 = off
  uint64_t seed = 0;
};
Status check_sampling_options(const SamplingOptions& options);

// ---- Decoding strategies over a token session.
enum class DecodingMode { kSequential, kJacobi, kDiffusion };
const char* decoding_mode_name(DecodingMode mode);
std::optional<DecodingMode> parse_decoding_mode(std::string_view name);

struct JacobiOptions {
  int max_guesses = 4;  // tokens guessed past the last accepted one, at most
  // The cost of one more position in an evaluation, as a fraction of a
  // one-token evaluation. Guesses are made only while the acceptance seen so
  // far makes them pay at this price; otherwise the strategy decodes one
  // token per evaluation and tries one guess now and then. The default is the
  // CPU session's (`cubeforge-cli bench-decoding` measures it); 0 guesses at
  // every evaluation.
  float position_cost = 0.75f;
  int probe_interval = 32;  // evaluations without guesses between two probes
};

// Block diffusion's key-value cache (Fast-dLLM):
//   none    every evaluation recomputes every position up to the current
//           block's end;
//   prefix  the finished blocks' keys and values are kept (each block is
//           evaluated once more with its final tokens at the next block's
//           first evaluation); exact for a block-causal model;
//   dual    also the rest of the current block: the block decodes in
//           sub-blocks, the whole block is evaluated once at each sub-block's
//           start, and the sub-block's further evaluations reuse the other
//           positions' keys and values from then (the masked suffix
//           included), as Fast-dLLM v2's sub-block cache. Approximate.
enum class DiffusionCache { kNone, kPrefix, kDual };
const char* diffusion_cache_name(DiffusionCache cache);
std::optional<DiffusionCache> parse_diffusion_cache(std::string_view name);

struct DiffusionOptions {
  // Confidence rule: accept every masked position whose confidence (the
  // probability of its most likely code) exceeds the threshold, and at least
  // the most confident one; 0 takes the model's (diffusion_options_for_model
  // in inference/decoding/decoding.h).
  // Factor rule (factor > 0): sort by confidence and accept the top n while
  // confidence_n >= 1 - factor / (n + 1), at least one.
  float threshold = 0.f;
  float factor = 0.f;
  DiffusionCache cache = DiffusionCache::kDual;
  int block_size = 0;      // 0: the model's
  int sub_block_size = 0;  // dual cache; 0: half the block
};

struct DecodingOptions {
  DecodingMode mode = DecodingMode::kSequential;
  JacobiOptions jacobi;
  DiffusionOptions diffusion;
};

// ---- Classifier-free guidance.
// The reference's scale, and what a model whose config names none is guided at.
inline constexpr float kReferenceGuidance = 3.0f;
inline constexpr float kMaxGuidance = 100.0f;
// A scale left to the model: its config's gpt_model.guidance_scale, else
// kReferenceGuidance (guidance_for_model, inference/decoding/decoding.h). A
// GenerationRequest leaves it to the model unless asked; planning and
// generation settle it before a backend opens a session.
inline constexpr float kModelGuidance = -1.0f;

// ---- What decides how the GPT runs, from a request down to a backend's
// session: requests and sessions hold it whole.
struct DecodeOptions {
  // > 0: two rows (conditional, unconditional); 0: off; kModelGuidance: the model's.
  float guidance_scale = kReferenceGuidance;
  SamplingOptions sampling;     // greedy by default, like the reference
  AttentionMode attention = AttentionMode::kCausal;
  bool use_kv_cache = true;  // off: every step recomputes the whole sequence
  KvCacheOptions kv_cache;   // exact by default
  // CUDA: replay one recorded decode step per token (CUBEFORGE_CUDA_GRAPHS=0
  // switches graphs off as well).
  bool cuda_graphs = true;

  int batch() const { return guidance_scale > 0.f ? 2 : 1; }
  bool guidance_left_to_model() const { return guidance_scale == kModelGuidance; }
};
// Guidance, sampling and the KV cache against each other (guidance may be
// left to the model).
Status check_decode_options(const DecodeOptions& options);

// ---- Meshing: shape tokens to a mesh.
enum class VertexMapping {
  // Grid index i maps to lower + i * (upper - lower) / 2^r: the vertex lies
  // where the grid point is.
  kCellSize,
  // The reference's mapping: index / (2^r + 1) * (upper - lower) + lower. It
  // divides by the point count, so its meshes are shrunk by 2^r / (2^r + 1)
  // towards the lower corner. Use it to compare with the reference's output.
  kReference,
};

inline constexpr int kMinResolution = 2;
inline constexpr int kMaxResolution = 10;

struct MeshingOptions {
  int resolution = 8;          // grid of (2^r + 1)^3 points
  bool coarse_to_fine = true;  // false: evaluate every grid point
  // Coarse-to-fine only: latents each block of grid points below the coarse
  // level attends to (inference/model/latent_selection.h); 0 attends to
  // every latent (exact).
  int64_t latent_top_k = 0;
  VertexMapping vertex_mapping = VertexMapping::kCellSize;
  bool remove_floaters = true;
  int64_t target_faces = 0;  // 0: max(10000, 10% of faces); < 0: no simplification
};
// Resolution and latent selection against each other (the model's latent
// count is the plan's check).
Status check_meshing_options(const MeshingOptions& options);

}  // namespace cubeforge
