// The command line's words for the engine's options: the flag that sets each
// one, for errors that name an option (Error::option). The engine's messages
// name no flag; this is where the command line says which of its own to change.
#pragma once

#include "inference/options/engine_options.h"

namespace cubeforge::cli {

inline const char* flag_for(OptionKey key) {
  switch (key) {
    case OptionKey::kWeights:
      return "--weights";
    case OptionKey::kQ4Group:
      return "--q4-group";
    case OptionKey::kKvCache:
      return "--no-kv-cache";
    case OptionKey::kKvFormat:
      return "--kv-cache";
    case OptionKey::kKvBudget:
      return "--kv-budget";
    case OptionKey::kKvRank:
      return "--kv-rank";
    case OptionKey::kBackend:
      return "--backend";
    case OptionKey::kCudaGraphs:
      return "--no-cuda-graphs";
    case OptionKey::kAttention:
      return "--attention";
    case OptionKey::kDecoding:
      return "--decoding";
    case OptionKey::kGuesses:
      return "--guesses";
    case OptionKey::kGuessCost:
      return "--guess-cost";
    case OptionKey::kThreshold:
      return "--threshold";
    case OptionKey::kFactor:
      return "--factor";
    case OptionKey::kDiffusionCache:
      return "--diffusion-cache";
    case OptionKey::kBlockSize:
      return "--block-size";
    case OptionKey::kSubBlock:
      return "--sub-block";
    case OptionKey::kGuidance:
      return "--guidance";
    case OptionKey::kSampling:
      return "--sample";
    case OptionKey::kTemperature:
      return "--temperature";
    case OptionKey::kTopK:
      return "--top-k";
    case OptionKey::kTopP:
      return "--top-p";
    case OptionKey::kBoundingBox:
      return "--bbox";
    case OptionKey::kResolution:
      return "--resolution";
    case OptionKey::kCoarseToFine:
      return "--dense";
    case OptionKey::kLatentTopK:
      return "--latent-top-k";
    case OptionKey::kVertexMapping:
      return "--reference-mapping";
    case OptionKey::kRemoveFloaters:
      return "--keep-floaters";
    case OptionKey::kTargetFaces:
      return "--target-faces";
    case OptionKey::kTrace:
      return "--trace";
  }
  return "?";
}

}  // namespace cubeforge::cli
