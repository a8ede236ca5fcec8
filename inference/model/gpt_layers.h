// The DualStreamRoformer's layers as the model binds them from its tensors:
// what a backend's forward reads (the CPU session multiplies them where they
// lie, the CUDA backend uploads them). Only model/gpt.cpp fills them.
#pragma once

#include <memory>
#include <vector>

#include "inference/model/config.h"
#include "inference/model/gpt.h"
#include "inference/model/weight_formats.h"
#include "inference/model/weights.h"
#include "inference/tensor/safetensors.h"

namespace cubeforge {

struct PreAttention {
  bool has_query = true;
  Linear qk;  // [2d, d] when has_query, else c_k [d, d]
  Linear v;
  std::vector<float> q_norm, k_norm;
};

struct PostAttention {
  Linear proj, gate, up, down;
};

struct DualBlock {
  PreAttention pre_x, pre_c;
  PostAttention post_1, post_2;
  bool cond_pre_only = false;
};

struct SingleBlock {
  PreAttention pre;  // has_query
  PostAttention post;
};

struct DualStreamGpt::Weights {
  std::shared_ptr<const SafetensorsFile> file;
  SafetensorsFile converted;  // decode matrices in the chosen format, when it is not `stored`
  WeightOptions weight_options;
  GptConfig config;
  Linear text_proj, shape_proj, bbox_proj, lm_head;
  std::vector<float> token_embedding;  // [V + 3, d], owned: the codebook rows are rewritten at load
  std::vector<DualBlock> dual;
  std::vector<SingleBlock> single;
};

}  // namespace cubeforge
