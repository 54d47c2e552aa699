"""Launch every corpus pair's auto round-trip kernel once (for Nsight Compute).

    ncu --csv --kernel-name regex:_auto_bench --metrics \
        l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,\
        l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,\
        l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,\
        l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum \
        python bench/ncu_conflicts.py > ncu.csv
    python bench/ncu_conflicts.py --report ncu.csv

Each kernel runs 132 CTAs and ``--iters`` round trips; the predicted shared
wavefronts of a launch are ``CTAs * warps * iters * (fwd + back wavefronts per warp)``,
and the plans predict zero bank conflicts.  ``--report`` prints measured
against predicted.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from llgen_bench.jobs import compile_jobs, prepare  # noqa: E402

CTAS, ITERS = 132, 4


def jobs(work: str):
    from bench_convert import CORPUS
    out = []
    for name, s, d, dt, _, _ in CORPUS:
        j = prepare(name, s, d, dt, work, naive=False, candidates=False)
        if j.variants[0].fwd.smem is not None:
            out.append(j)
    return out


def predicted(j) -> dict:
    v = j.variants[0]
    res = {}
    for side in ("store", "load"):
        n = 0
        for p in (v.fwd, v.back):
            n += getattr(p.smem, side).total_wavefronts if p.smem else 0
        res[side] = n * CTAS * j.warps * ITERS
    res["conflicts"] = sum((getattr(p.smem, s).bank_conflicts if p.smem else 0) for p in (v.fwd, v.back)
                           for s in ("store", "load"))
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--report")
    ap.add_argument("--work", default="/tmp/llgen_ncu_work")
    args = ap.parse_args(argv)
    js = jobs(args.work)
    if args.report:
        text = open(args.report).read()
        text = text[text.index('"ID"'):] if '"ID"' in text else text
        rows = list(csv.DictReader(io.StringIO(text)))
        got: dict[str, dict[str, float]] = {}
        for r in rows:
            k = re.sub(r"_bench.*", "", r.get("Kernel Name", ""))
            try:
                got.setdefault(k, {})[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
            except (KeyError, ValueError):
                pass
        print(f"{'pair':<34} {'pred st wf':>10} {'ncu st wf':>10} {'st confl':>9} {'pred ld wf':>10} "
              f"{'ncu ld wf':>10} {'ld confl':>9} pred confl/instr")
        for j in js:
            m = got.get(j.variants[0].kernel, {})
            p = predicted(j)
            g = lambda s: m.get(s, float("nan"))  # noqa: E731
            print(f"{j.name:<34} {p['store']:>10} {g('l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum'):>10.0f} "
                  f"{g('l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum'):>9.0f} {p['load']:>10} "
                  f"{g('l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum'):>10.0f} "
                  f"{g('l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum'):>9.0f} {p['conflicts']}")
        return 0
    import cupy
    import numpy as np
    compile_jobs(js)
    for j in js:
        v = j.variants[0]
        mod = cupy.RawModule(path=v.cubin)
        fn = mod.get_function(f"{v.kernel}_bench")
        n = CTAS * int(np.prod(j.shape))
        a = cupy.zeros(n * j.elem_bytes, dtype=cupy.uint8)
        b = cupy.zeros_like(a)
        fn((CTAS,), (v.fwd.threads,), (a, b, np.int32(ITERS)), shared_mem=max(v.fwd.smem_bytes, v.back.smem_bytes))
    cupy.cuda.runtime.deviceSynchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
