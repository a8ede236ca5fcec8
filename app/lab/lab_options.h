// The options every cubeforge-lab command shares, defined once so that each
// means the same wherever it appears:
//   --model DIR              the model folder to measure; left out, the
//                            built-in model (a command that can also measure
//                            random weights of a preset's sizes takes --shape
//                            instead)
//   --prompt TEXT, --prompts FILE
//                            captions: each --prompt, then the lines of the
//                            file (prompt_list.h)
//   --threads N              CPU threads (0: every core)
//   --json                   one JSON object on standard output, in the
//                            envelope every lab command writes (lab_report.h)
// A command takes the ones it uses; the rest of its options are its own.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "app/cli/model_option.h"
#include "app/cli/option_checks.h"
#include "app/cli/prompt_list.h"
#include "inference/cpu/ops.h"

namespace cubeforge::cli {

struct LabOptions {
  std::string model;
  bool model_given = false;  // an empty --model is an error, not the built-in model
  std::vector<std::string> prompts;
  std::string prompts_file;
  int threads = 0;
  bool json = false;
};

// Which of the shared options a command takes.
enum LabOption : unsigned {
  kModelOption = 1u << 0,
  kPromptOptions = 1u << 1,
  kThreadsOption = 1u << 2,
  kJsonOption = 1u << 3,
};

inline constexpr unsigned kAllLabOptions = kModelOption | kPromptOptions | kThreadsOption | kJsonOption;

// Adds the `which` of the shared options to `cmd`, into `options` (which must
// outlive the parse: commands keep theirs in the action's shared state).
// Returns --model's option (nullptr without it), for options that exclude it.
inline CLI::Option* add_lab_options(CLI::App* cmd, LabOptions& options, unsigned which) {
  CLI::Option* model = nullptr;
  if (which & kModelOption)
    model = cmd->add_option_function<std::string>(
        "--model",
        [&options](const std::string& folder) {
          options.model = folder;
          options.model_given = true;
        },
        "Model folder (default: the built-in model)");
  if (which & kPromptOptions) {
    cmd->add_option("--prompt,-p", options.prompts, "A caption (repeatable)");
    cmd->add_option("--prompts", options.prompts_file, "A file of captions, one per line ('#' starts a comment)");
  }
  if (which & kThreadsOption)
    cmd->add_option("--threads", options.threads, "CPU threads (0: every core)")
        ->check(whole_number_in(0, 1024, "0 uses every core"));
  if (which & kJsonOption) cmd->add_flag("--json", options.json, "Print one JSON object");
  return model;
}

// --shape: random weights of a preset's sizes instead of a model folder.
inline CLI::Option* add_shape_option(CLI::App* cmd, std::string& shape, CLI::Option* model, const std::string& help) {
  CLI::Option* option = cmd->add_option("--shape", shape, help)->check(CLI::IsMember({"small", "v01", "v05"}));
  if (model) option->excludes(model);
  return option;
}

// The folder --model names, or the built-in model's; nullopt after saying why.
inline std::optional<std::filesystem::path> lab_model_folder(const LabOptions& options, const char* command) {
  return model_folder_or_report(options.model, options.model_given, command);
}

// The captions of --prompt and --prompts; an error when there are none.
inline Result<std::vector<std::string>> lab_prompts(const LabOptions& options) {
  return prompt_list(options.prompts, options.prompts_file);
}

// Sizes the CPU thread pool as --threads asks.
inline void apply_lab_threads(const LabOptions& options) { cpu::set_thread_count(options.threads); }

}  // namespace cubeforge::cli
