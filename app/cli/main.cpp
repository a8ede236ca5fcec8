// cubeforge-cli: the command-line face of the engine. What every command
// shares is set up here: a file this run reads is never replaced by one it
// writes (file_io.h), a write past `ulimit -f` is an error rather than a
// signal, and the option parser's messages, which quote the user's values,
// reach the terminal escaped (untrusted_text.h).
#include <cstdio>
#include <iostream>
#include <new>
#include <sstream>
#include <vector>

#include "app/cli/commands.h"
#include "app/cli/interrupt.h"
#include "inference/core/file_io.h"
#include "inference/core/untrusted_text.h"
#include "inference/cpu/blas_kernels.h"

int main(int argc, char** argv) {
  cubeforge::cpu::reexec_with_matching_blas_kernels(argv);
  cubeforge::cli::ignore_file_size_signal();
  cubeforge::protect_inputs_from_writes();
  CLI::App app{"cubeforge: text-to-3D with the Cube 3D model family"};
  app.require_subcommand(1);
  std::vector<cubeforge::cli::Action> actions;
  actions.push_back(cubeforge::cli::add_generate_command(app));
  actions.push_back(cubeforge::cli::add_tokenize_command(app));
  actions.push_back(cubeforge::cli::add_bench_command(app));
  actions.push_back(cubeforge::cli::add_decoding_bench_command(app));
  actions.push_back(cubeforge::cli::add_decoding_compare_command(app));
  actions.push_back(cubeforge::cli::add_occupancy_bench_command(app));
  actions.push_back(cubeforge::cli::add_meshing_bench_command(app));
  actions.push_back(cubeforge::cli::add_trace_diff_command(app));
  actions.push_back(cubeforge::cli::add_quantize_command(app));
  actions.push_back(cubeforge::cli::add_calibrate_kv_command(app));
  actions.push_back(cubeforge::cli::add_compare_command(app));
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
    std::fprintf(stderr,
                 "cubeforge-cli: out of memory; close other programs, lower --resolution, or use a smaller model\n");
    return 1;
  } catch (const std::exception& e) {
    // Errors travel as values; an exception here is a bug, reported rather than aborted on.
    std::fprintf(stderr, "cubeforge-cli: internal error: %s; please report it\n",
                 cubeforge::escape_untrusted(e.what()).c_str());
    return 70;
  }
  return 0;
}
