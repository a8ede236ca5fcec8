// Prints the engine's greedy shape tokens for each prompt given on the command line, as one
// JSON object per line: {"prompt": ..., "tokens": [...], "has_surface": ...}. It runs the
// same generate_shape() as `cubeforge-cli generate` (guidance 3.0, greedy, KV cache), but
// reports the tokens even when the decoded shape has no surface, which the CLI treats as a
// failure; a barely trained smoke-scale model may decode some prompts to nothing.
//
//   engine_tokens MODEL_DIR PROMPT...
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "inference/pipeline/cube_model.h"
#include "inference/pipeline/generation.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR PROMPT...\n", argv[0]);
    return 2;
  }
  auto model = cubeforge::CubeModel::load(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "engine_tokens: %s\n", model.error().to_string().c_str());
    return 1;
  }
  for (int i = 2; i < argc; ++i) {
    cubeforge::GenerationRequest request;
    request.prompt = argv[i];
    request.guidance_scale = 3.0f;
    request.resolution = 3;  // the mesh is not what this checks; keep it cheap
    auto result = cubeforge::generate_shape(*model, request);
    if (!result.ok()) {
      std::fprintf(stderr, "engine_tokens: '%s': %s\n", argv[i], result.error().to_string().c_str());
      return 1;
    }
    nlohmann::json line = {{"prompt", argv[i]}, {"tokens", result->tokens}, {"has_surface", result->stats.has_surface}};
    std::cout << line.dump() << std::endl;
  }
  return 0;
}
