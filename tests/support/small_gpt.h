// A GPT configuration small enough for unit tests to build random weights
// for in milliseconds, with every part of the architecture present: dual
// blocks, a single block, the bounding-box condition.
#pragma once

#include "inference/model/config.h"

namespace cubeforge::testing {

inline GptConfig small_gpt_config(int width = 64) {
  GptConfig c;
  c.dual_layers = 2;
  c.single_layers = 1;
  c.heads = 2;
  c.width = width;
  c.codes = 40;
  c.shape_embed_dim = 8;
  c.text_width = 24;
  c.use_bbox = true;
  return c;
}

}  // namespace cubeforge::testing
