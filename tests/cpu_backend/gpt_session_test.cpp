// GptSession::evaluate against one-token decode on the fixture's GPT: several
// positions in one evaluation give every row the bits that decoding them one
// by one gives, in both attention modes and with one or two rows; a cache cut
// back with truncate() is rewritten as if the cut positions never ran; and
// misuse is an error, not a wrong answer.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "inference/cpu_backend/gpt_session.h"
#include "tests/support/oracle.h"

namespace cubeforge {
namespace {

using testing::oracle_dir;

class GptSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CUBEFORGE_REQUIRE_ORACLE();
    auto yaml = parse_model_config_yaml(oracle_dir() / "config.yaml");
    ASSERT_TRUE(yaml.ok()) << yaml.error().to_string();
    auto model = DualStreamGpt::load(oracle_dir() / "shape_gpt.safetensors", &yaml->gpt);
    ASSERT_TRUE(model.ok()) << model.error().to_string();
    model_.emplace(std::move(*model));
    auto expected = SafetensorsFile::open(oracle_dir() / "expected.safetensors");
    ASSERT_TRUE(expected.ok());
    auto codebook = expected->read_f32("decode.codebook");
    ASSERT_TRUE(codebook.ok());
    ASSERT_TRUE(model_->install_codebook(*codebook).ok());
    auto text = expected->read_f32("text_embed");
    ASSERT_TRUE(text.ok());
    auto cond = model_->project_condition(*text, nullptr);
    ASSERT_TRUE(cond.ok());
    cond_ = *cond;
  }

  std::vector<float> rows_of(int batch, std::span<const int> tokens) const {
    const size_t d = size_t(model_->config().width);
    std::vector<float> out(size_t(batch) * tokens.size() * d);
    for (int b = 0; b < batch; ++b)
      for (size_t i = 0; i < tokens.size(); ++i) {
        auto row = model_->token_embedding(tokens[i]);
        std::copy(row.begin(), row.end(), out.begin() + ptrdiff_t((size_t(b) * tokens.size() + i) * d));
      }
    return out;
  }

  // A session with cond (and, for two rows, cond again as the second row) and BOS prefilled.
  GptSession prefilled(int batch, AttentionMode mode) const {
    GptSession session(*model_, batch, int(cond_.size()) / model_->config().width, 16, mode);
    std::vector<float> cond_rows;
    for (int b = 0; b < batch; ++b) cond_rows.insert(cond_rows.end(), cond_.begin(), cond_.end());
    const int bos = model_->config().bos_id();
    std::vector<float> logits(size_t(batch) * model_->config().vocab_size());
    EXPECT_TRUE(session.prefill(cond_rows, rows_of(batch, std::span<const int>(&bos, 1)), 1, logits).ok());
    return session;
  }

  std::optional<DualStreamGpt> model_;
  std::vector<float> cond_;
};

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_F(GptSessionTest, EvaluatedRowsEqualOneTokenDecodeBitForBit) {
  const std::vector<int> tokens = {5, 17, 17, 99, 0, 42, 127};
  const int n = int(tokens.size());
  const int vocab = model_->config().vocab_size();
  for (AttentionMode mode : {AttentionMode::kCausal, AttentionMode::kReference})
    for (int batch : {1, 2}) {
      // One by one: logits[b][i].
      GptSession one = prefilled(batch, mode);
      std::vector<float> decoded(size_t(batch) * n * vocab), step(size_t(batch) * vocab);
      for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(one.decode(rows_of(batch, std::span<const int>(&tokens[size_t(i)], 1)), step).ok());
        for (int b = 0; b < batch; ++b)
          std::copy_n(step.begin() + b * vocab, vocab, decoded.begin() + (size_t(b) * n + i) * vocab);
      }
      // All in one evaluation, causally.
      GptSession together = prefilled(batch, mode);
      std::vector<int> visible(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) visible[size_t(i)] = 1 + i + 1;
      std::vector<float> evaluated(decoded.size());
      ASSERT_TRUE(together.evaluate(rows_of(batch, tokens), 1, n, visible, evaluated).ok());
      EXPECT_TRUE(same_bits(evaluated, decoded)) << "mode " << int(mode) << " batch " << batch;
      EXPECT_EQ(together.filled(), 1 + n);

      // Wrong guesses evaluated, cut back, and the right tokens evaluated in their place.
      GptSession guessed = prefilled(batch, mode);
      const std::vector<int> wrong = {tokens[0], tokens[1], 3, 4};
      std::vector<int> wrong_visible = {2, 3, 4, 5};
      std::vector<float> scratch(size_t(batch) * wrong.size() * vocab);
      ASSERT_TRUE(guessed.evaluate(rows_of(batch, wrong), 1, 4, wrong_visible, scratch).ok());
      ASSERT_TRUE(guessed.truncate(3).ok());
      const std::vector<int> rest(tokens.begin() + 2, tokens.end());
      std::vector<int> rest_visible;
      for (int i = 0; i < int(rest.size()); ++i) rest_visible.push_back(3 + i + 1);
      std::vector<float> rest_logits(size_t(batch) * rest.size() * vocab);
      ASSERT_TRUE(guessed.evaluate(rows_of(batch, rest), 3, int(rest.size()), rest_visible, rest_logits).ok());
      for (int b = 0; b < batch; ++b)
        EXPECT_TRUE(same_bits(std::span<const float>(rest_logits).subspan(size_t(b) * rest.size() * vocab,
                                                                           rest.size() * vocab),
                              std::span<const float>(decoded).subspan((size_t(b) * n + 2) * vocab,
                                                                      rest.size() * vocab)))
            << "after truncation, mode " << int(mode) << " batch " << batch;
    }
}

// Rows that see past themselves (a block) see the keys of the rows evaluated
// with them: the first row's logits change with what follows it.
TEST_F(GptSessionTest, BlockRowsSeeEachOther) {
  const int vocab = model_->config().vocab_size();
  std::vector<float> a(size_t(3) * vocab), b(size_t(3) * vocab);
  const std::vector<int> block = {7, 8, 9};
  const std::vector<int> visible = {4, 4, 4};
  GptSession first = prefilled(1, AttentionMode::kCausal);
  ASSERT_TRUE(first.evaluate(rows_of(1, block), 1, 3, visible, a).ok());
  GptSession second = prefilled(1, AttentionMode::kCausal);
  const std::vector<int> other = {7, 8, 100};
  ASSERT_TRUE(second.evaluate(rows_of(1, other), 1, 3, visible, b).ok());
  EXPECT_FALSE(same_bits(std::span<const float>(a).first(size_t(vocab)), std::span<const float>(b).first(size_t(vocab))));
  // Causally, the first row does not see the third.
  const std::vector<int> causal = {2, 3, 4};
  GptSession third = prefilled(1, AttentionMode::kCausal);
  GptSession fourth = prefilled(1, AttentionMode::kCausal);
  ASSERT_TRUE(third.evaluate(rows_of(1, block), 1, 3, causal, a).ok());
  ASSERT_TRUE(fourth.evaluate(rows_of(1, other), 1, 3, causal, b).ok());
  EXPECT_TRUE(same_bits(std::span<const float>(a).first(size_t(2 * vocab)), std::span<const float>(b).first(size_t(2 * vocab))));
}

TEST_F(GptSessionTest, MisuseIsAnError) {
  const int vocab = model_->config().vocab_size();
  const int token = 3;
  std::vector<float> logits(static_cast<size_t>(vocab));
  GptSession fresh(*model_, 1, int(cond_.size()) / model_->config().width, 8, AttentionMode::kCausal);
  const int one = 1;
  EXPECT_FALSE(fresh.evaluate(rows_of(1, std::span<const int>(&token, 1)), 0, 1, std::span<const int>(&one, 1), logits).ok());
  GptSession session = prefilled(1, AttentionMode::kCausal);
  const int past = 4;
  Status gap = session.evaluate(rows_of(1, std::span<const int>(&token, 1)), 3, 1, std::span<const int>(&past, 1), logits);
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.error().message.find("gap"), std::string::npos) << gap.error().message;
  const int beyond = 3;
  EXPECT_FALSE(session.evaluate(rows_of(1, std::span<const int>(&token, 1)), 1, 1, std::span<const int>(&beyond, 1), logits).ok());
  const int itself_not = 1;
  EXPECT_FALSE(
      session.evaluate(rows_of(1, std::span<const int>(&token, 1)), 1, 1, std::span<const int>(&itself_not, 1), logits).ok());
  EXPECT_FALSE(session.truncate(2).ok());
  EXPECT_TRUE(session.truncate(0).ok());
  // Only the condition: no logits, and a first evaluation from position 0.
  GptSession condition_only(*model_, 1, int(cond_.size()) / model_->config().width, 8, AttentionMode::kCausal);
  ASSERT_TRUE(condition_only.prefill(cond_, {}, 0, {}).ok());
  EXPECT_EQ(condition_only.filled(), 0);
  const int bos = model_->config().bos_id();
  EXPECT_TRUE(condition_only.evaluate(rows_of(1, std::span<const int>(&bos, 1)), 0, 1, std::span<const int>(&one, 1), logits).ok());
}

}  // namespace
}  // namespace cubeforge
