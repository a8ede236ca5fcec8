// The names of decoding modes and block diffusion's caches, as the command
// line, the app's settings and JSON reports spell them. Apart from the rest of
// decoding.h's definitions so that a settings parser links without the model.
#include "inference/decoding/decoding.h"

namespace cubeforge {

const char* decoding_mode_name(DecodingMode mode) {
  switch (mode) {
    case DecodingMode::kSequential: return "sequential";
    case DecodingMode::kJacobi: return "jacobi";
    case DecodingMode::kDiffusion: return "diffusion";
  }
  return "?";
}

std::optional<DecodingMode> parse_decoding_mode(std::string_view name) {
  for (DecodingMode mode : {DecodingMode::kSequential, DecodingMode::kJacobi, DecodingMode::kDiffusion})
    if (name == decoding_mode_name(mode)) return mode;
  return std::nullopt;
}

const char* diffusion_cache_name(DiffusionCache cache) {
  switch (cache) {
    case DiffusionCache::kNone: return "none";
    case DiffusionCache::kPrefix: return "prefix";
    case DiffusionCache::kDual: return "dual";
  }
  return "?";
}

std::optional<DiffusionCache> parse_diffusion_cache(std::string_view name) {
  for (DiffusionCache cache : {DiffusionCache::kNone, DiffusionCache::kPrefix, DiffusionCache::kDual})
    if (name == diffusion_cache_name(cache)) return cache;
  return std::nullopt;
}

}  // namespace cubeforge
