#!/bin/sh
# Installs what strata needs from Debian 12's packages (only what is missing, so it is cheap to
# rerun), then configures and builds into ./build. Run as root, or with sudo available.
set -eu
cd "$(dirname "$0")/.."

scripts/install_packages.sh build-essential cmake pkg-config libfmt-dev libcli11-dev \
  nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libsentencepiece-dev \
  liburing-dev libcpp-httplib-dev python3 python3-numpy python3-torch python3-sentencepiece \
  python3-regex iproute2 libglpk-dev

# The load test's OpenAI client (tests/openai_load.sh), pinned by tools/load/package-lock.json.
if command -v npm >/dev/null && [ ! -d tools/load/node_modules/openai ]; then
  npm ci --prefix tools/load --no-audit --no-fund >/dev/null 2>&1 ||
    echo "warning: npm ci --prefix tools/load failed: the OpenAI-client load test will be skipped"
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"
