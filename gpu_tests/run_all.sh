#!/usr/bin/env bash
# GPU verification of ll_codegen, on a machine with a CUDA GPU, CuPy, ncu and compute-sanitizer:
#   bash gpu_tests/run_all.sh
# 1. bit-exact suite (pytest gpu_tests), 2. Nsight Compute bank conflicts vs prediction (2b: memory plans:
# shared wavefronts/conflicts and global sectors),
# 3. compute-sanitizer memcheck/racecheck/synccheck/initcheck; writes gpu_tests/RESULTS.md and prints a summary.
# Logs and JSON go to $OUT (default gpu_tests/out).  Exit status: non-zero when any step failed
# (every step still runs, so the report is complete).
set -u -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export LLGEN_REQUIRE_GPU=1
OUT="${OUT:-gpu_tests/out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
t0=$(date +%s)
failed=()
echo "== 1/3 bit-exact suite"
LLGEN_GPU_REPORT="$OUT/pytest_cases.json" timeout "${PYTEST_TIMEOUT:-420}" \
    "$PY" -m pytest gpu_tests -q -p no:cacheprovider --tb=line > "$OUT/pytest.log" 2>&1 || failed+=("pytest")
tail -40 "$OUT/pytest.log"
echo "== 2/3 Nsight Compute bank conflicts ($(( $(date +%s) - t0 )) s)"
timeout "${NCU_TIMEOUT:-150}" "$PY" gpu_tests/ncu_bank_conflicts.py --out "$OUT" > "$OUT/ncu.log" 2>&1 || failed+=("ncu")
tail -80 "$OUT/ncu.log"
echo "== 2b/3 Nsight Compute, memory plans ($(( $(date +%s) - t0 )) s)"
timeout "${NCU_TIMEOUT:-150}" "$PY" gpu_tests/ncu_memory.py --out "$OUT" > "$OUT/ncu_memory.log" 2>&1 || failed+=("ncu_memory")
tail -12 "$OUT/ncu_memory.log"
echo "== 2c/3 Nsight Compute, wavefront phases of one-instruction probes ($(( $(date +%s) - t0 )) s)"
timeout "${NCU_TIMEOUT:-150}" "$PY" gpu_tests/ncu_phases.py --out "$OUT" > "$OUT/ncu_phases.log" 2>&1 || failed+=("ncu_phases")
tail -5 "$OUT/ncu_phases.log"
echo "== 2d/3 Nsight Compute, relayouts and reductions ($(( $(date +%s) - t0 )) s)"
timeout "${NCU_TIMEOUT:-150}" "$PY" gpu_tests/ncu_relayout_reduce.py --out "$OUT" --timeout 120 > "$OUT/ncu_relayout_reduce.log" 2>&1 \
    || failed+=("ncu_relayout_reduce")
tail -25 "$OUT/ncu_relayout_reduce.log"
echo "== 3/3 compute-sanitizer ($(( $(date +%s) - t0 )) s)"
timeout "${SAN_TIMEOUT:-200}" "$PY" gpu_tests/sanitize.py --out "$OUT" > "$OUT/sanitize.log" 2>&1 || failed+=("sanitize")
tail -30 "$OUT/sanitize.log"
echo "== report ($(( $(date +%s) - t0 )) s)"
"$PY" gpu_tests/report.py --out "$OUT" || failed+=("report")
if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED steps: ${failed[*]}"
    exit 1
fi
echo "all GPU steps passed"
