#!/bin/sh
# Prepares what scripts/gpu_check.sh runs on a GPU machine that has the NVIDIA driver and CUDA
# 13 (cuBLAS) but none of strata's Debian libraries and no network: this build's strata and
# strata_tests (built with the CUDA backend, sm_90 included), stripped, and the shared
# libraries they load except glibc's, the driver's and CUDA's, in gpu-bundle/ (git-ignored;
# the device tool carries it: carry ["gpu-bundle"]). Usage: scripts/gpu_bundle.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
if ! grep -q '^STRATA_HAVE_CUDA:INTERNAL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "$build has no CUDA backend: build with nvcc on PATH (scripts/setup.sh)" >&2
  exit 1
fi
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target strata_cli strata_tests >/dev/null
rm -rf gpu-bundle
mkdir -p gpu-bundle/bin gpu-bundle/lib
cp "$build/bin/strata" "$build/tests/strata_tests" gpu-bundle/bin/
strip gpu-bundle/bin/strata gpu-bundle/bin/strata_tests
for lib in $(ldd gpu-bundle/bin/strata gpu-bundle/bin/strata_tests | awk '/=>/ { print $3 }' | sort -u); do
  case $(basename "$lib") in
    libc.so* | libm.so* | ld-linux* | libpthread.so* | libdl.so* | librt.so* | libcuda.so* | \
      libcublas* | libcudart*) ;;
    *) cp -L "$lib" gpu-bundle/lib/ ;;
  esac
done
du -sh gpu-bundle | cut -f1 | sed 's/^/gpu-bundle: /'
