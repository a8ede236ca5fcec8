#!/usr/bin/env bash
# The shipped model folders (assets/) stay within the size the repository allows them: a larger
# recipe (more codes, a wider network) must show up here, not in a slow clone. Links count as
# links, so the block-diffusion folder's shared files count once.
#   assets_size_test.sh PROJECT_ROOT LIMIT_BYTES
set -euo pipefail
root=$1
limit=$2
total=$(find "$root/assets" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
echo "assets/: $total bytes in regular files (limit $limit)"
if [ "$total" -gt "$limit" ]; then
  echo "assets/ holds $total bytes, over the $limit allowed: shrink the model (codes, width) or its extras" >&2
  find "$root/assets" -type f -printf '%s %p\n' | sort -rn | head -5 >&2
  exit 1
fi
