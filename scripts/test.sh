#!/bin/sh
# Set up, build, and run the whole test suite (unit tests and the reference comparisons).
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)"
