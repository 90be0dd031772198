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
. "$root/tests/serve_on_free_port.sh"
serve_on_free_port "$log" "$strata" serve -m "$root/models/strata-tiny.gguf" -np 8 -t 2 --temp 0 || exit 1
timeout 120 node "$root/tools/load/openai_load.mjs" --port "$port" --clients 64 --tokens 64
