#!/usr/bin/env bash
# The GPU benchmarks in one device call, same clock, same device:
#   bash bench/run_benches.sh [OUT]        (default bench_out)
# conversions (bench_convert.py --no-legacy, by default --quick: the headline's kernels, no cost-model
# candidates), gathers (bench_gather.py), memory endpoints (bench_memory.py); each stage under a time limit
# (T_CONVERT/T_GATHER/T_MEMORY seconds, default 290/170/90: the whole call stays under 10 minutes, and a
# stage cut short still leaves what it wrote).  Extra options: CONVERT_ARGS (default --quick; '' for the
# full corpus with candidates, about 1.5 minutes more), GATHER_ARGS, MEMORY_ARGS.
# Writes OUT/convert/ (results.json -- results.partial.json if cut short --, table.md, speedup.png,
# sass.tar.gz), OUT/gather/ (results.json, table.md, sass/) and OUT/memory/ (memory.json, memory_table.md),
# and prints, last, the conversion headline over the unflagged pairs; exit status non-zero if any kernel
# was wrong or a stage failed.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-bench_out}}"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
status=0
# shellcheck disable=SC2086
timeout "${T_CONVERT:-290}" "$PY" bench/bench_convert.py --out "$OUT/convert" --no-legacy ${CONVERT_ARGS---quick} || status=1
# shellcheck disable=SC2086
timeout "${T_GATHER:-170}" "$PY" bench/bench_gather.py --out "$OUT/gather" ${GATHER_ARGS:-} || status=1
# shellcheck disable=SC2086
timeout "${T_MEMORY:-90}" "$PY" bench/bench_memory.py --out "$OUT/memory" ${MEMORY_ARGS:-} || status=1
for f in "$OUT/convert/results.json" "$OUT/convert/results.partial.json"; do
    if [ -f "$f" ]; then
        echo "== conversion headline ($f)"
        "$PY" bench/bench_convert.py --headline "$f"
        break
    fi
done
exit $status
