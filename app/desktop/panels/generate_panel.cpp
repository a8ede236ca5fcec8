// The Generate panel: the prompt, Generate / Cancel / Try 4 seeds, the model
// load's progress or outcome, then the settings (settings_panel.cpp).
#include <algorithm>
#include <cstdio>

#include "app/desktop/core/option_labels.h"
#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

namespace {

// The run bar's overlay: how far while it runs, how it ended once it has (a
// cancelled run's percentage would read as a run stuck there).
std::string run_bar_text(RunOutcome outcome, float fraction) {
  switch (outcome) {
    case RunOutcome::kDone: return "Done";
    case RunOutcome::kCancelled: return "Cancelled";
    case RunOutcome::kFailed: return "Failed";
    case RunOutcome::kRunning: break;
  }
  char text[16];
  std::snprintf(text, sizeof text, "%.0f%%", 100.f * fraction);
  return text;
}

// A cancelled run's last preview, on screen: keep it as the current shape
// (export then writes it), or go back to the shape before the run.
void draw_offered_preview(App& app) {
  const std::optional<OfferedPreview>& offered = app.state.generation.offered_preview;
  if (!offered) return;
  const std::string shown = "Showing the cancelled run's " + offered->what + "; export writes it once kept";
  ImGui::TextWrapped("%s", shown.c_str());
  remember_text(app, "offered-preview", shown);
  if (ImGui::Button("Keep the preview")) app.keep_offered_preview();
  remember_item(app, "keep-preview");
  reason_tooltip("Make it the current shape: the view keeps it and export writes it");
  const bool nothing_before = app.state.current.mesh.empty();
  const char* back = nothing_before ? "Discard it" : "Back to the previous shape";
  flow_next(button_width(back));
  if (ImGui::Button(back)) app.discard_offered_preview();
  remember_item(app, "discard-preview");
}

// The run in words and one bar that only moves forward: which pass, about how
// long is left, what the view shows meanwhile; how the last run ended.
void draw_run_status(App& app) {
  GenerationState& generation = app.state.generation;
  GenerationProgress& progress = generation.progress;
  if (!generation.generating && progress.outcome() == RunOutcome::kRunning) return;  // nothing run yet
  const double elapsed_ms = ms_between(generation.run_started, Clock::now());
  std::string status = progress.status(elapsed_ms);
  if (progress.outcome() == RunOutcome::kCancelled && !generation.offered_preview && !app.state.current.mesh.empty())
    status += "; the previous shape stays";
  if (progress.outcome() == RunOutcome::kFailed) ImGui::TextColored(kErrorTextColour, "%s", status.c_str());
  else ImGui::TextWrapped("%s", status.c_str());
  remember_text(app, "run-status", status);
  // A stopped run's bar is empty (fraction() is 0), its overlay says how it ended.
  const float fraction = progress.fraction(elapsed_ms);
  const std::string overlay = run_bar_text(progress.outcome(), fraction);
  ImGui::ProgressBar(fraction, ImVec2(-1, 0), overlay.c_str());
  remember_item(app, "run-progress");
  remember_text(app, "run-progress", overlay);
  if (!generation.preview_shown.empty()) ImGui::TextDisabled("Showing the %s", generation.preview_shown.c_str());
  draw_offered_preview(app);
}

// What the loaded model knows, next to the prompt: a plain warning when the
// prompt has words it was never taught, completions from its words, and its
// example prompts. The warning and the completions have room kept for them,
// so the panel below does not move as they come and go while typing.
void draw_prompt_help(App& app) {
  const std::optional<ModelCard>& card = app.state.model.card;
  if (!card) return;
  std::string& prompt = app.state.settings.prompt;
  const PromptCheck check = shown_prompt_check(app.state);
  // Room for the longest usual warning (an unknown word and every object the
  // model knows), or for this one where it is longer.
  const float wrap = ImGui::GetContentRegionAvail().x;
  const std::string longest = check_prompt(*card, "xxxxxxxxxx").message;
  const float room = std::max(ImGui::CalcTextSize(longest.c_str(), nullptr, false, wrap).y,
                              ImGui::CalcTextSize(check.message.c_str(), nullptr, false, wrap).y);
  ImGui::BeginChild("prompt-check", ImVec2(-1, room), false, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoNav);
  if (!check.message.empty()) {
    const ImVec4 colour = check.names_a_category ? ImVec4(0.95f, 0.8f, 0.4f, 1.f) : kErrorTextColour;
    ImGui::PushStyleColor(ImGuiCol_Text, colour);
    ImGui::TextWrapped("%s", check.message.c_str());
    ImGui::PopStyleColor();
    remember_item(app, "prompt-check");
  }
  ImGui::EndChild();
  remember_text(app, "prompt-check", check.message);
  // One row of completions, as many as fit; an empty row when there are none.
  const std::vector<std::string> completions = complete_word(*card, prompt);
  ImGui::BeginGroup();
  ImGui::Dummy(ImVec2(0, ImGui::GetTextLineHeight()));
  const float row_end = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  for (size_t i = 0; i < completions.size(); ++i) {
    const float width = button_width(completions[i].c_str());
    if (ImGui::GetItemRectMax().x + ImGui::GetStyle().ItemSpacing.x + width > row_end) break;
    ImGui::SameLine(0.f, i == 0 ? 0.f : -1.f);
    ImGui::PushID(static_cast<int>(i));
    if (ImGui::SmallButton(completions[i].c_str())) prompt = apply_completion(prompt, completions[i]);
    ImGui::PopID();
    remember_item(app, "complete-" + std::to_string(i));
  }
  ImGui::EndGroup();
  if (!card->examples.empty()) {
    ImGui::SetNextItemWidth(-1);
    if (ImGui::BeginCombo("##examples", "Examples this model knows")) {
      for (const std::string& example : card->examples)
        if (ImGui::Selectable(example.c_str())) prompt = example;
      ImGui::Separator();
      ImGui::TextDisabled("Objects:");
      for (const std::string& category : card->categories)
        if (ImGui::Selectable(category.c_str())) prompt = "a " + category;
      ImGui::EndCombo();
    }
    remember_item(app, "examples");
    reason_tooltip(card->description);
  }
}

// The prompt box's keys, as in web tools: Enter asks for Generate and
// Shift+Enter breaks the line (the multiline box would break it for both).
// A line break pasted from the clipboard stays.
int prompt_key_filter(ImGuiInputTextCallbackData* data) {
  if (data->EventChar != '\n' || ImGui::GetIO().KeyShift) return 0;
  if (!ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Enter)) &&
      !ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_KeyPadEnter)))
    return 0;
  *static_cast<bool*>(data->UserData) = true;
  return 1;  // the character is dropped
}

}  // namespace

void draw_generate_panel(App& app) {
  AppState& state = app.state;
  begin_panel(app, Panel::kGenerate);
  const bool busy = app.worker.busy();
  ImGui::TextWrapped("Prompt (Enter generates, Shift+Enter breaks the line)");
  bool enter = false;  // set by prompt_key_filter
  // Ctrl+Enter also generates (the box returns true for it, as it was told).
  const bool ctrl_enter = ImGui::InputTextMultiline(
      "##prompt", &state.settings.prompt, ImVec2(-1, ImGui::GetTextLineHeight() * 4),
      ImGuiInputTextFlags_EnterReturnsTrue | ImGuiInputTextFlags_CallbackCharFilter, prompt_key_filter, &enter);
  enter |= ctrl_enter;
  remember_item(app, "prompt");
  // Generate and the other runs of the prompt, with why not when they cannot
  // start: the app's reasons first, then the engine's for these settings and
  // this model (a block-diffusion model samples no candidates).
  const std::string why_not = app.why_not_generate();
  auto engine_refuses = [&](const GenerationRequest& request) -> std::string {
    if (!why_not.empty()) return why_not;
    const Status answer = app.worker.can_run(request);
    return answer.ok() ? "" : for_creator(answer.error());
  };
  const GenerationRequest asked = app.request_from_settings();
  const std::string why_not_generate = engine_refuses(asked);
  const std::string why_not_candidates = engine_refuses(candidate_request(asked, 0));
  if (enter && why_not_generate.empty()) app.start_generation();
  ImGui::BeginDisabled(!why_not_generate.empty());
  if (ImGui::Button("Generate")) app.start_generation();
  remember_item(app, "generate");
  remember_refusal(app, "generate", why_not_generate);
  ImGui::EndDisabled();
  reason_tooltip(why_not_generate);
  remember_text(app, "generate-disabled", why_not_generate);
  flow_next(button_width("Cancel"));
  ImGui::BeginDisabled(!busy);
  if (ImGui::Button("Cancel")) app.worker.cancel();
  remember_item(app, "cancel");
  ImGui::EndDisabled();
  flow_next(button_width("Try 4 seeds"));
  ImGui::BeginDisabled(!why_not_candidates.empty());
  if (ImGui::Button("Try 4 seeds")) app.start_candidates(4);
  ImGui::EndDisabled();
  remember_item(app, "candidates");
  remember_refusal(app, "candidates", why_not_candidates);
  reason_tooltip(why_not_candidates.empty()
                     ? "Four seeds of this prompt side by side (sampled, at low detail): pick one, then refine or "
                       "export it"
                     : why_not_candidates);

  draw_prompt_help(app);
  draw_run_status(app);

  const ModelState& model = state.model;
  if (!model.loading_folder.empty()) {
    if (model.loading_weights.empty() || model.loading_weights == "stored")
      ImGui::TextWrapped("Loading %s", model.loading_folder.c_str());
    else
      ImGui::TextWrapped("Loading %s, converting its weights to %s", model.loading_folder.c_str(),
                         model.loading_weights.c_str());
    ImGui::ProgressBar(static_cast<float>(model.load_fraction), ImVec2(-1, 0), model.load_step.c_str());
  } else if (!model.status.empty()) {
    ImGui::TextWrapped("%s", model.status.c_str());
    reason_tooltip(model.status_detail);
  }
  ImGui::Separator();
  draw_settings(app);
  ImGui::End();
}

}  // namespace cubeforge::app
