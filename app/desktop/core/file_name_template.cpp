// Export file-name templates: see file_name_template.h.
#include "app/desktop/core/file_name_template.h"

#include <ctime>

namespace cubeforge::app {

std::string slugify(const std::string& text, size_t max_length) {
  std::string slug;
  bool pending_dash = false;
  for (unsigned char c : text) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z');
    if (!keep) {
      pending_dash = !slug.empty();
      continue;
    }
    if (pending_dash) {
      if (slug.size() + 1 >= max_length) break;
      slug.push_back('-');
      pending_dash = false;
    }
    if (slug.size() >= max_length) break;
    slug.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
  }
  return slug.empty() ? "untitled" : slug;
}

FileNameFields fields_now(const std::string& prompt, uint64_t seed, int resolution) {
  FileNameFields fields{prompt, seed, resolution, "", ""};
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char date[16], time[16];
  std::strftime(date, sizeof date, "%Y%m%d", &local);
  std::strftime(time, sizeof time, "%H%M%S", &local);
  fields.date = date;
  fields.time = time;
  return fields;
}

Result<std::string> expand_file_name_template(const std::string& pattern, const FileNameFields& fields) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '{') {
      if (pattern[i] == '}')
        return make_error(ErrorCode::kInvalidArgument,
                          "file-name template '" + pattern + "' has a '}' without its '{'");
      out.push_back(pattern[i]);
      continue;
    }
    size_t close = pattern.find('}', i);
    if (close == std::string::npos)
      return make_error(ErrorCode::kInvalidArgument, "file-name template '" + pattern +
                                                         "' has an unclosed '{'; placeholders look like {prompt}");
    std::string name = pattern.substr(i + 1, close - i - 1);
    if (name == "prompt") out += slugify(fields.prompt);
    else if (name == "seed") out += std::to_string(fields.seed);
    else if (name == "resolution") out += std::to_string(fields.resolution);
    else if (name == "date") out += fields.date;
    else if (name == "time") out += fields.time;
    else
      return make_error(ErrorCode::kInvalidArgument,
                        "file-name template '" + pattern + "' has an unknown placeholder {" + name +
                            "}; use {prompt}, {seed}, {resolution}, {date} or {time}");
    i = close;
  }
  if (out.empty() || out.find('/') == out.size() - 1)
    return make_error(ErrorCode::kInvalidArgument, "file-name template '" + pattern + "' gives no file name");
  return out;
}

}  // namespace cubeforge::app
