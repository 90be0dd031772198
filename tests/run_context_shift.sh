#!/bin/sh
# strata run past a full context, as llama.cpp's --context-shift: it goes on to -n tokens, says
# how often it shifted, keeps --keep's tokens; without the flag it stops at the context, as
# llama.cpp v0.5.0 does by default. Usage: run_context_shift.sh STRATA_BINARY MODEL WORK_DIR
set -eu
strata=$1 model=$2 work=$3
mkdir -p "$work"
"$strata" run -m "$model" -c 32 -p "In the beginning" -n 80 --seed 3 --context-shift --keep 2 \
  --json >"$work/out" 2>"$work/err"
report=$(tail -n 1 "$work/err")
python3 - "$report" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
assert r["generated_tokens"] == 80, r
# 32 positions, BOS + 2 prompt tokens kept: each shift drops (32 - 3) // 2 = 14 tokens.
assert r["context_shifts"] >= 3 and r["context_dropped_tokens"] == 14 * r["context_shifts"], r
PY
"$strata" run -m "$model" -c 32 -p "In the beginning" -n 80 --seed 3 >"$work/out" 2>"$work/err"
grep -q "the context (32) is full (--context-shift goes on)" "$work/err" ||
  { echo "FAIL: no note at the full context"; cat "$work/err"; exit 1; }
echo "ok: --context-shift generated 80 tokens in a 32-token context; without it, run stopped"
