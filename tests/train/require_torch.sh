# Sourced by the train tests: sets $python to Debian's python3 (or $TRAIN_PYTHON where set, e.g. an
# interpreter with a CUDA build of PyTorch), or exits 77 (skip) when it cannot import what the
# training code needs.
python=${TRAIN_PYTHON:-/usr/bin/python3}
if ! "$python" -c "import torch, numpy, yaml" 2>/dev/null; then
  echo "SKIP: $python cannot import torch, numpy and yaml; install them with tools/train/setup.sh"
  exit 77
fi
