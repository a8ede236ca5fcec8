#!/usr/bin/env bash
# Sets up, builds and runs cubeforge's main job: a prompt turned into a mesh.
# With a display (DISPLAY set) that is the desktop app with the model loaded
# and the prompt ready; otherwise (or with --cli) the command line. With no
# model folder given it uses the built-in model when there is one, else the
# reference fixture folder beside the checkout, else (command line only) it
# benchmarks a random-weight model of the "small" shape. With no prompt given
# it is the model's first example (its card.json: the prompt it was measured to
# draw best), else "a chair".
# Usage: tools/run.sh [--cli] [--model DIR] [--prompt TEXT] [--out FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh >/dev/null
cli=${CUBEFORGE_BUILD_DIR:-build}/app/cli/cubeforge-cli
lab=${CUBEFORGE_BUILD_DIR:-build}/app/lab/cubeforge-lab
desktop=${CUBEFORGE_BUILD_DIR:-build}/app/desktop/cubeforge

model="" prompt="" out="cubeforge.glb" force_cli=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cli) force_cli=1; shift ;;
    --model) model=$2; shift 2 ;;
    --prompt) prompt=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1 (use --cli, --model, --prompt, --out)" >&2; exit 2 ;;
  esac
done
if [ -z "$model" ] && [ -f assets/model/shape_gpt.safetensors ]; then model=assets/model; fi
if [ -z "$model" ] && [ -f ../shared/oracle/cube3d-v05/shape_gpt.safetensors ]; then model=../shared/oracle/cube3d-v05; fi
if [ "$force_cli" = 0 ] && [ -n "${DISPLAY:-}" ] && [ -x "$desktop" ]; then
  # Without --prompt the app opens on the remembered prompt, or the model's first example.
  [ -n "$model" ] && model=$(realpath "$model")
  exec "$desktop" ${model:+--model "$model"} ${prompt:+--prompt "$prompt"}
fi
if [ -z "$prompt" ] && [ -n "$model" ] && [ -f "$model/card.json" ]; then
  prompt=$(tr -d '\n' < "$model/card.json" | sed -n 's/.*"examples": *\[ *"\([^"\\]*\)".*/\1/p')
fi
prompt=${prompt:-a chair}
if [ -z "$model" ]; then
  echo "No model folder found: benchmarking a random-weight model instead. Pass --model DIR for real generation."
  exec "$lab" bench --shape small --steps 32
fi
exec "$cli" generate --model "$model" --prompt "$prompt" --out "$out"
