"""Time building and inverting legacy layouts (CPU; no GPU needed).

    python bench/bench_layouts.py [--runs 200]

Cases: a 128x256 Hopper wgmma accumulator (``nvidia_mma`` version [3, 0],
4 warps, instr_shape [16, 256, 16]) and a 256x256 blocked layout.  For each
we time ``to_linear(shape)`` (build) and ``LinearLayout.invert()`` (invert)
with ``time.perf_counter`` and report the median and the minimum over
``--runs`` runs in milliseconds.  The budget is 5 ms for each.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ll_codegen.layouts.distributed import BlockedLayout  # noqa: E402
from ll_codegen.layouts.nvidia import NVMMADistributedLayout  # noqa: E402

BUDGET_MS = 5.0

CASES = {
    "wgmma 128x256 (nvidia_mma [3,0], warps [4,1], instr [16,256,16])":
        (NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 256, 16]), (128, 256)),
    "blocked 256x256 (spt [1,8], tpw [4,8], wpc [4,1], order [1,0])":
        (BlockedLayout(size_per_thread=[1, 8], threads_per_warp=[4, 8], warps_per_cta=[4, 1], order=[1, 0]),
         (256, 256)),
}


def _time(fn, runs: int) -> tuple[float, float]:
    fn()  # warm-up
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), min(ts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args(argv)
    print(f"python {platform.python_version()} on {platform.machine()}, nproc {os.cpu_count()}, "
          f"{args.runs} runs each")
    print(f"{'case':<70} {'step':<7} {'median ms':>10} {'min ms':>8}")
    worst = 0.0
    for name, (layout, shape) in CASES.items():
        L = layout.to_linear(shape)
        assert L.is_invertible(), name
        for step, fn in (("build", lambda: layout.to_linear(shape)), ("invert", L.invert)):
            med, lo = _time(fn, args.runs)
            worst = max(worst, med)
            print(f"{name:<70} {step:<7} {med:>10.3f} {lo:>8.3f}")
    ok = worst < BUDGET_MS
    print(f"worst median {worst:.3f} ms: {'within' if ok else 'OVER'} the {BUDGET_MS} ms budget")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
