#!/usr/bin/env bash
# Runs a Python check of the training code with the interpreter require_torch.sh picks, or
# exits 77 (skip) without PyTorch.
#   python_test.sh REPO_ROOT SCRIPT [ARGS...]   (the script gets REPO_ROOT ARGS...)
set -euo pipefail
repo=$1 script=$2
source "$repo/tests/train/require_torch.sh"
exec "$python" "$script" "$repo" "${@:3}"
