#!/usr/bin/env bash
# Configures and builds cubeforge into build/ (Release). Extra arguments go to
# the CMake configure step, e.g. tools/build.sh -DCUBEFORGE_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${CUBEFORGE_BUILD_DIR:-build}
# A first configure turns on unity builds: each target's sources compile in
# batches, so the heavy headers they share (JSON, GoogleTest) are compiled once
# per batch instead of once per file. A later configure keeps what is cached.
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON "$@"
elif [ $# -gt 0 ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
fi
cmake --build "$build_dir" --parallel "${CUBEFORGE_JOBS:-$(nproc)}"
