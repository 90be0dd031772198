#!/bin/sh
# Installs what strata needs from Debian 12's packages (only what is missing, so it is cheap to
# rerun), then configures and builds into ./build. Run as root, or with sudo available.
set -eu
cd "$(dirname "$0")/.."

packages="build-essential cmake pkg-config libfmt-dev libcli11-dev nlohmann-json3-dev \
libgtest-dev libgmock-dev libbenchmark-dev libsentencepiece-dev liburing-dev libcpp-httplib-dev python3 python3-numpy \
python3-torch python3-sentencepiece python3-regex"
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "installing:$missing"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"
