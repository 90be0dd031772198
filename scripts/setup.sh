#!/bin/sh
# Installs what strata needs from Debian 12's packages (only what is missing, so it is cheap to
# rerun), then configures and builds into ./build. Run as root, or with sudo available.
set -eu
cd "$(dirname "$0")/.."

scripts/install_packages.sh build-essential cmake pkg-config libfmt-dev libcli11-dev \
  nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libsentencepiece-dev \
  liburing-dev libcpp-httplib-dev python3 python3-numpy python3-torch python3-sentencepiece \
  python3-regex iproute2 libglpk-dev

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"
