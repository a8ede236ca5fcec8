// The History panel: past generations, newest first, each with a thumbnail
// mosaic, its prompt, seed and time. A click restores the entry (its mesh and
// the settings that made it); the context menu deletes it.
#include <cstdio>
#include <optional>

#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

namespace {

constexpr int kThumbnailCells = 20;  // history thumbnails: 20x20 mosaic cells
constexpr float kThumbnailSize = 40.f;

void draw_mosaic(const ThumbnailMosaic& mosaic, ImVec2 origin) {
  const float cell = kThumbnailSize / mosaic.cells;
  ImDrawList* draw = ImGui::GetWindowDrawList();
  for (int y = 0; y < mosaic.cells; ++y)
    for (int x = 0; x < mosaic.cells; ++x)
      draw->AddRectFilled(ImVec2(origin.x + x * cell, origin.y + y * cell),
                          ImVec2(origin.x + (x + 1) * cell, origin.y + (y + 1) * cell),
                          mosaic.colors[size_t(y) * mosaic.cells + x]);
}

}  // namespace

void draw_history_panel(App& app) {
  HistoryState& history = app.state.history;
  begin_panel(app, Panel::kHistory);
  if (!history.store) {
    ImGui::TextDisabled("history unavailable (see Log)");
  } else if (history.store->entries().empty()) {
    ImGui::TextDisabled("generations appear here");
  } else {
    const auto& entries = history.store->entries();
    std::optional<HistoryEntry> chosen;
    std::optional<std::string> removed;
    bool loaded_one = false;  // at most one thumbnail read per frame keeps frames short
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      ImGui::PushID(it->id.c_str());
      auto found = history.thumbnails.find(it->id);
      if (found == history.thumbnails.end() && !loaded_one) {
        loaded_one = true;
        auto loaded = load_thumbnail_mosaic(history.store->thumbnail_path(*it), kThumbnailCells);
        found = history.thumbnails.emplace(it->id, loaded.ok() ? std::move(*loaded) : ThumbnailMosaic{}).first;
      }
      if (found != history.thumbnails.end() && found->second.cells > 0)
        draw_mosaic(found->second, ImGui::GetCursorScreenPos());
      ImGui::Dummy(ImVec2(kThumbnailSize, kThumbnailSize));
      ImGui::SameLine();
      char line[160];
      // Latency-demo runs say which variant they were.
      const std::string run = it->settings.value("run", std::string("generate"));
      std::snprintf(line, sizeof line, "%s\nseed %llu  %.0f ms%s%s", it->prompt.c_str(),
                    static_cast<unsigned long long>(it->seed), it->timings.total_ms,
                    run == "generate" ? "" : "  ", run == "generate" ? "" : run.c_str());
      if (ImGui::Selectable(line, false, 0, ImVec2(0, kThumbnailSize))) chosen = *it;
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s\n%lld faces, first token %.1f ms, TPOT %.2f ms\nthumbnail: %s", it->created.c_str(),
                          static_cast<long long>(it->faces), it->timings.time_to_first_token_ms,
                          it->timings.mean_tpot_ms, history.store->thumbnail_path(*it).c_str());
      if (ImGui::BeginPopupContextItem()) {
        if (ImGui::MenuItem("Delete")) removed = it->id;
        ImGui::EndPopup();
      }
      ImGui::PopID();
    }
    if (chosen && !app.worker.busy()) app.restore_history(*chosen);
    if (removed) {
      history.thumbnails.erase(*removed);
      Status status = history.store->remove(*removed);
      if (!status.ok()) app.log_error("history: " + status.error().to_string());
    }
  }
  ImGui::End();
}

}  // namespace cubeforge::app
