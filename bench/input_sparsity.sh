#!/bin/sh
# Decode speed with training-free input sparsity against dense decode of the same file, side by
# side: runs alternate (dense, then per level TEAL with the row-major products of the
# thresholded input, "teal", and with input-sparse products through the column copies, "cols",
# then dense again, ...) so drift affects all; prints medians of decode tok/s, the ratio to
# dense, the weight bytes read per token and each input's share of values kept. The model must
# carry thresholds (strata sparsify). With LLAMA_BENCH set to a llama-bench binary (llama.cpp,
# built outside this repository), llama.cpp's dense decode of the same file runs in each round
# too, and each row's ratio to it is printed. KINDS picks the TEAL runs (default "teal cols"; a
# 7B F16 model's column copies do not fit in 24 GiB beside it: KINDS=teal). With COLUMN_BUNDLE
# set to the model's column-bundled file (strata bundle --columns), each level also runs from it
# with every column cached and the attention through its copies ("bundle": --input-columns
# --window 100000, no budget; 3 repetitions, the first reading the columns from disk, the
# median kept).
# Usage: [LLAMA_BENCH=.../llama-bench] [KINDS=...] [COLUMN_BUNDLE=...] bench/input_sparsity.sh
#        MODEL.gguf THREADS RUNS LEVEL...
set -eu
model=$1 threads=$2 runs=$3
shift 3
strata=${STRATA:-build/bin/strata}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
kinds=${KINDS:-teal cols}
one() {  # one LABEL [FLAGS...]: a decode run's tok/s, bytes per token and densities
  label=$1
  shift
  "$strata" bench -m "${RUN_MODEL:-$model}" -t "$threads" -p 0 -n 64 --no-bandwidth --json \
    -r "${REPS:-1}" "$@" 2>/dev/null |
    /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)
label, work = sys.argv[1], sys.argv[2]
open(f"{work}/{label}.tg", "a").write(str(r["decode_tokens_per_s"]) + "\n")
open(f"{work}/{label}.bytes", "w").write(str(r["weight_bytes_per_token"]) + "\n")
s = r["ffn_report"]["input_sparsity"]
open(f"{work}/{label}.kept", "w").write(
    "-" if s is None else " ".join(f"{k} {v:.2f}" for k, v in s["density"].items()) + "\n")' \
      "$label" "$work"
}
llama() {  # llama.cpp's dense decode of the same file, as `one` measures strata's
  "$LLAMA_BENCH" -m "$model" -t "$threads" -p 0 -n 64 -r 1 -o json 2>/dev/null |
    /usr/bin/python3 -c '
import json, sys
open(sys.argv[1], "a").write(str(json.load(sys.stdin)[0]["avg_ts"]) + "\n")' "$work/llama.tg"
}
i=0
while [ "$i" -lt "$runs" ]; do
  [ -z "${LLAMA_BENCH:-}" ] || llama
  one dense
  for level in "$@"; do
    for kind in $kinds; do
      case $kind in
        teal) one "teal$level" --sparsity-mode teal --sparsity "$level" ;;
        cols) one "cols$level" --sparsity-mode teal --sparsity "$level" --input-columns ;;
      esac
    done
    [ -z "${COLUMN_BUNDLE:-}" ] || RUN_MODEL=$COLUMN_BUNDLE REPS=3 one "bundle$level" \
      --sparsity-mode teal --sparsity "$level" --input-columns --window 100000
  done
  i=$((i + 1))
done
dense=$(median <"$work/dense.tg")
printf '%-10s %10s %7s %12s  %s\n' run "tok/s" ratio "MiB/token" "values kept"
printf '%-10s %10.2f %7.2f %12.1f  %s\n' dense "$dense" 1 \
  "$(awk '{print $1 / 1048576}' "$work/dense.bytes")" "-"
[ -z "${COLUMN_BUNDLE:-}" ] || kinds="$kinds bundle"
for level in "$@"; do
  for kind in $kinds; do
    tg=$(median <"$work/$kind$level.tg")
    printf '%-10s %10.2f %7.2f %12.1f  %s\n' "$kind $level" "$tg" \
      "$(awk -v a="$tg" -v b="$dense" 'BEGIN {print a / b}')" \
      "$(awk '{print $1 / 1048576}' "$work/$kind$level.bytes")" "$(cat "$work/$kind$level.kept")"
  done
done
if [ -n "${LLAMA_BENCH:-}" ]; then
  lt=$(median <"$work/llama.tg")
  printf 'llama.cpp dense %.2f tok/s; strata / llama.cpp: dense %.2f' "$lt" \
    "$(awk -v a="$dense" -v b="$lt" 'BEGIN {print a / b}')"
  for level in "$@"; do
    for kind in $kinds; do
      printf ', %s %s %.2f' "$kind" "$level" \
        "$(awk -v a="$(median <"$work/$kind$level.tg")" -v b="$lt" 'BEGIN {print a / b}')"
    done
  done
  echo
fi
