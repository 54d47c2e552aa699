"""Bit-exact GPU checks of per-warp shuffle conversions (``plan/shuffle.py``: ``per_warp``): pairs
whose warp columns differ while every warp already holds what the destination's same warp needs,
converted by warp shuffles whose source lane and selects depend on the warp id -- no shared memory,
no barrier.

Cases: ``bench/bench_convert.py``'s slice pairs in the directions that need no cross-warp data
(slice_dim0 row -> col, forward; slice_mma back: row slice -> mma slice) as auto plans them and in
i8, f16, f32 and f64 forced to ``shuffle``, and seeded random pairs held per warp
(``testing.corpus.per_warp_pair``: slices' copy warps, warp columns shifted by register and lane
vectors, broadcast and mixed bases) in i8, f16 and f32.  Each harness compiles in NVRTC batches
(``gpu.Batch``) and runs ``LLGEN_GPU_RUNS`` times (default 2) on fresh random bits; every
destination register of every thread must equal the numpy reference.
"""
import os
import random
import re
import tempfile

import numpy as np
import pytest

from ll_codegen.run import gpu

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

RUNS = int(os.environ.get("LLGEN_GPU_RUNS", "2"))


def per_warp_cases(n_random: int = 10, seed: int = 20261128) -> list[tuple[str, object]]:
    """(name, plan) of every GPU per-warp shuffle case."""
    from ll_codegen.api import plan_conversion
    from ll_codegen.plan.planner import normalise
    from ll_codegen.plan.shuffle import NotShuffleable, shuffle_plans
    from ll_codegen.spec import spec_from_dict
    from ll_codegen.testing.corpus import COL, MMA, ROW, per_warp_pair, sliced
    row0, col0, mma0 = (spec_from_dict(sliced(p, 0, [64])).linear for p in (ROW, COL, MMA))
    out = [("pw_slice_dim0_f16_auto", plan_conversion(row0, col0, "f16", "cuda", "sm_90")),
           ("pw_slice_mma_back_f32_auto", plan_conversion(row0, mma0, "f32", "cuda", "sm_90"))]
    out += [(f"pw_slice_{n}_{d}", plan_conversion(row0, dst, d, "cuda", "sm_90", strategy="shuffle"))
            for n, dst in (("dim0", col0), ("mma_back", mma0)) for d in ("i8", "f16", "f32", "f64")]
    rng = random.Random(seed)
    while len(out) < 10 + 3 * n_random:
        a, b = (normalise(L) for L in per_warp_pair(rng))
        try:
            [shuffle_plans(a, b, w) for w in (1, 2, 4)]
        except NotShuffleable:
            continue
        k = len(out)
        out += [(re.sub(r"\W", "_", f"pw_rand{k}_{d}"), plan_conversion(a, b, d, "cuda", "sm_90", strategy="shuffle"))
                for d in ("i8", "f16", "f32")]
    return out


CASES = per_warp_cases()


@pytest.fixture(scope="session")
def results():
    with tempfile.TemporaryDirectory(prefix="llgen_per_warp_gpu_") as d:
        b = gpu.Batch(CASES, d).compile(batch_size=24)
        rng = np.random.default_rng(5)
        return {n: b.run(n, RUNS, rng) for n, _ in CASES}


def test_cases_are_barrier_free_shuffles():
    assert all(p.strategy == "shuffle" and p.smem_bytes == 0 for _, p in CASES)
    assert len(CASES) >= 40


@pytest.mark.parametrize("name", [n for n, _ in CASES])
def test_per_warp_shuffle_bit_exact(results, name):
    r = results[name]
    assert r.ok, r.message
