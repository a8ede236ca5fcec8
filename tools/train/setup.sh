#!/usr/bin/env bash
# Installs the Debian packages the training recipe in tools/train/ needs
# (PyTorch for the CPU, NumPy, PyYAML). Kept apart from tools/setup.sh so the
# C++ build and CI do not pull in PyTorch; the train tests skip without it.
# Idempotent: packages already present are skipped.
set -euo pipefail

packages=(python3-torch python3-numpy python3-yaml)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "train setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  as_root=(sudo)
fi
echo "train setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq >/dev/null
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
