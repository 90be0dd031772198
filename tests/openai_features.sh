#!/bin/sh
# strata serve's structured output, tools and logprobs through the npm `openai` client
# (tools/load/openai_features.mjs), on the shipped model with Qwen2.5's chat template; every
# output validated by python3-jsonschema (tools/reference/check_openai_features.py). Skipped (77)
# where Node.js or the package is missing (scripts/setup.sh installs it with npm ci).
#   tests/openai_features.sh STRATA PYTHON
set -eu
strata=$1 python=$2
root=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v node >/dev/null || [ ! -d "$root/tools/load/node_modules/openai" ]; then
  echo "skipped: no node or no tools/load/node_modules/openai (npm ci --prefix tools/load)"
  exit 77
fi
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
. "$root/tests/serve_on_free_port.sh"
serve_on_free_port "$work/log" "$strata" serve -m "$root/models/strata-tiny.gguf" -np 2 -c 3072 -t 2 \
  --chat-template "$root/tests/data/chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja" || exit 1
timeout 120 node "$root/tools/load/openai_features.mjs" --port "$port" --out "$work/results.json"
"$python" "$root/tools/reference/check_openai_features.py" "$work/results.json"
