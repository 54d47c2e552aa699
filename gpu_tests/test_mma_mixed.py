"""Bit-exact GPU checks of the element-type pairs of one MMA: mixed-input MMAs (``llgen mma
--a-dtype``): acc += upcast(A) @ B, A of i4, u4, e2m1, f8e4m3, f8e5m2, i8 or u8 upcast in registers
into the A fragment, B and the instruction f16, bf16 or tf32 (A upcast to exact f32, 4-bit A stored
K-interleaved), and f16 or bf16 A upcast into a tf32 instruction's, f32 accumulation; the 4-bit A types
into the 8-bit instructions that hold them exactly (i4, u4 -> s8 and u4 -> u8 with s32 accumulation,
e2m1 -> e4m3, e5m2; four elements a 32-bit register); and the native pairs
(``mixed_cases.NATIVE_PAIRS``): acc += A @ B in the instruction's own types, f16, bf16, tf32, e4m3,
e5m2, s8 and u8 each with itself and e4m3 x e5m2, e5m2 x e4m3, s8 x u8, u8 x s8 (f32 accumulation,
s32 for the integers; tf32 data exact in tf32).

Cases (``ll_codegen/testing/mixed_cases.table_cases``, the catalogue tests/test_mma_mixed.py runs
on the host SIMT runtime in part): every A type x {f16, bf16, tf32} and f16, bf16 A x tf32, x the
tiles mma.sync 16x16x16, 64x64x64, 128x128x128, 256x256x128 (A alternately from shared memory and
registers) and wgmma 64x16x16, 64x64x64, 128x256x128 (two warp groups; A from shared memory), plus int4 with bf16 scales
per 128 and e2m1 with e8m0 scales per 32 along K (into bf16 and into tf32); then every native pair x
the same tiles (the 8-bit ones with K = 32 where the tile has 16; A alternately in shared memory and
registers on wgmma), and the 5 byte pairs at the 5 tiles whose K is a multiple of 32 (an 8-bit
instruction's k-step; A alternately from shared memory and registers on mma.sync): 276 cases.  Every harness compiles in NVRTC batches (``gpu.Batch``)
and runs ``LLGEN_GPU_RUNS`` times (default 2) on fresh data chosen so that f32 accumulation is
exact in any order (``verify/mixed.py``; the native pairs: small integers,
``verify/emulate/reference.mma_tensors``): the accumulator tensor and every thread's accumulator
registers must equal numpy's ``C + upcast(A) @ B`` bit for bit.  The session prints the table of
pass counts (a row per A x B pair, a column per tile).

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
from ll_codegen.testing.mixed_cases import SHAPES, table_cases

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

RUNS = int(os.environ.get("LLGEN_GPU_RUNS", "2"))
CASES = table_cases()


def _plans():
    from ll_codegen.api import plan_mma
    return [(c.name, plan_mma(**c.specs())) for c in CASES]


def table(res: dict) -> str:
    """Pass counts: a row per A x B pair (upcast pairs with their scale format), a column per tile
    (an 8-bit native pair runs a 16-deep tile with K = 32)."""
    cols = [(k, m, n) for k, m, n, _ in SHAPES]
    labels = [f"{k[:2]}{m}x{n}x{kk}" for k, m, n, kk in SHAPES]
    rows = collections.defaultdict(collections.Counter)
    for c in CASES:
        key = f"{c.a_dtype} x {c.dtype}" + ("" if c.scales is None else f"+{c.scales}")
        col = (c.kind, c.m, c.n)
        rows[key][col, "n"] += 1
        rows[key][col, "ok"] += bool(res[c.name].ok)
    lines = [f"{'A x B':<24} " + " ".join(labels)]
    for key, cnt in rows.items():
        cells = [(f"{cnt[col, 'ok']}/{cnt[col, 'n']}" if cnt[col, "n"] else "-").rjust(len(label))
                 for col, label in zip(cols, labels)]
        lines.append(f"{key:<24} " + " ".join(cells))
    ok = sum(bool(r.ok) for r in res.values())
    return "\n".join(lines + [f"{ok}/{len(res)} cases bit-exact"])


@pytest.fixture(scope="session")
def results():
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="llgen_mma_mixed_gpu_") as d:
        b = gpu.Batch(_plans(), d).compile(batch_size=16)
        rng = np.random.default_rng(43)
        res = {c.name: b.run(c.name, RUNS, rng) for c in CASES}
    print(f"\n[gpu_tests] {len(CASES)} mixed-input MMA harnesses in {time.time() - t0:.1f} s")
    print(table(res))
    out = os.environ.get("LLGEN_GPU_REPORT")
    if out:
        with open(out, "w") as f:
            json.dump([{"name": c.name, "ok": res[c.name].ok, "message": res[c.name].message} for c in CASES], f,
                      indent=1)
    return res


def test_coverage():
    """Every A type, every B type, both instructions, both A spaces, both scale formats, every native pair."""
    seen = collections.Counter()
    for c in CASES:
        seen.update((c.a_dtype, c.dtype, c.kind, c.a_space, c.scales, (c.a_dtype, c.dtype)))
    for t in ("i4", "u4", "e2m1", "f8e4m3", "f8e5m2", "i8", "u8", "f16", "bf16", "tf32", "wgmma", "mma.sync", "shared",
              "registers", "128,bf16", "32,e8m0", ("f8e4m3", "f8e5m2"), ("f8e5m2", "f8e4m3"), ("i8", "u8"),
              ("u8", "i8"), ("tf32", "tf32"), ("i4", "tf32"), ("e2m1", "tf32"), ("f8e5m2", "tf32"), ("u8", "tf32"),
              ("f16", "tf32"), ("bf16", "tf32"), ("i4", "i8"), ("u4", "i8"), ("u4", "u8"), ("e2m1", "f8e4m3"),
              ("e2m1", "f8e5m2")):
        assert seen[t] >= 1, (t, seen)
    assert len(CASES) == 276


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_mma_mixed_bit_exact(results, name):
    r = results[name]
    assert r.ok, r.message
