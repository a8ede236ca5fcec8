#!/usr/bin/env bash
# Long, time-bounded fuzzing of the libFuzzer targets (tests/fuzz), one
# target at a time, each from a fresh copy of its committed corpus and a new
# random seed. Prints per target the executions, executions per second, the
# coverage libFuzzer reached (cov: edges, ft: features), the corpus it grew
# and the seed, so a finding can be replayed. The CTest runs (label fuzz) are
# the short, deterministic ones; this is for finding new bugs.
#
#   tools/fuzz.sh [--minutes M] [--build-dir DIR] [--keep DIR] [target...]
#
#   --minutes M    time per target (default 5)
#   --build-dir    the configured build with the targets built (default build;
#                  `cmake --build build --target build_fuzz_<target>`)
#   --keep DIR     keep each grown corpus in DIR/<target> (default: removed)
#   target...      names as in tests/fuzz/CMakeLists.txt (default: every one)
#
# A crash, leak, timeout or memory overflow stops that target; its input is
# saved as DIR/<target>/crash-* (or in the working folder) and printed, and the
# script exits 1 after the other targets ran. Run it under `nice` on a shared
# machine.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=5
build_dir=build
keep=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ! [[ "$minutes" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
  echo "fuzz.sh: --minutes takes a number of minutes, not '$minutes'" >&2
  exit 2
fi
list="$build_dir/tests/fuzz/fuzz_targets.txt"
if [ ! -f "$list" ]; then
  echo "fuzz.sh: $list is missing; configure with clang present (CUBEFORGE_FUZZ=ON) and build the fuzz targets" >&2
  exit 2
fi
seconds=$(awk -v m="$minutes" 'BEGIN { s = int(m * 60); print (s < 1 ? 1 : s) }')

declare -A binary corpus max_len detect_leaks
known=()
while read -r name path seeds length leaks; do
  [ -n "$name" ] || continue
  binary[$name]=$path corpus[$name]=$seeds max_len[$name]=$length detect_leaks[$name]=$leaks
  known+=("$name")
done < "$list"
[ ${#targets[@]} -gt 0 ] || targets=("${known[@]}")
for t in "${targets[@]}"; do
  if [ -z "${binary[$t]:-}" ]; then
    echo "fuzz.sh: no fuzz target '$t'; the targets are: ${known[*]}" >&2
    exit 2
  fi
  if [ ! -x "${binary[$t]}" ]; then
    echo "fuzz.sh: ${binary[$t]} is not built; cmake --build $build_dir --target build_fuzz_$t" >&2
    exit 2
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/cubeforge-fuzz-XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=0
rows=()
for t in "${targets[@]}"; do
  dir="$work/$t"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp "${corpus[$t]}"/* "$dir/corpus/"
  seeds=$(ls "$dir/corpus" | wc -l)
  echo "fuzz.sh: $t for ${seconds} s from $seeds seed input(s)" >&2
  status=0
  ASAN_OPTIONS="detect_leaks=${detect_leaks[$t]}" "${binary[$t]}" -max_total_time="$seconds" \
    -max_len="${max_len[$t]}" -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/" "$dir/corpus" > "$dir/log" 2>&1 || status=$?
  seed=$(sed -n 's/^INFO: Seed: \([0-9]*\).*/\1/p' "$dir/log" | head -1)
  runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$dir/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *\([0-9]*\).*/\1/p' "$dir/log" | tail -1)
  added=$(sed -n 's/^stat::new_units_added: *\([0-9]*\).*/\1/p' "$dir/log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *\([0-9]*\).*/\1/p' "$dir/log" | tail -1)
  # The last status line ("#N DONE cov: C ft: F corp: U/S ...") holds the coverage reached.
  last=$(grep -E '^#[0-9]+' "$dir/log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<< "$last")
  verdict=ok
  if [ "$status" -ne 0 ]; then
    verdict="FAILED (exit $status)"
    failed=1
    echo "fuzz.sh: $t failed; the end of its log:" >&2
    tail -40 "$dir/log" >&2
  fi
  if [ -n "$keep" ]; then
    mkdir -p "$keep/$t"
    cp -r "$dir/corpus/." "$keep/$t/"
    cp "$dir/log" "$keep/$t.log"
    if compgen -G "$dir/artifacts/*" > /dev/null; then cp "$dir/artifacts"/* "$keep/$t/"; fi
  elif compgen -G "$dir/artifacts/*" > /dev/null; then
    mkdir -p "fuzz-artifacts/$t"
    cp "$dir/artifacts"/* "fuzz-artifacts/$t/"
    echo "fuzz.sh: the failing input(s) of $t are in fuzz-artifacts/$t/" >&2
  fi
  rows+=("$(printf '%-18s %8s %12s %9s %7s %7s %6s+%-5s %6s %11s  %s' "$t" "$seconds" "${runs:-?}" "${rate:-?}" \
    "${cov:-?}" "${ft:-?}" "$seeds" "${added:-?}" "${rss:-?}" "${seed:-?}" "$verdict")")
done

printf '%-18s %8s %12s %9s %7s %7s %12s %6s %11s  %s\n' target seconds executions "exec/s" cov ft \
  "corpus" "MB" seed result
for row in "${rows[@]}"; do echo "$row"; done
exit $failed
