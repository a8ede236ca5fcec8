// Block diffusion's decoder on the reference fixture's GPT read as a
// block-diffusion model (the same tensors with a block_diffusion config; its
// tokens mean nothing, the decoding rules are what is tested): block size 1
// is autoregressive decoding and gives the reference's greedy tokens; the
// prefix cache gives exactly what recomputing everything gives; the rules
// accept what they say; a model of the wrong kind is refused.
#include <gtest/gtest.h>

#include "inference/decoding/decoding.h"
#include "tests/decoding/fixture_gpt.h"

namespace cubeforge {
namespace {

class DiffusionOnFixture : public testing::FixtureGpt {
 protected:
  void SetUp() override {
    CUBEFORGE_REQUIRE_ORACLE();
    load([](GptConfig& c) {
      c.diffusion_block_size = 4;
      c.mask_token_id = c.padding_id();
    });
  }

  Result<DecodedTokens> decode(const testing::FixtureCase& c, int count, const DiffusionOptions& options) {
    auto session = open_decoding_session(c, count + 1, AttentionMode::kCausal, DecodingMode::kDiffusion);
    if (!session) return make_error(ErrorCode::kInternal, "the CPU backend opened no decoding session");
    return decode_block_diffusion(*session, count, c.guidance, options);
  }
};

TEST_F(DiffusionOnFixture, BlockSizeOneIsAutoregressiveDecoding) {
  for (const auto& c : cases()) {
    const auto expected = fixture_tokens(c.name + ".causal.tokens");
    for (DiffusionCache cache : {DiffusionCache::kNone, DiffusionCache::kPrefix, DiffusionCache::kDual}) {
      DiffusionOptions options;
      options.block_size = 1;
      options.cache = cache;
      auto decoded = decode(c, int(expected.size()), options);
      ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
      EXPECT_EQ(decoded->tokens, expected) << c.name << " cache " << diffusion_cache_name(cache);
      EXPECT_EQ(decoded->stats.model_evaluations, int(expected.size()));
    }
  }
}

TEST_F(DiffusionOnFixture, PrefixCacheDecodesWhatRecomputingDecodes) {
  const int count = shape_tokens();
  if (count % 8 != 0) GTEST_SKIP() << "blocks of 4 and 8 need a multiple of 8 tokens; the fixture has " << count;
  for (const auto& c : cases())
    for (float threshold : {0.05f, 0.3f, 0.9f})
      for (int block : {4, 8}) {
        DiffusionOptions options;
        options.threshold = threshold;
        options.block_size = block;
        options.cache = DiffusionCache::kNone;
        auto none = decode(c, count, options);
        options.cache = DiffusionCache::kPrefix;
        auto prefix = decode(c, count, options);
        ASSERT_TRUE(none.ok() && prefix.ok());
        EXPECT_EQ(prefix->tokens, none->tokens) << c.name << " threshold " << threshold << " block " << block;
        EXPECT_EQ(prefix->stats.tokens_per_step, none->stats.tokens_per_step);
        // The prefix cache evaluates fewer positions.
        int none_positions = 0, prefix_positions = 0;
        for (int n : none->stats.positions_per_step) none_positions += n;
        for (int n : prefix->stats.positions_per_step) prefix_positions += n;
        EXPECT_LT(prefix_positions, none_positions);
      }
}

TEST_F(DiffusionOnFixture, RulesAcceptWhatTheySay) {
  const auto c = cases().front();
  const int count = shape_tokens();
  if (count % 8 != 0) GTEST_SKIP() << "blocks of 8 need a multiple of 8 tokens; the fixture has " << count;
  for (DiffusionCache cache : {DiffusionCache::kNone, DiffusionCache::kPrefix, DiffusionCache::kDual}) {
    DiffusionOptions options;
    options.cache = cache;
    options.block_size = 8;
    options.sub_block_size = 4;
    // A threshold nothing reaches: one token per evaluation.
    options.threshold = 1.0f;
    auto one_each = decode(c, count, options);
    ASSERT_TRUE(one_each.ok()) << one_each.error().to_string();
    EXPECT_EQ(one_each->stats.model_evaluations, count) << diffusion_cache_name(cache);
    // A threshold everything passes: one evaluation per block (per sub-block with the dual cache).
    options.threshold = 1e-6f;
    auto all_at_once = decode(c, count, options);
    ASSERT_TRUE(all_at_once.ok());
    EXPECT_EQ(all_at_once->stats.model_evaluations, cache == DiffusionCache::kDual ? count / 4 : count / 8)
        << diffusion_cache_name(cache);
    for (int t : all_at_once->tokens) EXPECT_TRUE(t >= 0 && t < model_->config().codes);
    // The factor rule accepts more as it grows.
    options.threshold = 0.9f;
    int previous = count + 1;
    for (float factor : {0.01f, 1.0f, 4.0f, 1e5f}) {
      options.factor = factor;
      auto factored = decode(c, count, options);
      ASSERT_TRUE(factored.ok());
      EXPECT_LE(factored->stats.model_evaluations, previous) << "factor " << factor;
      previous = factored->stats.model_evaluations;
      EXPECT_EQ(factored->stats.tokens(), count);
    }
    EXPECT_EQ(previous, cache == DiffusionCache::kDual ? count / 4 : count / 8);
  }
}

// Every token is reported once, by the evaluation that accepted it, in order.
TEST_F(DiffusionOnFixture, EventsCoverEveryTokenOnce) {
  const auto c = cases().front();
  const int count = 16;
  auto session = open_decoding_session(c, count + 1, AttentionMode::kCausal, DecodingMode::kDiffusion);
  ASSERT_TRUE(session);
  std::vector<int> seen(size_t(count), 0);
  int last_step = 0;
  DiffusionOptions options;
  options.block_size = 8;
  options.threshold = 0.2f;
  auto decoded = decode_block_diffusion(*session, count, c.guidance, options, [&](const TokenEvent& e) {
    ++seen[size_t(e.index)];
    EXPECT_GE(e.step, last_step);
    last_step = e.step;
    return true;
  });
  ASSERT_TRUE(decoded.ok());
  for (int n : seen) EXPECT_EQ(n, 1);
  EXPECT_EQ(last_step + 1, decoded->stats.model_evaluations);
}

TEST_F(DiffusionOnFixture, RefusesTheWrongModelAndOptions) {
  DecodingOptions options;
  options.mode = DecodingMode::kDiffusion;
  EXPECT_TRUE(check_decoding(model_->config(), options, SamplingOptions{}, AttentionMode::kCausal).ok());
  Status reference = check_decoding(model_->config(), options, SamplingOptions{}, AttentionMode::kReference);
  EXPECT_FALSE(reference.ok());
  GptConfig autoregressive = model_->config();
  autoregressive.diffusion_block_size = 0;
  Status s = check_decoding(autoregressive, options, SamplingOptions{}, AttentionMode::kCausal);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("autoregressive"), std::string::npos) << s.error().message;
  const auto c = cases().front();
  // Blocks that do not divide the shape, and sub-blocks that do not divide a block.
  const int count = shape_tokens();
  DiffusionOptions uneven;
  uneven.block_size = count % 5 == 0 ? 7 : 5;
  EXPECT_FALSE(decode(c, count, uneven).ok());
  DiffusionOptions bad_sub;
  bad_sub.block_size = count;
  bad_sub.sub_block_size = count - 1;
  EXPECT_FALSE(decode(c, count, bad_sub).ok());
}

}  // namespace
}  // namespace cubeforge
