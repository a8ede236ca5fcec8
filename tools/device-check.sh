#!/usr/bin/env bash
# One prepared check for the GPU machine (an H200 with nvcc, CMake, ninja and
# PyTorch, 16 cores, but no network and no display), within 8 minutes. It
# writes summary.txt and at most seven logs under "$OUT" (./device-out when
# OUT is unset); every stage has a time limit, logs, and lets the next stage
# run even when it fails. The CUDA results come first:
#
#   stage                                   limit   what it gives
#   environment, carried packages             45 s  GPU, driver, toolkit; loaders, build deps, validation layers
#   configure                                 50 s  the whole project (else the kernels alone: CUDA and
#                                                   GoogleTest only, and the project without Vulkan)
#   kernels: build test_cuda_kernels         120 s  kernels + CUDA runtime only; ptxas registers and spills
#   kernels: tests                            45 s  every kernel family against its CPU reference, graphs
#   backend: build test_cuda, cubeforge-cli  110 s  the CUDA token backend and the command-line tool
#   backend: tests                            45 s  the CUDA session against the CPU backend (fixture, built-in model)
#   benchmarks                               155 s  bandwidth and v0.5-shaped decode steps; bf16 cache agreement;
#                                                   cubeforge-cli bench --backend cuda in all three ablation
#                                                   modes, small / v05 / the built-in model; v05 in Q8 and Q4
#                                                   and with an int8 KV cache and a KV budget
#   compute-sanitizer                         80 s  memcheck, racecheck, synccheck over a subset of the CUDA tests
#   the rest: build, ctest -L vulkan         180 s  the Vulkan engine and app, offscreen on the machine's driver
# The limits add up to more than the budget on purpose: a stage that ends
# early leaves its time to the next, and what runs out of time is the last.
#
# (CUBEFORGE_DEVICE_CHECK_SECONDS sets the whole budget, 470 s by default;
# each stage's limit is cut to what is left.)
#
# The machine lacks the Debian packages the project builds against and the
# reference fixture beside the project. Fetch them once on a development
# machine with network (they are git-ignored and travel with the working tree,
# 64 MiB in all; the run names .gl, .deps and .oracle in `carry`):
#   tools/device-check.sh fetch
# which fills .gl/ with the Vulkan/EGL loaders (unpacked onto / there, as the
# machine's notes prescribe), .deps/ with the build dependencies and the
# Vulkan validation layers (unpacked into a private prefix, never onto /,
# seen by CMake through CMAKE_PREFIX_PATH and by the Vulkan loader through
# VK_ADD_LAYER_PATH), and .oracle/ with the reference fixture's GPT files.
set -uo pipefail
cd "$(dirname "$0")/.."
root_dir=$PWD

# ---------------------------------------------------------------- fetch mode
if [ "${1:-}" = "fetch" ]; then
  set -e
  exclude=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$exclude")"
  for ignored in /.gl/ /.deps/ /.oracle/; do
    grep -qxF "$ignored" "$exclude" 2>/dev/null || echo "$ignored" >> "$exclude"
  done
  mkdir -p .gl .deps .oracle /tmp/cubeforge-apt/partial
  apt_options=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/cubeforge-apt)
  apt-get "${apt_options[@]}" update -qq
  (cd .gl && apt-get "${apt_options[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
  # Build dependencies from tools/setup.sh, less the toolchain and the
  # software-rendering test runners, plus the runtime libraries they need.
  # The validation layers stay: the Vulkan tests enable them.
  mapfile -t wanted < <(sed -n '/^packages=(/,/^)/p' tools/setup.sh | grep -v '^\s*#' | tr ' ()' '\n\n\n' |
    grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vxE 'packages|build-essential|cmake|ninja-build|clang|libclang-rt-[0-9]+-dev|xvfb|xauth|mesa-vulkan-drivers|googletest')
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
  # The reference fixture's GPT and expected values (the CUDA session tests'
  # CUBEFORGE_ORACLE_DIR); its CLIP and shape tokenizer are not needed there.
  fixture=${CUBEFORGE_ORACLE_DIR:-$root_dir/../shared/oracle/cube3d-v05}
  if [ -f "$fixture/expected.safetensors" ]; then
    mkdir -p .oracle/cube3d-v05
    cp "$fixture"/{config.yaml,meta.json,expected.safetensors,shape_gpt.safetensors} .oracle/cube3d-v05/
  else
    echo "device-check: no reference fixture at $fixture: the CUDA session tests will skip their fixture cases"
  fi
  du -sh .gl .deps .oracle
  echo "device-check: fetched ${#closure[@]} build packages into .deps/, the loaders into .gl/ and the" \
       "fixture into .oracle/; carry .gl, .deps and .oracle to the GPU machine"
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
kernels_dir=$build_dir-kernels
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

note "cubeforge device check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), budget ${budget}s"

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
stage environment env.log 15 bash -c "$(declare -f environment); jobs=$jobs; environment"
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
note "gpu: ${gpu:-none found by nvidia-smi (CUDA tests will skip)}"
export PATH=$PATH:/usr/local/cuda/bin  # nvcc, compute-sanitizer

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
stage packages env.log 30 bash -c "$(declare -f unpack); deps_prefix=$deps_prefix; unpack"

cmake_args=(-S . -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCUBEFORGE_FUZZ=OFF
            -DCUBEFORGE_CUDA_EMULATOR=OFF -DCUBEFORGE_CUDA_PTXAS_VERBOSE=ON)
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
  # The validation layers' manifest; its library is found through the library path.
  if [ -d "$deps_prefix/usr/share/vulkan/explicit_layer.d" ]; then
    export VK_ADD_LAYER_PATH=$deps_prefix/usr/share/vulkan/explicit_layer.d
    export VK_LAYER_PATH=$VK_ADD_LAYER_PATH  # loaders older than VK_ADD_LAYER_PATH
  fi
fi
# Vulkan and EGL on the NVIDIA driver, offscreen.
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
if [ -z "${__EGL_VENDOR_LIBRARY_FILENAMES:-}" ] && [ -f /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json ]; then
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
unset DISPLAY
# The reference fixture, when carried (tools/device-check.sh fetch).
if [ -z "${CUBEFORGE_ORACLE_DIR:-}" ] && [ -f "$root_dir/.oracle/cube3d-v05/expected.safetensors" ]; then
  export CUBEFORGE_ORACLE_DIR=$root_dir/.oracle/cube3d-v05
fi
note "fixture: ${CUBEFORGE_ORACLE_DIR:-none carried (fixture cases of the CUDA session tests skip)}"

# Test programs find the carried libraries through the library path; only they
# get it, so the machine's own tools keep their own libraries.
with_deps=(env "LD_LIBRARY_PATH=${CUBEFORGE_DEPS_LIBRARY_PATH:-}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")

ctest_summary() {
  grep -E "tests passed|tests failed|No tests were found" "$OUT/$1" | tail -1 | sed "s/^/  $2: /" >> "$summary"
  grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted)\)" "$OUT/$1" | head -20 | sed "s/^/  $2 failed:/" >> "$summary"
  local skipped
  skipped=$(grep -c "(Skipped)" "$OUT/$1")
  [ "$skipped" -gt 0 ] && echo "  $2: $skipped tests skipped themselves (see $1 for why)" >> "$summary"
  return 0
}

# 3. The whole project configured, else (a library missing) only the kernels,
# whose configuration needs nothing but CUDA and GoogleTest.
configured=no
if stage "configure" build.log 50 "${with_deps[@]}" cmake "${cmake_args[@]}" -B "$build_dir"; then
  configured=yes
  kernels_dir=$build_dir
else
  stage "configure the kernels alone" build.log 30 "${with_deps[@]}" cmake "${cmake_args[@]}" -B "$kernels_dir" \
    -DCUBEFORGE_CUDA_KERNELS_ONLY=ON
  rm -rf "$build_dir/CMakeCache.txt"
  if stage "configure without Vulkan" build.log 40 "${with_deps[@]}" cmake "${cmake_args[@]}" -B "$build_dir" \
      -DCUBEFORGE_VULKAN=OFF; then
    configured=yes
  fi
fi

# 4. The kernel tests first: their target links the kernels and the CUDA
# runtime only (gtest discovery runs the programs at build time: they need
# the carried libraries too).
kernel_tests=$kernels_dir/tests/cuda/test_cuda_kernels
if [ -f "$kernels_dir/build.ninja" ]; then
  stage "kernels: build" build.log 120 "${with_deps[@]}" cmake --build "$kernels_dir" --parallel "$jobs" \
    --target test_cuda_kernels
fi
if [ -x "$kernel_tests" ]; then
  stage "kernels: tests" cuda-tests.log 45 "${with_deps[@]}" ctest --test-dir "$kernels_dir" -L cuda -E 'CudaBench' \
    -R '^(Matvec|Norm|QkNorm|Rope|Attention|Sampling|DecodeGraph)' --output-on-failure --timeout 60 -j 8
  ctest_summary cuda-tests.log "kernel tests"
fi

# 5. The CUDA token backend and the command-line tool, then the session tests.
session_tests=$build_dir/tests/cuda/test_cuda
cli=$build_dir/app/cli/cubeforge-cli
if [ "$configured" = yes ]; then
  stage "backend: build test_cuda and cubeforge-cli" build.log 110 "${with_deps[@]}" \
    cmake --build "$build_dir" --parallel "$jobs" --target test_cuda cubeforge-cli
fi
if [ -x "$session_tests" ]; then
  stage "backend: tests" cuda-tests.log 45 "${with_deps[@]}" ctest --test-dir "$build_dir" -R '^(CudaSession|EveryCase)' \
    --output-on-failure --timeout 60 -j 8
  ctest_summary cuda-tests.log "backend tests"
fi

# 6. Benchmarks on the GPU: the kernel benchmarks, then the CLI on the CUDA
# backend in every mode of the ablation (no KV cache, KV cache eager, KV cache
# + graph). v0.5 without the cache recomputes up to 1100 rows a step: it runs
# fewer steps so the three sizes fit the budget.
if [ -x "$kernel_tests" ]; then
  stage "bench: kernels" bench.log 30 "${with_deps[@]}" "$kernel_tests" --gtest_filter='CudaBench.*'
fi
if [ -x "$session_tests" ]; then
  stage "bench: bf16 KV cache agreement" bench.log 15 "${with_deps[@]}" "$session_tests" --gtest_filter='*Bf16Cache*'
fi
if [ -x "$cli" ]; then
  stage "bench: small, 1024 steps" bench.log 25 "${with_deps[@]}" "$cli" bench --backend cuda --shape small --steps 1024 --json
  stage "bench: v05, 1024 steps, cache and graph" bench.log 40 "${with_deps[@]}" "$cli" bench --backend cuda --shape v05 \
    --steps 1024 --modes cache,graph --json
  stage "bench: built-in model, 1024 steps" bench.log 15 "${with_deps[@]}" "$cli" bench --backend cuda \
    --model assets/model --steps 1024 --json
  stage "bench: v05 without the cache, 128 steps" bench.log 30 "${with_deps[@]}" "$cli" bench --backend cuda --shape v05 \
    --steps 128 --modes no-cache --json
  for weights in q8 q4; do
    stage "bench: v05 $weights weights, 512 steps, graph" bench.log 20 "${with_deps[@]}" "$cli" bench --backend cuda \
      --shape v05 --weights "$weights" --steps 512 --modes graph --json
  done
  stage "bench: v05 int8 KV cache, 512 steps, graph" bench.log 20 "${with_deps[@]}" "$cli" bench --backend cuda \
    --shape v05 --kv-cache int8 --steps 512 --modes graph --json
  stage "bench: v05 KV budget 256, 512 steps, graph" bench.log 20 "${with_deps[@]}" "$cli" bench --backend cuda \
    --shape v05 --kv-budget 256 --steps 512 --modes graph --json
fi

# 7. compute-sanitizer over a subset that covers every kernel family and the session.
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
kernel_subset='MatvecTest.EverySplit*:MatvecTest.SwiGlu:MatvecTest.Quantised*:NormTest.*:QkNormRopeTest.ModelShape*:AttentionTest.FloatCache:AttentionTest.SmallHeadDims:SamplingTest.CfgCombine*:SamplingTest.Embedding*:DecodeGraphTest.*'
session_subset='*SessionsReport*:*CancelStops*:*cfg_bbox_causal_graph*:*cfg_causal_no_cache*:KvCacheKernels.StoreAndPrefill*:KvCacheKernels.FusedDecode*:KvCacheKernels.Budget*'
if [ -x "$sanitizer" ] && [ -x "$kernel_tests" ]; then
  stage "compute-sanitizer memcheck: kernels" sanitizer.log 25 "${with_deps[@]}" "$sanitizer" --tool memcheck \
    --error-exitcode 1 "$kernel_tests" --gtest_filter="$kernel_subset"
  [ -x "$session_tests" ] && stage "compute-sanitizer memcheck: session" sanitizer.log 20 "${with_deps[@]}" \
    "$sanitizer" --tool memcheck --error-exitcode 1 "$session_tests" --gtest_filter="$session_subset"
  stage "compute-sanitizer racecheck: kernels" sanitizer.log 20 "${with_deps[@]}" "$sanitizer" --tool racecheck \
    --error-exitcode 1 "$kernel_tests" --gtest_filter="$kernel_subset"
  stage "compute-sanitizer synccheck: kernels" sanitizer.log 15 "${with_deps[@]}" "$sanitizer" --tool synccheck \
    --error-exitcode 1 "$kernel_tests" --gtest_filter="$kernel_subset"
else
  note "compute-sanitizer: skipped (${sanitizer} or the kernel tests missing)"
fi

# 8. The rest of the project, then the Vulkan tests (offscreen, on the machine's driver).
if [ "$configured" = yes ]; then
  stage "build everything else" build.log 120 "${with_deps[@]}" cmake --build "$build_dir" --parallel "$jobs" -- -k 0
  stage "ctest -L vulkan" vulkan-tests.log 60 "${with_deps[@]}" ctest --test-dir "$build_dir" -L vulkan \
    --output-on-failure --timeout 60
  ctest_summary vulkan-tests.log vulkan
  viewport_bench=$build_dir/app/bench/cubeforge-bench-viewport
  if [ -x "$viewport_bench" ]; then
    stage "cubeforge-bench-viewport" bench.log 60 "${with_deps[@]}" "$viewport_bench"
  else
    note "cubeforge-bench-viewport: skipped (no $viewport_bench)"
  fi
fi

# 9. Registers and spills per kernel (ptxas -v in build.log), and the benchmark figures.
report() {
  python3 - "$OUT" <<'PYTHON'
import json, re, subprocess, sys
out = sys.argv[1]
kernels = {}
entry = None
for line in open(f"{out}/build.log", errors="replace"):
    m = re.search(r"Compiling entry function '([^']+)' for '(sm_\d+)'", line)
    if m:
        entry = m.group(1)
        continue
    m = re.search(r"Used (\d+) registers.*?(\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if not m:
        m2 = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m2 and entry:
            kernels.setdefault(entry, {})["spills"] = (int(m2.group(2)), int(m2.group(3)))
        m3 = re.search(r"Used (\d+) registers", line)
        if m3 and entry:
            kernels.setdefault(entry, {})["registers"] = int(m3.group(1))
        continue
    if entry:
        kernels[entry] = {"registers": int(m.group(1)), "spills": (int(m.group(2)), int(m.group(3)))}
names = list(kernels)
try:
    demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
except OSError:
    demangled = names
with open(f"{out}/ptxas.txt", "w") as f:
    for name, pretty in zip(names, demangled):
        k = kernels[name]
        stores, loads = k.get("spills", (0, 0))
        f.write(f"{k.get('registers', -1):4d} registers  spill stores {stores:4d} B  loads {loads:4d} B  {pretty}\n")
pretty_names = dict(zip(names, demangled))
spilling = [n for n in names if kernels[n].get("spills", (0, 0)) != (0, 0)]
print(f"  ptxas: {len(names)} kernels, {len(spilling)} with spills (ptxas.txt)")
for name in spilling[:10]:
    print(f"    spills {kernels[name]['spills']}: {pretty_names.get(name) or name}")
for line in open(f"{out}/bench.log", errors="replace"):
    if line.startswith("[bench]"):
        print("  " + line.rstrip())
        continue
    if not line.startswith("{"):
        continue
    try:
        r = json.loads(line)
    except ValueError:
        continue
    print(f"  bench {r['model']} on {r.get('backend_description', r.get('backend'))}, weights "
          f"{r.get('weights', 'stored')}, KV cache {r.get('kv_cache', 'f32')}"
          f"{', budget ' + str(r['kv_budget']) if r.get('kv_budget') else ''}: {r['steps']} steps, "
          f"floor {r['floor_ms']:.3f} ms, device read {r['memory_read_gbps']:.0f} GB/s, "
          f"{r['decode_weight_bytes'] / 1e9:.2f} GB of weights per token")
    for m in r.get("modes", []):
        print(f"    {m['mode']:9s} prefill {m['prefill_ms']:8.2f} ms  TPOT median {m['tpot_ms_median']:.3f} / "
              f"p90 {m['tpot_ms_p90']:.3f} ms  {m['weight_gbps']:.0f} GB/s = {100 * m['bandwidth_fraction']:.0f}% of "
              f"the floor  {m['kernel_launches_per_step']} launches/step  "
              f"{'graph' if m['graph_replay'] else 'eager'}  {m['device_memory_mb']:.0f} MB on the device")
PYTHON
}
report >> "$summary" 2>&1 || note "report: could not read the logs"
grep -hE "^\[bf16 cache\]" "$OUT/bench.log" 2>/dev/null | sed 's/^/  /' >> "$summary"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|========= (Invalid|Race|Barrier)" "$OUT/sanitizer.log" 2>/dev/null |
  sort | uniq -c | head -20 | sed 's/^/  sanitizer: /' >> "$summary"

note "total: $(( $(date +%s) - started ))s; logs in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
exit 0
