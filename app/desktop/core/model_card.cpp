// Model cards and prompt checks: see model_card.h.
#include "app/desktop/core/model_card.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <nlohmann/json.hpp>

#include "inference/core/file_io.h"

namespace cubeforge::app {

namespace {

// Lower-case words of letters and digits, as the captions are written.
std::vector<std::string> caption_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      word += static_cast<char>(std::tolower(u));
    } else if (!word.empty()) {
      words.push_back(word);
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(word);
  return words;
}

void add_words(std::set<std::string>& into, const std::string& phrase) {
  for (const std::string& word : caption_words(phrase)) into.insert(word);
}

std::string joined(const std::vector<std::string>& words, const char* separator) {
  std::string out;
  for (const auto& word : words) out += (out.empty() ? "" : separator) + word;
  return out;
}

}  // namespace

Result<std::optional<ModelCard>> load_model_card(const std::filesystem::path& model_folder) {
  const auto path = model_folder / "card.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<ModelCard>();
  CUBEFORGE_ASSIGN_OR_RETURN(std::string text, read_file_text(path));
  auto json = nlohmann::json::parse(text, nullptr, false);
  auto malformed = [&](const std::string& what) {
    return make_error(ErrorCode::kCorruptFile, "model card '" + path.string() + "': " + what);
  };
  if (json.is_discarded() || !json.is_object()) return malformed("not a JSON object");
  ModelCard card;
  std::set<std::string> known, category_words;
  if (auto d = json.find("description"); d != json.end() && d->is_string()) card.description = *d;
  const auto categories = json.find("categories");
  if (categories == json.end() || !categories->is_object() || categories->empty())
    return malformed("'categories' must map each category to the words that name it");
  for (const auto& [name, names] : categories->items()) {
    if (!names.is_array()) return malformed("category '" + name + "' needs a list of words");
    card.categories.push_back(name);
    add_words(category_words, name);
    for (const auto& phrase : names) {
      if (!phrase.is_string()) return malformed("category '" + name + "' has a word that is not text");
      add_words(category_words, phrase.get<std::string>());
    }
  }
  known = category_words;
  if (auto attributes = json.find("attributes"); attributes != json.end() && attributes->is_object()) {
    for (const auto& [name, names] : attributes->items()) {
      if (!names.is_array()) return malformed("attribute '" + name + "' needs a list of words");
      for (const auto& phrase : names)
        if (phrase.is_string()) add_words(known, phrase.get<std::string>());
    }
  }
  if (auto other = json.find("other_words"); other != json.end() && other->is_array())
    for (const auto& word : *other)
      if (word.is_string()) add_words(known, word.get<std::string>());
  if (auto examples = json.find("examples"); examples != json.end() && examples->is_array())
    for (const auto& example : *examples)
      if (example.is_string()) card.examples.push_back(example);
  card.category_words.assign(category_words.begin(), category_words.end());
  card.known_words.assign(known.begin(), known.end());
  return std::optional<ModelCard>(std::move(card));
}

PromptCheck check_prompt(const ModelCard& card, const std::string& prompt) {
  PromptCheck check;
  for (const std::string& word : caption_words(prompt)) {
    const bool known = std::binary_search(card.known_words.begin(), card.known_words.end(), word);
    check.any_known_word |= known;
    check.names_a_category |= std::binary_search(card.category_words.begin(), card.category_words.end(), word);
    if (!known && std::find(check.unknown_words.begin(), check.unknown_words.end(), word) == check.unknown_words.end())
      check.unknown_words.push_back(word);
  }
  const std::string kinds = joined(card.categories, ", ");
  std::string unknown = "\"";  // appended: GCC misreads `literal + string` here as overlapping copies
  unknown += joined(check.unknown_words, "\", \"");
  unknown += '"';
  if (caption_words(prompt).empty()) {
    check.message = "Type what to make, e.g. \"" + (card.examples.empty() ? card.categories.front() : card.examples[0]) +
                    "\".";
  } else if (!check.names_a_category) {
    check.message = (check.unknown_words.empty() ? std::string("The prompt names no object")
                                                 : "This model was never taught " + unknown) +
                    ", so the shape will be a guess. It knows only these objects: " + kinds + ".";
  } else if (!check.unknown_words.empty()) {
    check.message = "This model does not know " + unknown + " and will ignore " +
                    (check.unknown_words.size() == 1 ? "it." : "them.");
  }
  return check;
}

PromptCheck check_typed_prompt(const ModelCard& card, const std::string& prompt, bool finished) {
  const bool word_in_progress = !prompt.empty() && std::isalnum(static_cast<unsigned char>(prompt.back()));
  if (finished || !word_in_progress) return check_prompt(card, prompt);
  size_t start = prompt.size();
  while (start > 0 && std::isalnum(static_cast<unsigned char>(prompt[start - 1]))) --start;
  PromptCheck check = check_prompt(card, prompt.substr(0, start));
  if (check.unknown_words.empty() && !check.names_a_category) check.message.clear();
  return check;
}

std::vector<std::string> complete_word(const ModelCard& card, const std::string& prompt, size_t limit) {
  if (prompt.empty() || !std::isalnum(static_cast<unsigned char>(prompt.back()))) return {};
  const std::vector<std::string> words = caption_words(prompt);
  if (words.empty()) return {};
  const std::string& partial = words.back();
  std::vector<std::string> matches;
  for (const std::string& word : card.known_words)
    if (word.size() > partial.size() && word.compare(0, partial.size(), partial) == 0) matches.push_back(word);
  if (std::binary_search(card.known_words.begin(), card.known_words.end(), partial)) return {};
  std::stable_sort(matches.begin(), matches.end(),
                   [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
  if (matches.size() > limit) matches.resize(limit);
  return matches;
}

std::string apply_completion(const std::string& prompt, const std::string& word) {
  size_t end = prompt.size();
  size_t start = end;
  while (start > 0 && std::isalnum(static_cast<unsigned char>(prompt[start - 1]))) --start;
  return prompt.substr(0, start) + word + " ";
}

}  // namespace cubeforge::app
