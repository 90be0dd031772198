#!/bin/sh
# strata quantize against llama-quantize (llama.cpp v0.5.0, built outside the repository): the
# type of every tensor, name by name, for each recipe both know, on a Llama-shape model whose
# FFN width (640) is not a multiple of 256 (so the K-quant and IQ4_XS rows fall back), 8 layers
# (llama.cpp's "more bits" and first-eighth rules) and 4 query heads per KV head (the IQ4 attn_v
# rule). Prints one line per recipe: equal, or the tensors whose types differ.
# Usage: bench/llamacpp/compare_recipes.sh LLAMA_CPP WORK_DIR
set -eu
llama=$(realpath "$1") work=$2
here=$(dirname "$(realpath "$0")")
strata=$(realpath "${STRATA:-build/bin/strata}")
mkdir -p "$work"
export PYTHONPATH="$llama/gguf-py"
sed -e 's/^V, D, H, KV, F, L = .*/V, D, H, KV, F, L = 128, 256, 8, 2, 640, 8/' \
  "$here/llama31_model.py" > "$work/recipe_model.py"
/usr/bin/python3 "$work/recipe_model.py" "$work/f32.gguf"
types() { "$strata" info "$1" --json | /usr/bin/python3 -c '
import json, sys
for t in json.load(sys.stdin)["tensors"]: print(t["name"], t["type"])' | sort; }
for r in Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K \
         IQ4_NL IQ4_XS; do
  "$llama/build/bin/llama-quantize" "$work/f32.gguf" "$work/l-$r.gguf" "$r" 2 >/dev/null 2>&1
  "$strata" quantize "$work/f32.gguf" "$work/s-$r.gguf" "$r" -t 2 >/dev/null
  types "$work/l-$r.gguf" > "$work/l-$r.txt"
  types "$work/s-$r.gguf" > "$work/s-$r.txt"
  if cmp -s "$work/l-$r.txt" "$work/s-$r.txt"; then
    printf '%-7s tensor types equal (%s tensors)\n' "$r" "$(wc -l < "$work/l-$r.txt")"
  else
    printf '%-7s differ: %s\n' "$r" "$(diff "$work/l-$r.txt" "$work/s-$r.txt" | grep '^[<>]' | tr '\n' ';')"
  fi
done
