#!/bin/sh
# Makes the shipped model: trains tools/train_tiny/train.py (about an hour on 2 cores; with
# Debian's libopenblas0-pthread installed torch uses OpenBLAS, ~50x faster than the reference
# BLAS), converts the checkpoint with `strata convert` to F16, and copies the held-out text and
# the training script's own results next to it.
# Usage: tools/make_shipped_model.sh [BUILD_DIR] [WORK_DIR]
set -eu
build=${1:-build}
work=${2:-$build/strata-tiny-hf}
/usr/bin/python3 tools/train_tiny/train.py --out "$work"
"$build/bin/strata" convert "$work" -o models/strata-tiny.gguf --type f16 --name strata-tiny
cp "$work/heldout.txt" models/strata-tiny-heldout.txt
cp "$work/results.json" models/strata-tiny-training.json
