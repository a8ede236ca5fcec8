#!/usr/bin/env bash
# tools/device-check.sh without a GPU: its summary from fabricated logs (every
# CUDA test listed with its verdict, the stages not reached, a "!!!" line when
# every CUDA test skipped), and its preflight against fabricated nvidia-smi
# answers (no device, an old driver, an old GPU, too little memory): one
# "!!!" line and exit 2 before anything is unpacked or built.
# Usage: device_check_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
check=$source_dir/tools/device-check.sh
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }
expect_line() {  # FILE PATTERN WHAT
  grep -qE -- "$2" "$1" || { fail "$3: no line matching '$2' in:"; sed 's/^/    /' "$1"; }
}
expect_no_line() {
  if grep -qE -- "$2" "$1"; then fail "$3: a line matches '$2':"; sed 's/^/    /' "$1"; fi
}

# Three CUDA tests (two session tests, one kernel test) and one Vulkan test.
expected_json() {
  cat <<'JSON'
{"kind": "ctestInfo", "version": {"major": 1, "minor": 0}, "tests": [
 {"name": "CudaSessionOracle.CancelStopsWithinOneToken", "properties": [{"name": "LABELS", "value": ["cuda", "cuda-session"]}]},
 {"name": "CudaHeadDims.TheBackendRuleIsTheKernels", "properties": [{"name": "LABELS", "value": ["cuda", "cuda-session"]}]},
 {"name": "NormTest.LayerNormInPlace", "properties": [{"name": "LABELS", "value": ["cuda", "cuda-kernels"]}]}]}
JSON
}

# ---- All skipped: the red line, and each test with the reason it skipped.
out=$scratch/all-skipped
mkdir -p "$out"
expected_json > "$out/expected-cuda.json"
printf 'sessions\tok\t3\ttests-sessions.log\tcuda-session\nkernels\tok\t2\ttests-kernels.log\tcuda-kernels\n' > "$out/stages.tsv"
skipped_case() {
  cat <<XML
	<testcase name="$1" classname="$1" time="0.01" status="notrun">
		<skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
		<system-out>[ RUN      ] $1
/src/tests/cuda/cuda_test_support.h:25: Skipped
no CUDA device (no CUDA device (CUDA driver version is insufficient)); the cuda label runs on a GPU machine
[  SKIPPED ] $1 (0 ms)
</system-out>
	</testcase>
XML
}
{ echo '<?xml version="1.0" encoding="UTF-8"?><testsuite name="(empty)" tests="2">'
  skipped_case CudaSessionOracle.CancelStopsWithinOneToken; skipped_case CudaHeadDims.TheBackendRuleIsTheKernels
  echo '</testsuite>'; } > "$out/junit-sessions.xml"
{ echo '<?xml version="1.0" encoding="UTF-8"?><testsuite name="(empty)" tests="1">'
  skipped_case NormTest.LayerNormInPlace; echo '</testsuite>'; } > "$out/junit-kernels.xml"
"$check" report "$out" > "$scratch/all-skipped.txt" 2>&1 || fail "report exited $?"
expect_line "$scratch/all-skipped.txt" '^!!! ALL 3 CUDA TESTS SKIPPED' "all skipped"
expect_line "$scratch/all-skipped.txt" '^CUDA tests \(label cuda\): 3: 0 passed, 0 FAILED, 3 skipped, 0 not run' "all skipped"
expect_line "$scratch/all-skipped.txt" '^  skipped +NormTest.LayerNormInPlace  -- no CUDA device \(no CUDA device \(CUDA driver' "all skipped"

# ---- Mixed: a failure with its message, a stage killed mid-way (its tests
# known from ctest's progress lines, the rest not run), a stage not reached.
out=$scratch/mixed
mkdir -p "$out"
expected_json > "$out/expected-cuda.json"
printf 'sessions\tok\t20\ttests-sessions.log\tcuda-session\nkernels\ttimed-out\t35\ttests-kernels.log\tcuda-kernels\n' > "$out/stages.tsv"
printf 'vulkan\tskipped\t0\tno time left\tvulkan\n' >> "$out/stages.tsv"
cat > "$out/junit-sessions.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="2" failures="1">
	<testcase name="CudaSessionOracle.CancelStopsWithinOneToken" classname="x" time="1.2" status="run"><system-out>ok</system-out></testcase>
	<testcase name="CudaHeadDims.TheBackendRuleIsTheKernels" classname="x" time="0.1" status="fail">
		<failure message=""/>
		<system-out>[ RUN      ] CudaHeadDims.TheBackendRuleIsTheKernels
/src/tests/cuda/session_test.cpp:520: Failure
Expected equality of these values: head_dim_runs_on_cuda(48) which is: false
[  FAILED  ] CudaHeadDims.TheBackendRuleIsTheKernels (0 ms)
</system-out>
	</testcase>
</testsuite>
XML
cat > "$out/tests-kernels.log" <<'LOG'
=== kernels (12:00:00, limit 35s): ctest ...
    Start 3: NormTest.LayerNormInPlace
LOG
cat > "$out/bench.log" <<'LOG'
{"command": "bench", "machine": {"threads": 16, "kernel_isa": "avx512", "blas_core": "SkylakeX"}, "results": {"model": "v05", "backend": "cuda", "backend_description": "CUDA (NVIDIA H100 80GB HBM3)", "steps": 1024, "floor_ms": 0.52, "memory_read_gbps": 3000, "decode_weight_bytes": 1.5e9, "modes": [{"mode": "graph", "prefill_ms": 12.5, "tpot_ms_median": 0.71, "tpot_ms_p90": 0.74, "weight_gbps": 2100, "bandwidth_fraction": 0.73, "kernel_launches_per_step": 122, "graph_replay": true}]}}
LOG
"$check" report "$out" > "$scratch/mixed.txt" 2>&1 || fail "report exited $?"
expect_line "$scratch/mixed.txt" '^CUDA tests \(label cuda\): 3: 1 passed, 1 FAILED, 0 skipped, 1 not run' "mixed"
expect_line "$scratch/mixed.txt" '^!!! 1 CUDA tests FAILED' "mixed"
expect_line "$scratch/mixed.txt" '^  FAILED +CudaHeadDims.TheBackendRuleIsTheKernels  -- Expected equality of these values' "mixed"
expect_line "$scratch/mixed.txt" '^  not run +NormTest.LayerNormInPlace  -- its stage \(kernels\) timed-out' "mixed"
expect_line "$scratch/mixed.txt" '^  passed +CudaSessionOracle.CancelStopsWithinOneToken$' "mixed"
expect_line "$scratch/mixed.txt" '^stages not reached: vulkan$' "mixed"
expect_line "$scratch/mixed.txt" 'graph .*TPOT median 0.710 .* 73% of the floor +122 launches/step +graph' "mixed"
expect_no_line "$scratch/mixed.txt" 'SKIPPED' "mixed"

# ---- A stage killed before its junit file: verdicts from the progress lines.
out=$scratch/killed
mkdir -p "$out"
expected_json > "$out/expected-cuda.json"
printf 'sessions\ttimed-out\t50\ttests-sessions.log\tcuda-session\n' > "$out/stages.tsv"
cat > "$out/tests-sessions.log" <<'LOG'
1/2 Test #1: CudaSessionOracle.CancelStopsWithinOneToken ..........   Passed    1.20 sec
2/2 Test #2: CudaHeadDims.TheBackendRuleIsTheKernels ..............***Failed    0.10 sec
LOG
"$check" report "$out" > "$scratch/killed.txt" 2>&1 || fail "report exited $?"
expect_line "$scratch/killed.txt" '^  passed +CudaSessionOracle.CancelStopsWithinOneToken$' "killed"
expect_line "$scratch/killed.txt" '^  FAILED +CudaHeadDims.TheBackendRuleIsTheKernels  -- Failed \(see tests-sessions.log\)' "killed"
expect_line "$scratch/killed.txt" '^  not run +NormTest.LayerNormInPlace  -- no stage of this check runs it' "killed"

# ---- No list of tests at all (nothing was set up): said in a red line.
out=$scratch/nothing
mkdir -p "$out"
: > "$out/stages.tsv"
"$check" report "$out" > "$scratch/nothing.txt" 2>&1 || fail "report exited $?"
expect_line "$scratch/nothing.txt" '^!!! the list of CUDA tests is missing' "nothing set up"

# ---- Preflight: fabricated nvidia-smi answers; exit 2 at once, one line, nothing unpacked.
fake_smi() {  # NAME OUTPUT EXIT
  printf '#!/bin/sh\necho "%s"\nexit %s\n' "$2" "$3" > "$scratch/$1"
  chmod +x "$scratch/$1"
}
fake_smi no-gpu "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." 9
fake_smi old-driver "NVIDIA H100 80GB HBM3, 535.104.05, 9.0, 80000, 81559" 0
fake_smi old-gpu "NVIDIA A100-SXM4-80GB, 580.65.06, 8.0, 80000, 81920" 0
fake_smi full-gpu "NVIDIA H200, 580.159.03, 9.0, 1200, 143771" 0
for case in "no-gpu:nvidia-smi finds no GPU" "old-driver:driver 535.104.05 on NVIDIA H100 80GB HBM3 is older than 580" \
            "old-gpu:compute 8.0; the binaries are built for sm_90" "full-gpu:1200 MiB free" \
            "$scratch/absent-smi:nvidia-smi finds no GPU"; do
  name=${case%%:*} message=${case#*:}
  smi=$name
  [[ "$name" == /* ]] || smi=$scratch/$name
  out=$scratch/preflight-$(basename "$name")
  OUT=$out CUBEFORGE_NVIDIA_SMI=$smi "$check" > "$scratch/preflight.txt" 2>&1
  rc=$?
  [ $rc -eq 2 ] || fail "preflight $name: exit $rc, not 2"
  expect_line "$scratch/preflight.txt" "^!!! NO USABLE CUDA DEVICE: .*$message" "preflight $name"
  expect_line "$out/summary.txt" "^!!! NO USABLE CUDA DEVICE" "preflight $name summary"
  [ ! -s "$out/stages.tsv" ] || fail "preflight $name: stages ran: $(cat "$out/stages.tsv")"
done

[ $failures -eq 0 ] && echo "device-check: report and preflight behave" || exit 1
