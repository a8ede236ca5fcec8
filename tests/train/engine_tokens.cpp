// Prints the engine's greedy shape tokens for each prompt given on the command line, as one
// JSON object per line: {"prompt": ..., "tokens": [...], "has_surface": ..., "model_evaluations": ...}.
// It runs the same generate_shape() as `cubeforge-cli generate` (the model's guidance, greedy, KV cache), but
// reports the tokens even when the decoded shape has no surface, which the CLI treats as a
// failure; a barely trained smoke-scale model may decode some prompts to nothing. A
// block-diffusion model folder decodes with block diffusion: --threshold T (default 0.9) or
// --factor F, and --cache none|prefix|dual (default none).
//
//   engine_tokens MODEL_DIR [--threshold T | --factor F] [--cache C] PROMPT...
#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "inference/pipeline/cube_model.h"
#include "inference/pipeline/generation.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [--threshold T | --factor F] [--cache C] PROMPT...\n", argv[0]);
    return 2;
  }
  auto model = cubeforge::CubeModel::load(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "engine_tokens: %s\n", model.error().to_string().c_str());
    return 1;
  }
  cubeforge::DecodingOptions decoding;
  if (model->gpt().config().block_diffusion()) {
    decoding.mode = cubeforge::DecodingMode::kDiffusion;
    decoding.diffusion.cache = cubeforge::DiffusionCache::kNone;
  }
  int i = 2;
  for (; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threshold") {
      decoding.diffusion.threshold = std::stof(argv[i + 1]);
    } else if (flag == "--factor") {
      decoding.diffusion.factor = std::stof(argv[i + 1]);
    } else if (flag == "--cache") {
      auto cache = cubeforge::parse_diffusion_cache(argv[i + 1]);
      if (!cache) {
        std::fprintf(stderr, "engine_tokens: unknown cache '%s'\n", argv[i + 1]);
        return 2;
      }
      decoding.diffusion.cache = *cache;
    } else {
      break;
    }
  }
  for (; i < argc; ++i) {
    cubeforge::GenerationRequest request;
    request.prompt = argv[i];
    // Guidance is left to the model, as `cubeforge-cli generate` leaves it.
    request.resolution = 3;  // the mesh is not what this checks; keep it cheap
    request.decoding = decoding;
    auto result = cubeforge::generate_shape(*model, request);
    if (!result.ok()) {
      std::fprintf(stderr, "engine_tokens: '%s': %s\n", argv[i], result.error().to_string().c_str());
      return 1;
    }
    nlohmann::json line = {{"prompt", argv[i]},
                           {"tokens", result->tokens},
                           {"has_surface", result->stats.has_surface},
                           {"model_evaluations", result->decoding.model_evaluations}};
    std::cout << line.dump() << std::endl;
  }
  return 0;
}
