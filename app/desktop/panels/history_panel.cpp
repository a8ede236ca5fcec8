// The History panel: past generations, newest first, each with a thumbnail
// of the shape (rendered by the engine when the run finished), its prompt,
// seed and time. A click shows the entry's shape; when its prompt or
// settings differ from what is typed, the panel asks first whether to take
// them too or show the shape only. The context menu deletes an entry. What
// could not be read or kept is said here, not only in the Log.
#include <cstdio>
#include <optional>
#include <string>

#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

namespace {

constexpr int kThumbnailCells = 48;    // mosaic cells per side, from the 128-pixel render
constexpr float kThumbnailSize = 72.f;  // on screen: large enough to tell a chair from a mug
constexpr const char* kRestorePopup = "Restore from history";

// `text` cut at a character boundary and ended with "..." so it fits in
// `width` pixels (a Selectable does not wrap; a long prompt would widen the
// panel past the window). The whole text is in the entry's tooltip.
std::string fitted_to_width(const std::string& text, float width) {
  if (ImGui::CalcTextSize(text.c_str()).x <= width) return text;
  size_t length = text.size();
  while (length > 0) {
    do --length;
    while (length > 0 && (static_cast<unsigned char>(text[length]) & 0xC0) == 0x80);
    std::string cut = text.substr(0, length) + "...";
    if (ImGui::CalcTextSize(cut.c_str()).x <= width) return cut;
  }
  return "...";
}

void draw_restore_question(App& app) {
  HistoryState& history = app.state.history;
  if (history.open_restore_question) {
    ImGui::OpenPopup(kRestorePopup);
    history.open_restore_question = false;
  }
  if (!ImGui::BeginPopupModal(kRestorePopup, nullptr, ImGuiWindowFlags_AlwaysAutoResize)) return;
  if (!history.pending_restore) {
    ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
    return;
  }
  const HistoryEntry entry = *history.pending_restore;
  ImGui::PushTextWrapPos(ImGui::GetFontSize() * 30);
  ImGui::TextWrapped("\"%s\" (seed %llu) was made with another prompt or other settings than the ones typed now.",
                     entry.prompt.c_str(), static_cast<unsigned long long>(entry.seed));
  ImGui::PopTextWrapPos();
  bool close = false;
  if (ImGui::Button("Use its prompt and settings")) {
    app.restore_history(entry, true);
    close = true;
  }
  remember_item(app, "restore-all");
  ImGui::SameLine();
  if (ImGui::Button("Show the shape only")) {
    app.restore_history(entry, false);
    close = true;
  }
  remember_item(app, "restore-shape");
  ImGui::SameLine();
  if (ImGui::Button("Cancel") || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) close = true;
  remember_item(app, "restore-cancel");
  if (close) {
    history.pending_restore.reset();
    ImGui::CloseCurrentPopup();
  }
  ImGui::EndPopup();
}

void draw_problems(const HistoryState& history) {
  ImGui::PushStyleColor(ImGuiCol_Text, kErrorTextColour);
  if (!history.problem.empty()) ImGui::TextWrapped("%s", history.problem.c_str());
  if (history.store)
    for (const std::string& problem : history.store->problems()) ImGui::TextWrapped("%s", problem.c_str());
  ImGui::PopStyleColor();
}

}  // namespace

void draw_history_panel(App& app) {
  HistoryState& history = app.state.history;
  begin_panel(app, Panel::kHistory);
  draw_problems(history);
  if (!history.problem.empty() || (history.store && !history.store->problems().empty()))
    remember_item(app, "history-problem");
  if (history.store && history.store->entries().empty()) ImGui::TextDisabled("generations appear here");
  if (history.store && !history.store->entries().empty()) {
    const auto& entries = history.store->entries();
    std::optional<HistoryEntry> chosen;
    std::optional<std::string> removed;
    bool loaded_one = false;  // at most one thumbnail read per frame keeps frames short
    int shown = 0;
    for (auto it = entries.rbegin(); it != entries.rend(); ++it, ++shown) {
      ImGui::PushID(it->id.c_str());
      auto found = history.thumbnails.find(it->id);
      if (found == history.thumbnails.end() && !loaded_one) {
        loaded_one = true;
        auto loaded = load_thumbnail_mosaic(history.store->thumbnail_path(*it), kThumbnailCells);
        found = history.thumbnails.emplace(it->id, loaded.ok() ? std::move(*loaded) : ThumbnailMosaic{}).first;
      }
      if (found != history.thumbnails.end() && found->second.cells > 0)
        draw_mosaic(found->second, ImGui::GetCursorScreenPos(), kThumbnailSize);
      ImGui::Dummy(ImVec2(kThumbnailSize, kThumbnailSize));
      ImGui::SameLine();
      char line[200];
      // Latency-demo runs say which variant they were.
      const std::string run = it->settings.value("run", std::string("generate"));
      const std::string prompt = fitted_to_width(it->prompt, ImGui::GetContentRegionAvail().x);
      std::snprintf(line, sizeof line, "%s\nseed %llu\n%.1f s%s%s", prompt.c_str(),
                    static_cast<unsigned long long>(it->seed), it->timings.total_ms / 1000.0,
                    run == "generate" ? "" : ", ", run == "generate" ? "" : run.c_str());
      ImGui::PushTextWrapPos(0.f);
      if (ImGui::Selectable(line, false, 0, ImVec2(0, kThumbnailSize))) chosen = *it;
      ImGui::PopTextWrapPos();
      remember_item(app, "history-" + std::to_string(shown));
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s\n%s\n%lld faces, first token %.1f ms, TPOT %.2f ms\nthumbnail: %s", it->prompt.c_str(),
                          it->created.c_str(),
                          static_cast<long long>(it->faces), it->timings.time_to_first_token_ms,
                          it->timings.mean_tpot_ms, history.store->thumbnail_path(*it).c_str());
      if (ImGui::BeginPopupContextItem()) {
        if (ImGui::MenuItem("Delete")) removed = it->id;
        ImGui::EndPopup();
      }
      ImGui::PopID();
    }
    if (chosen && !app.worker.busy()) {
      if (app.restore_changes_settings(*chosen)) {
        history.pending_restore = *chosen;
        history.open_restore_question = true;
      } else {
        app.restore_history(*chosen, true);
      }
    }
    if (removed) {
      history.thumbnails.erase(*removed);
      Status status = history.store->remove(*removed);
      if (!status.ok()) app.log_error("history: " + status.error().to_string());
    }
  }
  draw_restore_question(app);
  ImGui::End();
}

}  // namespace cubeforge::app
