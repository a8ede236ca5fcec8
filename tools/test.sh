#!/usr/bin/env bash
# Sets up, builds and runs every test suite (CTest). Vulkan and app tests run
# on Mesa's software rasteriser, and each test that opens a window gets a
# virtual X server of its own (tests/support/with_display.sh), so no GPU or
# display is needed; CUDA tests skip themselves when no GPU is present. The whole
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
ctest "${ctest_args[@]}"
if [ $# -eq 0 ] && [ -z "${CUBEFORGE_SKIP_SANITIZE:-}" ]; then
  tools/sanitize.sh
fi
