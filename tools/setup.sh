#!/usr/bin/env bash
# Installs every Debian package cubeforge needs to build, test and run.
# Idempotent and quiet: packages already present are skipped, and apt is only
# asked for what is missing. Runs as root, or through sudo when available.
# `--train` adds what the training recipe in tools/train/ needs (PyTorch for
# the CPU, NumPy, PyYAML, SciPy); the C++ build and CI do without it.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  # inference: BLAS, configuration, weights metadata
  libopenblas-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev
  # geometry and files
  libmeshoptimizer-dev libassimp-dev libtinygltf-dev libstb-dev libglm-dev
  # Vulkan engine and desktop app
  libvulkan-dev glslc vulkan-validationlayers mesa-vulkan-drivers
  libglfw3-dev libimgui-dev xvfb xauth
  # tests
  libgtest-dev googletest
)
if [ "${1:-}" = "--train" ]; then
  packages+=(python3-torch python3-numpy python3-yaml python3-scipy)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  as_root=(sudo)
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq >/dev/null
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
