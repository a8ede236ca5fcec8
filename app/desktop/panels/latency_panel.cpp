// The latency demo, a view of its own for an audience: the runs named as they
// happen (no cache, then the KV cache, then what this build adds; the ones it
// cannot do say why), the token grid streaming large, and labelled bars with
// their values for the time per token and the time per object, the object's
// bar split by stage, so the room sees where the time goes: the cache makes
// tokens much cheaper, and what is left is mostly meshing.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

namespace {

// The stages of an object's time, in pipeline order, each with its colour.
struct StagePart {
  const char* name;
  double StageTimings::*ms;
  ImU32 colour;
};
const StagePart kStageParts[] = {
    {"text", &StageTimings::text_ms, IM_COL32(150, 150, 160, 255)},
    {"first token", &StageTimings::prefill_ms, IM_COL32(120, 170, 240, 255)},
    {"tokens", &StageTimings::decode_ms, IM_COL32(70, 130, 230, 255)},
    {"shape decode", &StageTimings::shape_decode_ms, IM_COL32(240, 200, 80, 255)},
    {"occupancy", &StageTimings::occupancy_ms, IM_COL32(235, 120, 60, 255)},
    {"meshing", &StageTimings::meshing_ms, IM_COL32(200, 90, 160, 255)},
    {"cleanup", &StageTimings::cleanup_ms, IM_COL32(120, 200, 120, 255)},
};

std::string ms_text(double ms) {
  char text[32];
  if (ms >= 1000) std::snprintf(text, sizeof text, "%.2f s", ms / 1000);
  else if (ms >= 10) std::snprintf(text, sizeof text, "%.0f ms", ms);
  else std::snprintf(text, sizeof text, "%.2f ms", ms);
  return text;
}

// A horizontal bar per run: its name on the left, the bar, its value on the right.
void draw_bars(const LatencyDemoState& latency, const char* title, double worker_message::LatencyResult::*value,
               bool split_by_stage) {
  ImGui::TextUnformatted(title);
  double largest = 0;
  for (const auto& result : latency.results)
    if (result && result->available) largest = std::max(largest, (*result).*value);
  const float name_width = ImGui::CalcTextSize("KV cache + CUDA graphs").x + 2 * ImGui::GetStyle().ItemSpacing.x;
  const float value_width = ImGui::CalcTextSize("00.00 ms (000x)").x;
  const float bar_room = std::max(40.f, ImGui::GetContentRegionAvail().x - name_width - value_width);
  const float height = ImGui::GetTextLineHeight() * 1.4f;
  const double first = latency.results.empty() || !latency.results[0] ? 0.0 : (*latency.results[0]).*value;
  ImDrawList* draw = ImGui::GetWindowDrawList();
  for (size_t i = 0; i < latency.runs.size(); ++i) {
    const auto& result = latency.results[i];
    ImGui::TextUnformatted(latency.runs[i].name.c_str());
    ImGui::SameLine(name_width);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    if (result && result->available && largest > 0) {
      const double v = (*result).*value;
      const float length = static_cast<float>(bar_room * v / largest);
      if (split_by_stage) {
        float x = origin.x;
        const double total = result->stages.total_ms();
        for (const StagePart& part : kStageParts) {
          const float w = total > 0 ? static_cast<float>(length * (result->stages.*part.ms) / total) : 0.f;
          draw->AddRectFilled(ImVec2(x, origin.y), ImVec2(x + w, origin.y + height), part.colour);
          x += w;
        }
      } else {
        draw->AddRectFilled(origin, ImVec2(origin.x + length, origin.y + height), IM_COL32(70, 130, 230, 255));
      }
      ImGui::Dummy(ImVec2(bar_room, height));
      ImGui::SameLine();
      std::string label = ms_text(v);
      if (i > 0 && first > 0 && v > 0) {
        char faster[32];
        std::snprintf(faster, sizeof faster, " (%.1fx)", first / v);
        label += faster;
      }
      ImGui::TextUnformatted(label.c_str());
    } else if (latency.current == static_cast<int>(i)) {
      ImGui::TextColored(ImVec4(1.f, 0.8f, 0.3f, 1.f), "running now...");
    } else if (!latency.runs[i].unavailable_reason.empty()) {
      ImGui::TextDisabled("not available: %s", latency.runs[i].unavailable_reason.c_str());
    } else if (result && !result->available) {
      ImGui::TextDisabled("did not finish: %s", result->unavailable_reason.c_str());
    } else {
      ImGui::TextDisabled("waiting");
    }
  }
  if (split_by_stage) {
    for (const StagePart& part : kStageParts) {
      const ImVec2 at = ImGui::GetCursorScreenPos();
      const float box = ImGui::GetTextLineHeight() * 0.8f;
      ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(at.x, at.y + 2), ImVec2(at.x + box, at.y + 2 + box),
                                                part.colour);
      ImGui::Dummy(ImVec2(box, box));
      ImGui::SameLine();
      ImGui::TextUnformatted(part.name);
      flow_next(ImGui::CalcTextSize("shape decode").x + box + 16);
    }
    ImGui::NewLine();
  }
}

// The token grid, cells as large as the width allows.
void draw_large_token_grid(const GenerationProgress& progress) {
  const auto& slots = progress.token_slots();
  if (slots.empty()) return;
  const int count = static_cast<int>(slots.size());
  const int columns = std::min(64, count);
  const float cell = std::clamp(ImGui::GetContentRegionAvail().x / columns - 2.f, 4.f, 24.f);
  const int rows = (count + columns - 1) / columns;
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImDrawList* draw = ImGui::GetWindowDrawList();
  for (int i = 0; i < count; ++i) {
    const float x = origin.x + (i % columns) * (cell + 2), y = origin.y + (i / columns) * (cell + 2);
    ImU32 colour = IM_COL32(60, 60, 66, 255);
    if (slots[size_t(i)] >= 0) colour = ImColor::HSV(std::fmod(slots[size_t(i)] * 0.61803398875f, 1.f), 0.65f, 0.95f);
    draw->AddRectFilled(ImVec2(x, y), ImVec2(x + cell, y + cell), colour);
  }
  ImGui::Dummy(ImVec2(columns * (cell + 2), rows * (cell + 2)));
}

// The sentence the numbers say, once both cache runs are in.
void draw_message(const LatencyDemoState& latency) {
  if (latency.results.size() < 2 || !latency.results[0] || !latency.results[1]) return;
  const auto& without = *latency.results[0];
  const auto& with = *latency.results[1];
  if (!without.available || !with.available || with.mean_tpot_ms <= 0 || with.total_ms <= 0) return;
  const double meshing = with.stages.shape_decode_ms + with.stages.occupancy_ms + with.stages.meshing_ms +
                         with.stages.cleanup_ms;
  ImGui::PushTextWrapPos(0.f);
  ImGui::Text("The KV cache makes each token %.0fx faster (TPOT %s -> %s). The whole object is %.1fx faster, "
              "because with the cache %.0f%% of its time is meshing the shape, which the cache does not touch.",
              without.mean_tpot_ms / with.mean_tpot_ms, ms_text(without.mean_tpot_ms).c_str(),
              ms_text(with.mean_tpot_ms).c_str(), without.total_ms / with.total_ms,
              100.0 * meshing / std::max(1.0, with.stages.total_ms()));
  ImGui::PopTextWrapPos();
}

}  // namespace

void draw_latency_panel(App& app) {
  LatencyDemoState& latency = app.state.latency;
  if (!latency.shown) return;
  const Rect& free = app.state.layout.layout.free_view;
  // Over the view and the statistics: the audience watches this, not the object.
  const float right = app.state.layout.panels_hidden ? free.right() : app.state.layout.width - 8.f;
  const ImGuiCond when = app.state.layout.place_panels ? ImGuiCond_Always : ImGuiCond_Appearing;
  ImGui::SetNextWindowPos(ImVec2(free.x, free.y + 8), when);
  ImGui::SetNextWindowSize(ImVec2(right - free.x, free.height - 16), when);
  bool open = true;
  ImGui::Begin("Latency demo", &open, ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoCollapse);
  remember_item(app, "latency-view");
  ImGui::SetWindowFontScale(1.15f);
  ImGui::Text("\"%s\": the same prompt, each run faster where this build can", app.state.settings.prompt.c_str());
  ImGui::Separator();
  for (size_t i = 0; i < latency.runs.size(); ++i) {
    const LatencyRun& run = latency.runs[i];
    const bool now = latency.current == static_cast<int>(i);
    const bool done = latency.results[i].has_value();
    if (now) ImGui::TextColored(ImVec4(1.f, 0.8f, 0.3f, 1.f), "%zu. %s: running now", i + 1, run.name.c_str());
    else if (!run.unavailable_reason.empty()) ImGui::TextDisabled("%zu. %s: not available here", i + 1, run.name.c_str());
    else ImGui::Text("%zu. %s%s", i + 1, run.name.c_str(), done ? ": done" : "");
    ImGui::SameLine();
    ImGui::TextDisabled("(%s)", run.what.c_str());
  }
  if (latency.running) {
    ImGui::Separator();
    const GenerationProgress& progress = app.state.generation.progress;
    ImGui::Text("Tokens: %d of %d", progress.tokens_done(), progress.token_count());
    draw_large_token_grid(progress);
  }
  ImGui::Separator();
  draw_bars(latency, "Time per token (TPOT)", &worker_message::LatencyResult::mean_tpot_ms, false);
  ImGui::Spacing();
  draw_bars(latency, "Time per object, by stage", &worker_message::LatencyResult::total_ms, true);
  ImGui::Separator();
  draw_message(latency);
  ImGui::SetWindowFontScale(1.f);
  ImGui::End();
  if (!open) latency.shown = false;
}

}  // namespace cubeforge::app
