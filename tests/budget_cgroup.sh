#!/bin/sh
# --ram-budget is a hard limit for every command: a bundled model whose FFN is larger than the
# budget is run by bench (with its bandwidth probe), run, perplexity and serve (answering
# requests), each under a memory cgroup (v1 controller) whose limit equals the budget, and the
# cgroup's peak (page cache included) stays within it. Skipped (exit 77) where no memory cgroup
# can be made (not root, no controller), and says so.
# Usage: budget_cgroup.sh STRATA WORK_DIR [BUNDLE PROFILE BUDGET_MIB]
#   without a model: a small one is made (8 layers of 4096 F16 neurons: 100 MB of FFN), and
#   bench runs under two budgets; with one (bench/README: the 1B figures), each command under
#   BUDGET_MIB.
set -u
strata=$1 work=$2
cg=/sys/fs/cgroup/memory/strata_budget_test_$$
if [ ! -d /sys/fs/cgroup/memory ] || ! mkdir "$cg" 2>/dev/null; then
  echo "skipped: no memory cgroup can be made here (needs root and the cgroup v1 memory controller)"
  exit 77
fi
# Whatever still runs in the group when the script ends (a server, if a check failed or the
# script was stopped) is killed, so that nothing outlives the test.
trap 'for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
      sleep 0.2; rmdir "$cg" 2>/dev/null' EXIT
mkdir -p "$work"
here=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ge 5 ]; then
  bundle=$3 profile=$4 budgets=$5 serve_budget=$5
else
  model=$work/budget.gguf bundle=$work/budget.bundle.gguf profile=$work/budget.profile.gguf
  budgets="80 112" serve_budget=144
  "$strata" synth --preset tiny --embd 512 --ff 4096 --layers 8 --type f16 --ffn reglu \
    --sparsity 0.1 --vocab 2048 --tokenizer-from "$here/models/strata-tiny.gguf" -o "$model" \
    >/dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
  "$strata" bundle -m "$model" -o "$bundle" >/dev/null 2>&1 || { echo "FAIL: bundle"; exit 1; }
  "$strata" profile -m "$model" --random-tokens 64 -o "$profile" >/dev/null 2>&1 ||
    { echo "FAIL: profile"; exit 1; }
fi
text=$here/models/strata-tiny-heldout.txt
failures=0

# in_cgroup BUDGET_MIB COMMAND...: runs the command in the cgroup limited to the budget.
# limit MIB: the cgroup's limit, its peak reset.
limit() {
  echo "$(($1 * 1048576))" >"$cg/memory.limit_in_bytes"
  echo 0 >"$cg/memory.max_usage_in_bytes" 2>/dev/null || true
}
# in_cgroup MIB COMMAND...: the command in the cgroup under that limit. (A server started in
# the background runs the sh -c line itself, so that $! is the server and killing it stops it:
# a function run with "&" is a subshell whose kill left the server running.)
in_cgroup() {
  limit "$1"
  shift
  sh -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' sh "$cg" "$@"
}

# check NAME BUDGET_MIB STATUS: the command succeeded and the cgroup's peak is within the limit.
check() {
  name=$1 mib=$2 status=$3
  peak=$(cat "$cg/memory.max_usage_in_bytes")
  if [ "$status" -ne 0 ]; then
    echo "FAIL: $name under $mib MiB (exit $status)"; cat "$work/budget.out"
    failures=$((failures + 1))
  elif [ "$peak" -gt $((mib * 1048576)) ]; then
    echo "FAIL: $name peaked at $peak bytes, over the budget of $mib MiB"
    failures=$((failures + 1))
  else
    echo "ok: $name under --ram-budget ${mib}M, cgroup peak $((peak / 1048576)) MiB"
  fi
}

for mib in $budgets; do
  in_cgroup "$mib" "$strata" bench -m "$bundle" --profile "$profile" -p 16 -n 32 -r 1 \
    --ram-budget "${mib}M" >"$work/budget.out" 2>&1
  check "bench ($(grep -o 'plan ([a-z]*): .*' "$work/budget.out" | cut -c1-60)...)" "$mib" $?
done
mib=$(echo "$budgets" | awk '{print $NF}')
in_cgroup "$mib" "$strata" run -m "$bundle" --profile "$profile" -p "In the beginning" -n 24 \
  --ram-budget "${mib}M" >"$work/budget.out" 2>&1
check run "$mib" $?
in_cgroup "$mib" "$strata" perplexity -m "$bundle" --profile "$profile" -f "$text" -c 64 \
  --chunks 2 --ram-budget "${mib}M" >"$work/budget.out" 2>&1
check perplexity "$mib" $?

# serve: its HTTP side (16 MiB of request memory, 24 workers) is planned inside the budget.
port=$((20000 + $$ % 20000))
limit "$serve_budget"
sh -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' sh "$cg" "$strata" serve -m "$bundle" \
  --profile "$profile" --port "$port" -np 2 --max-queue 4 --threads-http 24 \
  --request-memory 16M --ram-budget "${serve_budget}M" >"$work/budget.out" 2>&1 &
server=$!
answered=0
for _ in $(seq 1 100); do
  if /usr/bin/python3 - "$port" <<'EOF' 2>/dev/null; then answered=1; break; fi
import json, sys, urllib.request
r = urllib.request.urlopen(urllib.request.Request(
    f"http://127.0.0.1:{sys.argv[1]}/v1/completions",
    data=b'{"prompt": "In the beginning", "max_tokens": 16}',
    headers={"Content-Type": "application/json"}), timeout=60)
assert json.load(r)["usage"]["completion_tokens"] == 16
EOF
  kill -0 "$server" 2>/dev/null || break
  sleep 0.2
done
kill "$server" 2>/dev/null
wait "$server" 2>/dev/null
if [ "$answered" -eq 1 ]; then check serve "$serve_budget" 0; else check serve "$serve_budget" 1; fi
[ "$failures" -eq 0 ]
