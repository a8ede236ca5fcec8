// cubeforge-cli: the command-line face of the engine.
#include <cstdio>
#include <new>
#include <vector>

#include "app/cli/commands.h"
#include "inference/core/untrusted_text.h"
#include "inference/cpu/blas_kernels.h"

int main(int argc, char** argv) {
  cubeforge::cpu::reexec_with_matching_blas_kernels(argv);
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
  CLI11_PARSE(app, argc, argv);
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
