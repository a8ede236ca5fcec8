#!/usr/bin/env bash
# Builds cubeforge-cli and the `cpu` test executables with AddressSanitizer and
# UndefinedBehaviorSanitizer (the default compiler, no CUDA or Vulkan; a unity
# build, as tools/build.sh makes) into build-sanitize/, with line tables only
# (-g1: a report's stack still names file and line; full debug information
# makes objects twice the size and the build slower) and the test executables
# unoptimised (the engine's libraries they call keep -O1),
# then runs the `cpu` tests and a short generate and tokenize under them. Any
# report fails the run: memory errors abort, and undefined behaviour (such as
# a misaligned load) is fatal (-fno-sanitize-recover). tools/test.sh runs it
# after the main suite; it also runs alone. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${CUBEFORGE_SANITIZE_BUILD_DIR:-build-sanitize}
sanitizers="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

if [ ! -f "$build_dir/build.ninja" ]; then
  launcher=()
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "${launcher[@]}" \
    -DCMAKE_CXX_FLAGS="$sanitizers" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_UNITY_BUILD=ON -DCUBEFORGE_TEST_CXX_FLAGS=-O0 \
    -DCUBEFORGE_CUDA=OFF -DCUBEFORGE_VULKAN=OFF -DCUBEFORGE_FUZZ=OFF
fi

# The `cpu` label's executables, and the command-line programs they drive.
targets=(cubeforge-cli cubeforge-lab test_core test_options test_tensor test_cpu test_model test_cpu_backend test_text test_sampling
         test_geometry test_planning test_cli test_pipeline test_builtin_model)
cmake --build "$build_dir" --parallel "${CUBEFORGE_JOBS:-$(nproc)}" --target "${targets[@]}"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:check_initialization_order=1
export LSAN_OPTIONS="suppressions=$PWD/tools/lsan-suppressions.txt:print_suppressions=0"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The AVX-512 rerun of the pipeline tests repeats them with other BLAS kernels;
# once is enough to find memory errors.
ctest --test-dir "$build_dir" -L cpu -E skylakex_blas_kernels --output-on-failure --timeout 1800 \
  -j "${CUBEFORGE_JOBS:-$(nproc)}" "$@"

# The tool as a user runs it, end to end on the built-in model.
cli="$build_dir/app/cli/cubeforge-cli"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$cli" generate --prompt "a tall chair" --resolution 6 --out "$scratch/chair.glb" --json > "$scratch/generate.json"
"$cli" tokenize --mesh "$scratch/chair.glb" --resolution 5 --out "$scratch/rebuilt.obj" > "$scratch/tokenize.txt"
echo "sanitize: cpu tests, generate and tokenize ran clean under ASan and UBSan"
