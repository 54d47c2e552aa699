"""Bit-exact GPU checks of generated reduction harnesses (``llgen reduce``).

Cases (``reduce_cases()``, all CUDA warp 32): every CUDA case of ``corpus.REDUCE_NAMED`` -- the
wgmma accumulator's rows (the softmax row max / row sum: f32 max and sum, f16, bf16) and columns
(across the 4 warps through shared memory), 8-warp and 4x2-warp wgmma tiles, mma.sync
accumulators and dot operands, blocked tiles reduced along both dims (4 warps through shared
memory), tiles smaller than the CTA (broadcast lanes and warps), 3-D blocked tiles over one and two
dims, a slice -- with several (combine, element type) pairs each so that every pair of sum / max /
min x f32 / f16 / bf16 / i32 occurs, plus seeded random layouts with broadcast bases.  Each
compiles in NVRTC batches (``gpu.Batch``) and runs ``LLGEN_GPU_RUNS`` times (default 2) on fresh
random normal values (small and full-range integers for i32): the result tensor, every thread's
result registers and the broadcast back must equal the numpy reference
(``reference.reduce_reference``: the plan's order, the type's rounding) bit for bit.

``LLGEN_GPU_REPORT=path.json`` writes per-case results.
"""
import collections
import itertools
import json
import os
import random
import re
import tempfile
import time

import numpy as np
import pytest

from ll_codegen.run import gpu

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

RUNS = int(os.environ.get("LLGEN_GPU_RUNS", "2"))
PAIRS = list(itertools.product(("sum", "max", "min"), ("f32", "f16", "bf16", "i32")))
#: every named case gets these pairs (the softmax ones), then two more in rotation
ALWAYS = (("max", "f32"), ("sum", "f32"))


def _ident(s: str) -> str:
    return re.sub(r"\W", "_", s)


def reduce_cases(n_random: int = 12, seed: int = 20261202) -> list[tuple[str, object, tuple[str, ...]]]:
    """(name, plan, tags) of every GPU reduction case."""
    from ll_codegen.plan.reduce import plan_reduce
    from ll_codegen.spec import spec_from_dict
    from ll_codegen.testing.corpus import REDUCE_NAMED, random_reduce
    out = []
    k = 0
    for c in REDUCE_NAMED:
        if c.target != "cuda":
            continue
        L = spec_from_dict(c.src).linear
        pairs = list(ALWAYS) + [PAIRS[(k + 2) % len(PAIRS)], PAIRS[(k + 7) % len(PAIRS)]]
        k += 1
        for combine, dtype in dict.fromkeys(pairs):
            p = plan_reduce(L, c.dims, combine, dtype, "cuda", c.arch or "sm_90")
            out.append((_ident(f"r{len(out):03d}_{c.name}_{combine}_{dtype}"), p,
                        (c.src["kind"], p.strategy, combine, dtype, f"rank{len(p.shape)}")))
    rng = random.Random(seed)
    for i in range(n_random):
        L, dims = random_reduce(rng, 32)
        combine, dtype = PAIRS[i % len(PAIRS)]
        p = plan_reduce(L, dims, combine, dtype, "cuda", "sm_90")
        out.append((_ident(f"r{len(out):03d}_random{i}_{combine}_{dtype}"), p,
                    ("linear", p.strategy, combine, dtype, f"rank{len(p.shape)}")))
    return out


CASES = reduce_cases()


@pytest.fixture(scope="session")
def results():
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="llgen_reduce_gpu_") as d:
        b = gpu.Batch([(n, p) for n, p, _ in CASES], d).compile(batch_size=24)
        rng = np.random.default_rng(12)
        res = {n: b.run(n, RUNS, rng) for n, _, _ in CASES}
    print(f"\n[gpu_tests] {len(CASES)} reduce harnesses in {time.time() - t0:.1f} s")
    out = os.environ.get("LLGEN_GPU_REPORT")
    if out:
        with open(out, "w") as f:
            json.dump([{"name": n, "tags": list(t), "strategy": p.strategy, "dtype": p.dtype, "combine": p.combine,
                        "dims": list(p.dims), "ok": res[n].ok, "message": res[n].message} for n, p, t in CASES],
                      f, indent=1)
    return res


def test_coverage():
    """Every (combine, dtype) pair, all three levels, the wgmma rows in f32 max and sum, blocked
    tiles along both dims, a 4-warp shared-memory case, 3-D tiles, broadcast layouts."""
    assert len(CASES) >= 40
    tags = collections.Counter(t for _, _, ts in CASES for t in ts)
    assert {(p.combine, p.dtype) for _, p, _ in CASES} == set(PAIRS)
    for t in ("shuffle", "smem", "nvidia_mma", "blocked", "dot_operand", "slice", "linear", "rank3"):
        assert tags[t] >= 1, (t, tags)
    names = [n for n, _, _ in CASES]
    for want in ("wgmma_rows_max_f32", "wgmma_rows_sum_f32", "blocked_rows", "blocked_cols"):
        assert any(want in n for n in names), want
    assert any(p.strategy == "smem" and p.num_warps == 4 for _, p, _ in CASES)


@pytest.mark.parametrize("name", [n for n, _, _ in CASES])
def test_reduce_bit_exact(results, name):
    r = results[name]
    assert r.ok, r.message
