#!/bin/sh
# strata quantize against llama-quantize (llama.cpp v0.5.0, built outside the repository): the
# type of every tensor, name by name, for each recipe both know, on a Llama-shape model whose
# FFN width (640) is not a multiple of 256 (so the K-quant and IQ4_XS rows fall back), 8 layers
# (llama.cpp's "more bits" and first-eighth rules) and 4 query heads per KV head (the IQ4 attn_v
# rule), and Q4_K_M with the manual flags (--output-tensor-type, --token-embedding-type,
# --tensor-type). Prints one line per recipe: equal, or the tensors whose types differ.
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
# The manual choices too: --output-tensor-type, --token-embedding-type, --tensor-type.
manual="--output-tensor-type q8_0 --token-embedding-type q5_1 --tensor-type ffn_down=q5_0 --tensor-type attn_v=iq4_xs"
for label in Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K \
             IQ4_NL IQ4_XS Q4_K_M+manual; do
  r=${label%+manual} flags=""
  [ "$r" = "$label" ] || flags=$manual
  f=$(echo "$label" | tr + -)
  # shellcheck disable=SC2086
  "$llama/build/bin/llama-quantize" $flags "$work/f32.gguf" "$work/l-$f.gguf" "$r" 2 >/dev/null 2>&1
  # shellcheck disable=SC2086
  "$strata" quantize $flags "$work/f32.gguf" "$work/s-$f.gguf" "$r" -t 2 >/dev/null
  types "$work/l-$f.gguf" > "$work/l-$f.txt"
  types "$work/s-$f.gguf" > "$work/s-$f.txt"
  if cmp -s "$work/l-$f.txt" "$work/s-$f.txt"; then
    printf '%-14s tensor types equal (%s tensors)\n' "$label" "$(wc -l < "$work/l-$f.txt")"
  else
    printf '%-14s differ: %s\n' "$label" \
      "$(diff "$work/l-$f.txt" "$work/s-$f.txt" | grep '^[<>]' | tr '\n' ';')"
  fi
done
