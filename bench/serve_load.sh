#!/bin/sh
# Aggregate decode speed and latency of strata serve with C concurrent OpenAI clients (the npm
# `openai` package, tools/load/openai_load.mjs), for each C in a list, on one server:
#
#   bench/serve_load.sh MODEL SLOTS "1 4 8 16 32" [TOKENS] [extra strata serve flags...]
#
# The server gets SLOTS slots of (prompt + TOKENS + 16) positions each. Prints a markdown
# table: clients, requests, aggregate tok/s, p50 and p99 latency, all done in, 503s.
set -eu
model=$1 slots=$2 counts=$3 tokens=${4:-64}
shift 3; [ $# -gt 0 ] && shift
root=$(cd "$(dirname "$0")/.." && pwd)
strata=${STRATA:-$root/build/bin/strata}
port=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 20000 ))
log=$(mktemp)
"$strata" serve -m "$model" --port "$port" -np "$slots" -c $(( slots * (tokens + 32) )) \
  --temp 0 "$@" 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$log"' EXIT
for i in $(seq 1 600); do grep -q "^serving" "$log" && break; sleep 0.1; done
grep -q "^serving" "$log" || { cat "$log"; exit 1; }
grep -E "^plan|^serving" "$log" >&2 || true
# One warm-up pass so first-touch costs are not in the first row.
node "$root/tools/load/openai_load.mjs" --port "$port" --clients "$slots" --tokens 8 >/dev/null
echo "| clients | requests | aggregate tok/s | p50 s | p99 s | all done s | 503s |"
echo "|---|---|---|---|---|---|---|"
for c in $counts; do
  node "$root/tools/load/openai_load.mjs" --port "$port" --clients "$c" --tokens "$tokens" --json |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print("| %d | %d | %.1f | %.3f | %.3f | %.3f | %d |" % (r["clients"], r["requests"], r["aggregate_tok_s"], r["p50_s"], r["p99_s"], r["wall_s"], r["retried_503"]))'
done
