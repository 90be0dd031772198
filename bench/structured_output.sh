#!/bin/sh
# Decode speed with and without a JSON schema (grammar-constrained sampling), side by side:
# `strata run` alternating plain and constrained runs, ROUNDS each, medians of the decode tok/s
# and their ratio. The schema forces a long answer (an array of at least 200 short strings), so
# every run decodes N tokens under the grammar.
#   bench/structured_output.sh STRATA MODEL [ROUNDS=7] [THREADS=2] [N=128]
set -eu
strata=$1 model=$2 rounds=${3:-7} threads=${4:-2} n=${5:-128}
schema='{"type":"array","items":{"type":"string","maxLength":24},"minItems":200}'
plain="" constrained=""
i=0
while [ "$i" -lt "$rounds" ]; do
  for kind in plain constrained; do
    set -- -m "$model" -p "In the beginning" -n "$n" --temp 0 -t "$threads" -c 512 --json
    [ "$kind" = constrained ] && set -- "$@" -j "$schema"
    report=$("$strata" run "$@" 2>&1 >/dev/null | grep '"decode_tokens_per_s"')
    tps=$(echo "$report" | sed -n 's/.*"decode_tokens_per_s":\([0-9.]*\).*/\1/p')
    gen=$(echo "$report" | sed -n 's/.*"generated_tokens":\([0-9]*\).*/\1/p')
    [ "$gen" -eq "$n" ] || echo "note: a $kind run generated $gen tokens, not $n" >&2
    eval "$kind=\"\$$kind $tps\""
  done
  i=$((i + 1))
done
median() { printf '%s\n' $1 | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
mp=$(median "$plain") mc=$(median "$constrained")
echo "model: $model ($threads threads, $n tokens, $rounds rounds alternating)"
echo "plain decode tok/s:       $plain  -> median $mp"
echo "JSON-schema decode tok/s: $constrained  -> median $mc"
awk -v p="$mp" -v c="$mc" 'BEGIN { printf "constrained / plain: %.3f (slowdown %.1f%%)\n", c / p, 100 * (1 - c / p) }'
