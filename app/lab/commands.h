// The subcommands of cubeforge-lab, the measuring program: each registers
// itself on the app and returns the action to run when it is chosen (as the
// product's commands do, app/cli/commands.h).
#pragma once

#include "app/cli/commands.h"

namespace cubeforge::cli {

Action add_bench_command(CLI::App& app);
Action add_decoding_bench_command(CLI::App& app);
Action add_decoding_compare_command(CLI::App& app);
Action add_meshing_bench_command(CLI::App& app);
Action add_occupancy_bench_command(CLI::App& app);
Action add_trace_diff_command(CLI::App& app);
Action add_calibrate_kv_command(CLI::App& app);
Action add_compare_command(CLI::App& app);

}  // namespace cubeforge::cli
