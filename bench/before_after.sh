#!/bin/sh
# Two strata binaries side by side: strata bench on each model, old and new alternating, ROUNDS
# rounds; prints per model the median of the paired new/old ratios (prompt and decode) and each
# round's figures. For a refactor's "behaviour unchanged" check (docs/ARCHITECTURE.md), run on a
# quiet machine (uptime).
#   bench/before_after.sh OLD_STRATA NEW_STRATA MODEL [MODEL ...]
# Environment: ROUNDS (7), BENCH_ARGS ("-p 64 -n 64 -r 3 -t 2").
set -eu
[ $# -ge 3 ] || { echo "usage: $0 OLD_STRATA NEW_STRATA MODEL [MODEL ...]" >&2; exit 2; }
old=$1 new=$2
shift 2
rounds=${ROUNDS:-7}
args=${BENCH_ARGS:--p 64 -n 64 -r 3 -t 2}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
round=1
while [ "$round" -le "$rounds" ]; do
  for which in old new; do
    bin=$old
    [ "$which" = new ] && bin=$new
    for m in "$@"; do
      # shellcheck disable=SC2086  # args is a list of words
      "$bin" bench -m "$m" $args --no-bandwidth --json 2>/dev/null |
        python3 -c "import json,sys; j=json.load(sys.stdin); print(json.dumps({'which':'$which','model':sys.argv[1],'pp':j['prompt_tokens_per_s'],'tg':j['decode_tokens_per_s']}))" "$m" >>"$out"
    done
  done
  round=$((round + 1))
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for m in dict.fromkeys(r["model"] for r in rows):
    for k, what in (("pp", "prompt"), ("tg", "decode")):
        o = [r[k] for r in rows if r["model"] == m and r["which"] == "old"]
        n = [r[k] for r in rows if r["model"] == m and r["which"] == "new"]
        ratio = statistics.median(b / a for a, b in zip(o, n))
        print(f"{m} {what}: new/old {ratio:.3f} (median of {len(o)} paired rounds); "
              f"old {[round(x, 1) for x in o]}, new {[round(x, 1) for x in n]} tok/s")
PY
