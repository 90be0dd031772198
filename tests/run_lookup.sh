#!/bin/sh
# strata run --lookup (prompt-lookup speculative decoding) prints plain decoding's text for the
# same seed, greedy and sampled, says how many drafted tokens it kept (--json too), and stops at
# a full context as plain decoding does. Usage: run_lookup.sh STRATA_BINARY MODEL WORK_DIR
set -eu
strata=$1 model=$2 work=$3
mkdir -p "$work"
prompt="And God said, Let there be light: and there was light. And God said, Let there be light: and there was light. And God said,"
for flags in "--temp 0" "--temp 0.8 --seed 5" "--temp 0.8 --seed 11 -c 48"; do
  # shellcheck disable=SC2086
  "$strata" run -m "$model" -p "$prompt" -n 64 $flags >"$work/plain" 2>"$work/plain.err"
  # shellcheck disable=SC2086
  "$strata" run -m "$model" -p "$prompt" -n 64 $flags --lookup --json >"$work/spec" 2>"$work/spec.err"
  cmp -s "$work/plain" "$work/spec" ||
    { echo "FAIL: --lookup changed the text ($flags)"; diff "$work/plain" "$work/spec"; exit 1; }
  tail -n 1 "$work/spec.err" | python3 -c '
import json, sys
r = json.load(sys.stdin)["speculative"]
assert r["draft"] == "prompt lookup" and r["accepted"] <= r["drafted"], r
assert r["steps"] + r["plain_steps"] > 0, r
'
done
grep -q "the context (48) is full" "$work/spec.err" ||
  { echo "FAIL: --lookup did not stop at the full context"; cat "$work/spec.err"; exit 1; }
"$strata" run -m "$model" -p "x" -n 4 --lookup --context-shift >/dev/null 2>"$work/err" && exit 1
grep -q "error: --lookup stops at the context's end" "$work/err" ||
  { echo "FAIL: --lookup with --context-shift"; cat "$work/err"; exit 1; }
echo "ok: --lookup gave plain decoding's text, greedy and sampled"
