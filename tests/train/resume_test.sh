#!/usr/bin/env bash
# Training recipe (tools/train/): a run stopped several times and run again until it finishes
# must export the same bytes, and write the same curves, as a run that never stopped, for
# train.py and for diffusion.py. The stops fall in every kind of stage (data generation, the
# vocabulary, both autoencoder stages, k-means, the tokens, the GPT, the block-diffusion
# fine-tune), placed by train.py's test hook --stop-after-units; one is a wall-clock
# --max-seconds 0, which stops after one unit. Small: the smoke preset at a tenth of its steps,
# from a seed of its own, so that the fine-tune is seen to draw its source's shapes.
#   resume_test.sh REPO_ROOT [cpu|cuda]
# Exit 77 (skip) without PyTorch, or with cuda when PyTorch finds no CUDA device.
set -euo pipefail
repo=$1 device=${2:-cpu}
source "$repo/tests/train/require_torch.sh"
if [ "$device" = cuda ] && ! "$python" -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then
  echo "SKIP: $python finds no CUDA device"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

train() {
  nice -n 10 "$python" "$repo/tools/train/train.py" "$1" --preset smoke --steps-scale 0.1 --seed 7 \
    --device "$device" --threads 1 --blas-threads 1 "${@:2}"
}
diffusion() {
  nice -n 10 "$python" "$repo/tools/train/diffusion.py" "$1" --preset smoke --from "$work/whole" --steps 12 \
    --device "$device" --threads 1 --blas-threads 1 "${@:2}"
}
# stops WHERE COMMAND...: the command must stop with status 75 after WHERE (its last line says).
stops() {
  local where=$1 status=0
  shift
  "$@" >"$work/log" 2>&1 || status=$?
  if [ "$status" -ne 75 ] || ! tail -n 1 "$work/log" | grep -qF "stopped after $where ("; then
    echo "FAIL: expected status 75 after '$where', got $status:"
    tail -n 5 "$work/log"
    exit 1
  fi
  echo "stopped after $where"
}
# same A B: the exported folders and curves (without the seconds-per-step column) are equal.
same() {
  diff -r --exclude=checkpoints "$1" "$2"
  for curve in "$1"/checkpoints/curves_*.csv; do
    diff <(sed 's/,[^,]*$//' "$curve") <(sed 's/,[^,]*$//' "$2/checkpoints/${curve##*/}")
  done
  echo "$2 equals $1"
}

train "$work/whole" | tail -n 1
stops "data, 5 of 24 categories" train "$work/parts" --stop-after-units 5
# The other 19 categories, the vocabulary and 5 steps.
stops "ae_warm step 5 of 80" train "$work/parts" --stop-after-units 25
stops "k-means" train "$work/parts" --stop-after-units 76
# Past the quantised stage's first dead-code check (every 25 steps here), then one unit by the clock.
stops "ae_vq step 30 of 40" train "$work/parts" --stop-after-units 30
stops "ae_vq step 31 of 40" train "$work/parts" --max-seconds 0
stops "tokens" train "$work/parts" --stop-after-units 10
stops "gpt step 12 of 30" train "$work/parts" --stop-after-units 12
train "$work/parts" | tail -n 1
cmp "$work/whole/checkpoints/tokens.npy" "$work/parts/checkpoints/tokens.npy"
same "$work/whole" "$work/parts"

diffusion "$work/diffusion_whole" | tail -n 1
# The fine-tune's data is its source's: the same shapes, drawn from the seed the source recorded.
"$python" - "$work/whole/checkpoints/data.npz" "$work/diffusion_whole/checkpoints/data.npz" <<'EOF'
import sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
different = sorted(k for k in set(a.files) | set(b.files)
                   if k not in a.files or k not in b.files or not np.array_equal(a[k], b[k]))
if different:
    sys.exit(f"FAIL: the fine-tune drew other shapes than its source (arrays {', '.join(different)})")
print("the fine-tune's data equals its source's")
EOF
stops "data, 10 of 24 categories" diffusion "$work/diffusion_parts" --stop-after-units 10
# The other 14 categories, the tokens and 5 steps.
stops "diffusion step 5 of 12" diffusion "$work/diffusion_parts" --stop-after-units 20
diffusion "$work/diffusion_parts" | tail -n 1
same "$work/diffusion_whole" "$work/diffusion_parts"
