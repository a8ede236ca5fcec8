// The on-disk generation history: see history_store.h.
#include "app/desktop/core/history_store.h"

#include <algorithm>
#include <cstdint>
#include <ctime>

#include "app/desktop/core/json_number.h"
#include "inference/core/file_io.h"
#include "inference/core/untrusted_text.h"
#include "inference/geometry/mesh_io.h"

namespace cubeforge::app {

namespace {
constexpr const char* kIndexName = "index.json";
constexpr int kIndexVersion = 1;
constexpr uint64_t kMaxIndexBytes = uint64_t(256) << 20;
}  // namespace

nlohmann::json history_entry_to_json(const HistoryEntry& e) {
  return {{"id", e.id},
          {"created", e.created},
          {"prompt", e.prompt},
          {"seed", e.seed},
          {"settings", e.settings},
          {"timings",
           {{"total_ms", e.timings.total_ms},
            {"time_to_first_token_ms", e.timings.time_to_first_token_ms},
            {"mean_tpot_ms", e.timings.mean_tpot_ms},
            {"tokens_per_second", e.timings.tokens_per_second},
            {"stages_ms", e.timings.stages_ms}}},
          {"vertices", e.vertices},
          {"faces", e.faces},
          {"mesh_file", e.mesh_file},
          {"thumbnail_file", e.thumbnail_file}};
}

namespace {

// Names the field a malformed entry gets wrong, in words, instead of the JSON
// library's exception text.
std::string entry_problem(const nlohmann::json& json) {
  if (!json.is_object()) return "is not an object";
  struct Field {
    const char* key;
    bool (nlohmann::json::*is)() const noexcept;
    const char* kind;
    bool required;
  };
  static const Field fields[] = {
      {"id", &nlohmann::json::is_string, "text", true},
      {"prompt", &nlohmann::json::is_string, "text", true},
      {"seed", &nlohmann::json::is_number_unsigned, "a whole number >= 0", true},
      {"mesh_file", &nlohmann::json::is_string, "text", true},
      {"created", &nlohmann::json::is_string, "text", false},
      {"thumbnail_file", &nlohmann::json::is_string, "text", false},
      {"settings", &nlohmann::json::is_object, "an object", false},
      {"timings", &nlohmann::json::is_object, "an object", false},
      {"vertices", &nlohmann::json::is_number, "a number", false},
      {"faces", &nlohmann::json::is_number, "a number", false},
  };
  for (const Field& field : fields) {
    auto found = json.find(field.key);
    if (found == json.end()) {
      if (field.required) return std::string("has no '") + field.key + "'";
      continue;
    }
    if (!((*found).*field.is)()) return std::string("has '") + field.key + "' that is not " + field.kind;
  }
  if (auto t = json.find("timings"); t != json.end())
    for (const auto& [key, value] : t->items())
      if (key != "stages_ms" && !value.is_number()) return "has timing '" + key + "' that is not a number";
  return "";
}

}  // namespace

Result<HistoryEntry> history_entry_from_json(const nlohmann::json& json) {
  if (std::string problem = entry_problem(json); !problem.empty()) {
    std::string id = json.is_object() && json.contains("id") && json["id"].is_string() ? json["id"].get<std::string>()
                                                                                        : std::string();
    return make_error(ErrorCode::kCorruptFile,
                      "history entry" + (id.empty() ? std::string() : " '" + id + "'") + " " + problem);
  }
  try {
    HistoryEntry e;
    json.at("id").get_to(e.id);
    e.created = json.value("created", "");
    json.at("prompt").get_to(e.prompt);
    const std::string entry = "history entry " + quoted_untrusted(e.id);
    CUBEFORGE_TRY(json_number(json.at("seed"), e.seed, entry + ": seed"));
    e.settings = json.value("settings", nlohmann::json::object());
    if (auto t = json.find("timings"); t != json.end()) {
      e.timings.total_ms = t->value("total_ms", 0.0);
      e.timings.time_to_first_token_ms = t->value("time_to_first_token_ms", 0.0);
      e.timings.mean_tpot_ms = t->value("mean_tpot_ms", 0.0);
      e.timings.tokens_per_second = t->value("tokens_per_second", 0.0);
      e.timings.stages_ms = t->value("stages_ms", nlohmann::json::object());
    }
    for (auto [key, count] : {std::pair{"vertices", &e.vertices}, std::pair{"faces", &e.faces}})
      if (json.contains(key)) CUBEFORGE_TRY(json_number(json.at(key), *count, entry + ": " + key, {}, {0, INT64_MAX}));
    json.at("mesh_file").get_to(e.mesh_file);
    e.thumbnail_file = json.value("thumbnail_file", "");
    // Entries name files inside the folder only.
    for (const std::string* file : {&e.mesh_file, &e.thumbnail_file})
      if (file->find('/') != std::string::npos || file->find("..") != std::string::npos)
        return make_error(ErrorCode::kCorruptFile, "history entry '" + e.id + "' names a file outside its folder");
    return e;
  } catch (const nlohmann::json::exception& ex) {
    // entry_problem() checks every field first; the library's own text means nothing to a person.
    return make_error(ErrorCode::kCorruptFile, "history entry has a value of the wrong kind");
  }
}

Result<HistoryIndex> parse_history_index(std::string_view text, const std::string& index_name) {
  const auto json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object() || !json.contains("entries") || !json["entries"].is_array())
    return make_error(ErrorCode::kCorruptFile, "history index '" + index_name +
                                                   "' is not a valid index; move it away to start a new history");
  HistoryIndex index;
  for (const auto& item : json["entries"]) {
    auto entry = history_entry_from_json(item);
    if (entry.ok()) {
      index.entries.push_back(std::move(*entry));
    } else {
      index.unreadable.push_back(item);
      index.problems.push_back(entry.error().message + " and is left out (it stays in " + index_name + ")");
    }
  }
  return index;
}

Result<HistoryStore> HistoryStore::open(const std::filesystem::path& folder) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);  // the check below says what went wrong
  auto kind = file_kind(folder);
  if (!kind.ok()) return make_error(ErrorCode::kIo, "cannot open the history folder: " + kind.error().message);
  if (*kind != FileKind::kDirectory)
    return make_error(ErrorCode::kIo, "cannot create the history folder '" + folder.string() + "'" +
                                          (ec ? ": " + ec.message() : ": " + describe_file_type(folder) + " is there"));
  HistoryStore store(folder);
  const auto index = folder / kIndexName;
  CUBEFORGE_ASSIGN_OR_RETURN(FileKind index_kind, file_kind(index));
  if (index_kind == FileKind::kMissing) return store;
  CUBEFORGE_ASSIGN_OR_RETURN(std::string text, read_file_text(index, kMaxIndexBytes));
  CUBEFORGE_ASSIGN_OR_RETURN(HistoryIndex parsed, parse_history_index(text, index.string()));
  store.entries_ = std::move(parsed.entries);
  store.unreadable_ = std::move(parsed.unreadable);
  store.problems_ = std::move(parsed.problems);
  return store;
}

std::string HistoryStore::next_id() const {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  for (int n = 1;; ++n) {
    std::string id = std::string(stamp) + "-" + std::to_string(n);
    bool taken = std::any_of(entries_.begin(), entries_.end(), [&](const HistoryEntry& e) { return e.id == id; });
    auto kind = file_kind(folder_ / (id + ".glb"));
    if (!taken && kind.ok() && *kind == FileKind::kMissing) return id;
    if (n > 100000) return id;  // a folder that cannot be examined: the write will say why
  }
}

Status HistoryStore::save_index() const {
  nlohmann::json json = {{"version", kIndexVersion}, {"entries", nlohmann::json::array()}};
  for (const auto& entry : unreadable_) json["entries"].push_back(entry);
  for (const auto& entry : entries_) json["entries"].push_back(history_entry_to_json(entry));
  return write_file_atomically(folder_ / kIndexName, json.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

Result<HistoryEntry> HistoryStore::add(HistoryEntry entry, const Mesh& mesh) {
  entry.id = next_id();
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char created[32];
  std::strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%S", &local);
  entry.created = created;
  entry.mesh_file = entry.id + ".glb";
  entry.thumbnail_file = entry.id + ".png";
  entry.vertices = static_cast<int64_t>(mesh.vertex_count());
  entry.faces = static_cast<int64_t>(mesh.face_count());
  CUBEFORGE_TRY(export_mesh(mesh, folder_ / entry.mesh_file, MeshFileFormat::kGlb));
  entries_.push_back(entry);
  Status saved = save_index();
  if (!saved.ok()) {
    entries_.pop_back();
    return saved.take_error();
  }
  return entry;
}

Result<Mesh> HistoryStore::load_mesh(const HistoryEntry& entry) const {
  return import_mesh(folder_ / entry.mesh_file);
}

Status HistoryStore::remove(const std::string& id) {
  auto found = std::find_if(entries_.begin(), entries_.end(), [&](const HistoryEntry& e) { return e.id == id; });
  if (found == entries_.end()) return make_error(ErrorCode::kNotFound, "no history entry '" + id + "'");
  HistoryEntry removed = *found;
  entries_.erase(found);
  CUBEFORGE_TRY(save_index());
  std::error_code ec;
  std::filesystem::remove(folder_ / removed.mesh_file, ec);
  if (!removed.thumbnail_file.empty()) std::filesystem::remove(folder_ / removed.thumbnail_file, ec);
  return ok_status();
}

}  // namespace cubeforge::app
