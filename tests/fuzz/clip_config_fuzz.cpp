// libFuzzer target: clip/config.json. Any bytes must give a text-tower
// configuration or an error; an accepted one has positive sizes, heads that
// divide the width, and an eps that is a positive normal float of at most 1
// (1e-0256 passed as a positive double and became 0).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "inference/text/clip_text_encoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = cubeforge::ClipTextConfig::from_json(text, "fuzz/config.json");
  if (!config.ok()) return 0;
  if (config->vocab_size <= 0 || config->hidden_size <= 0 || config->num_attention_heads <= 0 ||
      config->hidden_size % config->num_attention_heads != 0 || config->num_hidden_layers <= 0 ||
      config->max_position_embeddings <= 0 || config->intermediate_size <= 0 ||
      !std::isnormal(config->layer_norm_eps) || !(config->layer_norm_eps > 0.f && config->layer_norm_eps <= 1.f))
    std::abort();
  return 0;
}
