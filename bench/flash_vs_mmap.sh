#!/bin/sh
# The flash tier against the naive baseline, under the same memory cap: a bundled model run with
# --ram-budget, and the same model (not bundled) memory-mapped (--mmap), same predict mode and
# predictors, each in a cgroup (v1 memory controller) whose limit is the budget, so the page
# cache cannot hold more than the budget either. Before each run the files' cached pages are
# dropped (posix_fadvise DONTNEED), so both start from the disk.
# Usage (root): bench/flash_vs_mmap.sh BUNDLED.gguf PLAIN.gguf BUDGET TOKENS THREADS
# (FLASH_ARGS adds flags to the flash run, e.g. "--window 10"; SKIP_MMAP=1 skips the baseline;
# PROMPT=N evaluates N prompt tokens before the decode tokens, whose reads alone are reported;
# MMAP_FFN=dense runs the baseline's FFN dense instead of in predict mode)
# BUDGET in bytes or with K/M/G (powers of 1024); CGROUP_LIMIT=BYTES sets the cgroup's limit apart
# from the budget (to compare runs whose plans count differently under one cap). Prints decode tok/s, bytes read per token,
# cache hit rate, the cgroup's peak memory (page cache included) and the process's peak RSS
# (GNU time) for both.
set -eu
bundled=$1 plain=$2 budget=$3 tokens=$4 threads=$5
strata=${STRATA:-build/bin/strata}
py=/usr/bin/python3
bytes=$($py -c 'import sys
s=sys.argv[1].upper(); m={"K":1<<10,"M":1<<20,"G":1<<30}
print(int(float(s[:-1])*m[s[-1]]) if s[-1] in m else int(s))' "$budget")
cg=/sys/fs/cgroup/memory/strata_flash_bench
[ -d /sys/fs/cgroup/memory ] || { echo "error: needs the cgroup v1 memory controller" >&2; exit 1; }
mkdir -p "$cg"
echo "${CGROUP_LIMIT:-$bytes}" >"$cg/memory.limit_in_bytes"
drop() { $py -c 'import os,sys
fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)' "$1"; }
run() {  # run LABEL ARGS...
  label=$1; shift
  drop "$bundled"; drop "$plain"
  echo 0 >"$cg/memory.max_usage_in_bytes" 2>/dev/null || true
  sh -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' sh "$cg" /usr/bin/time -f %M \
    -o /tmp/flash_bench_$label.rss "$strata" bench "$@" \
    -p "${PROMPT:-0}" -n "$tokens" -r 1 -t "$threads" --no-bandwidth --json >/tmp/flash_bench_$label.json
  peak=$(cat "$cg/memory.max_usage_in_bytes")
  rss_kib=$(tail -1 /tmp/flash_bench_$label.rss)
  $py - "$label" "$peak" "$bytes" /tmp/flash_bench_$label.json "$rss_kib" <<'PY'
import json, sys
label, peak, budget, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rss = int(sys.argv[5]) * 1024
r = json.load(open(path))
fl = r.get("decode_flash") or r.get("ffn_report", {}).get("flash") or {}
print(f"{label:8s} decode {r['decode_tokens_per_s']:8.3f} tok/s  "
      f"flash read {fl.get('bytes_read_per_token', 0) / 2**20:8.1f} MiB/token  "
      f"hit rate {fl.get('cache_hit_rate', 0):.3f}  cgroup peak {peak / 2**30:.2f} GiB, "
      f"peak RSS {rss / 2**30:.2f} GiB (budget {budget / 2**30:.2f} GiB)")
PY
}
run flash -m "$bundled" --ram-budget "$bytes" ${FLASH_ARGS:-}
[ -n "${SKIP_MMAP:-}" ] || run mmap -m "$plain" --mmap --ffn "${MMAP_FFN:-predict}"
rmdir "$cg" 2>/dev/null || true
