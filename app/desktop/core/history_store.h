// The generation history kept on disk between runs.
//
// HISTORY/index.json lists every entry (prompt, seed, the settings used, the
// timings, mesh size); each entry's mesh is HISTORY/<id>.glb and its thumbnail
// HISTORY/<id>.png (written by the app, which owns the renderer). The index is
// rewritten atomically after every change, and the mesh is written before the
// index names it, so a crash leaves at worst an unlisted file, never an entry
// without its mesh.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "inference/core/result.h"
#include "inference/geometry/mesh.h"

namespace cubeforge::app {

struct HistoryTimings {
  double total_ms = 0;
  double time_to_first_token_ms = 0;
  double mean_tpot_ms = 0;
  double tokens_per_second = 0;
  nlohmann::json stages_ms = nlohmann::json::object();  // stage name -> ms
};

struct HistoryEntry {
  std::string id;        // unique, sortable: YYYYMMDD-HHMMSS-N
  std::string created;   // ISO 8601 local time
  std::string prompt;
  uint64_t seed = 0;
  nlohmann::json settings = nlohmann::json::object();  // settings_to_json() of the run
  HistoryTimings timings;
  int64_t vertices = 0, faces = 0;
  std::string mesh_file;       // relative to the history folder
  std::string thumbnail_file;  // relative; the file may be missing
};

class HistoryStore {
 public:
  // Opens (or creates) the folder and reads its index. An index that is not
  // JSON is an error; an entry that cannot be read is left out and named in
  // problems(), and kept in the index as it was when the index is rewritten,
  // so one bad entry neither hides the others nor is lost.
  static Result<HistoryStore> open(const std::filesystem::path& folder);

  const std::filesystem::path& folder() const { return folder_; }
  const std::vector<HistoryEntry>& entries() const { return entries_; }  // oldest first
  // One sentence per entry that could not be read.
  const std::vector<std::string>& problems() const { return problems_; }

  // Saves the mesh, then lists the entry (id, files, created filled in here).
  Result<HistoryEntry> add(HistoryEntry entry, const Mesh& mesh);
  Result<Mesh> load_mesh(const HistoryEntry& entry) const;
  std::filesystem::path thumbnail_path(const HistoryEntry& entry) const { return folder_ / entry.thumbnail_file; }
  Status remove(const std::string& id);

 private:
  explicit HistoryStore(std::filesystem::path folder) : folder_(std::move(folder)) {}
  Status save_index() const;
  std::string next_id() const;

  std::filesystem::path folder_;
  std::vector<HistoryEntry> entries_;
  std::vector<nlohmann::json> unreadable_;  // entries left out, written back unchanged
  std::vector<std::string> problems_;
};

nlohmann::json history_entry_to_json(const HistoryEntry& entry);
Result<HistoryEntry> history_entry_from_json(const nlohmann::json& json);
// An index file's entries: those read, and those left out with the reason.
struct HistoryIndex {
  std::vector<HistoryEntry> entries;
  std::vector<nlohmann::json> unreadable;  // written back unchanged
  std::vector<std::string> problems;       // one per unreadable entry, in words
};
// The entries of an index file's text; `index_name` names it in errors. Only
// an index that is not one at all is an error: a bad entry is left out.
Result<HistoryIndex> parse_history_index(std::string_view text, const std::string& index_name);

}  // namespace cubeforge::app
