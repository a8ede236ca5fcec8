// The strict, depth-bounded JSON parse: a SAX handler that builds the value.
#include "inference/core/strict_json.h"

#include <string>
#include <vector>

#include "inference/core/untrusted_text.h"

namespace cubeforge {

namespace {

using json = nlohmann::json;

class StrictBuilder {
 public:
  explicit StrictBuilder(int max_depth) : max_depth_(max_depth) {}

  bool null() { return add(json(nullptr)); }
  bool boolean(bool value) { return add(json(value)); }
  bool number_integer(json::number_integer_t value) { return add(json(value)); }
  bool number_unsigned(json::number_unsigned_t value) { return add(json(value)); }
  bool number_float(json::number_float_t value, const json::string_t&) { return add(json(value)); }
  bool string(json::string_t& value) { return add(json(std::move(value))); }
  bool binary(json::binary_t& value) { return add(json::binary(std::move(value))); }

  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(json::string_t& name) {
    Level& level = levels_.back();
    if (level.value->contains(name)) {
      error_ = "key '" + name + "' appears twice in " + where() + " (a JSON object holds each key once)";
      return false;
    }
    level.key = name;
    level.member = &(*level.value)[name];
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) {
    error_ = std::string("not valid JSON: ") + error.what();
    return false;
  }

  json& root() { return root_; }
  const std::string& error() const { return error_; }

 private:
  struct Level {
    json* value = nullptr;
    std::string key;         // objects: the member being read
    json* member = nullptr;  // objects: where its value goes
  };

  json* place(json value) {
    if (levels_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Level& level = levels_.back();
    if (level.value->is_array()) {
      level.value->push_back(std::move(value));
      return &level.value->back();
    }
    *level.member = std::move(value);
    return level.member;
  }
  bool add(json value) {
    place(std::move(value));
    return true;
  }
  bool open(json container) {
    if (int(levels_.size()) >= max_depth_) {
      error_ = "JSON nested more than " + std::to_string(max_depth_) + " levels deep (in " + where() + ")";
      return false;
    }
    json* value = place(std::move(container));
    levels_.push_back({value, {}, nullptr});
    return true;
  }
  bool close() {
    levels_.pop_back();
    return true;
  }
  // "the top level", or the path to the innermost container: "text_config.vocab_size[3]".
  std::string where() const {
    if (levels_.size() <= 1) return "the top level";
    std::string path;
    for (size_t i = 0; i + 1 < levels_.size(); ++i) {
      if (i == 8) return path + "...";
      const Level& level = levels_[i];
      if (level.value->is_array()) {
        path += '[';
        path += std::to_string(level.value->size() - 1);
        path += ']';
      } else {
        if (!path.empty()) path += '.';
        path += level.key;
      }
    }
    return path;
  }

  int max_depth_;
  json root_;
  std::vector<Level> levels_;
  std::string error_;
};

}  // namespace

Result<nlohmann::json> parse_json_strictly(std::string_view text, int max_depth) {
  StrictBuilder builder(max_depth);
  const bool parsed = json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json,
                                      /*strict=*/true, /*ignore_comments=*/false);
  if (!parsed)
    return make_error(ErrorCode::kCorruptFile, builder.error().empty() ? "not valid JSON" : builder.error());
  return std::move(builder.root());
}

Result<nlohmann::json> parse_json_file_strictly(std::string_view text, std::string_view file_name, int max_depth) {
  auto value = parse_json_strictly(text, max_depth);
  if (!value.ok()) return make_error(ErrorCode::kCorruptFile, single_quoted(file_name) + ": " + value.error().message);
  return value;
}

std::string json_excerpt(const nlohmann::json& value, size_t max_chars) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > max_chars) {
    text.resize(max_chars);
    text += "...";
  }
  return text;
}

}  // namespace cubeforge
