// The subcommands of cubeforge-lab, the measuring program: each registers
// itself on the app and returns the action to run when it is chosen (as the
// product's commands do, app/cli/commands.h). They share one option block
// (lab_options.h) and one JSON report (lab_report.h).
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
// One part each, on inputs of the real sizes (a model folder's part, random
// weights of a preset's, an analytic field, a generated mesh).
Action add_text_encoder_bench_command(CLI::App& app);
Action add_shape_tokenizer_bench_command(CLI::App& app);
Action add_geometry_bench_command(CLI::App& app);
#ifdef CUBEFORGE_LAB_VIEWPORT
Action add_viewport_bench_command(CLI::App& app);  // built with the Vulkan engine only
#endif

}  // namespace cubeforge::cli
