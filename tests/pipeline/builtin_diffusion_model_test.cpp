// The block-diffusion model in assets/model-diffusion, as shipped: the built-in
// model's architecture and shape tokenizer with a block_diffusion config, and
// for the recorded prompts the engine's block diffusion, recomputing every
// position and with the prefix cache, gives the training code's tokens
// (builtin_diffusion_model_reference.json, written by
// tests/train/compare_with_engine.py from tools/train/generate.py; the `train`
// suite re-derives it when PyTorch is present). The dual cache, at the threshold
// the folder names (what a generation gets unless it asks for another), decodes
// each in fewer model evaluations than tokens, and every mesh is watertight.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "inference/core/file_io.h"
#include "inference/geometry/mesh_metrics.h"
#include "inference/pipeline/cube_model.h"
#include "inference/pipeline/generation.h"
#include "tests/support/sanitizer_build.h"

namespace cubeforge {
namespace {

const std::filesystem::path kBuiltinSequential = CUBEFORGE_BUILTIN_MODEL_DIR;
const std::filesystem::path kDiffusion = CUBEFORGE_BUILTIN_DIFFUSION_MODEL_DIR;
const std::filesystem::path kDiffusionReference = CUBEFORGE_BUILTIN_DIFFUSION_REFERENCE;

TEST(BuiltinDiffusionModel, IsABlockDiffusionFolderOfTheBuiltInModel) {
  auto model = CubeModel::load(kDiffusion);
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  auto builtin = CubeModel::load(kBuiltinSequential);
  ASSERT_TRUE(builtin.ok()) << builtin.error().to_string();
  const GptConfig& c = model->gpt().config();
  EXPECT_TRUE(c.block_diffusion());
  EXPECT_EQ(c.diffusion_block_size, 16);
  EXPECT_EQ(c.mask_token_id, c.padding_id());
  EXPECT_EQ(model->shape_tokens(), builtin->shape_tokens());
  EXPECT_EQ(c.width, builtin->gpt().config().width);
  // Sequential decoding is refused with a word on what to do instead.
  GenerationRequest sequential;
  sequential.prompt = "a tall chair";
  sequential.resolution = 4;
  auto refused = generate_shape(*model, sequential);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("decodes by blocks"), std::string::npos) << refused.error().message;
  EXPECT_EQ(error_option(refused.error()), OptionKey::kDecoding);
}

TEST(BuiltinDiffusionModel, TokensEqualTheTrainingCodeAndMeshesAreWatertight) {
  auto model = CubeModel::load(kDiffusion);
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  auto text = read_file_text(kDiffusionReference);
  ASSERT_TRUE(text.ok()) << text.error().to_string();
  const auto reference = nlohmann::json::parse(*text);
  const auto& prompts = reference.at("block_diffusion");
  ASSERT_GE(prompts.size(), 5u);
  // Under a sanitizer one prompt walks every code path the others do, at a
  // twentieth of the speed.
  const size_t prompt_count = testing::kSanitizerBuild ? 1 : prompts.size();
  for (size_t p = 0; p < prompt_count; ++p) {
    const auto& entry = prompts[p];
    const std::string prompt = entry.at("prompt");
    const auto expected = entry.at("tokens").get<std::vector<int>>();
    GenerationRequest request;
    request.prompt = prompt;
    request.guidance_scale = reference.at("guidance").get<float>();
    request.resolution = 7;
    request.decoding.mode = DecodingMode::kDiffusion;
    for (DiffusionCache cache : {DiffusionCache::kNone, DiffusionCache::kPrefix, DiffusionCache::kDual}) {
      request.decoding.diffusion.cache = cache;
      // The reference's threshold where tokens are compared; the folder's own (0: left to the
      // model) for the dual cache, whose saving is what the folder's threshold was chosen for.
      const bool exact = cache != DiffusionCache::kDual;
      request.decoding.diffusion.threshold = exact ? reference.at("threshold").get<float>() : 0.f;
      auto result = generate_shape(*model, request);
      ASSERT_TRUE(result.ok()) << prompt << ": " << result.error().to_string();
      const char* name = diffusion_cache_name(cache);
      if (exact) {
        EXPECT_EQ(result->tokens, expected) << prompt << ", cache " << name;
      } else {
        EXPECT_LT(result->decoding.model_evaluations, int(expected.size())) << prompt << ", cache " << name;
      }
      EXPECT_EQ(result->decoding.tokens(), int(expected.size()));
      ASSERT_TRUE(result->stats.has_surface) << prompt << ", cache " << name;
      const MeshTopology topology = analyze_topology(result->mesh);
      EXPECT_GT(topology.faces, 0) << prompt;
      EXPECT_TRUE(topology.closed_and_oriented()) << prompt << ", cache " << name << ": " << topology.boundary_edges
                                                  << " boundary, " << topology.non_manifold_edges << " non-manifold";
    }
  }
}

}  // namespace
}  // namespace cubeforge
