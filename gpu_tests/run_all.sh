#!/usr/bin/env bash
# GPU verification of ll_codegen (issue 5), on a machine with a CUDA GPU, CuPy, ncu and compute-sanitizer:
#   bash gpu_tests/run_all.sh
# 1. bit-exact suite (pytest gpu_tests), 2. Nsight Compute bank conflicts vs prediction,
# 3. compute-sanitizer memcheck/racecheck/synccheck/initcheck; writes gpu_tests/RESULTS.md and prints a summary.
# Logs and JSON go to $OUT (default gpu_tests/out).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
OUT="${OUT:-gpu_tests/out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
t0=$(date +%s)
echo "== 1/3 bit-exact suite"
LLGEN_GPU_REPORT="$OUT/pytest_cases.json" timeout "${PYTEST_TIMEOUT:-240}" \
    "$PY" -m pytest gpu_tests -q -p no:cacheprovider --tb=line 2>&1 | tee "$OUT/pytest.log" | tail -40
echo "== 2/3 Nsight Compute bank conflicts ($(( $(date +%s) - t0 )) s)"
timeout "${NCU_TIMEOUT:-150}" "$PY" gpu_tests/ncu_bank_conflicts.py --out "$OUT" 2>&1 | tail -80
echo "== 3/3 compute-sanitizer ($(( $(date +%s) - t0 )) s)"
timeout "${SAN_TIMEOUT:-200}" "$PY" gpu_tests/sanitize.py --out "$OUT" 2>&1 | tee "$OUT/sanitize.log" | tail -30
echo "== report ($(( $(date +%s) - t0 )) s)"
"$PY" gpu_tests/report.py --out "$OUT"
