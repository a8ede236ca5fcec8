// The on-disk generation history: see history_store.h.
#include "app/desktop/core/history_store.h"

#include <algorithm>
#include <ctime>

#include "app/desktop/core/json_number.h"
#include "inference/core/file_io.h"
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

Result<HistoryEntry> history_entry_from_json(const nlohmann::json& json) {
  try {
    HistoryEntry e;
    json.at("id").get_to(e.id);
    e.created = json.value("created", "");
    json.at("prompt").get_to(e.prompt);
    if (!json_number(json.at("seed"), e.seed))
      return make_error(ErrorCode::kCorruptFile, "history entry '" + e.id + "' has a seed that is not a whole number");
    e.settings = json.value("settings", nlohmann::json::object());
    if (auto t = json.find("timings"); t != json.end()) {
      e.timings.total_ms = t->value("total_ms", 0.0);
      e.timings.time_to_first_token_ms = t->value("time_to_first_token_ms", 0.0);
      e.timings.mean_tpot_ms = t->value("mean_tpot_ms", 0.0);
      e.timings.tokens_per_second = t->value("tokens_per_second", 0.0);
      e.timings.stages_ms = t->value("stages_ms", nlohmann::json::object());
    }
    for (auto [key, count] : {std::pair{"vertices", &e.vertices}, std::pair{"faces", &e.faces}})
      if (json.contains(key) && !json_number(json.at(key), *count))
        return make_error(ErrorCode::kCorruptFile, "history entry '" + e.id + "' has a " + key +
                                                       " count that is not a whole number");
    json.at("mesh_file").get_to(e.mesh_file);
    e.thumbnail_file = json.value("thumbnail_file", "");
    // Entries name files inside the folder only.
    for (const std::string* file : {&e.mesh_file, &e.thumbnail_file})
      if (file->find('/') != std::string::npos || file->find("..") != std::string::npos)
        return make_error(ErrorCode::kCorruptFile, "history entry '" + e.id + "' names a file outside its folder");
    return e;
  } catch (const nlohmann::json::exception& ex) {
    return make_error(ErrorCode::kCorruptFile, std::string("history entry is malformed: ") + ex.what());
  }
}

Result<std::vector<HistoryEntry>> parse_history_index(std::string_view text, const std::string& index_name) {
  const auto json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object() || !json.contains("entries") || !json["entries"].is_array())
    return make_error(ErrorCode::kCorruptFile, "history index '" + index_name +
                                                   "' is not a valid index; move it away to start a new history");
  std::vector<HistoryEntry> entries;
  for (const auto& item : json["entries"]) {
    auto entry = history_entry_from_json(item);
    if (!entry.ok())
      return make_error(ErrorCode::kCorruptFile, "history index '" + index_name + "': " + entry.error().message);
    entries.push_back(std::move(*entry));
  }
  return entries;
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
  CUBEFORGE_ASSIGN_OR_RETURN(store.entries_, parse_history_index(text, index.string()));
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
