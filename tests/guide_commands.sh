#!/bin/sh
# docs/GUIDE.md's commands, run as written: every ```sh block of the page, in order, in a fresh
# directory holding the repository's models/, with `strata` the built CLI. A block fails the
# test when any of its commands fails (each runs under `set -e`).
#   tests/guide_commands.sh STRATA REPO WORK_DIR
set -eu
strata=$1 repo=$2 work=$3
rm -rf "$work"
mkdir -p "$work/bin"
ln -s "$repo/models" "$work/models"
ln -s "$strata" "$work/bin/strata"
# The blocks, one file each (the fences are "```sh" and "```").
awk -v dir="$work" '
  /^```sh$/ { n++; file = sprintf("%s/block%02d.sh", dir, n); inside = 1; next }
  /^```$/   { inside = 0; next }
  inside    { print > file }
' "$repo/docs/GUIDE.md"
blocks=$(ls "$work"/block*.sh 2>/dev/null | wc -l)
[ "$blocks" -ge 5 ] || { echo "FAILED: found $blocks blocks in docs/GUIDE.md"; exit 1; }
failures=0
for block in "$work"/block*.sh; do
  name=$(basename "$block")
  if (cd "$work" && PATH="$work/bin:$PATH" sh -e "$block" >"$block.out" 2>&1 </dev/null); then
    echo "ok: $name ($(grep -c . "$block") lines)"
  else
    echo "FAILED: $name; its commands and output:"
    cat "$block"
    tail -n 20 "$block.out"
    failures=$((failures + 1))
  fi
done
[ "$failures" -eq 0 ] && echo "all $blocks blocks of docs/GUIDE.md ran"
exit "$failures"
