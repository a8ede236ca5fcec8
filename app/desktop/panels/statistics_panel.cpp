// The Live statistics panel: the current shape's connected pieces, token progress, the weights and KV cache the run
// decodes with, the token grid, time to first token, TPOT and tokens/s plots, per-stage times, memory, the cost of
// progressive previews and frame times (the latency demo has its own view).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <vector>

#include "app/desktop/core/data_folder.h"
#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

namespace {

// One cell per token slot, coloured by token id; hover shows the id.
void draw_token_grid(const GenerationProgress& progress) {
  const auto& slots = progress.token_slots();
  if (slots.empty()) return;
  const float cell = 9.f;
  const int fit = std::max(1, static_cast<int>(ImGui::GetContentRegionAvail().x / (cell + 1)));
  const int columns = std::min<int>(std::min(32, fit), static_cast<int>(slots.size()));
  ImVec2 origin = ImGui::GetCursorScreenPos();
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const int rows = (static_cast<int>(slots.size()) + columns - 1) / columns;
  for (size_t i = 0; i < slots.size(); ++i) {
    float x = origin.x + (i % columns) * (cell + 1);
    float y = origin.y + (i / columns) * (cell + 1);
    ImU32 colour = IM_COL32(60, 60, 66, 255);
    if (slots[i] >= 0) {
      // Golden-ratio hue steps keep neighbouring ids apart.
      float hue = std::fmod(slots[i] * 0.61803398875f, 1.f);
      colour = ImColor::HSV(hue, 0.65f, 0.95f);
    }
    draw->AddRectFilled(ImVec2(x, y), ImVec2(x + cell, y + cell), colour);
  }
  ImGui::Dummy(ImVec2(columns * (cell + 1), rows * (cell + 1)));
  if (ImGui::IsItemHovered()) {
    ImVec2 mouse = ImGui::GetIO().MousePos;
    int column = static_cast<int>((mouse.x - origin.x) / (cell + 1));
    int row = static_cast<int>((mouse.y - origin.y) / (cell + 1));
    size_t index = static_cast<size_t>(row * columns + column);
    if (column >= 0 && column < columns && index < slots.size()) {
      if (slots[index] >= 0) ImGui::SetTooltip("token %zu: id %d", index, slots[index]);
      else ImGui::SetTooltip("token %zu: not yet", index);
    }
  }
}

void draw_stage_table(const GenerationProgress& progress) {
  if (!ImGui::BeginTable("stages", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) return;
  for (int s = 0; s < kAppStageCount; ++s) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(app_stage_name(AppStage(s)));
    ImGui::TableNextColumn();
    if (const auto& ms = progress.stage_ms()[s]) ImGui::Text("%.1f ms", *ms);
    else if (progress.current_stage() == AppStage(s)) ImGui::TextUnformatted("running");
    else if (progress.stopped_stage() == AppStage(s))
      ImGui::TextUnformatted(progress.outcome() == RunOutcome::kCancelled ? "cancelled" : "failed");
    else ImGui::TextDisabled("-");
  }
  ImGui::EndTable();
}

void draw_preview_cost(const GenerationState& generation) {
  const PreviewCost& cost = generation.last_preview_cost;
  if (cost.previews == 0 && cost.skipped == 0) return;
  ImGui::TextWrapped("Preview: %d decodes (%d skipped), %.0f ms = %.1f%% of decode", cost.previews, cost.skipped,
                     cost.preview_ms, 100.0 * cost.overhead());
  if (generation.last_decode_ms_without_preview && generation.last_decode_ms_with_preview)
    ImGui::TextWrapped("Decode: %.0f ms with preview, %.0f ms without", *generation.last_decode_ms_with_preview,
                       *generation.last_decode_ms_without_preview);
}

void draw_frame_times(const FrameTimes& frame_times) {
  std::vector<float> frames(frame_times.recent_ms.begin(), frame_times.recent_ms.end());
  FrameTimeSummary recent = summarise(frames);
  // When nothing runs, frames wait for input, so only frames while working say much.
  char label[64];
  std::snprintf(label, sizeof label, "frame %.1f ms (max %.1f)", recent.mean_ms, recent.max_ms);
  ImGui::PlotLines("##frames", frames.data(), static_cast<int>(frames.size()), 0, label, 0.f, 50.f,
                   ImVec2(ImGui::GetContentRegionAvail().x, 40));
  const FrameTimeSummary& generating = frame_times.last_generation;
  if (generating.frames > 0)
    ImGui::TextWrapped("While generating: mean %.1f ms, p95 %.1f ms, max %.1f ms", generating.mean_ms,
                       generating.p95_ms, generating.max_ms);
}

// The current shape's connected pieces, the loose ones among them (under the
// settings' share of the largest piece's volume, mesh_cleanup.h's rule), and
// the choice to leave those out of the view and of exports.
void draw_pieces(App& app) {
  const CurrentShape& current = app.state.current;
  if (current.mesh.empty()) return;
  const AppSettings& settings = app.state.settings;
  const size_t pieces = current.pieces.solid_count();  // a sealed hollow is not a piece
  const int64_t loose = count_loose_pieces(current.pieces, settings.loose_piece_fraction);
  char line[200];
  if (loose == 0)
    std::snprintf(line, sizeof line, "Shape: %zu connected piece%s", pieces, pieces == 1 ? "" : "s");
  else
    std::snprintf(line, sizeof line, "Shape: %zu connected pieces, %lld loose (under %.1f%% of the largest's volume)",
                  pieces, static_cast<long long>(loose), 100.0 * settings.loose_piece_fraction);
  ImGui::TextWrapped("%s", line);
  remember_text(app, "pieces", line);
  AppSettings& choice = app.state.settings;
  ImGui::Checkbox("Remove loose pieces", &choice.remove_loose_pieces);
  remember_item(app, "remove-loose-pieces");
  reason_tooltip("Leave out of the view and of exports the pieces whose volume is under this share of the largest "
                 "piece's; the history keeps the whole shape");
  if (choice.remove_loose_pieces) {
    ImGui::SameLine();
    float percent = choice.loose_piece_fraction * 100.f;
    ImGui::SetNextItemWidth(-1);
    if (ImGui::SliderFloat("##loose-share", &percent, 0.1f, 50.f, "under %.1f%%", ImGuiSliderFlags_Logarithmic))
      choice.loose_piece_fraction = std::clamp(percent, 0.1f, 50.f) / 100.f;
    reason_tooltip("of the largest piece's volume");
  }
}

}  // namespace

void draw_statistics_panel(App& app) {
  const AppState& state = app.state;
  const GenerationProgress& progress = state.generation.progress;
  begin_panel(app, Panel::kStatistics);
  draw_pieces(app);
  const int done = progress.tokens_done(), count = progress.token_count();
  char overlay[64];
  if (progress.outcome() == RunOutcome::kCancelled)
    std::snprintf(overlay, sizeof overlay, "cancelled at %d/%d tokens", done, count);
  else std::snprintf(overlay, sizeof overlay, "%d/%d tokens", done, count);
  ImGui::ProgressBar(count > 0 ? float(done) / count : 0.f, ImVec2(-1, 0), overlay);
  remember_text(app, "token-progress", overlay);
  if (!state.generation.weights.empty()) {
    ImGui::TextWrapped("Weights %s, KV cache %s", state.generation.weights.c_str(), state.generation.kv_cache.c_str());
    remember_item(app, "run-engine-options");
  }
  // Coarse-to-fine adds levels as it goes, so this is the current level's share.
  if (progress.current_stage() == AppStage::kOccupancy)
    ImGui::ProgressBar(static_cast<float>(progress.occupancy_fraction()), ImVec2(-1, 0), "occupancy, this level");
  if (auto ttft = progress.time_to_first_token_ms()) ImGui::Text("Time to first token: %.1f ms", *ttft);
  else ImGui::TextDisabled("Time to first token: -");
  // Titled with the finished run's figures, as the log reports them; while it
  // runs, with the latest token's (one token's rate swings far from the run's).
  const GenerationState& generation = state.generation;
  const auto& tpot = progress.tpot_ms();
  const auto& rate = progress.tokens_per_second();
  char label[64];
  if (generation.run_mean_tpot_ms)
    std::snprintf(label, sizeof label, "TPOT %.2f ms (run mean)", *generation.run_mean_tpot_ms);
  else std::snprintf(label, sizeof label, "TPOT %.2f ms (latest token)", tpot.empty() ? 0.f : tpot.back());
  ImGui::PlotLines("##tpot", tpot.data(), static_cast<int>(tpot.size()), 0, label, 0.f, FLT_MAX,
                   ImVec2(ImGui::GetContentRegionAvail().x, 48));
  remember_text(app, "tpot-plot", label);
  if (generation.run_tokens_per_second)
    std::snprintf(label, sizeof label, "%.1f tokens/s (run)", *generation.run_tokens_per_second);
  else std::snprintf(label, sizeof label, "%.1f tokens/s (latest token)", rate.empty() ? 0.f : rate.back());
  ImGui::PlotLines("##rate", rate.data(), static_cast<int>(rate.size()), 0, label, 0.f, FLT_MAX,
                   ImVec2(ImGui::GetContentRegionAvail().x, 48));
  remember_text(app, "rate-plot", label);
  draw_token_grid(progress);
  draw_stage_table(progress);
  ImGui::Text("Memory (RSS): %.0f MiB", resident_memory_mib());
  draw_preview_cost(state.generation);
  draw_frame_times(state.frames);
  ImGui::End();
}

}  // namespace cubeforge::app
