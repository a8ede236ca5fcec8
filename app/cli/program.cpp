// What every command-line program shares (run_program, commands.h): a file
// this run reads is never replaced by one it writes (file_io.h), a write past
// `ulimit -f` is an error rather than a signal, and the option parser's
// messages, which quote the user's values, reach the terminal escaped
// (untrusted_text.h).
#include <pthread.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <new>
#include <sstream>
#include <string_view>
#include <vector>

#include "app/cli/commands.h"
#include "app/cli/interrupt.h"
#include "inference/core/file_io.h"
#include "inference/core/untrusted_text.h"
#include "inference/cpu/blas_kernels.h"

namespace {

// A process started under a small stack limit (ulimit -s 64) gets that much
// for its main thread, and glibc gives every thread it starts the same by
// default; reading a file, a parser or an importer then ends in SIGSEGV. So
// the command runs on a thread whose stack is sized here, and threads started
// later (the pool's, OpenBLAS's) get at least kThreadStackBytes by default.
// Both are only raised, never lowered.
constexpr size_t kCommandStackBytes = size_t(16) << 20;
constexpr size_t kThreadStackBytes = size_t(8) << 20;

using AddCommands = std::function<std::vector<cubeforge::cli::Action>(CLI::App&)>;

int run_command(int argc, char** argv, const char* description, const AddCommands& add_commands);

struct CommandThread {
  int argc;
  char** argv;
  const char* description;
  const AddCommands* add_commands;
  int exit_code = 0;
};

void* command_thread(void* arg) {
  auto* command = static_cast<CommandThread*>(arg);
  command->exit_code = run_command(command->argc, command->argv, command->description, *command->add_commands);
  return nullptr;
}

void raise_default_thread_stack() {
  pthread_attr_t defaults;
  if (pthread_getattr_default_np(&defaults) != 0) return;
  size_t size = 0;
  if (pthread_attr_getstacksize(&defaults, &size) == 0 && size < kThreadStackBytes &&
      pthread_attr_setstacksize(&defaults, kThreadStackBytes) == 0)
    pthread_setattr_default_np(&defaults);
  pthread_attr_destroy(&defaults);
}

// The command's exit code, run on a thread of its own stack size (or here,
// when no such thread can be started).
int run_on_sized_stack(int argc, char** argv, const char* description, const AddCommands& add_commands) {
  raise_default_thread_stack();
  CommandThread command{argc, argv, description, &add_commands};
  pthread_attr_t attributes;
  pthread_t thread;
  bool started = pthread_attr_init(&attributes) == 0 &&
                 pthread_attr_setstacksize(&attributes, kCommandStackBytes) == 0 &&
                 pthread_create(&thread, &attributes, command_thread, &command) == 0;
  pthread_attr_destroy(&attributes);
  if (!started) return run_command(argc, argv, description, add_commands);
  pthread_join(thread, nullptr);
  return command.exit_code;
}

}  // namespace

namespace cubeforge::cli {

namespace {

bool research_options_shown = false;

// CLI11's own hidden group ("") would also drop the option's name from its
// error messages; the group is left out of the help instead.
class ResearchHelpFormatter : public CLI::Formatter {
 public:
  std::string make_group(std::string group, bool is_positional, std::vector<const CLI::Option*> opts) const override {
    if (group == kResearchGroup && !research_options_shown) return {};
    return CLI::Formatter::make_group(std::move(group), is_positional, std::move(opts));
  }
};

}  // namespace

void show_research_options(bool shown) { research_options_shown = shown; }

std::shared_ptr<CLI::Formatter> research_help_formatter() { return std::make_shared<ResearchHelpFormatter>(); }

int run_program(int argc, char** argv, const char* description, const AddCommands& add_commands) {
  cubeforge::cpu::reexec_with_matching_blas_kernels(argv);
  ignore_file_size_signal();
  cubeforge::protect_inputs_from_writes();
  return run_on_sized_stack(argc, argv, description, add_commands);
}

}  // namespace cubeforge::cli

namespace {

int run_command(int argc, char** argv, const char* description, const AddCommands& add_commands) {
  // `--help-all` is `--help` with the research options shown.
  std::vector<char*> args(argv, argv + argc);
  static char help[] = "--help";
  for (char*& arg : args)
    if (std::string_view(arg) == "--help-all") {
      cubeforge::cli::show_research_options(true);
      arg = help;
    }
  argv = args.data();
  CLI::App app{description};
  app.require_subcommand(1);
  std::vector<cubeforge::cli::Action> actions = add_commands(app);
  const std::string program = cubeforge::escape_untrusted(std::filesystem::path(argv[0]).filename().string());
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help goes out as written; errors quote option values, which may hold anything.
    std::ostringstream err;
    const int code = app.exit(e, std::cout, err);
    std::cerr << cubeforge::escape_untrusted_lines(err.str()) << std::flush;
    return code;
  }
  // Each registered action checks whether its own subcommand was chosen.
  try {
    for (auto& action : actions) {
      if (int code = action(); code >= 0) return code;
    }
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: out of memory; close other programs, lower --resolution, or use a smaller model\n",
                 program.c_str());
    return 1;
  } catch (const std::exception& e) {
    // Errors travel as values; an exception here is a bug, reported rather than aborted on.
    std::fprintf(stderr, "%s: internal error: %s; please report it\n", program.c_str(),
                 cubeforge::escape_untrusted(e.what()).c_str());
    return 70;
  }
  return 0;
}

}  // namespace
