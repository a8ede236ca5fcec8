// The "Save as" dialog in a child process: see save_dialog.h.
#include "app/desktop/core/save_dialog.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>

namespace cubeforge::app {

struct SaveDialog::Shared {
  std::mutex mutex;
  bool open = false;
  std::optional<std::string> result;
};

namespace {

std::string find_program(const char* name) {
  const char* path = std::getenv("PATH");
  std::istringstream folders(path ? path : "");
  for (std::string folder; std::getline(folders, folder, ':');) {
    const std::string candidate = (folder.empty() ? std::string(".") : folder) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

// Single quotes for the shell; a quote inside becomes '\''.
std::string shell_quoted(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string dialog_command(const std::filesystem::path& suggested) {
  if (std::string zenity = find_program("zenity"); !zenity.empty())
    return shell_quoted(zenity) + " --file-selection --save --title='Export mesh' --filename=" +
           shell_quoted(suggested.string()) + " --file-filter='Meshes | *.glb *.obj *.stl *.ply' 2>/dev/null";
  if (std::string kdialog = find_program("kdialog"); !kdialog.empty())
    return shell_quoted(kdialog) + " --title 'Export mesh' --getsavefilename " + shell_quoted(suggested.string()) +
           " '*.glb *.obj *.stl *.ply' 2>/dev/null";
  return {};
}

}  // namespace

std::string SaveDialog::unavailable_reason() {
  if (!find_program("zenity").empty() || !find_program("kdialog").empty()) return {};
  return "no file dialog program: install zenity (GNOME, or any desktop) or kdialog (KDE); "
         "the folder and name fields work without one";
}

bool SaveDialog::start(const std::filesystem::path& suggested) {
  if (is_open()) return false;
  const std::string command = dialog_command(suggested);
  if (command.empty()) return false;
  shared_ = std::make_shared<Shared>();
  shared_->open = true;
  // Detached: the dialog belongs to the person, and quitting the app must not wait for it.
  std::thread([shared = shared_, command] {
    std::string chosen;
    if (FILE* child = ::popen(command.c_str(), "r")) {
      char buffer[4096];
      while (std::fgets(buffer, sizeof buffer, child)) chosen += buffer;
      ::pclose(child);
    }
    while (!chosen.empty() && (chosen.back() == '\n' || chosen.back() == '\r')) chosen.pop_back();
    std::lock_guard lock(shared->mutex);
    shared->result = chosen;
    shared->open = false;
  }).detach();
  return true;
}

bool SaveDialog::is_open() const {
  if (!shared_) return false;
  std::lock_guard lock(shared_->mutex);
  return shared_->open;
}

std::optional<std::string> SaveDialog::take_result() {
  if (!shared_) return std::nullopt;
  std::lock_guard lock(shared_->mutex);
  if (shared_->open || !shared_->result) return std::nullopt;
  std::optional<std::string> result = std::move(shared_->result);
  shared_->result.reset();
  return result;
}

}  // namespace cubeforge::app
