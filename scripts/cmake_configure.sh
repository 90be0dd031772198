#!/bin/sh
# Configures a build tree with Ninja, quietly (the output in DIR/configure.log, printed only on
# failure):   scripts/cmake_configure.sh DIR [--keep] [CMAKE ARGS ...]
# --keep leaves a tree that is already configured as it is. A tree an older checkout made with
# another generator (Unix Makefiles) is configured anew.
set -eu
dir=$1
shift
keep=0
if [ "${1:-}" = "--keep" ]; then
  keep=1
  shift
fi
cache="$dir/CMakeCache.txt"
if [ -f "$cache" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$cache"; then
  echo "$dir was configured for another generator: configuring it again for Ninja"
  rm -rf "$cache" "$dir/CMakeFiles"
fi
[ "$keep" -eq 1 ] && [ -f "$cache" ] && exit 0
mkdir -p "$dir"
if ! cmake -S . -B "$dir" -G Ninja "$@" >"$dir/configure.log" 2>&1; then
  cat "$dir/configure.log"
  echo "cmake could not configure $dir: the output is in $dir/configure.log" >&2
  exit 1
fi
grep '^-- strata:' "$dir/configure.log" | sed 's/^-- //' || true
