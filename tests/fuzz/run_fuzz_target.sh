#!/bin/sh
# One deterministic CTest run of a libFuzzer target:
#   run_fuzz_target.sh BINARY SEED_CORPUS WORK_CORPUS RUNS MAX_LEN
# A fresh working corpus is copied from the committed seeds, and the target
# makes RUNS executions from seed 1. libFuzzer is deterministic only when
# nothing else varies between runs: -reload=0 stops it rereading the corpus
# folder on a timer, and address-space randomisation is turned off (setarch
# -R) because pointer values reach its comparison tracing and stack-depth
# features. Where the system refuses that (some container profiles), the run
# goes on with randomisation and says so: its inputs may then differ from
# run to run, though never with the machine's speed.
set -eu
binary=$1 seeds=$2 work=$3 runs=$4 max_len=$5
rm -rf "$work"
mkdir -p "$work"
cp "$seeds"/* "$work"/
fixed_addresses=""
if setarch "$(uname -m)" -R true 2>/dev/null; then
  fixed_addresses="setarch $(uname -m) -R"
else
  echo "run_fuzz_target.sh: cannot turn off address-space randomisation here; the inputs tried may vary" >&2
fi
# The time and memory limits only stop a hang or a check that grows with a claimed size.
exec $fixed_addresses "$binary" -seed=1 -runs="$runs" -reload=0 -max_len="$max_len" -rss_limit_mb=1024 \
  -timeout=60 "$work"
