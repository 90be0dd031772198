#!/bin/sh
# strata run's speculative decoding (--lookup: prompt lookup; --model-draft: the model's own Q4_0
# copy drafting) prints plain decoding's text for the same seed, greedy and sampled, says how
# many drafted tokens it kept (--json too), and stops at a full context as plain decoding does;
# a draft of another vocabulary is refused naming the difference; `strata serve --model-draft`
# answers /completion with the text of a server without it, its timings and /metrics counting
# the drafts.
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
grep -q "three sources of drafts: give one" "$work/err" || { echo "FAIL: --lookup with -md"; cat "$work/err"; exit 1; }
# A draft with another vocabulary (a random model with GPT-2's).
"$strata" synth --preset tiny --vocab 857 --tokenizer-from "$(dirname "$0")/data/gpt2-tokenizer.gguf" -o "$work/other.gguf" >/dev/null 2>&1
"$strata" run -m "$model" -p "x" -n 4 -md "$work/other.gguf" >/dev/null 2>"$work/err" && exit 1
grep -q "cannot draft for" "$work/err" || { echo "FAIL: a draft of another vocabulary"; cat "$work/err"; exit 1; }
[ "$(wc -l <"$work/err")" -eq 1 ] || { echo "FAIL: the refusal is not one line"; cat "$work/err"; exit 1; }
# The server: two slots drafting in one batch, against a server without drafts.
. "$(dirname "$0")/serve_on_free_port.sh"
pid=
trap 'kill $pid 2>/dev/null || true' EXIT
ask() {  # ask PORT OUT: three completions (greedy, sampled, greedy with no drafts), at once
  python3 - "$1" "$2" "$prompt" <<'PY'
import json, sys, threading, urllib.request
port, out, prompt = sys.argv[1], sys.argv[2], sys.argv[3]
bodies = [{"prompt": prompt, "n_predict": 40, "temperature": 0},
          {"prompt": prompt, "n_predict": 40, "temperature": 0.8, "seed": 3},
          {"prompt": "In the beginning", "n_predict": 20, "temperature": 0, "speculative.n_max": 0}]
replies = [None] * len(bodies)
def post(i):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", json.dumps(bodies[i]).encode(),
                                 {"Content-Type": "application/json"})
    replies[i] = json.load(urllib.request.urlopen(req, timeout=60))
threads = [threading.Thread(target=post, args=(i,)) for i in range(len(bodies))]
[t.start() for t in threads]
[t.join() for t in threads]
metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
json.dump({"replies": replies, "metrics": metrics}, open(out, "w"))
PY
}
for draft in "" "--model-draft $work/draft.gguf --draft-p-min 0.2"; do
  # shellcheck disable=SC2086
  serve_on_free_port "$work/serve.log" "$strata" serve -m "$model" -np 2 -c 256 -t 2 $draft || exit 1
  ask "$port" "$work/served${draft:+-draft}.json"
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
python3 - "$work/served.json" "$work/served-draft.json" <<'PY'
import json, sys
plain, spec = (json.load(open(f)) for f in sys.argv[1:])
for a, b in zip(plain["replies"], spec["replies"]):
    assert a["content"] == b["content"], (a["content"], b["content"])
    assert "draft_n" not in a["timings"], a["timings"]
t = [r["timings"] for r in spec["replies"]]
assert t[0]["draft_n"] > 0 and 0 <= t[0]["draft_n_accepted"] <= t[0]["draft_n"], t[0]
assert "draft_n" not in t[2], t[2]  # speculative.n_max 0
m = dict(l.rsplit(" ", 1) for l in spec["metrics"].splitlines() if l and not l.startswith("#"))
assert float(m["llamacpp:spec_decode_num_draft_tokens_total"]) == t[0]["draft_n"] + t[1].get("draft_n", 0), m
assert float(m["strata_draft_tokens_accepted_total"]) > 0, m
PY
echo "ok: --lookup and --model-draft gave plain decoding's text, greedy and sampled; so did serve"
