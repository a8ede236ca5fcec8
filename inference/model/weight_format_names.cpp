// The weight formats' names, as the command line, the app's settings and
// JSON reports spell them. Apart from the conversions in weight_formats.cpp so
// that a settings parser links without the model.
#include "inference/model/weight_formats.h"

namespace cubeforge {

std::string_view weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::kStored: return "stored";
    case WeightFormat::kBF16: return "bf16";
    case WeightFormat::kQ8: return "q8";
    case WeightFormat::kQ4: return "q4";
  }
  return "?";
}

std::optional<WeightFormat> weight_format_from_name(std::string_view name) {
  for (WeightFormat f : {WeightFormat::kStored, WeightFormat::kBF16, WeightFormat::kQ8, WeightFormat::kQ4})
    if (weight_format_name(f) == name) return f;
  return std::nullopt;
}

}  // namespace cubeforge
