#!/bin/sh
# The CUDA backend's checks on a GPU machine, in one run of at most 8 minutes (an H200 here),
# building nothing: it runs gpu-bundle/ (scripts/gpu_bundle.sh, made on a machine with nvcc)
# against models it generates with `strata synth`, and prints one table.
#   1. GPU tests: every CUDA op against the scalar reference (BackendOps .../cuda), whole models
#      against the CPU (CudaSession: the shipped model, every type, 1B-shape F16/Q8_0/Q4_0
#      models, determinism, predict mode, budgets).
#   2. Benchmarks, wholly in VRAM (-ngl 99): pp512 and decode tok/s of 1B and 7B shapes in F16,
#      Q8_0 and Q4_0 as a share of the GPU's measured read bandwidth; predict mode at 10%
#      density against dense on a 7B-shape ReLU model.
#   --hybrid instead of 2: a 13B-shape ReLU model (F16, ~26 GB, 10% density, predictors of rank
#      64) split between the GPU and the CPU under --vram-budget 16G and 8G (consumer cards),
#      against the CPU alone: decode tok/s, the share of activations on the GPU.
# Usage (device tool: carry ["gpu-bundle"]): scripts/gpu_check.sh [--hybrid]
# Environment: GPU_MODELS (where models go; default /tmp/strata-gpu-models), OUT (where the logs
# and JSON go; default gpu-check-out), GPU_CHECK_SECONDS (default 470: the steps that would not
# finish in time are skipped and say so).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=${GPU_BUNDLE:-$root/gpu-bundle}
out=${OUT:-$root/gpu-check-out}
models=${GPU_MODELS:-/tmp/strata-gpu-models}
mkdir -p "$out" "$models"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
export STRATA_SOURCE_DIR="$root"
strata="$bundle/bin/strata"
start=$(date +%s)
deadline=$((start + ${GPU_CHECK_SECONDS:-470}))
table="$out/table.txt"
: >"$table"

if [ ! -x "$strata" ]; then
  echo "no $strata: run scripts/gpu_bundle.sh on a machine with nvcc and carry gpu-bundle" >&2
  exit 1
fi
left() { echo $((deadline - $(date +%s))); }
field() {  # field FILE NAME: a number from strata's JSON
  sed -n "s/^ *\"$2\": \([-0-9.e+]*\).*/\1/p" "$1" | head -n 1
}
model() {  # model NAME SYNTH-ARGS...: generated once
  name=$1
  shift
  [ -f "$models/$name.gguf" ] || "$strata" synth "$@" -o "$models/$name.gguf" >"$out/synth-$name.log" 2>&1
}
row() {  # row NAME MODE JSON
  printf '| %-14s | %-7s | %9.1f | %9.1f | %7.3f | %8.0f | %5.1f%% |\n' "$1" "$2" \
    "$(field "$3" prompt_tokens_per_s)" "$(field "$3" decode_tokens_per_s)" \
    "$(echo "$(field "$3" weight_bytes_per_token) / 1000000000" | awk '{print $1 / $3}')" \
    "$(echo "$(field "$3" bandwidth_bytes_per_s)" | awk '{print $1 / 1e9}')" \
    "$(field "$3" bandwidth_limit_percent)" >>"$table"
}
hybrid=0
[ "${1:-}" = --hybrid ] && hybrid=1
bench() {  # bench NAME MODE PROMPT GEN [FLAGS...]
  name=$1 mode=$2 p=$3 n=$4
  shift 4
  device="--device cuda"
  case "$*" in *--device*) device= ;; esac
  if [ "$(left)" -lt 45 ]; then
    echo "| $name | $mode | skipped: out of time |" >>"$table"
    return
  fi
  tag="$name-$mode$(echo "$*" | tr -c 'a-zA-Z0-9' '_')"
  # shellcheck disable=SC2086
  if timeout 150 "$strata" bench -m "$models/$name.gguf" -p "$p" -n "$n" -r 3 $device --ffn "$mode" \
    --json "$@" >"$out/bench-$tag.json" 2>"$out/bench-$tag.log"; then
    row "$name $*" "$mode" "$out/bench-$tag.json"
    share=$(sed -n 's/^ *"device_share": \([0-9.e+-]*\).*/\1/p' "$out/bench-$tag.json" | head -n 1)
    [ -n "$share" ] && echo "|   split: $(awk -v s="$share" 'BEGIN { printf "%.1f", 100 * s }')% of activations on the GPU |" >>"$table"
  else
    echo "| $name $* | $mode | failed: $(tail -n 1 "$out/bench-$tag.log") |" >>"$table"
  fi
}

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used \
  --format=csv,noheader | sed 's/^/gpu: /'

# 1. Tests (the 1B-shape comparison models first).
for t in f16 q8_0 q4_0; do model "cmp-1b-$t" --preset 1b --type "$t"; done
STRATA_GPU_MODELS="$models" timeout 240 "$bundle/bin/strata_tests" \
  --gtest_filter='*BackendOps*/cuda:CudaSession.*:CudaMath.*:DeviceChoice.*' >"$out/tests.log" 2>&1
tests_rc=$?
grep -E "max relative logit error" "$out/tests.log" | sed 's/^/  /'
passed=$(grep -c '^\[       OK \]' "$out/tests.log")
failed=$(grep -c '^\[  FAILED  \] [A-Za-z/]*\.' "$out/tests.log")
skipped=$(grep -c '^\[  SKIPPED \] [A-Za-z/]*\.' "$out/tests.log")
gpu_ran=$(grep -cE '^\[       OK \] .*(/cuda|CudaSession)' "$out/tests.log")
echo "GPU tests: $passed passed ($gpu_ran on the GPU), $failed failed, $skipped skipped (exit $tests_rc; $out/tests.log)"
if [ "$gpu_ran" -eq 0 ]; then
  echo "no GPU test ran: $(grep -m 1 -A 1 'Skipped' "$out/tests.log" | tail -n 1)"
  tests_rc=1
fi
grep -E '^\[  FAILED  \] [A-Za-z/]*\.' "$out/tests.log" | sort -u | sed 's/^/  /'

# 2. Benchmarks (or, with --hybrid, the split FFN).
{
  echo "| model          | ffn     |  pp tok/s |  tg tok/s | GB/tok  | GB/s read | limit  |"
  echo "|----------------|---------|-----------|-----------|---------|-----------|--------|"
} >>"$table"
if [ "$hybrid" -eq 1 ]; then
  model s13b-f16 --preset 13b --type f16 --ffn reglu --sparsity 0.1 --predictor-rank 64
  bench s13b-f16 predict 0 32 --vram-budget 16G
  bench s13b-f16 predict 0 32 --vram-budget 8G
  bench s13b-f16 predict 0 16 --device cpu
  echo "limit: decode tok/s as a share of (measured read bandwidth / weight bytes per token)"
  cat "$table"
  echo "gpu_check --hybrid: $(($(date +%s) - start)) s; logs and JSON in $out"
  [ "$tests_rc" -eq 0 ]
  exit
fi
for t in f16 q8_0 q4_0; do bench "cmp-1b-$t" dense 512 128; done
for t in q4_0 q8_0 f16; do
  if [ "$(left)" -lt 120 ]; then
    echo "| 7b-$t | dense | skipped: out of time |" >>"$table"
    continue
  fi
  model "7b-$t" --preset 7b --type "$t"
  bench "7b-$t" dense 512 64
  rm -f "$models/7b-$t.gguf"
done
if [ "$(left)" -gt 120 ]; then
  model s7b-q4_0 --preset 7b --type q4_0 --ffn reglu --sparsity 0.1 --predictor-rank 64
  bench s7b-q4_0 predict 0 64
  bench s7b-q4_0 dense 0 64
else
  echo "| s7b-q4_0 | predict | skipped: out of time |" >>"$table"
fi
echo "limit: decode tok/s as a share of (measured GPU read bandwidth / weight bytes per token)"
cat "$table"
echo "gpu_check: $(($(date +%s) - start)) s; logs and JSON in $out"
[ "$tests_rc" -eq 0 ]
