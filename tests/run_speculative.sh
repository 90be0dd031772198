#!/bin/sh
# strata run's speculative decoding (--lookup: prompt lookup; --model-draft: the model's own Q4_0
# copy drafting) prints plain decoding's text for the same seed, greedy and sampled, says how
# many drafted tokens it kept (--json too), and stops at a full context as plain decoding does;
# a draft of another vocabulary is refused naming the difference.
# Usage: run_speculative.sh STRATA_BINARY MODEL WORK_DIR
set -eu
strata=$1 model=$2 work=$3
mkdir -p "$work"
"$strata" quantize "$model" "$work/draft.gguf" Q4_0 --pure >/dev/null 2>&1
prompt="And God said, Let there be light: and there was light. And God said, Let there be light: and there was light. And God said,"
for draft in "--lookup" "--model-draft $work/draft.gguf --draft-p-min 0.2 --draft-max 6"; do
  for flags in "--temp 0" "--temp 0.8 --seed 5" "--temp 0.8 --seed 11 -c 48"; do
    # shellcheck disable=SC2086
    "$strata" run -m "$model" -p "$prompt" -n 64 $flags >"$work/plain" 2>"$work/plain.err"
    # shellcheck disable=SC2086
    "$strata" run -m "$model" -p "$prompt" -n 64 $flags $draft --json >"$work/spec" 2>"$work/spec.err"
    cmp -s "$work/plain" "$work/spec" ||
      { echo "FAIL: $draft changed the text ($flags)"; diff "$work/plain" "$work/spec"; exit 1; }
    tail -n 1 "$work/spec.err" | python3 -c '
import json, sys
r = json.load(sys.stdin)["speculative"]
want = "prompt lookup" if sys.argv[1] == "--lookup" else "draft model"
assert r["draft"] == want and r["accepted"] <= r["drafted"], r
assert r["steps"] + r["plain_steps"] > 0, r
assert (r["draft_passes"] > 0) == (want == "draft model"), r
' "$draft"
  done
  grep -q "the context (48) is full" "$work/spec.err" ||
    { echo "FAIL: $draft did not stop at the full context"; cat "$work/spec.err"; exit 1; }
done
"$strata" run -m "$model" -p "x" -n 4 --lookup --context-shift >/dev/null 2>"$work/err" && exit 1
grep -q "error: speculative decoding stops at the context's end" "$work/err" ||
  { echo "FAIL: --lookup with --context-shift"; cat "$work/err"; exit 1; }
"$strata" run -m "$model" -p "x" -n 4 --lookup -md "$work/draft.gguf" >/dev/null 2>"$work/err" && exit 1
grep -q "give one of them" "$work/err" || { echo "FAIL: --lookup with -md"; cat "$work/err"; exit 1; }
# A draft with another vocabulary (a random model with GPT-2's).
"$strata" synth --preset tiny --vocab 857 --tokenizer-from "$(dirname "$0")/data/gpt2-tokenizer.gguf" -o "$work/other.gguf" >/dev/null 2>&1
"$strata" run -m "$model" -p "x" -n 4 -md "$work/other.gguf" >/dev/null 2>"$work/err" && exit 1
grep -q "cannot draft for" "$work/err" || { echo "FAIL: a draft of another vocabulary"; cat "$work/err"; exit 1; }
[ "$(wc -l <"$work/err")" -eq 1 ] || { echo "FAIL: the refusal is not one line"; cat "$work/err"; exit 1; }
echo "ok: --lookup and --model-draft gave plain decoding's text, greedy and sampled"
