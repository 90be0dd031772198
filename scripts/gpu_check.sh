#!/bin/sh
# The CUDA backend's checks on a GPU machine, in one run of at most 8 minutes (an H200 here),
# building nothing: it runs gpu-bundle/ (scripts/gpu_bundle.sh, made on a machine with nvcc)
# against models it generates with `strata synth`, and prints one table.
#   1. GPU tests: every CUDA op against the scalar reference (BackendOps .../cuda), whole models
#      against the CPU (CudaSession: the shipped model, every type, 1B-shape F16/Q8_0/Q4_0
#      models, determinism, predict mode, budgets).
#   2. Benchmarks, wholly in VRAM (-ngl 99): pp512 and decode tok/s of 1B and 7B shapes in F16,
#      Q8_0 and Q4_0 as a share of the GPU's measured read bandwidth; predict mode at 10%
#      density against dense on a 7B-shape ReLU model; a Mixtral-shape mixture of experts (8
#      layers, Q4_0), whole and split by experts under --vram-budget 3G against the CPU alone.
#   --hybrid instead of 2: a 13B-shape ReLU model (F16, ~26 GB, 10% density, predictors of rank
#      64, profiled on 128 random tokens) split between the GPU and the CPU under --vram-budget
#      16G and 8G (consumer cards), against the CPU alone; then three tiers: a 7B-shape F16
#      model bundled, under --vram-budget 4G and --ram-budget 6G (the rest on flash), against
#      the CPU alone under the same RAM budget; then a TurboSparse-shape mixture of experts (8
#      Mixtral layers, dReLU experts, Q4_0) with its expert neurons split under --vram-budget 2G
#      against the CPU alone, and the 13B shape in Q4_0 under 4G, time allowing. Each row: decode tok/s, the cost model's prediction, the share of
#      activations on the GPU, each side's time and waits.
#   --sanitize instead of 2: compute-sanitizer's memcheck and racecheck over the CUDA op tests
#      (where the machine has compute-sanitizer).
# The same tests run on the CPU in every CI job against the emulated GPU (.../cuda_emu); here
# only the GPU's instances (.../cuda) run.
# Usage (device tool: carry ["gpu-bundle"]): scripts/gpu_check.sh [--hybrid | --sanitize]
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
profiled() {  # profiled NAME: its activation profile (128 random tokens, dense, on the CPU), once
  [ -f "$models/$1.profile.gguf" ] || timeout 150 "$strata" profile -m "$models/$1.gguf" \
    --random-tokens 128 -o "$models/$1.profile.gguf" >"$out/profile-$1.log" 2>&1
}
row() {  # row NAME MODE JSON
  printf '| %-14s | %-7s | %9.1f | %9.1f | %7.3f | %8.0f | %5.1f%% |\n' "$1" "$2" \
    "$(field "$3" prompt_tokens_per_s)" "$(field "$3" decode_tokens_per_s)" \
    "$(echo "$(field "$3" weight_bytes_per_token) / 1000000000" | awk '{print $1 / $3}')" \
    "$(echo "$(field "$3" bandwidth_bytes_per_s)" | awk '{print $1 / 1e9}')" \
    "$(field "$3" bandwidth_limit_percent)" >>"$table"
}
hybrid=0 sanitize=0
[ "${1:-}" = --hybrid ] && hybrid=1
[ "${1:-}" = --sanitize ] && sanitize=1
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
    predicted=$(field "$out/bench-$tag.json" plan_predicted_tokens_per_s)
    share=$(field "$out/bench-$tag.json" device_share)
    j="$out/bench-$tag.json"
    [ -n "$share" ] && awk -v p="$predicted" -v s="$share" -v g="$(field "$j" device_part)" \
      -v c="$(field "$j" ram_part)" -v cw="$(field "$j" cpu_waiting_for_device)" \
      -v gw="$(field "$j" device_waiting_for_cpu)" -v f="$(field "$j" flash_bytes)" 'BEGIN {
        printf "|   plan predicted %.1f tok/s; %.1f%% of activations on the GPU; FFN parts: GPU %.2f s, CPU %.2f s; CPU waited %.2f s, GPU %.2f s; flash %.1f MiB/token |\n",
          p, 100 * s, g, c, cw, gw, f / 1048576 }' >>"$table"
    [ -z "$share" ] && [ -n "$predicted" ] &&
      awk -v p="$predicted" 'BEGIN { printf "|   plan predicted %.1f tok/s |\n", p }' >>"$table"
  else
    echo "| $name $* | $mode | failed: $(tail -n 1 "$out/bench-$tag.log") |" >>"$table"
  fi
}

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used \
  --format=csv,noheader | sed 's/^/gpu: /'

# 1. Tests (the 1B-shape comparison models first).
for t in f16 q8_0 q4_0; do model "cmp-1b-$t" --preset 1b --type "$t"; done
# (TEAL's column products on the GPU: InputSparsity's GPU test.)
filter='*BackendOps*/cuda:*CudaSession.*/cuda:CudaMath.*:DeviceChoice.*'
filter="$filter:InputSparsity.ColumnProductsOnAGpu*"
STRATA_GPU_MODELS="$models" timeout 240 "$bundle/bin/strata_tests" --gtest_filter="$filter" \
  >"$out/tests.log" 2>&1
tests_rc=$?
grep -E "max relative logit error" "$out/tests.log" | sed 's/^/  /'
passed=$(grep -c '^\[       OK \]' "$out/tests.log")
failed=$(grep -c '^\[  FAILED  \] [A-Za-z/]*\.' "$out/tests.log")
skipped=$(grep -c '^\[  SKIPPED \] [A-Za-z/]*\.' "$out/tests.log")
gpu_ran=$(grep -cE '^\[       OK \] .*/cuda \(' "$out/tests.log")
echo "GPU tests: $passed passed ($gpu_ran on the GPU), $failed failed, $skipped skipped (exit $tests_rc; $out/tests.log)"
if [ "$gpu_ran" -eq 0 ]; then
  echo "no GPU test ran: $(grep -m 1 -A 1 'Skipped' "$out/tests.log" | tail -n 1)"
  tests_rc=1
fi
grep -E '^\[  FAILED  \] [A-Za-z/]*\.' "$out/tests.log" | sort -u | sed 's/^/  /'

# 2'. compute-sanitizer over the op tests, instead of the benchmarks.
if [ "$sanitize" -eq 1 ]; then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if [ ! -x "$cs" ]; then
    echo "compute-sanitizer: not on this machine"
  else
    for tool in memcheck racecheck; do
      timeout "$(( $(left) / 2 ))" "$cs" --tool "$tool" --error-exitcode 99 \
        "$bundle/bin/strata_tests" --gtest_filter='*BackendOps*/cuda' >"$out/sanitize-$tool.log" 2>&1
      echo "compute-sanitizer $tool: exit $? ($(grep -m 1 'ERROR SUMMARY' "$out/sanitize-$tool.log"))"
    done
  fi
  echo "gpu_check --sanitize: $(($(date +%s) - start)) s; logs in $out"
  [ "$tests_rc" -eq 0 ]
  exit
fi

# 2. Benchmarks (or, with --hybrid, the split FFN).
{
  echo "| model          | ffn     |  pp tok/s |  tg tok/s | GB/tok  | GB/s read | limit  |"
  echo "|----------------|---------|-----------|-----------|---------|-----------|--------|"
} >>"$table"
if [ "$hybrid" -eq 1 ]; then
  sparse="--ffn reglu --sparsity 0.1 --predictor-rank 64"
  sparse_moe="--ffn drelu --sparsity 0.1 --predictor-rank 64"
  # shellcheck disable=SC2086
  model s13b-f16 --preset 13b --type f16 $sparse
  profiled s13b-f16
  p13="--profile $models/s13b-f16.profile.gguf"
  # shellcheck disable=SC2086
  {
    # pp128: a split prompt computes its union of neurons on both sides (docs/GPU.md, Prompts).
    bench s13b-f16 predict 128 32 --vram-budget 16G $p13
    bench s13b-f16 predict 0 32 --vram-budget 8G $p13
    bench s13b-f16 predict 128 16 --device cpu $p13
  }
  rm -f "$models/s13b-f16.gguf"  # the disk holds 64 GiB
  # Three tiers: VRAM, a RAM budget below the rest, flash (the bundled file, profiled through
  # the file it was made from).
  if [ "$(left)" -gt 200 ]; then
    # shellcheck disable=SC2086
    model s7b-f16 --preset 7b --type f16 $sparse
    profiled s7b-f16
    [ -f "$models/s7b-f16-bundle.gguf" ] || "$strata" bundle -m "$models/s7b-f16.gguf" \
      -o "$models/s7b-f16-bundle.gguf" >"$out/bundle-s7b.log" 2>&1
    rm -f "$models/s7b-f16.gguf"
    p7="--profile $models/s7b-f16.profile.gguf"
    # shellcheck disable=SC2086
    {
      bench s7b-f16-bundle predict 0 32 --vram-budget 4G --ram-budget 6G $p7
      bench s7b-f16-bundle predict 0 16 --device cpu --ram-budget 6G $p7
    }
  else
    echo "| s7b-f16-bundle | predict | skipped: out of time |" >>"$table"
  fi
  # A TurboSparse-shape mixture (8 of Mixtral's 32 layers, 8 dReLU experts at 10% density, 2 a
  # token, predictors): its expert neurons split across --vram-budget 2G, against the CPU alone.
  if [ "$(left)" -gt 170 ]; then
    # shellcheck disable=SC2086
    model tsmx8-q4_0 --preset mixtral --layers 8 --type q4_0 $sparse_moe
    # shellcheck disable=SC2086
    {
      bench tsmx8-q4_0 predict 0 32 --vram-budget 2G
      bench tsmx8-q4_0 predict 0 16 --device cpu
    }
    rm -f "$models/tsmx8-q4_0.gguf"
  else
    echo "| tsmx8-q4_0 | predict | skipped: out of time |" >>"$table"
  fi
  if [ "$(left)" -gt 150 ]; then
    # shellcheck disable=SC2086
    model s13b-q4_0 --preset 13b --type q4_0 $sparse
    profiled s13b-q4_0
    # shellcheck disable=SC2086
    {
      bench s13b-q4_0 predict 0 32 --vram-budget 4G --profile "$models/s13b-q4_0.profile.gguf"
      bench s13b-q4_0 predict 0 16 --device cpu --profile "$models/s13b-q4_0.profile.gguf"
    }
  else
    echo "| s13b-q4_0 | predict | skipped: out of time |" >>"$table"
  fi
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
# A mixture of experts wholly in VRAM: 8 of Mixtral-8x7B's 32 layers (8 experts of 14336
# neurons, 2 a token), Q4_0, against its own read rate (the k experts' bytes a token); then
# split by whole experts under --vram-budget 3G (KTransformers'), against the CPU alone.
if [ "$(left)" -gt 120 ]; then
  model mx8-q4_0 --preset mixtral --layers 8 --type q4_0
  bench mx8-q4_0 dense 512 64
  bench mx8-q4_0 dense 0 32 --vram-budget 3G
  bench mx8-q4_0 dense 0 16 --device cpu
  rm -f "$models/mx8-q4_0.gguf"
else
  echo "| mx8-q4_0 | dense | skipped: out of time |" >>"$table"
fi
echo "limit: decode tok/s as a share of (measured GPU read bandwidth / weight bytes per token)"
cat "$table"
echo "gpu_check: $(($(date +%s) - start)) s; logs and JSON in $out"
[ "$tests_rc" -eq 0 ]
