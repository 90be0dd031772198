#!/bin/sh
# The suite's load test with a real OpenAI client: strata serve on a free loopback port, 64
# clients of the npm `openai` package at once (half streaming, 64 tokens each), every reply
# checked by tools/load/openai_load.mjs. Skipped (77) where Node.js or the package is missing
# (scripts/setup.sh installs it with npm ci when npm is there).
set -eu
strata=$1
root=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v node >/dev/null || [ ! -d "$root/tools/load/node_modules/openai" ]; then
  echo "skipped: no node or no tools/load/node_modules/openai (npm ci --prefix tools/load)"
  exit 77
fi
log=$(mktemp)
trap 'kill $pid 2>/dev/null || true; rm -f "$log"' EXIT
for attempt in 1 2 3 4 5; do
  port=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 20000 ))
  "$strata" serve -m "$root/models/strata-tiny.gguf" --port "$port" -np 8 -t 2 --temp 0 \
    2>"$log" &
  pid=$!
  for i in $(seq 1 100); do
    grep -q "^serving" "$log" && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
  done
  grep -q "^serving" "$log" && break
  wait $pid 2>/dev/null || true
done
grep -q "^serving" "$log" || { cat "$log"; exit 1; }
timeout 120 node "$root/tools/load/openai_load.mjs" --port "$port" --clients 64 --tokens 64
