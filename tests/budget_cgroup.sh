#!/bin/sh
# --ram-budget is a hard limit: a bundled model whose FFN is larger than the budget runs under a
# memory cgroup (v1 controller) whose limit equals the budget, and the cgroup's peak (page cache
# included) stays within it. Skipped (exit 77) where no memory cgroup can be made (not root, no
# controller), and says so. Usage: budget_cgroup.sh STRATA_BINARY WORK_DIR
set -u
strata=$1 work=$2
cg=/sys/fs/cgroup/memory/strata_budget_test_$$
if [ ! -d /sys/fs/cgroup/memory ] || ! mkdir "$cg" 2>/dev/null; then
  echo "skipped: no memory cgroup can be made here (needs root and the cgroup v1 memory controller)"
  exit 77
fi
trap 'rmdir "$cg" 2>/dev/null' EXIT
mkdir -p "$work"
model=$work/budget.gguf
# 8 layers of 4096 F16 neurons: 100 MB of FFN, far over the budget.
"$strata" synth --preset tiny --embd 512 --ff 4096 --layers 8 --type f16 --ffn reglu \
  --sparsity 0.1 -o "$model" >/dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
"$strata" bundle -m "$model" -o "$work/budget.bundle.gguf" >/dev/null 2>&1 || { echo "FAIL: bundle"; exit 1; }
"$strata" profile -m "$model" --random-tokens 64 -o "$work/budget.profile.gguf" >/dev/null 2>&1 ||
  { echo "FAIL: profile"; exit 1; }
failures=0
for budget_mib in 80 112; do
  bytes=$((budget_mib * 1048576))
  echo "$bytes" >"$cg/memory.limit_in_bytes"
  echo 0 >"$cg/memory.max_usage_in_bytes" 2>/dev/null || true
  if ! sh -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' sh "$cg" "$strata" bench \
      -m "$work/budget.bundle.gguf" --profile "$work/budget.profile.gguf" -p 16 -n 32 -r 1 \
      --no-bandwidth --ram-budget "${budget_mib}M" >"$work/budget.out" 2>&1; then
    echo "FAIL: bench under ${budget_mib} MiB"; cat "$work/budget.out"; failures=$((failures + 1))
    continue
  fi
  peak=$(cat "$cg/memory.max_usage_in_bytes")
  if [ "$peak" -gt "$bytes" ]; then
    echo "FAIL: peak $peak bytes over the budget $bytes"; failures=$((failures + 1))
  else
    echo "ok: --ram-budget ${budget_mib}M, cgroup peak $((peak / 1048576)) MiB ($(grep '^plan' "$work/budget.out"))"
  fi
done
[ "$failures" -eq 0 ]
