#!/usr/bin/env bash
# Builds the built-in model from nothing with one command: installs the training packages
# (tools/train/setup.sh), then runs the whole recipe (train.py) from its fixed seed. Run it
# again after an interruption and it resumes from the checkpoints in OUTDIR/checkpoints.
#   tools/train/make_model.sh OUTDIR [--smoke] [train.py options: --device cuda, --batch-scale K,
#                                                --max-seconds S, ...]
# --smoke: tiny sizes and few steps (about two minutes), to check the recipe end to end.
# Exit status 75: --max-seconds stopped the run with everything saved; run the same command again.
# TRAIN_PYTHON=python3: an interpreter that already has PyTorch (a CUDA build, say), NumPy and PyYAML;
# nothing is installed then. By default Debian's /usr/bin/python3, after tools/train/setup.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ] || [[ $1 == -* ]]; then
  echo "usage: $0 OUTDIR [--smoke] [train.py options]" >&2
  exit 2
fi
out=$1
shift
preset=full
if [ "${1:-}" = --smoke ]; then
  preset=smoke
  shift
fi
if [ -z "${TRAIN_PYTHON:-}" ]; then
  "$here/setup.sh"
  # Debian's interpreter on purpose: PyTorch comes from python3-torch, not from pip.
  TRAIN_PYTHON=/usr/bin/python3
fi
nice -n 10 "$TRAIN_PYTHON" "$here/train.py" "$out" --preset "$preset" "$@"
# The card's examples (what the app opens on and lists) are chosen by measurement on the
# finished model, and the figures kept beside the training curves.
if [ "$preset" = full ]; then
  nice -n 10 "$TRAIN_PYTHON" "$here/choose_examples.py" "$out" --write --json "$out/training/examples.json"
fi
