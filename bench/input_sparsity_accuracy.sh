#!/bin/sh
# Perplexity of a model with training-free input sparsity against dense: calibrates levels
# 0.25, 0.4 and 0.5 on one text (greedy and uniform splits), evaluates on another.
# Usage: bench/input_sparsity_accuracy.sh MODEL.gguf CALIBRATION.txt HELDOUT.txt [TOKENS] [CTX]
# (TOKENS: calibration tokens, default 4096; CTX: window, default 256). Prints a table.
set -eu
model=$1 calib=$2 heldout=$3 tokens=${4:-4096} ctx=${5:-256}
strata=${STRATA:-build/bin/strata}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for a in greedy uniform; do
  "$strata" sparsify -m "$model" -f "$calib" -n "$tokens" -c "$ctx" --sparsity 0.25,0.4,0.5 \
    --allocation "$a" -o "$work/$a.gguf" >/dev/null
done
ppl() {
  m=$1
  shift
  "$strata" perplexity -m "$m" -f "$heldout" -c "$ctx" --json "$@" 2>/dev/null |
    /usr/bin/python3 -c 'import json, sys; print("%.4f" % json.load(sys.stdin)["perplexity"])'
}
dense=$(ppl "$work/greedy.gguf" --sparsity-mode off)
rel() { awk -v a="$1" -v b="$dense" 'BEGIN {printf "%s (%+.2f%%)", a, 100 * (a / b - 1)}'; }
printf '%-9s %-22s %-22s %-22s\n' sparsity "TEAL greedy" "TEAL uniform" CATS
printf '%-9s %-22s\n' 0 "$dense"
for s in 0.25 0.4 0.5; do
  printf '%-9s %-22s %-22s %-22s\n' "$s" \
    "$(rel "$(ppl "$work/greedy.gguf" --sparsity-mode teal --sparsity "$s")")" \
    "$(rel "$(ppl "$work/uniform.gguf" --sparsity-mode teal --sparsity "$s")")" \
    "$(rel "$(ppl "$work/greedy.gguf" --sparsity-mode cats --sparsity "$s")")"
done
