// Exact parallel decoding on the reference fixture's GPT: in both attention
// modes, with and without guidance, and with guesses made at every
// evaluation or only when they pay, the tokens are sequential greedy
// decoding's and the reference's own.
#include <gtest/gtest.h>

#include <numeric>

#include "inference/decoding/decoding.h"
#include "tests/decoding/fixture_gpt.h"

namespace cubeforge {
namespace {

class JacobiOnFixture : public testing::FixtureGpt {
 protected:
  void SetUp() override {
    CUBEFORGE_REQUIRE_ORACLE();
    load();
  }
};

TEST_F(JacobiOnFixture, TokensAreSequentialGreedyDecodingsInEveryMode) {
  struct Mode {
    const char* fixture;
    AttentionMode attention;
  };
  const Mode modes[] = {{"causal", AttentionMode::kCausal}, {"refkv", AttentionMode::kReference}};
  JacobiOptions always;  // a guess at every evaluation, as many as there are
  always.position_cost = 0.f;
  always.max_guesses = 8;
  JacobiOptions single;
  single.position_cost = 0.f;
  single.max_guesses = 1;
  const JacobiOptions adaptive;  // the defaults: guesses only while they pay
  const auto all_cases = cases();
  ASSERT_FALSE(all_cases.empty());
  for (const auto& c : all_cases)
    for (const Mode& mode : modes) {
      const auto expected = fixture_tokens(c.name + "." + mode.fixture + ".tokens");
      const int count = int(expected.size());
      TokenGenerationOptions generation;
      generation.guidance_scale = c.guidance;
      generation.attention = mode.attention;
      auto sequential = generate_tokens(*model_, c.cond, c.uncond, count, generation);
      ASSERT_TRUE(sequential.ok()) << sequential.error().to_string();
      ASSERT_EQ(*sequential, expected) << c.name << " " << mode.fixture;
      for (const JacobiOptions& options : {always, single, adaptive}) {
        auto session = open_decoding_session(c, count + 1, mode.attention, DecodingMode::kJacobi);
        ASSERT_TRUE(session);
        std::vector<int> streamed(size_t(count), -1);
        int last_step = -1;
        auto jacobi = decode_jacobi(*session, count, c.guidance, options, [&](const TokenEvent& e) {
          EXPECT_GE(e.step, last_step);
          last_step = e.step;
          streamed[size_t(e.index)] = e.token;
          return true;
        });
        ASSERT_TRUE(jacobi.ok()) << jacobi.error().to_string();
        const std::string what = c.name + " " + mode.fixture + " guesses " + std::to_string(options.max_guesses) +
                                 " cost " + std::to_string(options.position_cost);
        EXPECT_EQ(jacobi->tokens, expected) << what;
        EXPECT_EQ(streamed, expected) << what;
        const DecodingStats& stats = jacobi->stats;
        EXPECT_EQ(stats.tokens(), count) << what;
        EXPECT_EQ(int(stats.tokens_per_step.size()), stats.model_evaluations);
        EXPECT_LE(stats.model_evaluations, count);
        EXPECT_EQ(stats.model_evaluations, count - stats.guesses_accepted) << what;
        if (options.position_cost == 0.f) {
          EXPECT_GT(stats.guessed, 0) << what;
        }
      }
    }
}

// With tokens but no way to use guesses (one token left), and cancellation.
TEST_F(JacobiOnFixture, OneTokenAndCancellation) {
  const auto c = cases().front();
  auto one = open_decoding_session(c, 2, AttentionMode::kCausal, DecodingMode::kJacobi);
  ASSERT_TRUE(one);
  auto single = decode_jacobi(*one, 1, c.guidance, JacobiOptions{});
  ASSERT_TRUE(single.ok()) << single.error().to_string();
  EXPECT_EQ(single->tokens.size(), 1u);
  const int count = shape_tokens();
  auto session = open_decoding_session(c, count + 1, AttentionMode::kCausal, DecodingMode::kJacobi);
  ASSERT_TRUE(session);
  int seen = 0;
  auto cancelled =
      decode_jacobi(*session, count, c.guidance, JacobiOptions{}, [&](const TokenEvent&) { return ++seen < 5; });
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.error().code, ErrorCode::kCancelled);
  EXPECT_EQ(seen, 5);
}

// decode_tokens over the CPU backend opens the session the strategy runs on:
// the reference's tokens again. What a session cannot serve is refused at
// the seam, naming what is wrong.
TEST_F(JacobiOnFixture, DecodeTokensRunsOnTheBackendsDecodingSession) {
  const auto c = cases().front();
  const auto expected = fixture_tokens(c.name + ".causal.tokens");
  const int count = int(expected.size());
  TokenGenerationOptions generation;
  generation.guidance_scale = c.guidance;
  DecodingOptions options;
  options.mode = DecodingMode::kJacobi;
  auto decoded = decode_tokens(*backend_, c.cond, c.uncond, count, generation, options);
  ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
  EXPECT_EQ(decoded->tokens, expected);
  EXPECT_EQ(decoded->stats.mode, DecodingMode::kJacobi);

  DecodingSessionOptions session;
  session.positions = count + 1;
  session.decoding = DecodingMode::kSequential;
  auto sequential = backend_->open_decoding_session(session, c.cond, c.uncond);
  ASSERT_FALSE(sequential.ok());
  EXPECT_NE(sequential.error().message.find("token session"), std::string::npos) << sequential.error().message;
  session.decoding = DecodingMode::kJacobi;
  session.positions = 1;
  auto no_room = backend_->open_decoding_session(session, c.cond, c.uncond);
  ASSERT_FALSE(no_room.ok());
  EXPECT_NE(no_room.error().message.find("1 positions"), std::string::npos) << no_room.error().message;
  session.positions = count + 1;
  std::vector<float> ragged(c.cond.begin(), c.cond.end() - 1);
  auto ragged_rows = backend_->open_decoding_session(session, ragged, {});
  ASSERT_FALSE(ragged_rows.ok());
  EXPECT_NE(ragged_rows.error().message.find("whole number of width-"), std::string::npos)
      << ragged_rows.error().message;
  auto short_uncond = backend_->open_decoding_session(session, c.cond, ragged);
  ASSERT_FALSE(short_uncond.ok());
  EXPECT_NE(short_uncond.error().message.find("same size"), std::string::npos) << short_uncond.error().message;
  EXPECT_TRUE(backend_->open_decoding_session(session, c.cond, {}).ok());
}

TEST_F(JacobiOnFixture, RefusesSamplingAndBlockDiffusionModels) {
  DecodingOptions options;
  options.mode = DecodingMode::kJacobi;
  SamplingOptions sampling;
  sampling.greedy = false;
  Status s = check_decoding(model_->config(), options, sampling, AttentionMode::kCausal);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("greedy"), std::string::npos) << s.error().message;
  EXPECT_EQ(error_option(s.error()), OptionKey::kSampling);
  GptConfig diffusion = model_->config();
  diffusion.diffusion_block_size = 4;
  diffusion.mask_token_id = diffusion.padding_id();
  s = check_decoding(diffusion, options, SamplingOptions{}, AttentionMode::kCausal);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("decodes by blocks"), std::string::npos) << s.error().message;
  EXPECT_EQ(error_option(s.error()), OptionKey::kDecoding) << "the front end names its decoding control";
  options.mode = DecodingMode::kSequential;
  EXPECT_FALSE(check_decoding(diffusion, options, SamplingOptions{}, AttentionMode::kCausal).ok());
}

}  // namespace
}  // namespace cubeforge
