// The built-in model's card and the prompt checks the app shows: a prompt
// with no word the model was trained on is said to be a guess, and the
// card's words complete what is typed.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "app/desktop/core/model_card.h"
#include "test_folder.h"

namespace cubeforge::app {
namespace {

ModelCard builtin_card() {
  auto card = load_model_card(CUBEFORGE_BUILTIN_MODEL_DIR);
  EXPECT_TRUE(card.ok()) << card.error().to_string();
  EXPECT_TRUE(card.ok() && card->has_value()) << "the built-in model has no card.json";
  return card.ok() && card->has_value() ? **card : ModelCard{};
}

TEST(ModelCard, TheBuiltInModelListsItsCategoriesWordsAndExamples) {
  const ModelCard card = builtin_card();
  EXPECT_EQ(card.categories.size(), 24u);
  for (const char* word : {"chair", "couch", "bookcase", "toadstool", "tall", "squat", "four", "with"})
    EXPECT_TRUE(std::binary_search(card.known_words.begin(), card.known_words.end(), word)) << word;
  EXPECT_FALSE(card.examples.empty());
  // Every example is a prompt the card itself accepts.
  for (const auto& example : card.examples) EXPECT_TRUE(check_prompt(card, example).message.empty()) << example;
}

TEST(ModelCard, APromptWithNoTrainedWordIsSaidToBeAGuess) {
  const ModelCard card = builtin_card();
  PromptCheck cat = check_prompt(card, "a cat");
  EXPECT_FALSE(cat.names_a_category);
  EXPECT_EQ(cat.unknown_words, std::vector<std::string>{"cat"});
  EXPECT_NE(cat.message.find("\"cat\""), std::string::npos) << cat.message;
  EXPECT_NE(cat.message.find("guess"), std::string::npos) << cat.message;
  EXPECT_NE(cat.message.find("chair"), std::string::npos) << "it lists what the model knows: " << cat.message;
  PromptCheck dragon = check_prompt(card, "A red Dragon!");
  EXPECT_EQ(dragon.unknown_words, (std::vector<std::string>{"red", "dragon"}));
  EXPECT_FALSE(dragon.names_a_category);

  PromptCheck chair = check_prompt(card, "a tall chair with four legs");
  EXPECT_TRUE(chair.names_a_category);
  EXPECT_TRUE(chair.message.empty()) << chair.message;
  PromptCheck red_chair = check_prompt(card, "a red chair");
  EXPECT_TRUE(red_chair.names_a_category);
  EXPECT_EQ(red_chair.unknown_words, std::vector<std::string>{"red"});
  EXPECT_NE(red_chair.message.find("ignore"), std::string::npos) << red_chair.message;
}

// A word still being typed is not judged: "chai" is on its way to "chair".
TEST(ModelCard, AWordStillBeingTypedIsNotJudged) {
  const ModelCard card = builtin_card();
  EXPECT_NE(check_prompt(card, "a chai").message, "") << "the whole prompt, judged at once, does name \"chai\"";
  EXPECT_EQ(check_typed_prompt(card, "a chai", false).message, "");
  EXPECT_EQ(check_typed_prompt(card, "a", false).message, "") << "the first word is being typed";
  // Followed by a space or punctuation, or with Generate pressed, it is a word.
  for (const std::string& prompt : {std::string("a chai "), std::string("a chai,")})
    EXPECT_EQ(check_typed_prompt(card, prompt, false).unknown_words, std::vector<std::string>{"chai"}) << prompt;
  EXPECT_EQ(check_typed_prompt(card, "a chai", true).unknown_words, std::vector<std::string>{"chai"});
  // Finished words are judged while the next one is typed.
  const PromptCheck typing = check_typed_prompt(card, "a red chair wi", false);
  EXPECT_EQ(typing.unknown_words, std::vector<std::string>{"red"});
  EXPECT_NE(typing.message.find("ignore"), std::string::npos) << typing.message;
  EXPECT_NE(check_typed_prompt(card, "a cat wi", false).message.find("guess"), std::string::npos);
  EXPECT_EQ(check_typed_prompt(card, "", false).message, check_prompt(card, "").message) << "the empty prompt's hint";
}

TEST(ModelCard, CompletionsComeFromTheCard) {
  const ModelCard card = builtin_card();
  auto tall = complete_word(card, "a ta");
  ASSERT_FALSE(tall.empty());
  EXPECT_EQ(tall[0], "tall");  // shortest first
  EXPECT_NE(std::find(tall.begin(), tall.end(), "table"), tall.end());
  EXPECT_TRUE(complete_word(card, "a tall ").empty());  // nothing unfinished
  EXPECT_TRUE(complete_word(card, "a chair").empty());  // already a whole word
  EXPECT_TRUE(complete_word(card, "a zq").empty());
  EXPECT_EQ(apply_completion("a ta", "table"), "a table ");
}

TEST(ModelCard, NoCardMeansNoClaimAndABrokenCardIsAnError) {
  testing::TemporaryFolder folder;
  auto none = load_model_card(folder.path());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  std::ofstream(folder.path() / "card.json") << "{\"categories\": 3}";
  auto broken = load_model_card(folder.path());
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().message.find("categories"), std::string::npos);
}

}  // namespace
}  // namespace cubeforge::app
