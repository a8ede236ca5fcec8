#!/usr/bin/env bash
# One prepared check for the GPU machine (an H200 with nvcc, CMake, ninja and
# PyTorch, but no network and no display): configures a Release build for
# sm_90 into build-device/, builds it, runs the `cuda` and `vulkan` test
# labels (Vulkan offscreen, on the machine's own driver), the CUDA benchmarks
# and, when they exist, the command-line decode and viewport benchmarks; writes summary.txt
# and at most six logs under "$OUT" (./device-out when OUT is unset). Every
# stage has a time limit, logs, and lets the next stage run even when it fails;
# the whole check ends within 8 minutes (CUBEFORGE_DEVICE_CHECK_SECONDS).
#
# The machine lacks the Debian packages the project builds against. Fetch
# them once on a development machine with network (they are git-ignored and
# travel with the working tree, 64 MiB at most):
#   tools/device-check.sh fetch
# which fills .gl/ with the Vulkan/EGL loaders (unpacked onto / there, as the
# machine's notes prescribe) and .deps/ with build dependencies (unpacked into
# a private prefix, never onto /, and seen by CMake through CMAKE_PREFIX_PATH).
set -uo pipefail
cd "$(dirname "$0")/.."
root_dir=$PWD

# ---------------------------------------------------------------- fetch mode
if [ "${1:-}" = "fetch" ]; then
  set -e
  exclude=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$exclude")"
  for ignored in /.gl/ /.deps/; do
    grep -qxF "$ignored" "$exclude" 2>/dev/null || echo "$ignored" >> "$exclude"
  done
  mkdir -p .gl .deps /tmp/cubeforge-apt/partial
  apt_options=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/cubeforge-apt)
  apt-get "${apt_options[@]}" update -qq
  (cd .gl && apt-get "${apt_options[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
  # Build dependencies from tools/setup.sh, less the toolchain and the
  # software-rendering test runners, plus the runtime libraries they need.
  mapfile -t wanted < <(sed -n '/^packages=(/,/^)/p' tools/setup.sh | grep -v '^\s*#' | tr ' ()' '\n\n\n' |
    grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vxE 'packages|build-essential|cmake|ninja-build|clang|libclang-rt-[0-9]+-dev|xvfb|xauth|mesa-vulkan-drivers|vulkan-validationlayers|googletest')
  # Closure over hard dependencies, without what every Linux image already has.
  set -f  # the names below are patterns for grep, not for the shell
  base_packages=(
    libc6 libc-bin libgcc-s1 'libstdc\+\+6' 'libstdc\+\+-[0-9]+-dev' libc6-dev libc-dev-bin linux-libc-dev
    libcrypt1 libcrypt-dev zlib1g libzstd1 liblzma5 libbz2-1.0 libtinfo6 libselinux1 libpcre2-8-0
    libgcc-[0-9]+-dev gcc-[0-9]+.* cpp.* 'g\+\+.*' libnsl.* libtirpc.* debconf.* dpkg perl.* python3.* tar
    coreutils sensible-utils libsemanage.* libaudit.* libcap.* libbsd0 libmd0 libffi8 libexpat1 libssl3
    libgmp10 libmpfr6 libmpc3 libisl23 libgomp1 libatomic1 libquadmath0 libitm1 libasan8 liblsan0 libtsan2
    libubsan1 libhwasan0 binutils.* libbinutils libctf.* libgprofng0 libjansson4 libsframe1 libdebuginfod.*
    libelf1 libdw1 libcc1-0 libllvm.* libz3-.* libgl1-mesa-dri libegl-mesa0 libglx-mesa0 libglapi-mesa
    libgbm1 libdrm.* libsensors.* libpciaccess0 libxcb-dri.* libxshmfence1 libwayland-server0
    libopenblas0-openmp libopenblas0-serial libopenblas-openmp-dev libopenblas-serial-dev libperl.*
    libpython3.* libicu.* libxml2 install-info mailcap media-types mime-support libgdbm.* libdb5.3
    readline-common libreadline.* libedit2 libncursesw6 libsqlite3-0 libgssapi-krb5-2 libk5crypto3 libkrb5.*
    libkeyutils1 libcom-err2 libacl1 libuuid1 xkb-data xorg-sgml-doctools
  )
  base="^($(IFS='|'; echo "${base_packages[*]}"))\$"
  set +f
  mapfile -t closure < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
      --no-replaces --no-enhances "${wanted[@]}" | grep -v '^ ' | grep -v '^<' | sed 's/:amd64$//' | sort -u |
    grep -vE "$base")
  (cd .deps && apt-get "${apt_options[@]}" download "${closure[@]}")
  du -sh .gl .deps
  echo "device-check: fetched ${#closure[@]} build packages into .deps/ and the loaders into .gl/;" \
       "carry .gl and .deps to the GPU machine"
  exit 0
fi

# ---------------------------------------------------------------- check mode
OUT=${OUT:-$root_dir/device-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
summary=$OUT/summary.txt
: > "$summary"
started=$(date +%s)
budget=${CUBEFORGE_DEVICE_CHECK_SECONDS:-470}
build_dir=${CUBEFORGE_DEVICE_BUILD_DIR:-build-device}
jobs=$(nproc 2>/dev/null || echo 8)

note() { echo "$*" | tee -a "$summary"; }
seconds_left() { echo $(( budget - ($(date +%s) - started) )); }

# stage NAME LOG LIMIT COMMAND...: runs COMMAND under a time limit (cut to what
# is left of the budget), appending its output to LOG and one line to the summary.
stage() {
  local name=$1 log=$2 limit=$3
  shift 3
  local left
  left=$(( $(seconds_left) - 10 ))
  if [ "$left" -lt 15 ]; then
    note "$name: skipped (no time left)"
    return 124
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local begin rc
  begin=$(date +%s)
  echo "=== $name ($(date -u +%H:%M:%S), limit ${limit}s): $*" >> "$OUT/$log"
  timeout --kill-after=5 "$limit" "$@" >> "$OUT/$log" 2>&1
  rc=$?
  local took=$(( $(date +%s) - begin ))
  case $rc in
    0) note "$name: ok (${took}s)" ;;
    124|137) note "$name: TIMED OUT after ${took}s (see $log)" ;;
    *) note "$name: FAILED, exit $rc (${took}s, see $log)" ;;
  esac
  return $rc
}

note "cubeforge device check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

# 1. What the machine is.
environment() {
  uname -a
  nvidia-smi || true
  nvcc --version || /usr/local/cuda/bin/nvcc --version || true
  cmake --version | head -1
  ninja --version
  c++ --version | head -1
  echo "cpu cores: $jobs"
  ldconfig -p | grep -E 'libvulkan|libEGL' || echo "no Vulkan/EGL loader in the linker cache"
}
stage environment env.log 30 bash -c "$(declare -f environment); jobs=$jobs; environment"
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
note "gpu: ${gpu:-none found by nvidia-smi (CUDA tests will skip)}"

# 2. Carried packages: loaders onto / (root only), build dependencies into a prefix.
deps_prefix=/tmp/cubeforge-deps
unpack() {
  if ldconfig -p | grep -q 'libvulkan\.so\.1' && ldconfig -p | grep -q 'libEGL\.so\.1'; then
    echo "the machine has Vulkan and EGL loaders: .gl/ is not unpacked"
  elif compgen -G ".gl/*.deb" > /dev/null; then
    if [ "$(id -u)" -eq 0 ]; then
      for f in .gl/*.deb; do dpkg -x "$f" / || echo "could not unpack $f"; done
      ldconfig
    else
      echo "not root: the loaders in .gl/ are not unpacked"
    fi
  else
    echo "no .gl/*.deb: using the machine's own Vulkan loader, if any"
  fi
  if compgen -G ".deps/*.deb" > /dev/null; then
    mkdir -p "$deps_prefix"
    for f in .deps/*.deb; do dpkg -x "$f" "$deps_prefix" || echo "could not unpack $f"; done
    echo "unpacked $(ls .deps/*.deb | wc -l) build packages into $deps_prefix"
  else
    echo "no .deps/*.deb: relying on the machine's own development packages"
  fi
}
stage packages env.log 60 bash -c "$(declare -f unpack); deps_prefix=$deps_prefix; unpack"

cmake_args=(-S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
            -DCUBEFORGE_FUZZ=OFF)
multiarch=x86_64-linux-gnu
if [ -d "$deps_prefix/usr" ]; then
  # OpenBLAS keeps its libraries in a subfolder that Debian's alternatives
  # would link into place (dpkg -x runs no maintainer scripts).
  cmake_args+=("-DCMAKE_PREFIX_PATH=$deps_prefix/usr;$deps_prefix/usr/lib/$multiarch/cmake"
               "-DCMAKE_LIBRARY_PATH=$deps_prefix/usr/lib/$multiarch/openblas-pthread"
               "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$deps_prefix/usr/lib/$multiarch"
               "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,-rpath-link,$deps_prefix/usr/lib/$multiarch")
  # Headers found by no CMake package (tiny_gltf.h, glm) come after the machine's own.
  cmake_args+=("-DCMAKE_CXX_FLAGS=-idirafter $deps_prefix/usr/include" "-DCMAKE_C_FLAGS=-idirafter $deps_prefix/usr/include")
  export PATH=$PATH:$deps_prefix/usr/bin  # glslc, pkg-config: after the machine's own
  # pkg-config answers from the prefix only, with its paths moved into it.
  export PKG_CONFIG_LIBDIR=$deps_prefix/usr/lib/$multiarch/pkgconfig:$deps_prefix/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$deps_prefix
  export CUBEFORGE_DEPS_LIBRARY_PATH=$deps_prefix/usr/lib/$multiarch:$deps_prefix/usr/lib/$multiarch/openblas-pthread
fi
# Vulkan and EGL on the NVIDIA driver, offscreen.
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
if [ -z "${__EGL_VENDOR_LIBRARY_FILENAMES:-}" ] && [ -f /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json ]; then
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
unset DISPLAY

# Test programs find the carried libraries through the library path; only they
# get it, so the machine's own tools keep their own libraries.
with_deps=(env "LD_LIBRARY_PATH=${CUBEFORGE_DEPS_LIBRARY_PATH:-}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")

# 3. Configure (the whole project, else without the Vulkan engine and app).
configured=no
# (The carried pkg-config and glslc need the carried libraries, hence with_deps.)
if stage configure build.log 90 "${with_deps[@]}" cmake "${cmake_args[@]}"; then
  configured=yes
else
  rm -rf "$build_dir/CMakeCache.txt"
  if stage "configure without Vulkan" build.log 60 "${with_deps[@]}" cmake "${cmake_args[@]}" -DCUBEFORGE_VULKAN=OFF; then
    configured=yes
  fi
fi

# 4. Build everything that builds (-k 0), then make sure the CUDA tests exist.
if [ "$configured" = yes ]; then
  # gtest discovery runs the test programs at build time: they need the carried libraries too.
  stage build build.log 270 "${with_deps[@]}" cmake --build "$build_dir" --parallel "$jobs" -- -k 0 ||
    stage "build test_cuda alone" build.log 120 "${with_deps[@]}" cmake --build "$build_dir" --parallel "$jobs" --target test_cuda
fi

# 5. Tests, by label; the benchmarks run on their own below.
ctest_summary() {
  grep -E "tests passed|tests failed|No tests were found|Total Test time" "$OUT/$1" | tail -2 | sed "s/^/  $2: /" >> "$summary"
  local skipped
  skipped=$(grep -c "(Skipped)" "$OUT/$1")
  [ "$skipped" -gt 0 ] && echo "  $2: $skipped tests skipped themselves (see $1 for why)" >> "$summary"
  return 0
}
if [ -d "$build_dir" ]; then
  stage "ctest -L cuda" cuda-tests.log 150 "${with_deps[@]}" ctest --test-dir "$build_dir" -L cuda -E 'CudaBench' \
    --output-on-failure --timeout 120 -j 4
  ctest_summary cuda-tests.log cuda
  stage "ctest -L vulkan" vulkan-tests.log 90 "${with_deps[@]}" ctest --test-dir "$build_dir" -L vulkan \
    --output-on-failure --timeout 60
  ctest_summary vulkan-tests.log vulkan

  # 6. Benchmarks.
  if [ -x "$build_dir/tests/cuda/test_cuda" ]; then
    stage "CUDA benchmarks" bench.log 90 "${with_deps[@]}" "$build_dir/tests/cuda/test_cuda" --gtest_filter='CudaBench.*'
  else
    note "CUDA benchmarks: skipped (no $build_dir/tests/cuda/test_cuda)"
  fi
  cli=$build_dir/app/cli/cubeforge-cli
  if [ -x "$cli" ]; then
    stage "cubeforge-cli bench --shape v05" bench.log 90 "${with_deps[@]}" "$cli" bench --shape v05 --json
  else
    note "cubeforge-cli bench: skipped (no $cli)"
  fi
  viewport_bench=$build_dir/app/bench/cubeforge-bench-viewport
  if [ -x "$viewport_bench" ]; then
    stage "cubeforge-bench-viewport" bench.log 60 "${with_deps[@]}" "$viewport_bench"
  else
    note "cubeforge-bench-viewport: skipped (no $viewport_bench)"
  fi
  grep -h '^\[bench\]' "$OUT/bench.log" 2>/dev/null | sed 's/^/  /' >> "$summary"
  grep -h '^{' "$OUT/bench.log" 2>/dev/null | tail -3 | sed 's/^/  cli: /' >> "$summary"
fi

note "total: $(( $(date +%s) - started ))s; logs in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
exit 0
