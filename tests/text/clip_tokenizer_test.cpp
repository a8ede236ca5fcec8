// CLIP tokenizer: exact ids against Hugging Face CLIPTokenizerFast's output in
// the oracle (expected_tokens.json), plus edge cases and random bytes.
#include "inference/text/clip_tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "inference/core/file_io.h"
#include "tests/support/oracle.h"

namespace cubeforge {
namespace {

// Loads the tokenizer once for all tests (CLIP's vocabulary is 49408 entries).
const ClipTokenizer* oracle_tokenizer() {
  static const Result<ClipTokenizer> tokenizer = ClipTokenizer::load(testing::oracle_clip_dir());
  return tokenizer.ok() ? &tokenizer.value() : nullptr;
}

std::vector<int32_t> ids_of(const nlohmann::json& array) { return array.get<std::vector<int32_t>>(); }

// The specials' ids as the fixture's vocab.json gives them.
int start_id() { return testing::oracle_clip_token_id("<|startoftext|>"); }
int end_id() { return testing::oracle_clip_token_id("<|endoftext|>"); }

TEST(ClipTokenizer, MatchesHuggingFaceIdsForEveryOraclePrompt) {
  SKIP_WITHOUT_CLIP_ORACLE("expected_tokens.json");
  auto loaded = ClipTokenizer::load(testing::oracle_clip_dir());
  ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
  auto text = read_file_text(testing::oracle_clip_dir() / "expected_tokens.json");
  ASSERT_TRUE(text.ok()) << text.error().to_string();
  const nlohmann::json cases = nlohmann::json::parse(text.value());
  ASSERT_TRUE(cases.is_array());
  ASSERT_FALSE(cases.empty());
  for (const nlohmann::json& c : cases) {
    const std::string prompt = c.at("prompt").get<std::string>();
    const TokenizedText tokens = loaded->encode(prompt);
    EXPECT_EQ(tokens.bpe_ids, ids_of(c.at("bpe_ids"))) << "prompt: " << prompt;
    EXPECT_EQ(tokens.input_ids, ids_of(c.at("input_ids"))) << "prompt: " << prompt;
    EXPECT_EQ(tokens.attention_mask, ids_of(c.at("attention_mask"))) << "prompt: " << prompt;
  }
}

TEST(ClipTokenizer, SpecialIdsComeFromTheVocabulary) {
  SKIP_WITHOUT_CLIP_ORACLE("vocab.json");
  const ClipTokenizer* tokenizer = oracle_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  ASSERT_GE(start_id(), 0) << "vocab.json has no <|startoftext|>";
  ASSERT_GE(end_id(), 0) << "vocab.json has no <|endoftext|>";
  EXPECT_EQ(tokenizer->start_of_text_id(), start_id());
  EXPECT_EQ(tokenizer->end_of_text_id(), end_id());
  EXPECT_EQ(tokenizer->vocab_size(), testing::oracle_clip_vocabulary_size());
  const int a = testing::oracle_clip_token_id("a</w>");
  ASSERT_GE(a, 0) << "vocab.json has no a</w>";
  EXPECT_EQ(tokenizer->token_string(a), "a</w>");
}

TEST(ClipTokenizer, EmptyPromptIsStartEndAndPadding) {
  SKIP_WITHOUT_CLIP_ORACLE("vocab.json");
  const ClipTokenizer* tokenizer = oracle_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  for (std::string_view blank : {"", "   \t\n  "}) {
    const TokenizedText tokens = tokenizer->encode(blank);
    EXPECT_TRUE(tokens.bpe_ids.empty());
    ASSERT_EQ(tokens.input_ids.size(), size_t(kClipContextLength));
    EXPECT_EQ(tokens.input_ids[0], start_id());
    for (int i = 1; i < kClipContextLength; ++i) EXPECT_EQ(tokens.input_ids[size_t(i)], end_id());
    EXPECT_EQ(tokens.attention_mask[0], 1);
    EXPECT_EQ(tokens.attention_mask[1], 1);
    for (int i = 2; i < kClipContextLength; ++i) EXPECT_EQ(tokens.attention_mask[size_t(i)], 0);
  }
}

TEST(ClipTokenizer, NormalisesCaseWhitespaceAndComposition) {
  SKIP_WITHOUT_CLIP_ORACLE("vocab.json");
  const ClipTokenizer* tokenizer = oracle_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const auto reference = tokenizer->bpe_ids("a cafe naïve dragon");
  EXPECT_EQ(tokenizer->bpe_ids("  A\tCAFE \n NAÏVE   dragon "), reference);
  EXPECT_EQ(tokenizer->bpe_ids("a cafe nai\xCC\x88ve dragon"), reference);  // i + U+0308
  // An invalid byte is the same as U+FFFD written out.
  EXPECT_EQ(tokenizer->bpe_ids("dragon\xFF"), tokenizer->bpe_ids("dragon\xEF\xBF\xBD"));
}

TEST(ClipTokenizer, SplitsContractionsLettersDigitsAndPunctuation) {
  SKIP_WITHOUT_CLIP_ORACLE("vocab.json");
  const ClipTokenizer* tokenizer = oracle_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  // Each piece the pre-tokeniser splits off ends in </w>, whichever subwords
  // the vocabulary spells it with.
  auto spelled = [&](std::string_view text) {
    std::string out;
    for (int32_t id : tokenizer->bpe_ids(text)) out += tokenizer->token_string(id);
    return out;
  };
  EXPECT_EQ(spelled("it's"), "it</w>'s</w>");
  EXPECT_EQ(spelled("42"), "4</w>2</w>");
  EXPECT_EQ(spelled("a!!b"), "a</w>!!</w>b</w>");
  // Specials written in the text become their ids, wherever they are.
  const auto x_ids = tokenizer->bpe_ids("x"), y_ids = tokenizer->bpe_ids("y");
  const auto ids = tokenizer->bpe_ids("x<|endoftext|>y<|startoftext|>");
  ASSERT_EQ(ids.size(), x_ids.size() + y_ids.size() + 2);
  EXPECT_EQ(ids[x_ids.size()], end_id());
  EXPECT_EQ(ids.back(), start_id());
  // They are matched after normalisation, so case does not matter.
  EXPECT_EQ(tokenizer->bpe_ids("<|EndOfText|>"), std::vector<int32_t>{end_id()});
  // Only the exact string is special.
  for (int32_t id : tokenizer->bpe_ids("<| endoftext|>")) {
    EXPECT_NE(id, start_id());
    EXPECT_NE(id, end_id());
  }
}

TEST(ClipTokenizer, LongWordsStayFast) {
  SKIP_WITHOUT_CLIP_ORACLE("vocab.json");
  const ClipTokenizer* tokenizer = oracle_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  // 180 000 letters in one word: quadratic BPE would take minutes here.
  std::string word;
  for (int i = 0; i < 20000; ++i) word += "dragonfly!";
  std::string letters_only;
  for (char c : word) {
    if (c != '!') letters_only.push_back(c);
  }
  const auto ids = tokenizer->bpe_ids(letters_only);
  EXPECT_GT(ids.size(), 1000u);
  // Decoding the ids gives the word back, with one end-of-word marker.
  std::string decoded;
  for (int32_t id : ids) decoded += tokenizer->token_string(id);
  EXPECT_EQ(decoded, letters_only + "</w>");
}

TEST(ClipTokenizer, TruncatesToSeventySevenWithEndOfText) {
  SKIP_WITHOUT_CLIP_ORACLE("vocab.json");
  const ClipTokenizer* tokenizer = oracle_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  // "a" is one token in CLIP's vocabulary and in any trained on English captions.
  ASSERT_EQ(tokenizer->bpe_ids("a").size(), 1u) << "the fixture's vocabulary spells \"a\" in pieces";
  std::string long_prompt;
  for (int i = 0; i < 100; ++i) long_prompt += "a ";
  const TokenizedText tokens = tokenizer->encode(long_prompt);
  EXPECT_TRUE(tokens.truncated);
  EXPECT_EQ(tokens.bpe_ids.size(), 100u);
  ASSERT_EQ(tokens.input_ids.size(), size_t(kClipContextLength));
  EXPECT_EQ(tokens.input_ids.front(), start_id());
  EXPECT_EQ(tokens.input_ids.back(), end_id());
  for (int i = 1; i < kClipContextLength - 1; ++i) EXPECT_EQ(tokens.input_ids[size_t(i)], tokens.bpe_ids[0]);
  for (int32_t mask : tokens.attention_mask) EXPECT_EQ(mask, 1);
}

TEST(ClipTokenizer, RandomBytesNeverCrashAndGiveWellFormedIds) {
  SKIP_WITHOUT_CLIP_ORACLE("vocab.json");
  const ClipTokenizer* tokenizer = oracle_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  std::mt19937 random(1234);
  // Mix arbitrary bytes with pieces that steer towards interesting paths:
  // multi-byte lead bytes, combining marks, apostrophes, specials.
  const std::string fragments[] = {"\xC3", "\xCC\x81", "\xE2\x82", "\xF0\x9F\x98\x80", "'", "'ll", " ",
                                   "<|endoftext|>", "<|startof", "\xED\xA0\x80", "\xC4\xB0", "9"};
  for (int trial = 0; trial < 1500; ++trial) {
    std::string text;
    const int length = int(random() % 120);
    for (int i = 0; i < length; ++i) {
      if (random() % 4 == 0) {
        text += fragments[random() % std::size(fragments)];
      } else {
        text.push_back(char(random() % 256));
      }
    }
    const TokenizedText tokens = tokenizer->encode(text);
    ASSERT_EQ(tokens.input_ids.size(), size_t(kClipContextLength));
    ASSERT_EQ(tokens.attention_mask.size(), size_t(kClipContextLength));
    ASSERT_EQ(tokens.input_ids[0], tokenizer->start_of_text_id());
    const size_t real = std::min(tokens.bpe_ids.size(), size_t(kClipContextLength - 2)) + 2;
    for (size_t i = 0; i < size_t(kClipContextLength); ++i) {
      ASSERT_EQ(tokens.attention_mask[i], i < real ? 1 : 0);
      ASSERT_GE(tokens.input_ids[i], 0);
      ASSERT_LT(tokens.input_ids[i], tokenizer->vocab_size());
    }
    ASSERT_EQ(tokens.input_ids[real - 1], tokenizer->end_of_text_id());
    // Cached words give the same ids as the first pass.
    ASSERT_EQ(tokenizer->encode(text).bpe_ids, tokens.bpe_ids);
  }
}

TEST(ClipTokenizer, RejectsBrokenFilesWithTheirNames) {
  auto not_json = ClipTokenizer::from_strings("{oops", "#version: 0.2\na b\n", "my_vocab.json", "my_merges.txt");
  ASSERT_FALSE(not_json.ok());
  EXPECT_NE(not_json.error().message.find("my_vocab.json"), std::string::npos);

  auto missing_bytes = ClipTokenizer::from_strings(R"({"<|startoftext|>": 0, "<|endoftext|>": 1})", "a b\n",
                                                   "my_vocab.json", "my_merges.txt");
  ASSERT_FALSE(missing_bytes.ok());
  EXPECT_NE(missing_bytes.error().message.find("my_vocab.json"), std::string::npos);

  // A vocabulary is strict JSON: nesting is bounded (a value nested 100000
  // levels deep ended in SIGSEGV) and a token given twice is refused.
  auto deep = ClipTokenizer::from_strings("{\"a\": " + std::string(100000, '[') + std::string(100000, ']') + "}",
                                          "a b\n", "my_vocab.json", "my_merges.txt");
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.error().message.find("my_vocab.json: JSON nested more than 64 levels deep"), std::string::npos)
      << deep.error().message;
  auto twice = ClipTokenizer::from_strings(R"({"a": 0, "a": 1})", "a b\n", "my_vocab.json", "my_merges.txt");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("key 'a' appears twice"), std::string::npos) << twice.error().message;

  auto missing_dir = ClipTokenizer::load("/nonexistent/clip");
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_NE(missing_dir.error().message.find("vocab.json"), std::string::npos);
}

}  // namespace
}  // namespace cubeforge
