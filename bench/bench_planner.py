"""Time planning conversions and checking plans with the CPU emulator (no GPU).

    python bench/bench_planner.py [--runs 30]

Planning: ``plan_conversion`` (classification, every legal strategy and every
shared-memory candidate, scoring) for pairs of up to 64K elements; budget
20 ms median.  Emulation: ``verify.emulate.convert.check_plan`` (execute the plan on every
thread and compare with the numpy reference) for a 16K-element pair; budget
50 ms median.  Medians and minima of ``--runs`` runs after one warm-up.
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ll_codegen.testing import corpus  # noqa: E402
from ll_codegen.verify.emulate.convert import check_plan  # noqa: E402
from ll_codegen.plan.planner import plan_conversion  # noqa: E402
from ll_codegen.spec import spec_from_dict  # noqa: E402

PLAN_BUDGET_MS, EMULATE_BUDGET_MS = 20.0, 50.0


def _lin(d):
    return spec_from_dict(d).linear


def plan_cases():
    big_blocked = corpus.blocked([1, 8], [4, 8], [8, 1], [1, 0], [256, 256])
    yield "blocked 256x256 -> mma v2 (f16, 8 warps)", _lin(big_blocked), _lin(corpus.mma_v2([4, 2], [256, 256])), "f16"
    yield "blocked 256x256 row -> col (f8)", _lin(big_blocked), \
        _lin(corpus.blocked([8, 1], [8, 4], [1, 8], [0, 1], [256, 256])), "f8e4m3"
    yield "wgmma 128x256 -> blocked (f16, 8 warps)", _lin(corpus.wgmma([8, 1], 256, [128, 256])), \
        _lin(corpus.blocked([1, 8], [2, 16], [8, 1], [1, 0], [128, 256])), "f16"
    rng = random.Random(3)
    for i in range(3):
        s, d = corpus.random_pair(rng, 32, min_bits=8, max_bits=8)
        n = 1 << sum(v.bit_length() - 1 for v in s.out_dim_sizes.values())
        yield f"random pair {i} ({n} elements)", s, d, "f32"


def _time(fn, runs):
    fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), min(ts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args(argv)
    print(f"python {platform.python_version()} on {platform.machine()}, nproc {os.cpu_count()}, {args.runs} runs each")
    print(f"{'case':<48} {'step':<8} {'median ms':>10} {'min ms':>8}")
    ok = True
    for name, s, d, dt in plan_cases():
        med, lo = _time(lambda: plan_conversion(s, d, dt), args.runs)
        ok &= med < PLAN_BUDGET_MS
        print(f"{name:<48} {'plan':<8} {med:>10.2f} {lo:>8.2f}")
    p = next(x for x in corpus.NAMED if x.name == "mma_v2_to_blocked_f16_128")
    s, d = _lin(p.src), _lin(p.dst)
    plan = plan_conversion(s, d, "f16", strategy="smem")
    med, lo = _time(lambda: check_plan(plan, s, d, 1), args.runs)
    ok &= med < EMULATE_BUDGET_MS
    print(f"{'mma v2 -> blocked 128x128 f16 (16K elements)':<48} {'emulate':<8} {med:>10.2f} {lo:>8.2f}")
    print("within budget" if ok else "OVER BUDGET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
