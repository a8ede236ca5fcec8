#!/usr/bin/env bash
# Configures and builds cubeforge into build/ (Release). Extra arguments go to
# the CMake configure step, e.g. tools/build.sh -DCUBEFORGE_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${CUBEFORGE_BUILD_DIR:-build}
if [ ! -f "$build_dir/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
fi
cmake --build "$build_dir" --parallel "${CUBEFORGE_JOBS:-$(nproc)}"
