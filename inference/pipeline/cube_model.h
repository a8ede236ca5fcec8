// A loaded Cube 3D model folder: the GPT, the shape tokenizer and CLIP.
//
// MODEL/shape_gpt.safetensors, MODEL/shape_tokenizer.safetensors, optional
// MODEL/config.yaml (else sizes are inferred from the tensors) and MODEL/clip/
// (a Hugging Face CLIP folder). Loading checks that the pieces belong
// together and performs the reference's load-time codebook copy.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "inference/core/result.h"
#include "inference/model/config.h"
#include "inference/model/gpt.h"
#include "inference/model/shape_tokenizer.h"
#include "inference/text/clip_text_encoder.h"
#include "inference/text/clip_tokenizer.h"

namespace cubeforge {

// How to assemble a model folder; part of every "model not found" error.
extern const char* const kModelFolderHelp;

// Progress through loading: a short description of the step and the fraction
// done. Return false to cancel (the load then fails with kCancelled).
using LoadProgress = std::function<bool(const std::string& step, double fraction)>;

class CubeModel {
 public:
  // `weights`: the format the GPT decodes with (weight_formats.h).
  static Result<CubeModel> load(const std::filesystem::path& folder, const LoadProgress& progress = {},
                                const WeightOptions& weights = {});

  CubeModel(CubeModel&&) noexcept = default;
  CubeModel& operator=(CubeModel&&) noexcept = default;

  const std::filesystem::path& folder() const { return folder_; }
  const ModelConfig& config() const { return config_; }
  const DualStreamGpt& gpt() const { return *gpt_; }
  const ShapeTokenizer& shape() const { return *shape_; }
  const ClipTokenizer& tokenizer() const { return *tokenizer_; }
  const ClipTextEncoder& text_encoder() const { return *text_encoder_; }
  int shape_tokens() const { return config_.shape.latents; }

 private:
  CubeModel() = default;
  std::filesystem::path folder_;
  ModelConfig config_;
  std::optional<DualStreamGpt> gpt_;
  std::optional<ShapeTokenizer> shape_;
  std::optional<ClipTokenizer> tokenizer_;
  std::optional<ClipTextEncoder> text_encoder_;
};

// The model folder used when none is given: $CUBEFORGE_MODEL_DIR, else the
// built-in model shipped in assets/ when present. Empty when there is none.
std::filesystem::path default_model_folder();

}  // namespace cubeforge
