// The engine options' names, parsers and checks (engine_options.h).
#include "inference/options/engine_options.h"

#include <array>
#include <cmath>
#include <utility>

namespace cubeforge {

namespace {

// One table per enum: its values and their spellings, read both ways.
template <class Enum, size_t N>
using NameTable = std::array<std::pair<Enum, const char*>, N>;

template <class Enum, size_t N>
const char* name_in(const NameTable<Enum, N>& table, Enum value) {
  for (const auto& [entry, name] : table)
    if (entry == value) return name;
  return "?";
}

template <class Enum, size_t N>
std::optional<Enum> value_in(const NameTable<Enum, N>& table, std::string_view name) {
  for (const auto& [entry, spelling] : table)
    if (name == spelling) return entry;
  return std::nullopt;
}

constexpr NameTable<OptionKey, 30> kOptionKeys{{
    {OptionKey::kWeights, "weights"},
    {OptionKey::kQ4Group, "q4_group"},
    {OptionKey::kKvCache, "kv_cache"},
    {OptionKey::kKvFormat, "kv_cache_format"},
    {OptionKey::kKvBudget, "kv_budget"},
    {OptionKey::kKvRank, "kv_rank"},
    {OptionKey::kBackend, "backend"},
    {OptionKey::kCudaGraphs, "cuda_graphs"},
    {OptionKey::kAttention, "attention"},
    {OptionKey::kDecoding, "decoding"},
    {OptionKey::kGuesses, "guesses"},
    {OptionKey::kGuessCost, "guess_cost"},
    {OptionKey::kThreshold, "diffusion_threshold"},
    {OptionKey::kFactor, "diffusion_factor"},
    {OptionKey::kDiffusionCache, "diffusion_cache"},
    {OptionKey::kBlockSize, "block_size"},
    {OptionKey::kSubBlock, "sub_block_size"},
    {OptionKey::kGuidance, "guidance"},
    {OptionKey::kSampling, "sampling"},
    {OptionKey::kTemperature, "temperature"},
    {OptionKey::kTopK, "top_k"},
    {OptionKey::kTopP, "top_p"},
    {OptionKey::kBoundingBox, "bbox"},
    {OptionKey::kResolution, "resolution"},
    {OptionKey::kCoarseToFine, "coarse_to_fine"},
    {OptionKey::kLatentTopK, "latent_top_k"},
    {OptionKey::kVertexMapping, "vertex_mapping"},
    {OptionKey::kRemoveFloaters, "remove_floaters"},
    {OptionKey::kTargetFaces, "target_faces"},
    {OptionKey::kTrace, "trace"},
}};

constexpr NameTable<WeightFormat, 4> kWeightFormats{{
    {WeightFormat::kStored, "stored"},
    {WeightFormat::kBF16, "bf16"},
    {WeightFormat::kQ8, "q8"},
    {WeightFormat::kQ4, "q4"},
}};
constexpr NameTable<KvFormat, 4> kKvFormats{{
    {KvFormat::kF32, "f32"},
    {KvFormat::kBF16, "bf16"},
    {KvFormat::kFp8, "fp8"},
    {KvFormat::kInt8, "int8"},
}};
constexpr NameTable<BackendChoice, 3> kBackendChoices{{
    {BackendChoice::kAuto, "auto"},
    {BackendChoice::kCpu, "cpu"},
    {BackendChoice::kCuda, "cuda"},
}};
constexpr NameTable<AttentionMode, 2> kAttentionModes{{
    {AttentionMode::kCausal, "causal"},
    {AttentionMode::kReference, "reference"},
}};
constexpr NameTable<DecodingMode, 3> kDecodingModes{{
    {DecodingMode::kSequential, "sequential"},
    {DecodingMode::kJacobi, "jacobi"},
    {DecodingMode::kDiffusion, "diffusion"},
}};
constexpr NameTable<DiffusionCache, 3> kDiffusionCaches{{
    {DiffusionCache::kNone, "none"},
    {DiffusionCache::kPrefix, "prefix"},
    {DiffusionCache::kDual, "dual"},
}};

Error invalid(OptionKey option, std::string message) {
  return option_error(ErrorCode::kInvalidArgument, option, std::move(message));
}

}  // namespace

const char* option_key(OptionKey key) { return name_in(kOptionKeys, key); }
std::optional<OptionKey> option_key_from_name(std::string_view name) { return value_in(kOptionKeys, name); }

Error option_error(ErrorCode code, OptionKey option, std::string message) {
  Error error = make_error(code, std::move(message));
  error.option = option_key(option);
  return error;
}

std::optional<OptionKey> error_option(const Error& error) {
  if (error.option.empty()) return std::nullopt;
  return option_key_from_name(error.option);
}

std::string_view weight_format_name(WeightFormat format) { return name_in(kWeightFormats, format); }
std::optional<WeightFormat> weight_format_from_name(std::string_view name) { return value_in(kWeightFormats, name); }

Status check_weight_options(const WeightOptions& options) {
  if (options.q4_group != 32 && options.q4_group != 64)
    return invalid(OptionKey::kQ4Group, "a Q4 group holds 32 or 64 weights, not " + std::to_string(options.q4_group));
  return ok_status();
}

std::string_view kv_format_name(KvFormat format) { return name_in(kKvFormats, format); }
std::optional<KvFormat> kv_format_from_name(std::string_view name) { return value_in(kKvFormats, name); }

std::string KvCacheOptions::label() const {
  std::string s(kv_format_name(format));
  if (budget) s += "/budget " + std::to_string(budget);
  if (rank) s += "/rank " + std::to_string(rank);
  return s;
}

Status check_kv_cache_options(const KvCacheOptions& options) {
  if (options.budget < 0 || options.budget == 1 || options.budget > kMaxKvSize)
    return invalid(OptionKey::kKvBudget, "a KV budget keeps BOS and at least one more position: give 2 to " +
                                             std::to_string(kMaxKvSize) + " slots, or 0 to keep every position");
  if (options.rank < 0 || options.rank > kMaxKvSize)
    return invalid(OptionKey::kKvRank, "a KV rank is 0 (full keys and values) or up to " + std::to_string(kMaxKvSize));
  if (options.budget > 0 && options.format == KvFormat::kInt8)
    return invalid(OptionKey::kKvBudget,
                   "eviction rewrites cache slots, but the INT8 (KIVI) cache quantises keys in blocks of 32 slots "
                   "that stay as they are; keep every position with int8, or store f32, bf16 or fp8");
  return ok_status();
}

const char* backend_choice_name(BackendChoice choice) { return name_in(kBackendChoices, choice); }
Result<BackendChoice> parse_backend_choice(std::string_view text) {
  if (auto choice = value_in(kBackendChoices, text)) return *choice;
  return invalid(OptionKey::kBackend, "the backend is auto, cpu or cuda, not '" + std::string(text) + "'");
}

const char* attention_mode_name(AttentionMode mode) { return name_in(kAttentionModes, mode); }
std::optional<AttentionMode> parse_attention_mode(std::string_view name) { return value_in(kAttentionModes, name); }

Status check_sampling_options(const SamplingOptions& options) {
  if (!options.greedy && !(options.temperature > 0.f && std::isfinite(options.temperature)))
    return invalid(OptionKey::kTemperature, "the sampling temperature must be a number > 0");
  if (!(options.top_p > 0.f && options.top_p <= 1.f)) return invalid(OptionKey::kTopP, "top-p must be in (0, 1]");
  if (options.top_k < 0) return invalid(OptionKey::kTopK, "top-k must be 0 (off) or positive");
  return ok_status();
}

const char* decoding_mode_name(DecodingMode mode) { return name_in(kDecodingModes, mode); }
std::optional<DecodingMode> parse_decoding_mode(std::string_view name) { return value_in(kDecodingModes, name); }
const char* diffusion_cache_name(DiffusionCache cache) { return name_in(kDiffusionCaches, cache); }
std::optional<DiffusionCache> parse_diffusion_cache(std::string_view name) { return value_in(kDiffusionCaches, name); }

Status check_decode_options(const DecodeOptions& options) {
  if (!options.guidance_left_to_model() &&
      !(options.guidance_scale >= 0.f && options.guidance_scale <= kMaxGuidance))
    return invalid(OptionKey::kGuidance, "guidance must be from 0 (off) to " + std::to_string(int(kMaxGuidance)) +
                                             ", or left to the model");
  CUBEFORGE_TRY(check_sampling_options(options.sampling));
  CUBEFORGE_TRY(check_kv_cache_options(options.kv_cache));
  if (!options.use_kv_cache && !options.kv_cache.exact())
    return invalid(OptionKey::kKvCache,
                   "KV cache options need the cache: recomputing every step keeps no cache to store or evict");
  if (options.attention == AttentionMode::kReference && !options.kv_cache.exact())
    return invalid(OptionKey::kAttention,
                   "the reference's attention quirk runs with the exact KV cache only (f32, no budget, full rank)");
  return ok_status();
}

Status check_meshing_options(const MeshingOptions& options) {
  if (options.resolution < kMinResolution || options.resolution > kMaxResolution)
    return invalid(OptionKey::kResolution, "resolution " + std::to_string(options.resolution) + " is outside " +
                                               std::to_string(kMinResolution) + ".." + std::to_string(kMaxResolution) +
                                               " (8 is the reference's)");
  if (options.latent_top_k < 0) return invalid(OptionKey::kLatentTopK, "latent top-k is 0 (every latent) or positive");
  if (options.latent_top_k > 0 && !options.coarse_to_fine)
    return invalid(OptionKey::kLatentTopK,
                   "latent top-k chooses latents from the coarser levels of coarse-to-fine evaluation, which a "
                   "dense grid does not have; use top-k 0 with a dense grid");
  return ok_status();
}

}  // namespace cubeforge
