#!/usr/bin/env bash
# Builds the built-in model from nothing with one command: installs the training packages
# (tools/train/setup.sh), then runs the whole recipe (train.py) from its fixed seed. Run it
# again after an interruption and it resumes from the checkpoints in OUTDIR/checkpoints.
#   tools/train/make_model.sh OUTDIR [--smoke]
# --smoke: tiny sizes and few steps (about two minutes), to check the recipe end to end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ] || [ $# -gt 2 ] || { [ $# -eq 2 ] && [ "$2" != --smoke ]; }; then
  echo "usage: $0 OUTDIR [--smoke]" >&2
  exit 2
fi
preset=full
[ "${2:-}" = --smoke ] && preset=smoke
"$here/setup.sh"
# Debian's interpreter on purpose: PyTorch comes from python3-torch, not from pip.
exec nice -n 10 /usr/bin/python3 "$here/train.py" "$1" --preset "$preset"
