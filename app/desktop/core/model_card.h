// What a model folder says it was trained on (MODEL/card.json, optional):
// its categories with the words that name each, its attribute words and
// example prompts. The built-in model ships one (tools/train/captions.py
// writes it); the real Cube 3D models have none and know open vocabulary.
//
// check_prompt() compares a prompt's words with the card, so the app can say
// plainly when the model will only guess ("a cat" on a model that knows
// chairs and mugs), and complete_word() offers the card's words as the
// person types.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "inference/core/result.h"

namespace cubeforge::app {

struct ModelCard {
  std::string description;
  std::vector<std::string> categories;      // one name per category
  std::vector<std::string> category_words;  // every word that names a category
  std::vector<std::string> known_words;     // every word the captions use, sorted
  std::vector<std::string> examples;
};

// No card.json: nullopt (the model makes no claim). A malformed one: an error.
Result<std::optional<ModelCard>> load_model_card(const std::filesystem::path& model_folder);

struct PromptCheck {
  std::vector<std::string> unknown_words;  // in prompt order, once each
  bool names_a_category = false;
  bool any_known_word = false;
  // One sentence for the person, empty when every word is known.
  std::string message;
};
PromptCheck check_prompt(const ModelCard& card, const std::string& prompt);

// check_prompt() on a prompt being typed: a word at its end with nothing
// after it yet may be the start of a known one ("chai" of "chair"), so it is
// not judged until a space or punctuation follows it, or `finished` (Generate
// was pressed); and while it is typed, the prompt is not said to name no
// object (it may be that word).
PromptCheck check_typed_prompt(const ModelCard& card, const std::string& prompt, bool finished);

// The card's words that start with the prompt's last, unfinished word (at
// most `limit`, shortest first); empty when it is already a whole known word.
std::vector<std::string> complete_word(const ModelCard& card, const std::string& prompt, size_t limit = 6);

// The prompt with its last word replaced by `word` and a space after it.
std::string apply_completion(const std::string& prompt, const std::string& word);

}  // namespace cubeforge::app
