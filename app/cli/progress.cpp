// Progress line and timing table.
#include "app/cli/progress.h"

#include <unistd.h>

namespace cubeforge::cli {

void ProgressLine::draw(const std::string& text) {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[2K%s", text.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressLine::on_event(const GenerationEvent& e) {
  using Kind = GenerationEvent::Kind;
  const auto now = std::chrono::steady_clock::now();
  switch (e.kind) {
    case Kind::kStageStarted:
      stage_ = stage_name(e.stage);
      draw("[" + stage_ + "]");
      break;
    case Kind::kStageFinished:
      break;
    case Kind::kToken: {
      ++tokens_seen_;
      if (e.decode_step == 0) {
        first_step_tokens_ = tokens_seen_;
        decode_start_ = now;
      }
      const bool last = tokens_seen_ == e.token_count;
      if (!last && now - last_draw_ < std::chrono::milliseconds(50)) return;
      last_draw_ = now;
      const int width = 30;
      const int done = e.token_count > 0 ? tokens_seen_ * width / e.token_count : width;
      std::string bar(size_t(done), '#');
      bar.resize(size_t(width), '.');
      double rate = 0;
      if (e.decode_step > 0) {
        const double seconds = std::chrono::duration<double>(now - decode_start_).count();
        rate = seconds > 0 ? double(tokens_seen_ - first_step_tokens_) / seconds : 0;
      }
      char line[160];
      std::snprintf(line, sizeof line, "[%s] %d/%d tokens  %.1f tok/s  %s", bar.c_str(), tokens_seen_,
                    e.token_count, rate, stage_.c_str());
      draw(line);
      break;
    }
    case Kind::kOccupancyProgress: {
      if (now - last_draw_ < std::chrono::milliseconds(100)) return;
      last_draw_ = now;
      char line[160];
      std::snprintf(line, sizeof line, "[occupancy] %lld / %lld points", (long long)e.points_done,
                    (long long)e.points_planned);
      draw(line);
      break;
    }
  }
}

void ProgressLine::finish() {
  if (drawn_) std::fprintf(stderr, "\r\033[2K");
  drawn_ = false;
}

void print_timing_table(const GenerationResult& r, std::FILE* out) {
  const StageTimings& t = r.timings;
  std::fprintf(out, "%-14s %10s\n", "stage", "ms");
  const std::pair<const char*, double> rows[] = {{"text", t.text_ms},         {"prefill", t.prefill_ms},
                                                 {"decode", t.decode_ms},     {"shape decode", t.shape_decode_ms},
                                                 {"occupancy", t.occupancy_ms}, {"meshing", t.meshing_ms},
                                                 {"cleanup", t.cleanup_ms}};
  for (const auto& [name, ms] : rows) std::fprintf(out, "%-14s %10.1f\n", name, ms);
  std::fprintf(out, "%-14s %10.1f\n", "total", t.total_ms());
  if (!r.tokens.empty())
    std::fprintf(out, "tokens %zu, time to first token %.1f ms, %.1f tokens/s\n", r.tokens.size(),
                 r.time_to_first_token_ms, r.tokens_per_second);
  if (r.decoding.mode != DecodingMode::kSequential)
    std::fprintf(out, "decoding %s: %d model evaluations, %.2f tokens per evaluation\n",
                 decoding_mode_name(r.decoding.mode), r.decoding.model_evaluations,
                 r.decoding.tokens_per_evaluation());
  std::fprintf(out, "mesh: %lld vertices, %lld faces (%lld before cleanup), %lld occupancy points of %lld dense\n",
               (long long)r.stats.vertices, (long long)r.stats.faces, (long long)r.stats.faces_before_cleanup,
               (long long)r.stats.occupancy_points, (long long)r.stats.dense_points);
}

}  // namespace cubeforge::cli
