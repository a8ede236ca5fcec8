#!/usr/bin/env bash
# Runs one window-opening test on an X server of its own (Xvfb), so tests that
# CTest runs side by side never share a display: one server serving every
# window of a parallel run was slow to answer or refused connections under
# load, and a window that cannot open failed a test that passes alone.
#
# Usage: with_display.sh PROGRAM [ARGS...]  (CMake sets it as the test
# executables' CROSSCOMPILING_EMULATOR, so CTest and gtest discovery call it).
# Listing tests needs no display. Without Xvfb the program runs on the
# caller's DISPLAY, if any (the tests skip when there is none).
# Xvfb picks a free display number itself (-displayfd) and writes it when it
# accepts connections; reading it through a FIFO waits for exactly that, with
# no polling and no time limit of its own (CTest's timeout bounds the test).
# The program's HOME is a fresh folder beside the display's (see below).
set -uo pipefail

for argument in "$@"; do
  [ "$argument" = "--gtest_list_tests" ] && exec "$@"
done
if ! command -v Xvfb >/dev/null; then
  exec "$@"
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/cubeforge-display.XXXXXX") || exit 1
server=""
cleanup() {
  if [ -n "$server" ]; then
    kill "$server" 2>/dev/null
    wait "$server" 2>/dev/null
  fi
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

# A home of its own, removed with the display: the app exports into the
# desktop's documents folder and keeps its data under the home unless told
# otherwise, and no test may write into the home of whoever runs the tests.
# Caches stay where they were: they are Mesa's and the Vulkan validation
# layer's compiled shaders (the app keeps nothing there), and a cold cache in
# every test would compile them again for each.
mkdir "$scratch/home" || exit 1
export XDG_CACHE_HOME="${XDG_CACHE_HOME:-$HOME/.cache}"
export HOME="$scratch/home"
unset XDG_CONFIG_HOME XDG_DATA_HOME XDG_STATE_HOME

mkfifo "$scratch/ready"
# Large enough for every window size the tests ask for.
Xvfb -displayfd 3 -screen 0 1920x1200x24 -nolisten tcp -noreset 3>"$scratch/ready" 2>"$scratch/server.log" &
server=$!
display=""
read -r display <"$scratch/ready"
if [ -z "$display" ]; then
  echo "with_display.sh: Xvfb did not start; its log:" >&2
  cat "$scratch/server.log" >&2
  exit 1
fi

DISPLAY=":$display" "$@"
status=$?
exit "$status"
