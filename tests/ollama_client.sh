#!/bin/sh
# strata serve through the npm `ollama` client (tools/load/ollama_client.mjs): list, show, ps,
# version, chat and generate whole and streamed, a schema format, an error. Skipped (77) where
# Node.js or the package is missing (scripts/setup.sh installs it with npm ci).
#   tests/ollama_client.sh STRATA
set -eu
strata=$1
root=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v node >/dev/null || [ ! -d "$root/tools/load/node_modules/ollama" ]; then
  echo "skipped: no node or no tools/load/node_modules/ollama (npm ci --prefix tools/load)"
  exit 77
fi
log=$(mktemp)
trap 'kill $pid 2>/dev/null || true; rm -f "$log"' EXIT
. "$root/tests/serve_on_free_port.sh"
serve_on_free_port "$log" "$strata" serve -m "$root/models/strata-tiny.gguf" --alias tiny -np 2 -c 1024 -t 2 \
  --chat-template "$root/tests/data/chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja" || exit 1
timeout 120 node "$root/tools/load/ollama_client.mjs" --port "$port" --model tiny
