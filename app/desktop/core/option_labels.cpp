// The controls behind the engine's options (option_labels.h).
#include "app/desktop/core/option_labels.h"

#include "inference/core/untrusted_text.h"

namespace cubeforge::app {

const char* control_for(OptionKey key) {
  switch (key) {
    case OptionKey::kWeights:
    case OptionKey::kQ4Group:
      return "Model memory";
    case OptionKey::kKvCache:
      return "Faster decoding";
    case OptionKey::kKvFormat:
      return "Cache memory";
    case OptionKey::kKvBudget:
      return "Cache limit";
    case OptionKey::kKvRank:
      return "Cache compression";
    case OptionKey::kBackend:
      return "GPU (CUDA)";
    case OptionKey::kCudaGraphs:
      return "GPU fast path";
    case OptionKey::kAttention:
      return "As the reference";
    case OptionKey::kDecoding:
    case OptionKey::kGuesses:
    case OptionKey::kGuessCost:
    case OptionKey::kFactor:
    case OptionKey::kDiffusionCache:
    case OptionKey::kBlockSize:
    case OptionKey::kSubBlock:
      return "Decoding";
    case OptionKey::kThreshold:
      return "Diffusion threshold";
    case OptionKey::kGuidance:
      return "Guidance";
    case OptionKey::kSampling:
      return "Vary with the seed";
    case OptionKey::kTemperature:
      return "Temperature";
    case OptionKey::kTopK:
      return "Top-k";
    case OptionKey::kTopP:
      return "Top-p";
    case OptionKey::kBoundingBox:
      return "Bounding box";
    case OptionKey::kResolution:
    case OptionKey::kCoarseToFine:
    case OptionKey::kLatentTopK:
    case OptionKey::kVertexMapping:
    case OptionKey::kRemoveFloaters:
      return "Detail";
    case OptionKey::kTargetFaces:
      return "Max faces";
    case OptionKey::kTrace:
      return "Trace";
  }
  return "Settings";
}

std::string weights_in_words(WeightFormat format) {
  switch (format) {
    case WeightFormat::kStored:
      return "exact weights";
    case WeightFormat::kBF16:
      return "weights at half size";
    case WeightFormat::kQ8:
      return "weights at a quarter size";
    case WeightFormat::kQ4:
      return "weights at an eighth size";
  }
  return "weights " + std::string(weight_format_name(format));
}

std::string for_creator(const Error& error) {
  if (auto option = error_option(error))
    return std::string(control_for(*option)) + ": " + escape_untrusted(error.message);
  return error.to_string();
}

}  // namespace cubeforge::app
