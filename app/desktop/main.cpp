// `cubeforge`: the desktop app. See desktop_app.h.
#include <cstdio>
#include <cstring>
#include <string>

#include "app/desktop/desktop_app.h"
#include "inference/cpu/blas_kernels.h"

namespace {

void print_usage() {
  std::printf(
      "usage: cubeforge [--model DIR] [--prompt TEXT] [--data-dir DIR] [--size WxH] [--script FILE]\n"
      "  --model DIR     model folder to load at start (default: the last one used, else the built-in model)\n"
      "  --prompt TEXT   prompt to start with\n"
      "  --data-dir DIR  settings, log and history (default: $CUBEFORGE_DATA_DIR,\n"
      "                  else $XDG_DATA_HOME/cubeforge, else ~/.local/share/cubeforge)\n"
      "  --size WxH      window size in pixels\n"
      "  --script FILE   run commands from FILE (model, prompt, set, generate, latency, cancel,\n"
      "                  wait, idle, export, screenshot, quit, click, drag, key, type, resize,\n"
      "                  reset-layout, dump), one per line\n");
}

}  // namespace

int main(int argc, char** argv) {
  cubeforge::cpu::reexec_with_matching_blas_kernels(argv);
  cubeforge::app::LaunchOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "cubeforge: %s needs a value\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      print_usage();
      return 0;
    } else if (arg == "--script") {
      options.script = value("--script");
    } else if (arg == "--data-dir") {
      options.data_folder = value("--data-dir");
    } else if (arg == "--model") {
      options.model_folder = value("--model");
    } else if (arg == "--prompt") {
      options.prompt = value("--prompt");
    } else if (arg == "--size") {
      const char* size = value("--size");
      if (std::sscanf(size, "%dx%d", &options.width, &options.height) != 2 || options.width < 64 ||
          options.height < 64) {
        std::fprintf(stderr, "cubeforge: --size takes WIDTHxHEIGHT (at least 64x64), not '%s'\n", size);
        return 2;
      }
    } else {
      std::fprintf(stderr, "cubeforge: unknown argument '%s'\n", arg.c_str());
      print_usage();
      return 2;
    }
  }
  return cubeforge::app::run_desktop_app(options);
}
