#!/bin/sh
# strata against llama.cpp on falcon files that llama.cpp's own tools wrote: random weights in
# the Falcon-7B shape (one KV head, one input norm) and the Falcon-40B shape (KV groups, two
# norms) through llama.cpp's gguf-py writer (bench/llama_falcon_gguf.py), F16, and Q4_0 by
# llama-quantize. Prints, per file, both perplexities (llama.cpp's method on the shipped model's
# held-out text) and their relative difference, and whether the greedy continuations of a
# prompt are equal (or how many characters agree). llama.cpp is not built by this repository:
# pass its checkout (gguf-py) and the folder holding its binaries.
# Usage: bench/compare_llama_falcon.sh LLAMA_CPP_DIR LLAMA_BIN_DIR WORK_DIR [THREADS]
set -eu
src=$1 bin=$2 work=$3 threads=${4:-2}
strata=${STRATA:-build/bin/strata}
tokenizer=models/strata-tiny.gguf text=models/strata-tiny-heldout.txt prompt="And he said"
mkdir -p "$work"
for shape in 7b 40b; do
  /usr/bin/python3 bench/llama_falcon_gguf.py "$src" "$shape" "$work/falcon-$shape-f16.gguf" \
    "$tokenizer" >/dev/null
  "$bin/llama-quantize" "$work/falcon-$shape-f16.gguf" "$work/falcon-$shape-q4_0.gguf" Q4_0 \
    >/dev/null 2>&1
done
printf '%-22s %12s %12s %9s  %s\n' file llama.cpp strata rel greedy
for f in "$work"/falcon-7b-f16.gguf "$work"/falcon-40b-f16.gguf "$work"/falcon-7b-q4_0.gguf \
  "$work"/falcon-40b-q4_0.gguf; do
  l=$("$bin/llama-perplexity" -m "$f" -f "$text" -c 128 --chunks 8 -t "$threads" 2>&1 |
    sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p')
  s=$("$strata" perplexity -m "$f" -f "$text" -c 128 --chunks 8 -t "$threads" --json |
    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["perplexity"])')
  a=$("$bin/llama-simple" -m "$f" -n 32 "$prompt" 2>/dev/null | sed 's/^<s> //')
  b=$("$strata" run -m "$f" -p "$prompt" -n 32 --temp 0 -t "$threads" 2>/dev/null)
  greedy=$(/usr/bin/python3 -c '
import sys
a, b = sys.argv[1], sys.argv[2]
n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
print("equal (32 tokens)" if a == b else f"first {n} of {len(a)} characters equal")' "$a" "$b")
  printf '%-22s %12.4f %12.4f %9.1e  %s\n' "$(basename "$f")" "$l" "$s" \
    "$(/usr/bin/python3 -c "print(abs($s / $l - 1))")" "$greedy"
done
