// The app state's bookkeeping: frame-time summaries, the latency demo's
// summaries and the log. See app_state.h.
#include "app/desktop/app_state.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "inference/core/untrusted_text.h"

namespace cubeforge::app {

FrameTimeSummary summarise(std::vector<float> times) {
  FrameTimeSummary s;
  if (times.empty()) return s;
  s.frames = static_cast<int>(times.size());
  double sum = 0;
  for (float t : times) sum += t;
  s.mean_ms = sum / times.size();
  std::sort(times.begin(), times.end());
  s.p95_ms = times[std::min(times.size() - 1, static_cast<size_t>(std::ceil(0.95 * times.size())) - 1)];
  s.max_ms = times.back();
  return s;
}

float wireframe_opacity(size_t faces, float radius_pixels) {
  if (faces == 0) return 0.9f;
  // About half the faces face the eye, sharing the projected disc.
  const double pixels_per_face = 3.14159265 * double(radius_pixels) * radius_pixels / (0.5 * double(faces));
  const double edge_pixels = std::sqrt(2.0 * pixels_per_face);
  return static_cast<float>(std::clamp((edge_pixels - 2.0) / 10.0, 0.15, 0.9));
}

std::string prompt_for_request(const std::string& prompt) {
  std::string text = prompt;
  for (char& c : text)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  const size_t begin = text.find_first_not_of(' ');
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(' ') + 1 - begin);
}

bool prompt_is_blank(const std::string& prompt) { return prompt_for_request(prompt).empty(); }

PromptCheck shown_prompt_check(const AppState& state) {
  if (!state.model.card) return {};
  const std::string& prompt = state.settings.prompt;
  return check_typed_prompt(*state.model.card, prompt, prompt == state.generation.generated_prompt);
}

namespace {

Spread spread_of_runs(const LatencyDemoState& latency, size_t run,
                      double worker_message::LatencyResult::*value) {
  std::vector<double> samples;
  if (run < latency.measured.size())
    for (const auto& m : latency.measured[run])
      if (m.available) samples.push_back(m.*value);
  return spread_of(std::move(samples));
}

}  // namespace

Spread LatencyDemoState::tpot_ms(size_t run) const {
  return spread_of_runs(*this, run, &worker_message::LatencyResult::mean_tpot_ms);
}

Spread LatencyDemoState::object_ms(size_t run) const {
  return spread_of_runs(*this, run, &worker_message::LatencyResult::total_ms);
}

std::optional<Comparison> LatencyDemoState::tpot_against_baseline(size_t run) const {
  if (run >= runs.size() || runs[run].baseline < 0) return std::nullopt;
  const Spread baseline = tpot_ms(size_t(runs[run].baseline));
  if (baseline.samples == 0) return std::nullopt;
  return compare_to_baseline(baseline, tpot_ms(run));
}

std::optional<Comparison> LatencyDemoState::object_against_baseline(size_t run) const {
  if (run >= runs.size() || runs[run].baseline < 0) return std::nullopt;
  const Spread baseline = object_ms(size_t(runs[run].baseline));
  if (baseline.samples == 0) return std::nullopt;
  return compare_to_baseline(baseline, object_ms(run));
}

std::optional<double> LatencyDemoState::tokens_per_evaluation(size_t run) const {
  if (run >= runs.size() || runs[run].decoding.mode == DecodingMode::kSequential) return std::nullopt;
  const worker_message::LatencyResult* result = last(run);
  if (!result || result->decoding.model_evaluations <= 0) return std::nullopt;
  return result->decoding.tokens_per_evaluation();
}

const worker_message::LatencyResult* LatencyDemoState::last(size_t run) const {
  if (run >= measured.size()) return nullptr;
  for (auto m = measured[run].rbegin(); m != measured[run].rend(); ++m)
    if (m->available) return &*m;
  return nullptr;
}

std::string LatencyDemoState::bar_text(size_t run, bool per_token) const {
  if (run >= runs.size()) return "";
  std::string text = spread_text(per_token ? tpot_ms(run) : object_ms(run));
  if (const auto c = per_token ? tpot_against_baseline(run) : object_against_baseline(run)) {
    const std::string& baseline = runs[size_t(runs[run].baseline)].name;
    switch (c->difference) {
      case Difference::kTooFewRuns: text += ", too few runs to compare"; break;
      case Difference::kWithinNoise: text += ", within noise of " + baseline; break;
      case Difference::kFaster:
      case Difference::kSlower: text += ", " + describe(*c) + " than " + baseline; break;
    }
  }
  if (const auto per_evaluation = tokens_per_evaluation(run)) {
    char line[48];
    std::snprintf(line, sizeof line, "; %.2f tokens per evaluation", *per_evaluation);
    text += line;
  }
  return text;
}

void FrameTimes::add(float frame_ms, bool generating) {
  recent_ms.push_back(frame_ms);
  if (recent_ms.size() > kWindow) recent_ms.pop_front();
  if (generating) while_generating_ms.push_back(frame_ms);
}

void AppLog::add(bool error, const std::string& raw_text) {
  const std::string text = escape_untrusted(raw_text);  // messages quote names and contents of files
  lines.push_back({error, text});
  if (lines.size() > 2000) lines.erase(lines.begin(), lines.begin() + 500);
  if (error) {
    ++errors;
    popup_messages.push_back(text);
    if (popup_messages.size() > 50) popup_messages.erase(popup_messages.begin());
    popup_pending = true;
  }
  const char* tag = error ? "error: " : "";
  if (file) file << tag << text << std::endl;
  std::fprintf(error ? stderr : stdout, "cubeforge: %s%s\n", tag, text.c_str());
}

}  // namespace cubeforge::app
