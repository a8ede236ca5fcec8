#!/usr/bin/env bash
# Compares the engine with the training code on a shipped model (assets/model, or the folder
# under assets/ given) and checks the recorded reference tokens against a fresh run of
# tools/train/generate.py. Exit 77 (skip) when Debian's python3 has no PyTorch.
#   builtin_model_check.sh REPO_ROOT CUBEFORGE_CLI VOCAB_CHECK ENGINE_TOKENS [FOLDER REFERENCE]
set -euo pipefail
repo=$1 cli=$2 vocab_check=$3 engine_tokens=$4 folder=${5:-model} reference=${6:-builtin_model_reference.json}
source "$repo/tests/train/require_torch.sh"
exec "$python" "$repo/tests/train/compare_with_engine.py" "$repo/assets/$folder" "$cli" "$vocab_check" \
  "$engine_tokens" --reference "$repo/tests/pipeline/$reference"
