// The documents folder: see documents_folder.h.
#include "app/desktop/core/documents_folder.h"

#include <cstdlib>
#include <fstream>

#include "app/desktop/core/export_target.h"

namespace cubeforge::app {

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// The value of XDG_DOCUMENTS_DIR in a user-dirs.dirs file: a shell
// assignment, XDG_DOCUMENTS_DIR="$HOME/Documents", whose path is absolute or
// starts with $HOME/ (the format xdg-user-dirs writes). Empty when the file
// or the line is missing or says something else.
std::filesystem::path documents_from_user_dirs(const std::filesystem::path& file, const std::string& home) {
  std::ifstream in(file);
  std::string line;
  constexpr std::string_view kKey = "XDG_DOCUMENTS_DIR=";
  std::filesystem::path found;
  while (std::getline(in, line)) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line.compare(start, kKey.size(), kKey) != 0) continue;
    std::string value = line.substr(start + kKey.size());
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t' || value.back() == '\r')) value.pop_back();
    if (value.size() < 2 || value.front() != '"' || value.back() != '"') continue;
    value = value.substr(1, value.size() - 2);
    if (value == "$HOME" || value == "$HOME/")
      found = home;  // the directory is disabled: the home folder
    else if (value.rfind("$HOME/", 0) == 0 && !home.empty())
      found = std::filesystem::path(home) / value.substr(6);
    else if (!value.empty() && value.front() == '/')
      found = value;
    // The last assignment wins, as in the shell.
  }
  return found;
}

}  // namespace

std::filesystem::path documents_folder() {
  const std::string home = environment("HOME");
  std::string config = environment("XDG_CONFIG_HOME");
  if (config.empty() && !home.empty()) config = home + "/.config";
  if (!config.empty()) {
    const std::filesystem::path named =
        documents_from_user_dirs(std::filesystem::path(config) / "user-dirs.dirs", home);
    if (!named.empty()) return named.lexically_normal();
  }
  if (home.empty()) {
    std::error_code ec;
    const std::filesystem::path here = std::filesystem::current_path(ec);
    return ec ? std::filesystem::path(".") : here;
  }
  const std::filesystem::path documents = std::filesystem::path(home) / "Documents";
  std::error_code ec;
  if (std::filesystem::exists(documents, ec) && !std::filesystem::is_directory(documents, ec)) return home;
  return documents;
}

std::filesystem::path export_folder_or_documents(const std::string& folder) {
  return folder.empty() ? documents_folder() : expand_home(folder);
}

}  // namespace cubeforge::app
