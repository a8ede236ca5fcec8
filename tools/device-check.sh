#!/usr/bin/env bash
# The check for a GPU machine that is lent for minutes: one prepared call that
# runs binaries built here, proves the CUDA path (fails loudly, never "ok,
# N skipped") and writes summary.txt and its logs under "$OUT" (./device-out
# when OUT is unset).
#
# How it is called:
#   1. Here, on a development machine (nvcc 13, the Debian packages of
#      tools/setup.sh), once per commit to check:
#        tools/device-check.sh prepare
#      builds the device binaries for sm_90 into build-device/ and packs them,
#      with the shared libraries they need, the Vulkan loader and validation
#      layer and GoogleTest (for the fallback build), into .device/ (git-ignored);
#      it checks them (static C++ and CUDA runtimes, what they still load, the
#      glibc they need), runs them here (every CUDA test skips, and fails with
#      CUBEFORGE_REQUIRE_CUDA=1) and prints what the call will carry against
#      the 64 MiB a call may carry. Optionally, with network:
#        tools/device-check.sh fetch
#      copies the reference fixture's GPT files into .oracle/ (the session
#      tests' fixture cases; else they skip) and, with --deps, downloads the
#      build dependencies into .deps/ for the full build fallback (about 30 MB:
#      it fits only without .device/).
#   2. On the GPU machine, one call, carrying .device and .oracle:
#        tools/device-check.sh            (timeout_s 420)
#      The stages below take at most CUBEFORGE_DEVICE_CHECK_SECONDS (360 s by
#      default) after a preflight of seconds, so a second call fits in the
#      same 15 minutes when the first shows something to rerun
#      (CUBEFORGE_DEVICE_CHECK_STAGES="sessions bench-v05" reruns only those).
#   3. Here again: tools/device-check.sh report DIR rewrites the summary from
#      the logs that came back.
#
# Preflight (seconds): the device, its driver (CUDA 13 needs 580 or newer),
# compute capability (the binaries are sm_90), free memory, compute-sanitizer,
# cuBLASLt, and whether the carried binaries run; without a usable device it
# prints one line starting with "!!!" and exits 2 before anything else.
#
# Stages, in the order of what matters most, each under its limit (cut to
# what is left of the budget; what runs out of time is listed as not reached):
#   stage          limit  what
#   unpack            15  the carried binaries (or, when they cannot run here,
#                         the fallback: the kernels-only build, or the whole
#                         project from .deps/, each within the budget)
#   sessions          50  ctest -L cuda-session: the CUDA token sessions against
#                         the CPU backend (fixture, built-in model, head size 48)
#   bench-v05         40  cubeforge-lab bench --backend cuda --shape v05 in every
#                         mode of the ablation (KV cache + graph, eager, none)
#   kernels           35  ctest -L cuda-kernels: every kernel family against its CPU reference
#   interop           15  ctest -L cuda-interop: CUDA writes a mesh Vulkan draws
#   cuda-rest         15  the rest of the cuda label (the training recipe on CUDA)
#   kernel-bench      25  ctest -L cuda-bench: bandwidth and decode-step benchmarks
#   bench-more        50  bench: small, the built-in model, Q8, Q4, int8 cache, KV budget
#   sanitizer         50  compute-sanitizer memcheck, racecheck, synccheck, initcheck
#                         over a kernel and a session subset (says so when absent)
#   vulkan            35  ctest -L vulkan, offscreen on the machine's driver
#   viewport          10  cubeforge-lab bench-viewport
# The ctest stages run with CUBEFORGE_REQUIRE_CUDA=1: a CUDA test that finds no
# device fails there. The summary lists every test of the cuda label with its
# verdict, the stages not reached, the benchmark figures and the sanitizers'.
set -uo pipefail
cd "$(dirname "$0")/.."
root_dir=$PWD
device_dir=$root_dir/.device
# The carried build names files by this path, which the check makes lead to
# the tree it runs in, wherever that is (a symbolic link in /tmp).
tree_link=/tmp/cubeforge-device-tree
build_name=build-device
# Every executable the cuda and vulkan labels run (the desktop app's window
# tests need a display, which the machine lacks).
device_targets=(test_cuda_kernels test_cuda cubeforge-lab test_engine_cuda test_engine_vulkan test_gallery
                cubeforge-gallery test_imgui_overlay)

# ------------------------------------------------------------------ report mode
if [ "${1:-}" = "report" ]; then
  [ $# -ge 2 ] || { echo "usage: tools/device-check.sh report DIR" >&2; exit 2; }
  exec python3 "$root_dir/tools/device_check_report.py" "$2"
fi

# ------------------------------------------------------------------ fetch mode
if [ "${1:-}" = "fetch" ]; then
  set -e
  exclude=$(git rev-parse --git-path info/exclude)
  fixture=${CUBEFORGE_ORACLE_DIR:-$root_dir/../shared/oracle/cube3d-v05}
  if [ -f "$fixture/expected.safetensors" ]; then
    mkdir -p .oracle/cube3d-v05
    cp "$fixture"/{config.yaml,meta.json,expected.safetensors,shape_gpt.safetensors} .oracle/cube3d-v05/
    echo "device-check: the fixture's GPT files are in .oracle/ ($(du -sh .oracle | cut -f1))"
  else
    echo "device-check: no reference fixture at $fixture: the CUDA session tests will skip their fixture cases"
  fi
  if [ "${2:-}" = "--deps" ]; then
    mkdir -p .deps /tmp/cubeforge-apt/partial
    apt_options=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/cubeforge-apt)
    apt-get "${apt_options[@]}" update -qq
    # Build dependencies from tools/setup.sh, less the toolchain and the
    # software-rendering test runners, with their libraries (not what every
    # Linux image has).
    mapfile -t wanted < <(sed -n '/^packages=(/,/^)/p' tools/setup.sh | grep -v '^\s*#' | tr ' ()' '\n\n\n' |
      grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vxE 'packages|build-essential|cmake|ninja-build|clang|libclang-rt-[0-9]+-dev|xvfb|xauth|mesa-vulkan-drivers|googletest')
    set -f
    base='^(libc6|libc-bin|libgcc-s1|libstdc\+\+6|libstdc\+\+-[0-9]+-dev|libc6-dev|libc-dev-bin|linux-libc-dev|libcrypt1|libcrypt-dev|zlib1g|libzstd1|liblzma5|libbz2-1.0|libtinfo6|libselinux1|libpcre2-8-0|libgcc-[0-9]+-dev|gcc-[0-9]+.*|cpp.*|g\+\+.*|perl.*|python3.*|libpython3.*|libllvm.*|libgl1-mesa-dri|libicu.*|libxml2|dpkg|tar|coreutils|debconf.*)$'
    set +f
    mapfile -t closure < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances "${wanted[@]}" | grep -v '^ ' | grep -v '^<' | sed 's/:amd64$//' | sort -u |
      grep -vE "$base")
    (cd .deps && apt-get "${apt_options[@]}" download "${closure[@]}")
    grep -qxF "/.deps/" "$exclude" 2>/dev/null || echo "/.deps/" >> "$exclude"
    echo "device-check: ${#closure[@]} build packages in .deps/ ($(du -sh .deps | cut -f1)); carry it instead of .device"
  fi
  exit 0
fi

# ------------------------------------------------------------------ prepare mode
# Which shared libraries an executable loads that the GPU machine may lack:
# everything ldd names but the C library's own, the driver's (libcuda), and
# libstdc++ and libgcc_s, which the executables link in and which the
# machine's own newer ones serve for the rest (a carried older libstdc++ would
# shadow theirs for its programs).
carried_libraries() {
  ldd "$@" 2>/dev/null | awk '/=> \// {print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/libcuda\.so|/libnvidia' ||
    true
}

prepare() {
  set -e
  local nvcc
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  [ -x "$nvcc" ] || { echo "device-check prepare: nvcc not found (CUDA 13 in /usr/local/cuda or on PATH)" >&2; exit 1; }
  if [ -e "$tree_link" ] && [ ! -L "$tree_link" ]; then
    echo "device-check prepare: $tree_link exists and is not a symbolic link; move it away" >&2
    exit 1
  fi
  ln -sfn "$root_dir" "$tree_link"
  local build=$tree_link/$build_name launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  local started
  started=$(date +%s)
  # libstdc++, libgcc, the CUDA runtime and OpenBLAS linked in; --as-needed
  # keeps only the shared libraries an executable really calls, which are
  # carried in build-device/lib: every executable sits two folders down and
  # finds them through an RPATH (not a RUNPATH: it also serves the libraries'
  # own dependencies).
  cmake -S "$tree_link" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90 -DCUBEFORGE_CUDA_STATIC_RUNTIME=ON \
    -DCUBEFORGE_VULKAN=ON -DCUBEFORGE_TESTS=ON -DCUBEFORGE_FUZZ=OFF -DCUBEFORGE_CUDA_EMULATOR=OFF \
    -DBLA_STATIC=ON -DBLA_VENDOR=OpenBLAS -DCUBEFORGE_CUDA_PTXAS_VERBOSE=ON \
    '-DCMAKE_BUILD_RPATH=$ORIGIN/../../lib' \
    -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc -Wl,--as-needed -Wl,--disable-new-dtags" \
    "${launcher[@]}" > /dev/null
  local build_log
  build_log=$(mktemp)
  cmake --build "$build" --parallel "${CUBEFORGE_JOBS:-$(nproc)}" --target "${device_targets[@]}" | tee "$build_log"
  local built=$(( $(date +%s) - started ))

  # The executables, the ctest files that name them, the libraries and the
  # Vulkan layer, under build-device/ as the check unpacks them.
  local pack
  pack=$(mktemp -d)
  local staged=$pack/$build_name
  mkdir -p "$staged/lib" "$staged/vulkan/explicit_layer.d"
  local executables=()
  for target in "${device_targets[@]}"; do
    local file
    file=$(find "$build" -type f -name "$target" -perm -u+x -print -quit)
    [ -n "$file" ] || { echo "device-check prepare: no executable for $target" >&2; exit 1; }
    executables+=("$file")
    mkdir -p "$staged/$(dirname "${file#"$build"/}")"
    strip --strip-unneeded -o "$staged/${file#"$build"/}" "$file"
  done
  (cd "$build" && find . \( -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake' -o -name '*_labels.cmake' \) \
      -print0 | tar --null -cf - -T -) | tar -xf - -C "$staged"
  local layer=/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so
  local manifest=/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json
  if [ -f "$layer" ] && [ -f "$manifest" ]; then
    # The manifest names the layer relative to itself.
    sed 's|"library_path": *"[^"]*"|"library_path": "../../lib/'"$(basename "$layer")"'"|' "$manifest" \
      > "$staged/vulkan/explicit_layer.d/$(basename "$manifest")"
    strip --strip-unneeded -o "$staged/lib/$(basename "$layer")" "$layer"
  else
    echo "device-check prepare: no Vulkan validation layer here (vulkan-validationlayers): the Vulkan tests will fail there"
  fi
  local libraries
  libraries=$(carried_libraries "${executables[@]}" "$layer")
  for library in $libraries; do cp -L "$library" "$staged/lib/"; done
  # GoogleTest for the kernels-only fallback build: a prefix laid out as
  # Debian's, which its CMake package file expects.
  local multiarch=x86_64-linux-gnu
  mkdir -p "$pack/gtest/usr/lib/$multiarch/cmake" "$pack/gtest/usr/include"
  cp /usr/lib/$multiarch/libgtest*.a "$pack/gtest/usr/lib/$multiarch/"
  cp -r /usr/include/gtest "$pack/gtest/usr/include/"
  cp -r /usr/lib/$multiarch/cmake/GTest "$pack/gtest/usr/lib/$multiarch/cmake/"

  rm -rf "$device_dir"
  mkdir -p "$device_dir"
  tar -C "$pack" -cJf "$device_dir/binaries.tar.xz" "$build_name" gtest
  # Registers and spills of every kernel (ptxas -v in this build's output;
  # kernels not compiled again keep their earlier lines), for the summary.
  python3 - "$build_log" "$root_dir/$build_name/ptxas-usage.json" "$device_dir/resource-usage.txt" <<'PYTHON'
import json, os, re, subprocess, sys
log, store, report = sys.argv[1:4]
kernels = json.load(open(store)) if os.path.exists(store) else {}
entry = None
for line in open(log, errors="replace"):
    m = re.search(r"Compiling entry function '([^']+)' for '(sm_\d+)'", line)
    if m:
        entry = m.group(1)
        kernels.setdefault(entry, {})
        continue
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and entry:
        kernels[entry]["spill"] = [int(m.group(2)), int(m.group(3))]
    m = re.search(r"Used (\d+) registers", line)
    if m and entry:
        kernels[entry]["registers"] = int(m.group(1))
        entry = None
json.dump(kernels, open(store, "w"))
names = list(kernels)
try:
    pretty = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
except OSError:
    pretty = names
rows = sorted(((k.get("registers", -1), k.get("spill", [0, 0]), p) for k, p in zip((kernels[n] for n in names), pretty)),
              key=lambda r: -r[0])
with open(report, "w") as f:
    for registers, (stores, loads), name in rows:
        f.write("%4d registers  spill stores %5d B  loads %5d B  %s\n" % (registers, stores, loads, name))
print("  ptxas: %d kernels, %d with spills, most registers %d" %
      (len(rows), sum(1 for r in rows if r[1] != [0, 0]), rows[0][0] if rows else 0))
PYTHON
  rm -f "$build_log"
  local exclude
  exclude=$(git rev-parse --git-path info/exclude)
  grep -qxF "/.device/" "$exclude" 2>/dev/null || echo "/.device/" >> "$exclude"

  # What the binaries still load, and the newest glibc they need.
  echo "device-check prepare: built in ${built}s; $(du -sh "$staged" | cut -f1) unpacked"
  local problems=0
  for file in "${executables[@]}"; do
    local needed glibc
    needed=$(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    glibc=$(objdump -T "$file" | grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -1)
    echo "  $(basename "$file"): needs ${glibc:-no glibc version}; loads $needed"
    if echo "$needed" | grep -qE 'libstdc\+\+|libgcc_s|libcudart'; then
      echo "  !!! $(basename "$file") loads libstdc++, libgcc_s or libcudart: they should be linked in" >&2
      problems=1
    fi
  done
  echo "  carried shared libraries: $(echo "$libraries" | xargs -n1 basename 2>/dev/null | tr '\n' ' ')"

  # Here, without a GPU: the binaries run, every CUDA test skips, and fails
  # when a device is required.
  local full_build=$root_dir/$build_name-full
  rm -rf "$full_build"
  mv "$root_dir/$build_name" "$full_build"
  tar -C "$root_dir" -xJf "$device_dir/binaries.tar.xz" "$build_name"
  local runtime_env=(env "VK_ADD_LAYER_PATH=$build/vulkan/explicit_layer.d")
  set +e
  "${runtime_env[@]}" ctest --test-dir "$build" -L '^cuda$' -j "$(nproc)" --timeout 120 > "$pack/skips.log" 2>&1
  local skip_rc=$?
  "${runtime_env[@]}" CUBEFORGE_REQUIRE_CUDA=1 ctest --test-dir "$build" -L '^cuda-kernels$' -j "$(nproc)" \
    --timeout 120 > "$pack/required.log" 2>&1
  local required_rc=$?
  "${runtime_env[@]}" "$build/app/lab/cubeforge-lab" bench --backend cpu --model assets/model --steps 8 --json \
    > "$pack/cli.log" 2>&1
  local cli_rc=$?
  set -e
  rm -rf "${root_dir:?}/$build_name"
  mv "$full_build" "$root_dir/$build_name"
  echo "  here, without a GPU: $(grep -E 'tests passed|tests failed' "$pack/skips.log" | tail -1)" \
       "($(grep -c '\*\*\*Skipped\|Skipped ' "$pack/skips.log") skipped)"
  if [ $skip_rc -ne 0 ]; then
    echo "  !!! the CUDA tests did not all pass or skip here:" >&2
    grep -E "\*\*\*(Failed|Exception|Timeout)|Not Run" "$pack/skips.log" | head -10 >&2
    problems=1
  fi
  if [ $required_rc -eq 0 ] || ! grep -q "Failed" "$pack/required.log"; then
    echo "  !!! with CUBEFORGE_REQUIRE_CUDA=1 the kernel tests did not fail without a device" >&2
    problems=1
  else
    echo "  with CUBEFORGE_REQUIRE_CUDA=1: $(grep -E 'tests passed|tests failed' "$pack/required.log" | tail -1)"
  fi
  if [ $cli_rc -ne 0 ]; then
    echo "  !!! the carried cubeforge-lab did not run here: $(tail -3 "$pack/cli.log")" >&2
    problems=1
  else
    echo "  the carried cubeforge-lab ran a CPU bench of the built-in model"
  fi
  rm -rf "$pack"

  # What a call carries: the tree (tracked and untracked-not-ignored files),
  # .device and .oracle, against 64 MiB.
  local tree_bytes carried_bytes=0 path
  tree_bytes=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 stat -c %s 2>/dev/null |
    awk '{s += $1} END {print s + 0}')
  for path in .device .oracle; do
    [ -e "$path" ] && carried_bytes=$(( carried_bytes + $(du -sb "$path" | cut -f1) ))
  done
  local total=$(( tree_bytes + carried_bytes )) limit=$(( 64 * 1024 * 1024 ))
  printf '  a call carries %.1f MiB: the tree %.1f MiB, .device %.1f MiB, .oracle %.1f MiB (limit 64 MiB)\n' \
    "$(echo "$total / 1048576" | bc -l)" "$(echo "$tree_bytes / 1048576" | bc -l)" \
    "$(echo "$(du -sb .device | cut -f1) / 1048576" | bc -l)" \
    "$(echo "$( [ -e .oracle ] && du -sb .oracle | cut -f1 || echo 0) / 1048576" | bc -l)"
  if [ $total -gt $limit ]; then
    echo "  !!! over the 64 MiB a call may carry" >&2
    problems=1
  fi
  [ $problems -eq 0 ] || exit 1
  echo "device-check prepare: ready; on the GPU machine run tools/device-check.sh (timeout_s 420), carrying .device and .oracle"
}

if [ "${1:-}" = "prepare" ]; then
  prepare
  exit $?
fi

# ------------------------------------------------------------------ check mode
OUT=${OUT:-$root_dir/device-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
summary=$OUT/summary.txt
stages_file=$OUT/stages.tsv
: > "$stages_file"
started=$(date +%s)
budget=${CUBEFORGE_DEVICE_CHECK_SECONDS:-360}
only_stages=${CUBEFORGE_DEVICE_CHECK_STAGES:-}
jobs=$(nproc 2>/dev/null || echo 8)
export PATH=$PATH:/usr/local/cuda/bin  # nvcc, compute-sanitizer, cuobjdump
header="cubeforge device check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), budget ${budget}s"
echo "$header"

seconds_left() { echo $(( budget - ($(date +%s) - started) )); }
finish() {
  python3 "$root_dir/tools/device_check_report.py" "$OUT" --header "$header" > "$summary" 2>&1 ||
    echo "report: could not read the logs ($(tail -1 "$summary"))" >> "$summary"
  echo "total: $(( $(date +%s) - started ))s; logs in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')" >> "$summary"
  cat "$summary"
}

# stage NAME LIMIT LOG LABEL COMMAND...: COMMAND under a time limit (cut to what
# is left of the budget), its output appended to LOG; one line to stages.tsv.
# LABEL names the ctest label the stage runs (the report's "not run" says
# which stage a test was waiting for).
stage() {
  local name=$1 limit=$2 log=$3 label=$4
  shift 4
  if [ -n "$only_stages" ] && [[ " $only_stages " != *" $name "* ]]; then
    printf '%s\tskipped\t0\t%s\t%s\n' "$name" "not in CUBEFORGE_DEVICE_CHECK_STAGES" "$label" >> "$stages_file"
    return 0
  fi
  local left=$(( $(seconds_left) - 5 ))
  if [ "$left" -lt 5 ]; then
    printf '%s\tskipped\t0\t%s\t%s\n' "$name" "no time left" "$label" >> "$stages_file"
    echo "$name: not reached (no time left)"
    return 124
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local begin rc verdict
  begin=$(date +%s)
  echo "=== $name ($(date -u +%H:%M:%S), limit ${limit}s): $*" >> "$OUT/$log"
  timeout --kill-after=5 "$limit" "$@" >> "$OUT/$log" 2>&1
  rc=$?
  case $rc in
    0) verdict=ok ;;
    124|137) verdict=timed-out ;;
    *) verdict=failed ;;
  esac
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$verdict" "$(( $(date +%s) - begin ))" "$log" "$label" >> "$stages_file"
  echo "$name: $verdict ($(( $(date +%s) - begin ))s)"
  return $rc
}

# ---- Preflight: a usable device, in seconds, or one line and exit 2.
nvidia_smi=${CUBEFORGE_NVIDIA_SMI:-nvidia-smi}
no_device() {
  echo "!!! NO USABLE CUDA DEVICE: $*; nothing was built or run" | tee "$OUT/preflight.txt"
  { echo "$header"; cat "$OUT/preflight.txt"; echo "total: $(( $(date +%s) - started ))s"; } > "$summary"
  exit 2
}
gpu=$("$nvidia_smi" --query-gpu=name,driver_version,compute_cap,memory.free,memory.total \
        --format=csv,noheader,nounits 2>&1) || no_device "nvidia-smi finds no GPU ($(echo "$gpu" | head -1))"
gpu=$(echo "$gpu" | head -1)
[ -n "$gpu" ] && ! echo "$gpu" | grep -qiE "failed|error|No devices" || no_device "nvidia-smi finds no GPU (${gpu:-no output})"
IFS=',' read -r gpu_name driver compute free_mib total_mib <<< "$gpu"
gpu_name=$(echo "$gpu_name" | xargs); driver=$(echo "$driver" | xargs); compute=$(echo "$compute" | xargs)
free_mib=$(echo "$free_mib" | xargs); total_mib=$(echo "$total_mib" | xargs)
[[ "$driver" =~ ^[0-9]+ ]] || no_device "nvidia-smi gave no driver version ($gpu)"
[ "${driver%%.*}" -ge 580 ] || no_device "driver $driver on $gpu_name is older than 580, which CUDA 13 needs"
[[ "$compute" =~ ^[0-9]+\.[0-9]+$ ]] || no_device "nvidia-smi gave no compute capability ($gpu)"
[ "${compute%%.*}" -ge 9 ] || no_device "$gpu_name is compute $compute; the binaries are built for sm_90 (9.0 or newer)"
[[ "$free_mib" =~ ^[0-9]+$ ]] && [ "$free_mib" -ge 4096 ] ||
  no_device "$gpu_name has ${free_mib:-?} MiB free, under the 4096 MiB the v0.5 benchmarks need"
sanitizer=$(command -v compute-sanitizer || true)
# cuBLASLt 13, opened at run time by the CUDA backend: the toolkit's, or PyTorch's wheel's.
cublaslt=$(ldconfig -p 2>/dev/null | awk '/libcublasLt\.so\.13 / {print $NF; exit}')
if [ -z "$cublaslt" ]; then
  for candidate in /usr/local/cuda/lib64/libcublasLt.so.13 /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13 \
      $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cu13", "lib", "libcublasLt.so.13") for p in nvidia.__path__))' 2>/dev/null); do
    [ -f "$candidate" ] && cublaslt=$candidate && break
  done
fi
cuda_library_path=${cublaslt:+$(dirname "$cublaslt")}
echo "preflight: $gpu_name, driver $driver, compute $compute, ${free_mib}/${total_mib} MiB free;" \
     "compute-sanitizer: ${sanitizer:-absent (the sanitizer stage says so)};" \
     "cuBLASLt: ${cublaslt:-NOT FOUND (the CUDA backend cannot prefill)}" | tee "$OUT/preflight.txt"

# ---- The binaries: carried, else built here.
build=$tree_link/$build_name
if [ -e "$tree_link" ] && [ ! -L "$tree_link" ]; then no_device "$tree_link exists and is not a symbolic link"; fi
ln -sfn "$root_dir" "$tree_link" 2>/dev/null || no_device "cannot make $tree_link lead to this tree"
export CUBEFORGE_REQUIRE_CUDA=1
if [ -z "${CUBEFORGE_ORACLE_DIR:-}" ] && [ -f "$root_dir/.oracle/cube3d-v05/expected.safetensors" ]; then
  export CUBEFORGE_ORACLE_DIR=$root_dir/.oracle/cube3d-v05
fi
echo "fixture: ${CUBEFORGE_ORACLE_DIR:-none carried (the fixture cases of the session tests skip)}" >> "$OUT/preflight.txt"
# The Vulkan loader and validation layer come with the binaries; the driver is the machine's.
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
[ -n "${VK_DRIVER_FILES:-}" ] || echo "vulkan: no NVIDIA Vulkan driver manifest found (the interop and Vulkan tests say why they fail)" >> "$OUT/preflight.txt"
unset DISPLAY
# The carried binaries find their libraries through their RPATH; only
# cuBLASLt, opened by name at run time, may need a path.
runtime_path=${cuda_library_path}${LD_LIBRARY_PATH:+${cuda_library_path:+:}$LD_LIBRARY_PATH}
export VK_ADD_LAYER_PATH=$build/vulkan/explicit_layer.d VK_LAYER_PATH=$build/vulkan/explicit_layer.d
with_libraries=(env "LD_LIBRARY_PATH=$runtime_path")

unpack_carried() {
  set -e
  rm -rf "${build:?}/" "$root_dir/.device-gtest"
  if command -v xz > /dev/null; then
    tar -C "$root_dir" -xJf "$device_dir/binaries.tar.xz"
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$device_dir/binaries.tar.xz" "$root_dir"
  fi
  mv "$root_dir/gtest" "$root_dir/.device-gtest"
  # Runs at all here (glibc, libraries): the kernel tests list themselves.
  "${with_libraries[@]}" "$build/tests/cuda/test_cuda_kernels" --gtest_list_tests > /dev/null
}
binaries=none
if [ -f "$device_dir/binaries.tar.xz" ] &&
   stage unpack 15 build.log "" bash -c "$(declare -f unpack_carried); $(declare -p build root_dir device_dir with_libraries); unpack_carried"; then
  binaries=carried
else
  # The fallback: the whole project from carried Debian packages, else the kernels alone.
  cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCUBEFORGE_FUZZ=OFF
              -DCUBEFORGE_CUDA_EMULATOR=OFF -DCUBEFORGE_CUDA_PTXAS_VERBOSE=ON)
  deps=/tmp/cubeforge-deps
  if compgen -G ".deps/*.deb" > /dev/null; then
    mkdir -p "$deps" && for f in .deps/*.deb; do dpkg -x "$f" "$deps"; done
    multiarch=x86_64-linux-gnu
    cmake_args+=("-DCMAKE_PREFIX_PATH=$deps/usr;$deps/usr/lib/$multiarch/cmake"
                 "-DCMAKE_LIBRARY_PATH=$deps/usr/lib/$multiarch/openblas-pthread"
                 "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$deps/usr/lib/$multiarch"
                 "-DCMAKE_CXX_FLAGS=-idirafter $deps/usr/include")
    export PATH=$PATH:$deps/usr/bin PKG_CONFIG_SYSROOT_DIR=$deps
    export PKG_CONFIG_LIBDIR=$deps/usr/lib/$multiarch/pkgconfig:$deps/usr/share/pkgconfig
    runtime_path=$deps/usr/lib/$multiarch:$deps/usr/lib/$multiarch/openblas-pthread:$runtime_path
    with_libraries=(env "LD_LIBRARY_PATH=$runtime_path")
    if stage configure 40 build.log "" "${with_libraries[@]}" cmake -S "$tree_link" -B "$build" "${cmake_args[@]}" &&
       stage build 150 build.log "" "${with_libraries[@]}" cmake --build "$build" --parallel "$jobs" \
         --target "${device_targets[@]}" -- -k 0; then
      binaries=built
    fi
  fi
  if [ "$binaries" = none ]; then
    gtest_prefix=$root_dir/.device-gtest
    if [ ! -d "$gtest_prefix" ] && [ -f "$device_dir/binaries.tar.xz" ]; then
      tar -C "$root_dir" -xJf "$device_dir/binaries.tar.xz" gtest && mv "$root_dir/gtest" "$gtest_prefix"
    fi
    if stage configure-kernels-only 30 build.log "" cmake -S "$tree_link" -B "$build" "${cmake_args[@]}" \
         -DCUBEFORGE_CUDA_KERNELS_ONLY=ON "-DCMAKE_PREFIX_PATH=$gtest_prefix/usr" &&
       stage build-kernels-only 120 build.log "" cmake --build "$build" --parallel "$jobs" --target test_cuda_kernels; then
      binaries=kernels-only
    fi
  fi
fi
echo "binaries: $binaries" >> "$OUT/preflight.txt"
if [ -f "$build/CTestTestfile.cmake" ]; then
  for label in cuda vulkan; do
    ctest --test-dir "$build" -L "^$label\$" --show-only=json-v1 > "$OUT/expected-$label.json" 2> /dev/null
  done
fi

# ctest_stage NAME LIMIT LABEL: the label's tests, junit and progress into OUT.
ctest_stage() {
  local name=$1 limit=$2 label=$3 parallel=${4:-$jobs}
  stage "$name" "$limit" "tests-$name.log" "$label" "${with_libraries[@]}" ctest --test-dir "$build" -L "^$label\$" \
    --output-on-failure --timeout 60 -j "$parallel" --output-junit "$OUT/junit-$name.xml"
}

cli=$build/app/lab/cubeforge-lab
bench() { stage "$1" "$2" bench.log "" "${with_libraries[@]}" "$cli" bench --backend cuda "${@:3}" --json; }

# ---- Correctness and the headline benchmark first.
ctest_stage sessions 50 cuda-session
if [ -x "$cli" ]; then
  bench bench-v05 25 --shape v05 --steps 1024 --modes graph,cache
  bench bench-v05-no-cache 15 --shape v05 --steps 128 --modes no-cache
fi
ctest_stage kernels 35 cuda-kernels
ctest_stage interop 15 cuda-interop
# The rest of the cuda label (the training recipe's CUDA run): no part label.
stage cuda-rest 15 tests-cuda-rest.log cuda "${with_libraries[@]}" ctest --test-dir "$build" -L '^cuda$' \
  -LE '^cuda-(session|kernels|interop)$' --output-on-failure --timeout 60 --output-junit "$OUT/junit-cuda-rest.xml"
ctest_stage kernel-bench 25 cuda-bench 1

# ---- More figures.
if [ -x "$cli" ]; then
  bench bench-small 8 --shape small --steps 512
  bench bench-builtin 8 --model assets/model --steps 512
  for weights in q8 q4; do bench "bench-v05-$weights" 9 --shape v05 --weights "$weights" --steps 256 --modes graph; done
  bench bench-v05-int8-cache 8 --shape v05 --kv-cache int8 --steps 256 --modes graph
  bench bench-v05-budget 8 --shape v05 --kv-budget 256 --steps 256 --modes graph
fi

# ---- compute-sanitizer over a subset that covers every kernel family and the session.
kernel_tests=$build/tests/cuda/test_cuda_kernels
session_tests=$build/tests/cuda/test_cuda
kernel_subset='MatvecTest.EverySplit*:MatvecTest.SwiGlu:NormTest.*:QkNormRopeTest.ModelShape*:AttentionTest.FloatCache:AttentionTest.EveryMultipleOf16:SamplingTest.CfgCombine*:DecodeGraphTest.*'
session_subset='*SessionsReport*:*cfg_bbox_causal_graph*:KvCacheKernels.FusedDecode*:KvCacheKernels.Budget*:CudaSessionHeadDims.*'
if [ -n "$sanitizer" ] && [ -x "$kernel_tests" ]; then
  stage sanitizer-memcheck 15 sanitizer.log "" "${with_libraries[@]}" "$sanitizer" --tool memcheck --error-exitcode 1 \
    "$kernel_tests" --gtest_filter="$kernel_subset"
  [ -x "$session_tests" ] && stage sanitizer-memcheck-session 10 sanitizer.log "" "${with_libraries[@]}" "$sanitizer" \
    --tool memcheck --error-exitcode 1 "$session_tests" --gtest_filter="$session_subset"
  stage sanitizer-racecheck 10 sanitizer.log "" "${with_libraries[@]}" "$sanitizer" --tool racecheck --error-exitcode 1 \
    "$kernel_tests" --gtest_filter="$kernel_subset"
  stage sanitizer-synccheck 8 sanitizer.log "" "${with_libraries[@]}" "$sanitizer" --tool synccheck --error-exitcode 1 \
    "$kernel_tests" --gtest_filter="$kernel_subset"
  stage sanitizer-initcheck 7 sanitizer.log "" "${with_libraries[@]}" "$sanitizer" --tool initcheck --error-exitcode 1 \
    "$kernel_tests" --gtest_filter="$kernel_subset"
else
  printf 'sanitizer\tskipped\t0\t%s\t\n' "compute-sanitizer ${sanitizer:+present}${sanitizer:-absent}${sanitizer:+, no kernel tests}" \
    >> "$stages_file"
fi

# ---- Vulkan, offscreen on the machine's driver. The carried fixture holds
# the GPT files only: the gallery's test, which needs a whole model folder,
# skips without it.
with_libraries=(env -u CUBEFORGE_ORACLE_DIR "${with_libraries[@]:1}")
ctest_stage vulkan 35 vulkan 4
# The lab has bench-viewport when it was built with the Vulkan engine.
if "${with_libraries[@]}" "$cli" --help 2>/dev/null | grep -q '^  bench-viewport'; then
  stage viewport 10 bench.log "" "${with_libraries[@]}" "$cli" bench-viewport
fi
cp "$device_dir/resource-usage.txt" "$OUT/" 2>/dev/null || true

finish
exit 0
