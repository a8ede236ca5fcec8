// libFuzzer target: the desktop app's own files, which a user (or a crash)
// may leave in any state: settings.json, the history index and --script
// files. The first byte picks which; each must load or give an error, never
// crash or throw, and what loads must be usable (settings in range and
// writable back, history entries naming files inside their folder, script
// commands with their arguments).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "app/desktop/core/app_settings.h"
#include "app/desktop/core/history_store.h"
#include "app/desktop/core/script.h"

using namespace cubeforge;
using namespace cubeforge::app;

namespace {

// Settings as read (from the file or a script's `set`) are ones the engine can
// use: every float normal (positive ones positive), bounding-box sides in range,
// and the diffusion threshold a probability or 0 (the model's own).
void check_usable(const AppSettings& s) {
  if (s.resolution < 2 || s.resolution > 10) std::abort();
  for (float positive : {s.temperature, s.top_p})
    if (!std::isnormal(positive) || !(positive > 0.f)) std::abort();
  if (s.diffusion_threshold != 0.f && !(std::isnormal(s.diffusion_threshold) && s.diffusion_threshold > 0.f &&
                                        s.diffusion_threshold <= 1.f))
    std::abort();
  if (!std::isfinite(s.guidance) || std::fpclassify(s.guidance) == FP_SUBNORMAL) std::abort();
  for (float side : s.bbox)
    if (!(side >= kMinBoundingBoxSide && side <= kMaxBoundingBoxSide)) std::abort();
}

void settings(std::string_view text) {
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return;
  auto loaded = settings_from_json(json);
  if (!loaded.ok()) return;
  check_usable(*loaded);
  // What was read is written back the same way (settings_to_json must not throw).
  (void)settings_to_json(*loaded).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  (void)make_request(*loaded);
}

void history(std::string_view text) {
  auto index = parse_history_index(text, "fuzz/index.json");
  if (!index.ok()) return;
  if (index->problems.size() != index->unreadable.size()) std::abort();
  for (const HistoryEntry& entry : index->entries) {
    if (entry.mesh_file.find('/') != std::string::npos || entry.mesh_file.find("..") != std::string::npos) std::abort();
    (void)history_entry_to_json(entry).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

void script(std::string_view text) {
  auto commands = parse_script(std::string(text));
  if (!commands.ok()) return;
  AppSettings scratch;
  for (const ScriptCommand& command : *commands) {
    if (command.line <= 0) std::abort();
    if (command.kind == ScriptCommand::Kind::kSet) {
      const size_t space = command.argument.find_first_of(" \t");
      if (space == std::string::npos) std::abort();
      (void)set_setting(scratch, command.argument.substr(0, space), command.argument.substr(space + 1));
      check_usable(scratch);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: settings(text); break;
    case 1: history(text); break;
    default: script(text); break;
  }
  return 0;
}
