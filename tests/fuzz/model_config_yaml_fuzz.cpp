// libFuzzer target: config.yaml. Any text must parse to a configuration or
// an error, never a crash or an exception; what parses must hold the sizes the
// parser promises (positive, heads dividing widths, eps and rope_theta
// positive normal floats: neither 0 after narrowing nor a denormal).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "inference/model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = cubeforge::parse_model_config_yaml_text(text, "fuzz.yaml");
  if (!config.ok()) {
    if (config.error().message.empty()) std::abort();
    return 0;
  }
  const auto& g = config->gpt;
  const auto& s = config->shape;
  if (g.dual_layers <= 0 || g.heads <= 0 || g.width <= 0 || g.width % g.heads != 0) std::abort();
  if (s.heads <= 0 || s.width <= 0 || s.width % s.heads != 0) std::abort();
  for (float positive : {g.eps, s.eps, g.rope_theta})
    if (!std::isnormal(positive) || !(positive > 0.f)) std::abort();
  return 0;
}
