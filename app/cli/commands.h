// The subcommands of cubeforge-cli, the product's command line (generate,
// tokenize, quantize; the measuring commands are cubeforge-lab's,
// app/lab/commands.h); each registers itself on the app and returns the
// action to run when it is chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <vector>

namespace cubeforge::cli {

using Action = std::function<int()>;

// Options for measuring and research (KV forms, budgets and ranks, parallel
// decoding's knobs, latent selection, traces) are in a help group of their
// own, which a command's default help leaves out and `--help-all` shows.
inline constexpr const char* kResearchGroup = "Research options";
void show_research_options(bool shown);
// The help formatter of a command with research options: it leaves their
// group out unless --help-all asked for it.
std::shared_ptr<CLI::Formatter> research_help_formatter();
// `option` in the research group when `research`, else as it is.
inline CLI::Option* in_research_group(CLI::Option* option, bool research) {
  return research ? option->group(kResearchGroup) : option;
}

Action add_generate_command(CLI::App& app);
Action add_tokenize_command(CLI::App& app);
Action add_quantize_command(CLI::App& app);

// Runs a command-line program: what every command shares is set up (a file
// this run reads is never replaced by one it writes, a write past `ulimit -f`
// is an error rather than a signal, the parser's messages reach the terminal
// escaped, the command runs on a thread with room on its stack), then the
// commands `add_commands` registers are parsed and the chosen one runs.
// Returns the exit code.
int run_program(int argc, char** argv, const char* description,
                const std::function<std::vector<Action>(CLI::App&)>& add_commands);

}  // namespace cubeforge::cli
