// The subcommands of cubeforge-cli; each registers itself on the app and
// returns the action to run when it is chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace cubeforge::cli {

using Action = std::function<int()>;

Action add_bench_command(CLI::App& app);
Action add_decoding_bench_command(CLI::App& app);
Action add_decoding_compare_command(CLI::App& app);
Action add_meshing_bench_command(CLI::App& app);
Action add_occupancy_bench_command(CLI::App& app);
Action add_generate_command(CLI::App& app);
Action add_tokenize_command(CLI::App& app);
Action add_trace_diff_command(CLI::App& app);
Action add_quantize_command(CLI::App& app);
Action add_calibrate_kv_command(CLI::App& app);
Action add_compare_command(CLI::App& app);

}  // namespace cubeforge::cli
