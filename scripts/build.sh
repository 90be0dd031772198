#!/bin/sh
# Builds a configured tree with one progress line instead of the compiler's commands:
#   scripts/build.sh DIR [TARGET ...]      (no target: everything)
# The whole output goes to DIR/build.log. What the compiler says (a warning, an error) is
# printed after the build; on failure the failed commands with it, and the exit status is the
# build's. On a terminal the line is redrawn in place; in a log (CI) it is printed every 10%.
set -eu
dir=$1
shift
log="$dir/build.log"
status="$dir/build.status"
jobs=$(nproc 2>/dev/null || echo 2)
targets=""
for t in "$@"; do targets="$targets --target $t"; done
tty=0
[ -t 1 ] && tty=1

# The progress line, from ninja's "[done/total] description" lines. (A shell loop, not awk:
# mawk reads a pipe in blocks, so its line would lag the build.)
progress() {
  next_share=0
  last_total=""
  while IFS= read -r line; do
    case $line in
      \[[0-9]*/[0-9]*\]\ *) ;;
      *) continue ;;
    esac
    count=${line%%]*}
    count=${count#[}
    done_=${count%/*}
    total=${count#*/}
    [ "$done_" -gt 0 ] || continue
    [ "$total" = "$last_total" ] || next_share=0
    last_total=$total
    what=${line##* }
    what=${what##*.dir/}
    what=${what%.o}
    if [ "$tty" -eq 1 ]; then
      printf '\r\033[K%.100s' "building $dir: $done_/$total $what"
    elif [ $((100 * done_)) -ge $((next_share * total)) ]; then
      echo "building $dir: $done_/$total ($((100 * done_ / total))%)"
      while [ $((100 * done_)) -ge $((next_share * total)) ]; do next_share=$((next_share + 10)); done
    fi
  done
  if [ "$tty" -eq 1 ]; then printf '\r\033[K'; fi
}

# shellcheck disable=SC2086  # targets is a list of words
{
  rc=0
  cmake --build "$dir" -j "$jobs" $targets || rc=$?
  echo "$rc" >"$status"
} 2>&1 | tee "$log" | progress
rc=$(cat "$status")
rm -f "$status"
# What the compiler (or ninja) said besides its progress lines.
said=$(grep -v -e '^\[[0-9]*/[0-9]*\] ' -e '^ninja: Entering directory' -e '^ninja: no work to do' \
  "$log" || true)
[ -n "$said" ] && printf '%s\n' "$said"
if [ "$rc" -ne 0 ]; then
  echo "build failed in $dir (exit $rc): the whole output is in $log" >&2
  exit "$rc"
fi
echo "built $dir${*:+ ($*)}"
