"""Bit-exact GPU checks of butterfly conversions (strategy ``butterfly``, ``plan/butterfly.py``:
chains of warp shuffle steps, each exchanging one lane bit with one register bit).

Cases: ``bench/bench_convert.py``'s warp-local transpose (each warp's 8x32 block, registers along
columns -> rows, 8 warps) in i8, f16, f32 and f64 forced to ``butterfly`` (auto takes it for i8),
and seeded random warp-local pairs (a permutation of the register and lane columns, no broadcast)
in i8, f16 and f32.  Each harness compiles in NVRTC batches (``gpu.Batch``) and runs
``LLGEN_GPU_RUNS`` times (default 2) on fresh random bits; every destination register of every
thread must equal the numpy reference.
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


def butterfly_cases(n_random: int = 8, seed: int = 20261128) -> list[tuple[str, object]]:
    """(name, plan) of every GPU butterfly case."""
    from ll_codegen.api import plan_conversion
    from ll_codegen.plan.butterfly import swap_sequence
    from ll_codegen.plan.planner import normalise
    from ll_codegen.spec import spec_from_dict
    from ll_codegen.testing.corpus import blocked, random_layout
    src = spec_from_dict(blocked([1, 8], [8, 4], [8, 1], [1, 0], [64, 32])).linear
    dst = spec_from_dict(blocked([8, 1], [1, 32], [8, 1], [1, 0], [64, 32])).linear
    out = [(f"bfly_warp_t_{d}", plan_conversion(src, dst, d, "cuda", "sm_90", strategy="butterfly"))
           for d in ("i8", "f16", "f32", "f64")]
    out.append(("bfly_warp_t_i8_auto", plan_conversion(src, dst, "i8", "cuda", "sm_90")))
    rng = random.Random(seed)
    while len(out) < 5 + 3 * n_random:
        warps = 1 << rng.randint(0, 2)
        total = 5 + warps.bit_length() - 1 + rng.randint(1, 4)
        d0 = rng.randint(0, total)
        shape = {"dim0": 1 << d0, "dim1": 1 << (total - d0)}
        a = normalise(random_layout(rng, shape, 32, warps, broadcast=0.0))
        b = normalise(random_layout(rng, shape, 32, warps, broadcast=0.0, warp_bits=a.flat_bases("warp")))
        seq = swap_sequence(a, b)
        if seq is None or len(seq) < 2:
            continue
        k = len(out)
        out += [(re.sub(r"\W", "_", f"bfly_rand{k}_{d}"), plan_conversion(a, b, d, "cuda", "sm_90", strategy="butterfly"))
                for d in ("i8", "f16", "f32")]
    return out


CASES = butterfly_cases()


@pytest.fixture(scope="session")
def results():
    with tempfile.TemporaryDirectory(prefix="llgen_butterfly_gpu_") as d:
        b = gpu.Batch(CASES, d).compile(batch_size=24)
        rng = np.random.default_rng(5)
        return {n: b.run(n, RUNS, rng) for n, _ in CASES}


def test_cases_are_butterflies():
    assert all(p.strategy == "butterfly" for _, p in CASES)
    assert len(CASES) >= 25


@pytest.mark.parametrize("name", [n for n, _ in CASES])
def test_butterfly_bit_exact(results, name):
    r = results[name]
    assert r.ok, r.message
