#!/usr/bin/env bash
# Installs the Debian packages the training recipe needs: the project's own
# set plus PyTorch for the CPU, NumPy, PyYAML and SciPy (tools/setup.sh --train).
set -euo pipefail
exec "$(dirname "$0")/../setup.sh" --train
