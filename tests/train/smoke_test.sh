#!/usr/bin/env bash
# Runs the training recipe at smoke scale into a temporary folder, then compares the engine
# with the training code on it (compare_with_engine.py). Exit 77 (skip) when Debian's
# python3 has no PyTorch.
#   smoke_test.sh REPO_ROOT CUBEFORGE_CLI VOCAB_CHECK ENGINE_TOKENS
set -euo pipefail
repo=$1 cli=$2 vocab_check=$3 engine_tokens=$4
source "$repo/tests/train/require_torch.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
nice -n 10 "$python" "$repo/tools/train/train.py" "$work/model" --preset smoke --threads 1 | tail -n 3
"$python" "$repo/tests/train/compare_with_engine.py" "$work/model" "$cli" "$vocab_check" "$engine_tokens"
