// A live one-line progress display on stderr (tokens, tok/s, stage) and the
// final timing table, shared by the generate and tokenize commands.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "inference/pipeline/generation.h"

namespace cubeforge::cli {

class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled) {}
  ~ProgressLine() { finish(); }

  void on_event(const GenerationEvent& e);
  void finish();

 private:
  void draw(const std::string& text);

  bool enabled_;
  bool drawn_ = false;
  std::string stage_ = "starting";
  int tokens_seen_ = 0;  // parallel decoding reports several tokens per step, block diffusion out of order
  int first_step_tokens_ = 0;
  std::chrono::steady_clock::time_point decode_start_{};
  std::chrono::steady_clock::time_point last_draw_{};
};

void print_timing_table(const GenerationResult& result, std::FILE* out);

}  // namespace cubeforge::cli
