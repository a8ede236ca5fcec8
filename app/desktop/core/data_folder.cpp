// Data folder resolution and process memory: see data_folder.h.
#include "app/desktop/core/data_folder.h"

#include <cstdlib>
#include <fstream>

#include "inference/core/file_io.h"
#include "inference/core/untrusted_text.h"

namespace cubeforge::app {

std::filesystem::path resolve_data_folder(const std::string& override_folder) {
  if (!override_folder.empty()) return override_folder;
  if (const char* env = std::getenv("CUBEFORGE_DATA_DIR"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "cubeforge";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".local" / "share" / "cubeforge";
  std::error_code ec;
  const std::filesystem::path here = std::filesystem::current_path(ec);
  return (ec ? std::filesystem::path(".") : here) / ".cubeforge";
}

Status check_data_file(const std::filesystem::path& path) {
  CUBEFORGE_ASSIGN_OR_RETURN(FileKind kind, file_kind(path));
  if (kind == FileKind::kMissing || kind == FileKind::kRegular) return ok_status();
  return make_error(ErrorCode::kIo, single_quoted(path.string()) + " is " + describe_file_type(path) +
                                        ", not a regular file; move it away");
}

double resident_memory_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;  // kB
  }
  return 0.0;
}

}  // namespace cubeforge::app
