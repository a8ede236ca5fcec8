#!/usr/bin/env bash
# Sets up, builds and runs every test suite (CTest). Vulkan and app tests run
# on Mesa's software rasteriser, and each test that opens a window gets a
# virtual X server of its own (tests/support/with_display.sh), so no GPU or
# display is needed; CUDA tests skip themselves when no GPU is present. The tests
# that read the reference fixture then run again on tests/fixtures/cube3d-alt,
# and the `cpu` tests and a short generate run again under AddressSanitizer and
# UndefinedBehaviorSanitizer in a build of their own (tools/sanitize.sh;
# CUBEFORGE_SKIP_SANITIZE=1 leaves it out).
# Extra arguments go to ctest, e.g. tools/test.sh -L cpu (then without the sanitizer run).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
build_dir=${CUBEFORGE_BUILD_DIR:-build}
ctest_args=(--test-dir "$build_dir" --output-on-failure --timeout 900 -j "$(nproc)" "$@")
ctest "${ctest_args[@]}"
if [ $# -eq 0 ]; then
  # The tests that read the reference fixture (label `oracle`) once more, on the
  # project's second fixture of that layout: other sizes, BF16 weights, a head
  # size of 48 (tests/fixtures/README.md). Nothing a test expects is a fact of
  # one folder.
  CUBEFORGE_ORACLE_DIR="$PWD/tests/fixtures/cube3d-alt" ctest "${ctest_args[@]}" -L oracle
fi
if [ $# -eq 0 ] && [ -z "${CUBEFORGE_SKIP_SANITIZE:-}" ]; then
  tools/sanitize.sh
fi
