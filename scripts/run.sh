#!/bin/sh
# Quick start: set up, build the strata CLI (only it, and GPU code only for this machine's GPU:
# scripts/setup.sh --quick), and generate text with the model shipped in models/.
# Extra arguments go to `strata run` (e.g. -p "your prompt" -n 64).
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh --quick
if [ "$#" -eq 0 ]; then
  set -- -p "In the beginning" -n 64 --seed 1
fi
exec build/bin/strata run -m models/strata-tiny.gguf "$@"
