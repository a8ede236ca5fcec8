// Exact parallel decoding on the built-in model (assets/model): for prompts
// of several kinds, in both attention modes, with and without guidance, the
// tokens are sequential greedy decoding's, and block diffusion is refused on
// this autoregressive model.
#include <gtest/gtest.h>

#include <optional>

#include "inference/cpu_backend/cpu_token_backend.h"
#include "inference/decoding/decoding.h"
#include "inference/pipeline/cube_model.h"
#include "inference/pipeline/generation.h"

namespace cubeforge {
namespace {

const std::filesystem::path kBuiltin = CUBEFORGE_BUILTIN_MODEL_DIR;

TEST(BuiltinModelJacobi, TokensAreSequentialGreedyDecodings) {
  auto model = CubeModel::load(kBuiltin);
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  auto uncond = encode_prompt(*model, "", std::nullopt);
  ASSERT_TRUE(uncond.ok());
  const int count = model->shape_tokens();
  const std::shared_ptr<TokenBackend> cpu = make_cpu_token_backend(model->gpt());
  int guessed = 0;
  for (const char* prompt : {"a tall chair", "render of a short mug", "a red snowman"}) {
    auto cond = encode_prompt(*model, prompt, std::nullopt);
    ASSERT_TRUE(cond.ok());
    for (AttentionMode attention : {AttentionMode::kCausal, AttentionMode::kReference})
      for (float guidance : {3.0f, 0.0f}) {
        TokenGenerationOptions generation;
        generation.guidance_scale = guidance;
        generation.attention = attention;
        std::span<const float> unconditional = guidance > 0 ? std::span<const float>(*uncond) : std::span<const float>();
        auto sequential = generate_tokens(model->gpt(), *cond, unconditional, count, generation);
        ASSERT_TRUE(sequential.ok());
        for (float position_cost : {0.0f, JacobiOptions{}.position_cost}) {
          DecodingOptions options;
          options.mode = DecodingMode::kJacobi;
          options.jacobi.position_cost = position_cost;
          auto jacobi = decode_tokens(*cpu, *cond, unconditional, count, generation, options);
          ASSERT_TRUE(jacobi.ok()) << jacobi.error().to_string();
          EXPECT_EQ(jacobi->tokens, *sequential)
              << prompt << " attention " << int(attention) << " guidance " << guidance << " cost " << position_cost;
          EXPECT_EQ(jacobi->stats.tokens(), count);
          guessed += jacobi->stats.guessed;
        }
      }
  }
  EXPECT_GT(guessed, 0);
  DecodingOptions diffusion;
  diffusion.mode = DecodingMode::kDiffusion;
  Status refused = check_decoding(model->gpt().config(), diffusion, SamplingOptions{}, AttentionMode::kCausal);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("autoregressive"), std::string::npos);
}

}  // namespace
}  // namespace cubeforge
