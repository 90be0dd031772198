#!/bin/sh
# strata against llama.cpp on files that llama.cpp's own tools wrote: random weights through
# llama.cpp's gguf-py writer, F16, then quantized by llama-quantize. Shapes: falcon-7b (one KV
# head, one input norm) and falcon-40b (KV groups, two norms) from bench/llama_falcon_gguf.py,
# Q4_0; mixtral (8 experts, 2 per token, stacked expert tensors) and qwen2 (q/k/v biases, NeoX
# rotation) from bench/llama_family_gguf.py, Q4_K_M. Prints, per file, both perplexities
# (llama.cpp's method on the shipped model's held-out text) and their relative difference, and
# whether the greedy continuations of a prompt are equal (or how many characters agree).
# llama.cpp's own spread is printed beside: its perplexity of the same file one token per
# micro-batch (`-ub 1`: the same arithmetic summed in another order) and how far that is from its
# batched figure. On random-weight files the 8-bit and f16 roundings of activations (and a
# mixture's near-tied routes) turn such order differences into perplexity differences of up to
# a few 1e-3, so a gap between the engines means something only beside this one.
# FAMILY_ARGS are passed to llama_family_gguf.py (e.g. "--seed 2 --experts-used 8"), QUANT
# replaces the mixtral/qwen2 files' quantization (Q4_K_M). Issue 57's families (SHAPES gemma2
# gemma3 phi3 gpt-oss glm4moe) come from bench/llama_family2026_gguf.py, Q4_K_M (gpt-oss:
# MXFP4_MOE, its released files' experts).
# llama.cpp is not built by this repository: pass its checkout (gguf-py) and the folder holding
# its binaries.
# Usage: bench/compare_llama_families.sh LLAMA_CPP_DIR LLAMA_BIN_DIR WORK_DIR [THREADS] [SHAPES]
set -eu
src=$1 bin=$2 work=$3 threads=${4:-2} shapes=${5:-"falcon-7b falcon-40b mixtral qwen2"}
strata=${STRATA:-build/bin/strata}
tokenizer=models/strata-tiny.gguf text=models/strata-tiny-heldout.txt prompt="And he said"
mkdir -p "$work"
files=""
for shape in $shapes; do
  case $shape in
    falcon-*) /usr/bin/python3 bench/llama_falcon_gguf.py "$src" "${shape#falcon-}" \
      "$work/$shape-f16.gguf" "$tokenizer" >/dev/null
      quant=Q4_0 ;;
    gemma2|gemma3|phi3|gpt-oss|glm4moe) /usr/bin/python3 bench/llama_family2026_gguf.py "$src" \
      "$shape" "$work/$shape-f16.gguf" "$tokenizer" ${FAMILY_ARGS:-} >/dev/null
      quant=${QUANT:-Q4_K_M}
      [ "$shape" = gpt-oss ] && quant=MXFP4_MOE ;;
    *) /usr/bin/python3 bench/llama_family_gguf.py "$src" "$shape" "$work/$shape-f16.gguf" \
      "$tokenizer" ${FAMILY_ARGS:-} >/dev/null
      quant=${QUANT:-Q4_K_M} ;;
  esac
  "$bin/llama-quantize" "$work/$shape-f16.gguf" "$work/$shape-$quant.gguf" "$quant" \
    >/dev/null 2>&1
  files="$files $work/$shape-f16.gguf $work/$shape-$quant.gguf"
done
llama_ppl() {  # file, then llama-perplexity's extra flags
  f=$1
  shift
  "$bin/llama-perplexity" -m "$f" -f "$text" -c 128 --chunks 8 -t "$threads" "$@" 2>&1 |
    sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p'
}
printf '%-22s %12s %12s %9s %12s %9s  %s\n' file llama.cpp strata rel "llama.cpp ub1" "its rel" \
  greedy
for f in $files; do
  l=$(llama_ppl "$f")
  l1=$(llama_ppl "$f" -ub 1)
  s=$("$strata" perplexity -m "$f" -f "$text" -c 128 --chunks 8 -t "$threads" --json |
    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["perplexity"])')
  a=$("$bin/llama-simple" -m "$f" -n 32 "$prompt" 2>/dev/null | sed 's/^<s> //')
  b=$("$strata" run -m "$f" -p "$prompt" -n 32 --temp 0 -t "$threads" 2>/dev/null)
  greedy=$(/usr/bin/python3 -c '
import sys
a, b = sys.argv[1], sys.argv[2]
n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
print("equal (32 tokens)" if a == b else f"first {n} of {len(a)} characters equal")' "$a" "$b")
  printf '%-22s %12.4f %12.4f %9.1e %12.4f %9.1e  %s\n' "$(basename "$f")" "$l" "$s" \
    "$(/usr/bin/python3 -c "print(abs($s / $l - 1))")" "$l1" \
    "$(/usr/bin/python3 -c "print(abs($l1 / $l - 1))")" "$greedy"
done
