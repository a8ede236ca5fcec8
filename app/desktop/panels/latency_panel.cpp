// The latency demo, a view of its own for an audience: the runs named as they
// happen (no cache, then the KV cache, then what this build adds; the ones it
// cannot do say why), the token grid streaming large, and labelled bars with
// their values for the time per token and the time per object, the object's
// bar split by stage, so the room sees where the time goes: the cache makes
// tokens much cheaper, and what is left is mostly meshing.
//
// A decoding selector chooses the parallel decoding the demo ends with (exact
// parallel decoding, or block diffusion at a confidence threshold). The token
// grid colours each slot by the model evaluation that chose it, so slots
// filled in one step share a colour: large for the run in progress, small for
// each finished run in a table that compares the runs' weights and KV cache,
// model evaluations, tokens per evaluation and times side by side. A smaller
// KV cache chosen in the settings is a run of its own beside the exact one.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

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
  float name_width = ImGui::CalcTextSize("KV cache + CUDA graphs").x;
  for (const LatencyRun& run : latency.runs) name_width = std::max(name_width, ImGui::CalcTextSize(run.name.c_str()).x);
  name_width += 2 * ImGui::GetStyle().ItemSpacing.x;
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

// The colour of model evaluation `step`: neighbouring evaluations lie far
// apart in hue, so slots of one colour were filled by one evaluation.
ImU32 step_colour(int step) { return ImColor::HSV(std::fmod(step * 0.61803398875f, 1.f), 0.65f, 0.95f); }

// Token slots in rows of up to 64, cells as large as `width` allows up to
// `largest_cell`, each coloured by the evaluation that chose it (grey: none
// yet); neighbours chosen by one evaluation are joined into one bar.
void draw_token_steps(const std::vector<int>& steps, float width, float largest_cell) {
  if (steps.empty()) return;
  const int count = static_cast<int>(steps.size());
  const int columns = std::min(64, count);
  const float gap = 2.f;
  const float cell = std::clamp(width / columns - gap, 2.f, largest_cell);
  const int rows = (count + columns - 1) / columns;
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  for (int i = 0; i < count; ++i) {
    const float x = origin.x + (i % columns) * (cell + gap), y = origin.y + (i / columns) * (cell + gap);
    const int step = steps[size_t(i)];
    const bool joined = step >= 0 && i % columns > 0 && steps[size_t(i - 1)] == step;
    draw->AddRectFilled(ImVec2(joined ? x - gap : x, y), ImVec2(x + cell, y + cell),
                        step >= 0 ? step_colour(step) : IM_COL32(60, 60, 66, 255));
  }
  ImGui::Dummy(ImVec2(columns * (cell + gap), rows * (cell + gap)));
}

// The run in progress: its tokens as they land, large.
void draw_live_token_grid(const LatencyDemoState& latency, const GenerationProgress& progress) {
  const auto& steps = progress.token_steps();
  if (steps.empty()) return;
  int last_step = -1;
  for (int step : steps) last_step = std::max(last_step, step);
  const char* name = latency.current >= 0 ? latency.runs[size_t(latency.current)].name.c_str() : "";
  ImGui::Text("%s: %d of %d tokens in %d model evaluations (one colour per evaluation)", name, progress.tokens_done(),
              progress.token_count(), last_step + 1);
  draw_token_steps(steps, ImGui::GetContentRegionAvail().x, 24.f);
}

// The runs side by side: the weights and KV cache each decoded with, model
// evaluations, tokens per evaluation, time per token and per object.
void draw_decoding_table(const LatencyDemoState& latency) {
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("decodings", 7, flags)) return;
  // A KV cache with a budget and a rank wraps in its column rather than widen the table.
  const float kv_width = ImGui::CalcTextSize("bf16, budget 1024").x;
  for (const char* column : {"Run", "Weights", "KV cache", "Model evaluations", "Tokens per evaluation",
                             "Time per token", "Time per object"})
    ImGui::TableSetupColumn(column, column == std::string_view("KV cache") ? ImGuiTableColumnFlags_WidthFixed : 0,
                            column == std::string_view("KV cache") ? kv_width : 0.f);
  ImGui::TableHeadersRow();
  for (size_t i = 0; i < latency.runs.size(); ++i) {
    const auto& result = latency.results[i];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(latency.runs[i].name.c_str());
    if (!result || !result->available) {
      ImGui::TableNextColumn();
      ImGui::TextDisabled("-");
      continue;
    }
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(result->weights.c_str());
    ImGui::TableNextColumn();
    ImGui::PushTextWrapPos(0.f);
    ImGui::TextUnformatted(result->kv_cache.c_str());
    ImGui::PopTextWrapPos();
    ImGui::TableNextColumn();
    ImGui::Text("%d", result->decoding.model_evaluations);
    ImGui::TableNextColumn();
    ImGui::Text("%.2f", result->decoding.tokens_per_evaluation());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(ms_text(result->mean_tpot_ms).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(ms_text(result->total_ms).c_str());
  }
  ImGui::EndTable();
}

// Each finished run's tokens, one colour per model evaluation: sequential
// decoding is one slot per colour, parallel decoding joins the slots one
// evaluation filled.
void draw_run_token_steps(const LatencyDemoState& latency) {
  float name_width = 0;
  for (const LatencyRun& run : latency.runs) name_width = std::max(name_width, ImGui::CalcTextSize(run.name.c_str()).x);
  name_width += 2 * ImGui::GetStyle().ItemSpacing.x;
  bool title = false;
  for (size_t i = 0; i < latency.runs.size(); ++i) {
    const auto& result = latency.results[i];
    if (!result || !result->available || result->token_steps.empty()) continue;
    if (!title) {
      ImGui::TextUnformatted("Which model evaluation chose each token (one colour each; joined slots: one evaluation)");
      title = true;
    }
    ImGui::TextUnformatted(latency.runs[i].name.c_str());
    ImGui::SameLine(name_width);
    // A whole Cube shape (1024 tokens) in small cells, so that every run stays in view.
    draw_token_steps(result->token_steps, ImGui::GetContentRegionAvail().x, result->token_steps.size() > 256 ? 5.f : 14.f);
  }
}

// What the demo ends with: exact parallel decoding or block diffusion at a
// threshold, or the cache runs alone; "Run again" starts it with the choice. A
// block-diffusion model decodes only by blocks: then the threshold is the
// only choice.
void draw_decoding_selector(App& app) {
  AppSettings& settings = app.state.settings;
  const char* const names[] = {"sequential", "exact parallel", "block diffusion"};
  const DecodingMode modes[] = {DecodingMode::kSequential, DecodingMode::kJacobi, DecodingMode::kDiffusion};
  const auto summary = app.worker.model_summary();
  const bool by_blocks = summary && summary->block_diffusion;
  int chosen = 1;
  for (int i = 0; i < 3; ++i)
    if (settings.latency_decoding == decoding_mode_name(modes[i])) chosen = i;
  if (by_blocks) chosen = 2;
  ImGui::BeginDisabled(app.state.latency.running);
  ImGui::BeginDisabled(by_blocks);
  ImGui::SetNextItemWidth(ImGui::CalcTextSize("block diffusion").x + 3 * ImGui::GetFrameHeight());
  if (ImGui::Combo("Decoding", &chosen, names, 3)) settings.latency_decoding = decoding_mode_name(modes[chosen]);
  remember_item(app, "latency-decoding");
  ImGui::EndDisabled();
  if (modes[chosen] == DecodingMode::kDiffusion) {
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ImGui::CalcTextSize("0.000").x * 4);
    ImGui::SliderFloat("Threshold", &settings.diffusion_threshold, 0.5f, 0.99f, "%.2f");
    remember_item(app, "latency-threshold");
  }
  ImGui::SameLine();
  if (ImGui::Button("Run again")) app.start_latency_demo();
  remember_item(app, "latency-run");
  ImGui::EndDisabled();
}

// What parallel decoding did, once a parallel run is in: how many tokens each
// model evaluation gave.
void draw_parallel_message(const LatencyDemoState& latency) {
  for (size_t i = 0; i < latency.runs.size(); ++i) {
    const auto& result = latency.results[i];
    if (latency.runs[i].decoding.mode == DecodingMode::kSequential || !result || !result->available) continue;
    const DecodingStats& stats = result->decoding;
    if (stats.model_evaluations <= 0) continue;
    ImGui::PushTextWrapPos(0.f);
    ImGui::Text("%s: %d tokens in %d model evaluations, %.2f tokens per evaluation%s.",
                latency.runs[i].name.c_str(), stats.tokens(), stats.model_evaluations, stats.tokens_per_evaluation(),
                stats.mode == DecodingMode::kJacobi ? ", the tokens of sequential decoding" : "");
    ImGui::PopTextWrapPos();
  }
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
  draw_decoding_selector(app);
  ImGui::Separator();
  for (size_t i = 0; i < latency.runs.size(); ++i) {
    const LatencyRun& run = latency.runs[i];
    const bool now = latency.current == static_cast<int>(i);
    const bool done = latency.results[i].has_value();
    if (now) ImGui::TextColored(ImVec4(1.f, 0.8f, 0.3f, 1.f), "%zu. %s: running now", i + 1, run.name.c_str());
    else if (!run.unavailable_reason.empty()) ImGui::TextDisabled("%zu. %s: not available here", i + 1, run.name.c_str());
    else ImGui::Text("%zu. %s%s", i + 1, run.name.c_str(), done ? ": done" : "");
    ImGui::SameLine();
    ImGui::PushTextWrapPos(0.f);
    ImGui::TextDisabled("(%s)", run.what.c_str());
    ImGui::PopTextWrapPos();
  }
  if (latency.running) {
    ImGui::Separator();
    draw_live_token_grid(latency, app.state.generation.progress);
  }
  ImGui::Separator();
  draw_bars(latency, "Time per token (TPOT)", &worker_message::LatencyResult::mean_tpot_ms, false);
  ImGui::Spacing();
  draw_bars(latency, "Time per object, by stage", &worker_message::LatencyResult::total_ms, true);
  ImGui::Spacing();
  draw_decoding_table(latency);
  ImGui::Spacing();
  draw_run_token_steps(latency);
  ImGui::Separator();
  draw_message(latency);
  draw_parallel_message(latency);
  ImGui::SetWindowFontScale(1.f);
  ImGui::End();
  if (!open) latency.shown = false;
}

}  // namespace cubeforge::app
