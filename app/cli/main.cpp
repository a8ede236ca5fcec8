// cubeforge-cli: the product's command line. A prompt to a mesh file
// (generate), a mesh to shape tokens and back (tokenize), and a model folder
// in smaller weights (quantize). Measuring the engine is cubeforge-lab's.
#include "app/cli/commands.h"

int main(int argc, char** argv) {
  using namespace cubeforge::cli;
  return run_program(argc, argv, "cubeforge: text-to-3D with the Cube 3D model family", [](CLI::App& app) {
    return std::vector<Action>{add_generate_command(app), add_tokenize_command(app), add_quantize_command(app)};
  });
}
