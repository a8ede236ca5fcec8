// cubeforge-lab: measuring the engine, apart from the product's command line
// (as llama.cpp keeps llama-bench apart from llama-cli). Benchmarks of the
// GPT, parallel decoding, the occupancy field and meshing, and of one part
// each (the text encoder, the shape tokenizer, coarse-to-fine evaluation on an
// analytic field, the viewport); comparisons of engine options and decodings
// against the exact run; KV calibration; trace comparison against the
// reference.
#include "app/lab/commands.h"

int main(int argc, char** argv) {
  using namespace cubeforge::cli;
  return run_program(argc, argv, "cubeforge-lab: measuring the cubeforge engine", [](CLI::App& app) {
    std::vector<Action> commands{add_bench_command(app),
                                 add_decoding_bench_command(app),
                                 add_decoding_compare_command(app),
                                 add_occupancy_bench_command(app),
                                 add_meshing_bench_command(app),
                                 add_trace_diff_command(app),
                                 add_calibrate_kv_command(app),
                                 add_compare_command(app),
                                 add_text_encoder_bench_command(app),
                                 add_shape_tokenizer_bench_command(app),
                                 add_geometry_bench_command(app)};
#ifdef CUBEFORGE_LAB_VIEWPORT
    commands.push_back(add_viewport_bench_command(app));
#endif
    return commands;
  });
}
