"""Bit-exact GPU checks of packed 4-bit plans (i4, u4, e2m1: two elements per byte).

Cases (``subbyte_cases()``, CUDA sm_90 and sm_80): conversions between layouts that pair the
same elements (blocked <-> mma.sync along K), conversions whose source or destination pairs
another register basis (an in-thread nibble repack before or after the byte plan: K-major <->
M-major blocked), stores and loads of global and swizzled shared tiles (with the masked
forms of the global tiles and the repacking ones), a global -> shared copy; each for the three
4-bit types.  Every harness compiles in NVRTC batches (``gpu.Batch``) and runs
``LLGEN_GPU_RUNS`` times (default 2) on fresh random nibbles: the output tensor (packed as
the destination's caller holds it) and every thread's destination bytes must equal numpy
bit for bit (``verify/harness.py``).

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

RUNS = int(os.environ.get("LLGEN_GPU_RUNS", "2"))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")

#: K fastest, 2 x 4 per thread: pairs (0, 1), register basis 2 is (1, 0)
K_MAJOR = {"kind": "blocked", "size_per_thread": [2, 4], "threads_per_warp": [4, 8], "warps_per_cta": [4, 1],
           "order": [1, 0], "shape": [64, 64]}
#: M fastest, 2 x 4 per thread: pairs (1, 0), register basis 1 is (0, 1)
M_MAJOR = {"kind": "blocked", "size_per_thread": [2, 4], "threads_per_warp": [8, 4], "warps_per_cta": [1, 4],
           "order": [0, 1], "shape": [64, 64]}
#: 128 x 128 K-major tile with 16-byte (32-element) rows per thread, as a W4 weight load
WIDE = {"kind": "blocked", "size_per_thread": [1, 32], "threads_per_warp": [32, 1], "warps_per_cta": [4, 1],
        "order": [1, 0], "shape": [128, 128]}
GLOBAL128 = {"kind": "global", "order": [1, 0], "alignment": 16, "shape": [128, 128]}


def _ex(name: str) -> str:
    return os.path.join(EX, name)


def subbyte_cases() -> list[tuple[str, object, tuple[str, ...]]]:
    """(name, plan, tags) of every GPU case."""
    from ll_codegen.api import plan_conversion
    pairs = [("blocked_mma", _ex("blocked_64x64.yaml"), _ex("mma_v2_64x64.yaml")),
             ("mma_blocked", _ex("mma_v2_64x64.yaml"), _ex("blocked_64x64.yaml")),
             ("kmaj_mmaj", K_MAJOR, M_MAJOR), ("mmaj_kmaj", M_MAJOR, K_MAJOR),
             ("blocked_mmaj", _ex("blocked_64x64.yaml"), M_MAJOR),
             ("store_global", _ex("blocked_64x64.yaml"), _ex("global_64x64.yaml")),
             ("load_global", _ex("global_64x64.yaml"), _ex("blocked_64x64.yaml")),
             ("store_swizzled", _ex("mma_v2_64x64.yaml"), _ex("swizzled_shared_64x64.yaml")),
             ("load_swizzled", _ex("swizzled_shared_64x64.yaml"), _ex("mma_v2_64x64.yaml")),
             ("store_global_repack", M_MAJOR, _ex("global_64x64.yaml")),
             ("load_global_repack", _ex("global_64x64.yaml"), M_MAJOR),
             ("store_swizzled_repack", M_MAJOR, _ex("swizzled_shared_64x64.yaml")),
             ("copy", _ex("global_64x64.yaml"), _ex("swizzled_shared_64x64.yaml")),
             ("load_wide", GLOBAL128, WIDE)]
    out = []
    for k, dtype in enumerate(("i4", "u4", "e2m1")):
        for name, s, d in pairs:
            arch = "sm_80" if (k + len(out)) % 3 == 0 else "sm_90"
            p = plan_conversion(s, d, dtype=dtype, arch=arch)
            repack = "repack" if p.packing.repacks else "quotient"
            out.append((f"sb{len(out):03d}_{name}_{dtype}_{arch}", p, (p.operation, repack, dtype, arch)))
    return out


CASES = subbyte_cases()


@pytest.fixture(scope="session")
def results():
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="llgen_subbyte_gpu_") as d:
        b = gpu.Batch([(n, p) for n, p, _ in CASES], d).compile(batch_size=24)
        rng = np.random.default_rng(40)
        res = {n: b.run(n, RUNS, rng) for n, _, _ in CASES}
    print(f"\n[gpu_tests] {len(CASES)} packed 4-bit harnesses in {time.time() - t0:.1f} s")
    out = os.environ.get("LLGEN_GPU_REPORT")
    if out:
        with open(out, "w") as f:
            json.dump([{"name": n, "tags": list(t), "strategy": p.strategy, "ok": res[n].ok, "message": res[n].message}
                       for n, p, t in CASES], f, indent=1)
    return res


def test_coverage():
    """Every operation, both forms (quotient, repack), the three types, both archs."""
    tags = collections.Counter(t for _, _, ts in CASES for t in ts)
    for t in ("convert", "store", "load", "copy", "quotient", "repack", "i4", "u4", "e2m1", "sm_80", "sm_90"):
        assert tags[t] >= 1, (t, tags)
    assert len(CASES) >= 40


@pytest.mark.parametrize("name", [n for n, _, _ in CASES])
def test_subbyte_bit_exact(results, name):
    r = results[name]
    assert r.ok, r.message
