#!/usr/bin/env bash
# Runs the training recipe at smoke scale into a temporary folder, then the block-diffusion
# fine-tune of it (diffusion.py --preset smoke), and compares the engine with the training code
# on both (compare_with_engine.py). Exit 77 (skip) when Debian's python3 has no PyTorch.
#   smoke_test.sh REPO_ROOT CUBEFORGE_CLI VOCAB_CHECK ENGINE_TOKENS
set -euo pipefail
repo=$1 cli=$2 vocab_check=$3 engine_tokens=$4
source "$repo/tests/train/require_torch.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
nice -n 10 "$python" "$repo/tools/train/train.py" "$work/model" --preset smoke --threads 1 | tail -n 3
# The preset's guidance scale is the folder's, which the engine and the training code both read.
grep -qx '  guidance_scale: 2.0' "$work/model/config.yaml" || { echo "config.yaml names no guidance_scale" >&2; exit 1; }
"$python" "$repo/tests/train/compare_with_engine.py" "$work/model" "$cli" "$vocab_check" "$engine_tokens"
nice -n 10 "$python" "$repo/tools/train/diffusion.py" "$work/diffusion" --preset smoke --from "$work/model" \
  --threads 1 | tail -n 2
grep -qx '  guidance_scale: 2.0' "$work/diffusion/config.yaml" || { echo "the fine-tune lost the guidance_scale" >&2; exit 1; }
"$python" "$repo/tests/train/compare_with_engine.py" "$work/diffusion" "$cli" "$vocab_check" "$engine_tokens"
