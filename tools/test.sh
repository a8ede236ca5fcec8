#!/usr/bin/env bash
# Sets up, builds and runs every test suite (CTest). Vulkan and app tests run
# on Mesa's software rasteriser under a virtual X server, so no GPU or display
# is needed; CUDA tests skip themselves when no GPU is present. The whole
# suite then repeats the `cpu` tests and a short generate under AddressSanitizer
# and UndefinedBehaviorSanitizer in a build of their own (tools/sanitize.sh;
# CUBEFORGE_SKIP_SANITIZE=1 leaves it out).
# Extra arguments go to ctest, e.g. tools/test.sh -L cpu (then without the sanitizer run).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
build_dir=${CUBEFORGE_BUILD_DIR:-build}
ctest_args=(--test-dir "$build_dir" --output-on-failure --timeout 900 -j "$(nproc)" "$@")
if [ -z "${DISPLAY:-}" ] && command -v xvfb-run >/dev/null; then
  xvfb-run -a -s "-screen 0 1280x1024x24" ctest "${ctest_args[@]}"
else
  ctest "${ctest_args[@]}"
fi
if [ $# -eq 0 ] && [ -z "${CUBEFORGE_SKIP_SANITIZE:-}" ]; then
  tools/sanitize.sh
fi
