#!/bin/sh
# Side-by-side decode and prompt speed of llama.cpp and strata on the same GGUF files.
# llama.cpp is not built by this repository: pass the folder holding the llama-bench you built.
# Runs alternate (llama, strata, llama, strata, ...) so drift affects both; prints medians and
# the strata / llama.cpp ratio.
# Usage: [P=64] [N=128] bench/compare_llama.sh LLAMA_BIN_DIR THREADS RUNS MODEL.gguf [...]
# P and N: prompt and generated tokens per run (either may be 0, not both).
set -eu
llama=$1 threads=$2 runs=$3
P=${P:-64} N=${N:-128}
shift 3
strata=${STRATA:-build/bin/strata}
[ -x "$llama/llama-bench" ] || { echo "error: no llama-bench in '$llama'" >&2; exit 1; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
printf '%-28s %-6s %10s %10s %7s\n' model test llama.cpp strata ratio
for model in "$@"; do
  : >/tmp/cmp_llama_pp; : >/tmp/cmp_llama_tg; : >/tmp/cmp_strata_pp; : >/tmp/cmp_strata_tg
  i=0
  while [ "$i" -lt "$runs" ]; do
    "$llama/llama-bench" -m "$model" -t "$threads" -p "$P" -n "$N" -r 1 -o json 2>/dev/null |
      /usr/bin/python3 -c '
import json, sys
for r in json.load(sys.stdin):
    f = "/tmp/cmp_llama_pp" if r["n_prompt"] > 0 else "/tmp/cmp_llama_tg"
    open(f, "a").write(str(r["avg_ts"]) + "\n")'
    "$strata" bench -m "$model" -t "$threads" -p "$P" -n "$N" -r 1 --no-bandwidth --json |
      /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)
open("/tmp/cmp_strata_pp", "a").write(str(r["prompt_tokens_per_s"]) + "\n")
open("/tmp/cmp_strata_tg", "a").write(str(r["decode_tokens_per_s"]) + "\n")'
    i=$((i + 1))
  done
  for t in pp tg; do
    { [ "$t" = pp ] && [ "$P" -eq 0 ]; } || { [ "$t" = tg ] && [ "$N" -eq 0 ]; } && continue
    l=$(median </tmp/cmp_llama_$t) s=$(median </tmp/cmp_strata_$t)
    printf '%-28s %-6s %10.2f %10.2f %6.2fx\n' "$(basename "$model")" "$t" "$l" "$s" \
      "$(echo "$s $l" | awk '{print $1 / $2}')"
  done
done
