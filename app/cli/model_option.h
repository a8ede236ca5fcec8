// What the generate and tokenize commands share: resolving --model (the
// given folder, else the built-in one, else how to assemble a model folder),
// checking --out before any long work, fitting the thread count into a limit
// on address space, and printing errors and JSON safely (untrusted text
// escaped, see inference/core/untrusted_text.h).
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/option_flags.h"
#include "inference/core/file_io.h"
#include "inference/core/untrusted_text.h"
#include "inference/cpu/ops.h"
#include "inference/pipeline/cube_model.h"
#include "inference/pipeline/generation.h"

namespace cubeforge::cli {

// "generate: --kv-budget: invalid argument: …" when the error names an
// option (its flag), else "generate: …".
inline void print_error(const char* command, const Error& error) {
  if (auto option = error_option(error))
    std::fprintf(stderr, "%s: %s: %s\n", command, flag_for(*option), error.to_string().c_str());
  else
    std::fprintf(stderr, "%s: %s\n", command, error.to_string().c_str());
}

// The exit status of a failed run: 2 when an option cannot be honoured as
// given (a value refused, or a file it names missing: a usage error), 1
// otherwise (the machine or the model).
inline int exit_status_of(const Error& error) {
  const bool usage = error.code == ErrorCode::kInvalidArgument || error.code == ErrorCode::kNotFound;
  return error_option(error) && usage ? 2 : 1;
}

// The folder --model names; an empty --model is an error, not the built-in model.
inline std::optional<std::filesystem::path> model_folder_or_report(const std::string& given, bool given_on_command_line,
                                                                   const char* command) {
  if (given_on_command_line && given.empty()) {
    std::fprintf(stderr, "%s: --model is empty; give a model folder, or leave --model out to use the built-in model\n",
                 command);
    return std::nullopt;
  }
  std::filesystem::path folder = given.empty() ? default_model_folder() : std::filesystem::path(given);
  if (folder.empty()) {
    std::fprintf(stderr, "%s: no model folder given and no built-in model found; pass --model DIR. %s\n", command,
                 kModelFolderHelp);
    return std::nullopt;
  }
  return folder;
}

// `weights`: the format the GPT decodes with (weight_formats.h).
inline std::optional<CubeModel> load_model_or_report(const std::filesystem::path& folder, const char* command,
                                                     const WeightOptions& weights = {}) {
  auto model = CubeModel::load(folder, {}, weights);
  if (!model.ok()) {
    print_error(command, model.error());
    return std::nullopt;
  }
  return std::move(*model);
}

// The rules --out is written by (see file_io.h): a read-only file is replaced
// only with --force.
inline WriteOptions output_write_options(bool force) {
  WriteOptions options;
  options.replace_read_only = force;
  options.read_only_hint = "pass --force to replace it, or choose another name";
  return options;
}

// False (after saying why) when `out` cannot be written: checked before any
// long work so a typo in the path costs nothing.
inline bool output_writable(const std::string& out, bool force, const char* command) {
  auto target = resolve_write_target(out, output_write_options(force));
  if (target.ok()) return true;
  print_error(command, target.error());
  return false;
}

// Sets the thread count (0: every core), fewer under a limit on address space
// that cannot hold more threads' buffers. False (after saying why) when not
// even one thread's run fits.
inline bool set_threads_within_address_space(int requested, const std::filesystem::path& model_folder,
                                             int resolution, bool coarse_to_fine, const char* command) {
  cpu::set_thread_count(requested);
  auto fitted = threads_within_address_space(cpu::thread_count(), model_folder, resolution, coarse_to_fine);
  if (!fitted.ok()) {
    print_error(command, fitted.error());
    return false;
  }
  if (*fitted < cpu::thread_count()) {
    std::fprintf(stderr, "%s: note: using %d thread(s); the limit on address space (ulimit -v) leaves no room for "
                 "more threads' work buffers\n", command, *fitted);
    cpu::set_thread_count(*fitted);
  }
  return true;
}

// One line of JSON, valid whatever bytes the strings in it held.
inline std::string json_line(const nlohmann::json& report) {
  return report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace cubeforge::cli
