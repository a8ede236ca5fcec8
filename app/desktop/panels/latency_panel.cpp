// The latency demo, a view of its own for an audience: the runs named as they
// happen (no cache, then the KV cache, then what this build adds; the ones it
// cannot do say why), the token grid streaming large, and labelled bars for
// the time per token and the time per object's tokens.
//
// The machine is shared and noisy, so each run is measured several times
// (the worker alternates the runs round by round); every bar shows the
// median with a whisker over the range, and its text names the run it is
// compared with and says "within noise" unless the difference stands outside
// the spread of both (core/latency_statistics.h). The bars lie on a log
// scale with labelled ticks, so that a run hundreds of times faster keeps a
// visible bar. Parallel runs say how many tokens each model evaluation gave:
// about one means no fewer evaluations than the KV cache's. The demo meshes
// once, coarsely, and says so: it measures decoding. With a block-diffusion
// model loaded, the token-by-token runs decode the same prompt with the
// built-in autoregressive model, so that the two stand side by side.
//
// A decoding selector chooses the parallel decoding the demo ends with (exact
// parallel decoding, or block diffusion at a confidence threshold). The token
// grid colours each slot by the model evaluation that chose it, so slots
// filled in one step share a colour: large for the run in progress, small for
// each finished run. A table compares the runs' weights and KV cache, tokens
// per evaluation and times side by side, wrapping to the view's width. A
// smaller KV cache chosen in the settings is a run of its own beside the
// exact one.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

namespace {

const ImU32 kBarColour = IM_COL32(70, 130, 230, 255);
const ImU32 kSpreadColour = IM_COL32(235, 235, 245, 255);
const ImU32 kGridColour = IM_COL32(255, 255, 255, 40);
const ImVec4 kRunningColour(1.f, 0.8f, 0.3f, 1.f);

// Text that wraps at the view's right edge rather than run past it.
void wrapped_disabled(const std::string& text) {
  ImGui::PushTextWrapPos(0.f);
  ImGui::TextDisabled("%s", text.c_str());
  ImGui::PopTextWrapPos();
}

// What a run's bar row says when it has no measurement yet.
void draw_missing_bar(const LatencyDemoState& latency, size_t i) {
  if (latency.current == static_cast<int>(i)) {
    ImGui::PushTextWrapPos(0.f);
    ImGui::TextColored(kRunningColour, "running now (%d of %d)...", latency.current_repeat + 1, latency.repeats);
    ImGui::PopTextWrapPos();
  } else if (!latency.runs[i].unavailable_reason.empty()) {
    wrapped_disabled("not available: " + latency.runs[i].unavailable_reason);
  } else if (!latency.not_run[i].empty()) {
    wrapped_disabled("did not run: " + latency.not_run[i]);
  } else {
    ImGui::TextDisabled("waiting");
  }
}

// One bar per run on a log axis: its name and what the numbers say on one
// line, then the bar to the median with a whisker over the range; the axis's
// ticks are faint lines through every bar, labelled below them.
void draw_bars(App& app, const LatencyDemoState& latency, const char* title, const char* what, bool per_token) {
  ImGui::TextUnformatted(title);
  ImGui::SameLine();
  wrapped_disabled(what);
  std::vector<Spread> spreads;
  double smallest = 0, largest = 0;
  for (size_t i = 0; i < latency.runs.size(); ++i) {
    spreads.push_back(per_token ? latency.tpot_ms(i) : latency.object_ms(i));
    const Spread& s = spreads.back();
    if (s.samples == 0 || !(s.min > 0)) continue;
    smallest = smallest > 0 ? std::min(smallest, s.min) : s.min;
    largest = std::max(largest, s.max);
  }
  const LogAxis axis = log_axis_for(smallest > 0 ? smallest : 1, largest > 0 ? largest : 1);
  const float indent = ImGui::GetFontSize();
  const float room = std::max(40.f, ImGui::GetContentRegionAvail().x - 2 * indent);
  const float height = ImGui::GetTextLineHeight() * 1.1f;
  ImDrawList* draw = ImGui::GetWindowDrawList();
  float top = -1, left = 0;
  auto x_of = [&](double value) { return left + static_cast<float>(axis.position(value)) * room; };
  const std::string which = per_token ? "tpot" : "object";
  for (size_t i = 0; i < latency.runs.size(); ++i) {
    ImGui::TextUnformatted(latency.runs[i].name.c_str());
    ImGui::SameLine();
    if (spreads[i].samples == 0) {
      draw_missing_bar(latency, i);
      continue;
    }
    wrapped_disabled(latency.bar_text(i, per_token));
    ImGui::Indent(indent);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    if (top < 0) top = origin.y;
    left = origin.x;
    const Spread& s = spreads[i];
    const float end = std::max(x_of(s.median), left + 2.f);
    draw->AddRectFilled(origin, ImVec2(end, origin.y + height), kBarColour);
    // The whisker: the range of the run's measurements.
    const float mid = origin.y + height / 2, low = x_of(s.min), high = x_of(s.max);
    draw->AddLine(ImVec2(low, mid), ImVec2(high, mid), kSpreadColour, 2.f);
    draw->AddLine(ImVec2(low, origin.y + 2), ImVec2(low, origin.y + height - 2), kSpreadColour, 2.f);
    draw->AddLine(ImVec2(high, origin.y + 2), ImVec2(high, origin.y + height - 2), kSpreadColour, 2.f);
    // The bar's own extent, for scripts and tests: how wide the audience sees it.
    ImGui::Dummy(ImVec2(end - left, height));
    remember_item(app, "latency-" + which + "-bar-" + std::to_string(i));
    ImGui::SameLine(0.f, 0.f);
    ImGui::Dummy(ImVec2(std::max(1.f, room - (end - left)), height));
    ImGui::Unindent(indent);
  }
  if (top < 0) return;
  // The axis: grid lines through the bars, the ticks' labels below them.
  ImGui::Indent(indent);
  const ImVec2 at = ImGui::GetCursorScreenPos();
  left = at.x;
  float last_label_end = -1e9f;
  for (double tick : axis.ticks()) {
    const float x = x_of(tick);
    draw->AddLine(ImVec2(x, top), ImVec2(x, at.y + 4), kGridColour);
    const std::string label = tick_label(tick);
    const float width = ImGui::CalcTextSize(label.c_str()).x;
    const float label_x = std::clamp(x - width / 2, left, left + room - width);
    if (label_x < last_label_end + 6) continue;  // no label over its neighbour
    draw->AddText(ImVec2(label_x, at.y + 4), ImGui::GetColorU32(ImGuiCol_TextDisabled), label.c_str());
    last_label_end = label_x + width;
  }
  ImGui::Dummy(ImVec2(room, ImGui::GetTextLineHeight() + 6));
  remember_item(app, "latency-" + which + "-axis");
  ImGui::Unindent(indent);
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
  char line[256];
  std::snprintf(line, sizeof line, "%s, run %d of %d: %d of %d tokens in %d model evaluations (one colour per evaluation)",
                name, latency.current_repeat + 1, latency.repeats, progress.tokens_done(), progress.token_count(),
                last_step + 1);
  ImGui::TextWrapped("%s", line);
  draw_token_steps(steps, ImGui::GetContentRegionAvail().x, 24.f);
}


// The runs side by side, as wide as the view and no wider: each cell wraps.
// The weights and KV cache each decoded with, tokens per model evaluation,
// and the time per token and per object's tokens with their verdicts.
void draw_decoding_table(const LatencyDemoState& latency) {
  const char* const headers[] = {"Run", "Weights, KV cache", "Tokens per evaluation", "Time per token",
                                 "Time per object"};
  const float weights[] = {1.3f, 1.f, 0.8f, 2.f, 2.f};
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("decodings", 5, flags)) return;
  for (int c = 0; c < 5; ++c) ImGui::TableSetupColumn(headers[c], ImGuiTableColumnFlags_WidthStretch, weights[c]);
  // Headers that wrap, where TableHeadersRow would cut them off.
  ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
  for (const char* header : headers) {
    ImGui::TableNextColumn();
    ImGui::TextWrapped("%s", header);
  }
  for (size_t i = 0; i < latency.runs.size(); ++i) {
    const worker_message::LatencyResult* result = latency.last(i);
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextWrapped("%s", latency.runs[i].name.c_str());
    if (!result) {
      ImGui::TableNextColumn();
      ImGui::TextDisabled("-");
      continue;
    }
    ImGui::TableNextColumn();
    ImGui::TextWrapped("%s; %s", result->weights.c_str(), result->kv_cache.c_str());
    ImGui::TableNextColumn();
    ImGui::TextWrapped("%.2f (%d evaluations)", result->decoding.tokens_per_evaluation(),
                       result->decoding.model_evaluations);
    ImGui::TableNextColumn();
    ImGui::TextWrapped("%s", latency.bar_text(i, true).c_str());
    ImGui::TableNextColumn();
    ImGui::TextWrapped("%s", latency.bar_text(i, false).c_str());
  }
  ImGui::EndTable();
}

// Each finished run's tokens, one colour per model evaluation: sequential
// decoding is one slot per colour, parallel decoding joins the slots one
// evaluation filled.
void draw_run_token_steps(const LatencyDemoState& latency) {
  float name_width = 0;
  for (const LatencyRun& run : latency.runs) name_width = std::max(name_width, ImGui::CalcTextSize(run.name.c_str()).x);
  name_width = std::min(name_width + 2 * ImGui::GetStyle().ItemSpacing.x, ImGui::GetContentRegionAvail().x / 3);
  bool title = false;
  for (size_t i = 0; i < latency.runs.size(); ++i) {
    const worker_message::LatencyResult* result = latency.last(i);
    if (!result || result->token_steps.empty()) continue;
    if (!title) {
      ImGui::TextWrapped("Which model evaluation chose each token (one colour each; joined slots: one evaluation)");
      title = true;
    }
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + name_width - ImGui::GetStyle().ItemSpacing.x);
    ImGui::TextUnformatted(latency.runs[i].name.c_str());
    ImGui::PopTextWrapPos();
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
    // 0 leaves it to the model: a block-diffusion model loaded says its own;
    // beside an autoregressive one, the block-diffusion model decides.
    const bool models_own = settings.diffusion_threshold == 0.f;
    float shown = by_blocks ? summary->threshold_for(settings.diffusion_threshold) : settings.diffusion_threshold;
    const char* format = !models_own ? "%.2f" : by_blocks ? "%.2f, the model's" : "the model's";
    ImGui::SetNextItemWidth(ImGui::CalcTextSize("0.00, the model's").x + 2 * ImGui::GetFrameHeight());
    if (ImGui::SliderFloat("Threshold", &shown, 0.5f, 0.99f, format)) settings.diffusion_threshold = shown;
    remember_item(app, "latency-threshold");
  }
  ImGui::SameLine();
  if (ImGui::Button("Run again")) app.start_latency_demo();
  remember_item(app, "latency-run");
  ImGui::EndDisabled();
}

// What parallel decoding did, once a parallel run is in: how many tokens each

// What parallel decoding did, once a parallel run is in: how many tokens each
// model evaluation gave. About one token per evaluation is as many
// evaluations as the KV cache makes: no gain from decoding in parallel.
void draw_parallel_message(const LatencyDemoState& latency) {
  for (size_t i = 0; i < latency.runs.size(); ++i) {
    const worker_message::LatencyResult* result = latency.last(i);
    if (latency.runs[i].decoding.mode == DecodingMode::kSequential || !result) continue;
    const DecodingStats& stats = result->decoding;
    if (stats.model_evaluations <= 0) continue;
    std::string line;
    char text[320];
    std::snprintf(text, sizeof text, "%s: %d tokens in %d model evaluations, %.2f tokens per evaluation%s.",
                  latency.runs[i].name.c_str(), stats.tokens(), stats.model_evaluations,
                  stats.tokens_per_evaluation(),
                  stats.mode == DecodingMode::kJacobi ? ", the tokens of sequential decoding" : "");
    line = text;
    if (stats.tokens_per_evaluation() < 1.05)
      line += " About one token per evaluation: as many evaluations as token-by-token decoding, so any "
              "difference in time is not parallel decoding's.";
    ImGui::TextWrapped("%s", line.c_str());
  }
}

// The sentence the numbers say, once both cache runs are in: a speed-up only
// where it stands outside the noise.
void draw_message(const LatencyDemoState& latency) {
  if (latency.runs.size() < 2 || !latency.last(0) || !latency.last(1)) return;
  const auto tokens = latency.tpot_against_baseline(1);
  const auto object = latency.object_against_baseline(1);
  if (!tokens || !object) return;
  auto said = [](const Comparison& c) {
    return c.difference == Difference::kWithinNoise ? std::string("no faster beyond the noise")
                                                    : c.difference == Difference::kTooFewRuns ? std::string("not yet compared (too few runs)")
                                                                                              : describe(c);
  };
  ImGui::TextWrapped("With the KV cache each token is %s (median %s -> %s) and the object's tokens are %s (%s -> %s), "
                     "over %d runs each.",
                     said(*tokens).c_str(), duration_text(latency.tpot_ms(0).median).c_str(),
                     duration_text(latency.tpot_ms(1).median).c_str(), said(*object).c_str(),
                     duration_text(latency.object_ms(0).median).c_str(),
                     duration_text(latency.object_ms(1).median).c_str(), latency.tpot_ms(1).samples);
}

// The demo's one meshing and its whole time.
void draw_meshing_and_duration(const LatencyDemoState& latency) {
  if (latency.meshed) {
    const worker_message::LatencyMeshed& m = *latency.meshed;
    const std::string& name = latency.runs[size_t(m.index)].name;
    if (m.problem.empty())
      ImGui::TextWrapped("Meshed once, the last run's tokens (%s) at resolution %d: %lld faces in %s. Meshing is the "
                         "same work for every run, so it is not compared; this shape goes neither to the view nor "
                         "to the history.",
                         name.c_str(), m.resolution, static_cast<long long>(m.faces), duration_text(m.ms).c_str());
    else wrapped_disabled("Meshing the last run's tokens failed: " + m.problem);
  }
  if (latency.wall_ms) wrapped_disabled("The whole demo took " + duration_text(*latency.wall_ms) + ".");
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
  ImGui::Begin(kLatencyViewTitle, &open, ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoCollapse);
  remember_item(app, "latency-view");
  ImGui::SetWindowFontScale(1.15f);
  ImGui::TextWrapped("\"%s\": the same prompt, greedy, each run %d times, taking turns. Bars: the median, the "
                     "whisker the range; a difference is a speed-up only outside the range of both runs.",
                     app.state.settings.prompt.c_str(), latency.repeats);
  draw_decoding_selector(app);
  ImGui::Separator();
  for (size_t i = 0; i < latency.runs.size(); ++i) {
    const LatencyRun& run = latency.runs[i];
    const bool now = latency.current == static_cast<int>(i);
    const int done = static_cast<int>(latency.measured[i].size());
    char head[160];
    if (!run.unavailable_reason.empty() || !latency.not_run[i].empty())
      std::snprintf(head, sizeof head, "%zu. %s: not available here", i + 1, run.name.c_str());
    else if (now) std::snprintf(head, sizeof head, "%zu. %s: running now (%d of %d)", i + 1, run.name.c_str(),
                                latency.current_repeat + 1, latency.repeats);
    else std::snprintf(head, sizeof head, "%zu. %s: %d of %d runs", i + 1, run.name.c_str(), done, latency.repeats);
    if (now) ImGui::TextColored(kRunningColour, "%s", head);
    else if (!run.unavailable_reason.empty()) ImGui::TextDisabled("%s", head);
    else ImGui::TextUnformatted(head);
    ImGui::SameLine();
    wrapped_disabled("(" + run.what + ")");
  }
  if (latency.running) {
    ImGui::Separator();
    draw_live_token_grid(latency, app.state.generation.progress);
  }
  ImGui::Separator();
  draw_bars(app, latency, "Time per token (TPOT)", "(log scale)", true);
  ImGui::Spacing();
  draw_bars(app, latency, "Time per object", "(the prompt to the last token: text, first token, tokens; log scale)",
            false);
  ImGui::Spacing();
  draw_decoding_table(latency);
  ImGui::Spacing();
  draw_run_token_steps(latency);
  ImGui::Separator();
  draw_message(latency);
  draw_parallel_message(latency);
  draw_meshing_and_duration(latency);
  ImGui::SetWindowFontScale(1.f);
  ImGui::End();
  if (!open) latency.shown = false;
}

}  // namespace cubeforge::app
