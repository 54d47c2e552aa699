"""Bit-exact GPU checks of generated gather harnesses.

Every case of ``cases.gather_cases()`` -- the CUDA cases of
``corpus.GATHER_NAMED`` (blocked and mma, 1-D and 2-D, both axes, warp-local
and not, broadcast, an index wider than the source along the axis; each of
their dtypes with forced shuffle and smem) and seeded random pairs -- compiles
in NVRTC batches (``gpu.Batch``, the driver of every operation) and runs twice on fresh random data: random raw bits, and
indices with repeats, 0, n - 1 and out-of-range values (negative, n, the index
type's extremes), which the generated code takes mod n.  The output tensor
and every thread's output registers must equal numpy's
``take_along_axis(src, index mod n)`` bit for bit.

``LLGEN_GPU_REPORT=path.json`` writes per-case results.
"""
import collections
import json
import os
import tempfile
import time

import numpy as np
import pytest

from ll_codegen.run import gpu

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

import cases  # noqa: E402  (gpu_tests/ is on sys.path via conftest)

CASES = cases.gather_cases()
RUNS = int(os.environ.get("LLGEN_GPU_RUNS", "2"))


@pytest.fixture(scope="session")
def results():
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="llgen_gather_gpu_") as d:
        b = gpu.Batch([(c.name, c.plan) for c in CASES], d).compile(batch_size=24)
        rng = np.random.default_rng(11)
        res = {c.name: b.run(c.name, RUNS, rng) for c in CASES}
    print(f"\n[gpu_tests] {len(CASES)} gather harnesses in {time.time() - t0:.1f} s")
    out = os.environ.get("LLGEN_GPU_REPORT")
    if out:
        with open(out, "w") as f:
            json.dump([{"name": c.name, "pair": c.pair, "tags": list(c.tags), "strategy": c.plan.strategy,
                        "dtype": c.plan.dtype, "index_dtype": c.plan.index_dtype, "ok": res[c.name].ok,
                        "message": res[c.name].message} for c in CASES], f, indent=1)
    return res


def test_coverage():
    """At least 100 pairs x dtypes: both strategies, 1-D and 2-D, both axes, mma and blocked, all widths."""
    assert len(CASES) >= 100
    tags = collections.Counter(t for c in CASES for t in c.tags)
    for t in ("shuffle", "smem", "rank1", "rank2", "axis0", "axis1", "nvidia_mma_v2", "blocked", "linear"):
        assert tags[t] >= 2, (t, tags)
    assert {c.plan.elem_bytes for c in CASES} == {1, 2, 4, 8}
    assert {c.plan.index_bytes for c in CASES} == {1, 2, 4}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gather_bit_exact(results, case):
    r = results[case.name]
    assert r.ok, r.message
