#!/usr/bin/env bash
# The GPU benchmarks of conversions and gathers in one device call (issues 14 and 15), same clock,
# same device:   bash bench/run_benches.sh [OUT]     (default bench_out; extra options: CONVERT_ARGS, GATHER_ARGS)
# Writes OUT/convert/ (bench_convert.py: results.json, table.md, speedup.png, sass.tar.gz) and OUT/gather/
# (bench_gather.py: results.json, table.md, sass/); exit status non-zero if any kernel was wrong.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-bench_out}}"
PY="${PYTHON:-python3}"
status=0
# shellcheck disable=SC2086
"$PY" bench/bench_convert.py --out "$OUT/convert" --no-legacy ${CONVERT_ARGS:-} || status=1
# shellcheck disable=SC2086
"$PY" bench/bench_gather.py --out "$OUT/gather" ${GATHER_ARGS:-} || status=1
exit $status
