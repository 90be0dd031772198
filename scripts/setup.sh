#!/bin/sh
# Installs what strata needs from Debian 12's packages (only what is missing, so it is cheap to
# rerun), then configures and builds into ./build. Run as root, or with sudo available.
#   scripts/setup.sh          everything (library, CLI, tests, benchmarks), the CUDA backend for
#                             every GPU architecture strata supports when nvcc is found: what
#                             scripts/test.sh and CI build
#   scripts/setup.sh --quick  only the strata CLI, with CUDA code only for this machine's GPU
#                             (none without one): what scripts/run.sh builds. A tree already
#                             configured keeps its configuration.
# STRATA_WERROR=ON in the environment makes warnings errors (CI sets it).
set -eu
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1

scripts/install_packages.sh build-essential cmake ninja-build pkg-config libfmt-dev \
  libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev \
  libsentencepiece-dev liburing-dev libcpp-httplib-dev libglpk-dev libedit-dev
if [ "$quick" -eq 1 ]; then
  gpu="-DSTRATA_CUDA=OFF"
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    gpu="-DSTRATA_CUDA=ON -DSTRATA_CUDA_ARCHS=native"
  fi
  # shellcheck disable=SC2086  # gpu is a list of words
  scripts/cmake_configure.sh build --keep -DCMAKE_BUILD_TYPE=Release $gpu
  exec scripts/build.sh build strata_cli
fi

scripts/install_packages.sh python3 python3-numpy python3-torch python3-sentencepiece \
  python3-regex python3-jinja2 python3-jsonschema python3-websocket python3-yaml iproute2 tmux chromium nginx
# The load test's OpenAI client (tests/openai_load.sh), pinned by tools/load/package-lock.json.
if command -v npm >/dev/null && [ ! -d tools/load/node_modules/openai ]; then
  npm ci --prefix tools/load --no-audit --no-fund >/dev/null 2>&1 ||
    echo "warning: npm ci --prefix tools/load failed: the OpenAI-client load test will be skipped"
fi
scripts/cmake_configure.sh build -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=ON \
  -DSTRATA_CUDA_ARCHS=all -DSTRATA_WERROR="${STRATA_WERROR:-OFF}"
scripts/build.sh build
