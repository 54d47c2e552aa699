"""Bit-exact GPU checks of upcasts (``--dst-dtype``): i4, u4, e2m1, f8e4m3, f8e5m2, i8, u8 -> f16, bf16
landing in MMA operand fragments.

Cases (``upcast_cases()``): every element-type pair into the wgmma A fragment from registers
(k_width 2, sm_90), the mma.sync m16n8k16 A and B fragments (sm_80 and sm_90; the fp8 pairs at
sm_90 only, their cvt being sm_89+), blocked layouts of 4 and 2 registers per thread (the
4-bit words of 4 and 2 nibbles), and loads with the upcast from a global tile into the wgmma A
fragment and from a swizzled shared tile into the mma.sync A fragment.  Every harness compiles
in NVRTC batches (``gpu.Batch``) and runs ``LLGEN_GPU_RUNS`` times (default 2) on fresh random codes (every code present): the
destination tensor and every thread's destination words must equal numpy's exact upcast bit for
bit (``verify/harness.py``); scaled cases (``--scales``: group-128 and group-64 f16/bf16 scales
with and without zero points, mxfp4's e8m0 exponents per 32) must give RNE(u * s - RNE(z * s)),
each rounding the fma.rn.f16x2/bf16x2 the header issues; a NaN code (e4m3 0x7f/0xff, e5m2 exponent 31 with a non-zero
mantissa) must give a NaN, its payload free (the PTX ISA does not fix it).

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

SOURCES = ("i4", "u4", "e2m1", "f8e4m3", "f8e5m2", "i8", "u8")
BLOCKED = os.path.join(EX, "blocked_64x64.yaml")
MMA_A = os.path.join(EX, "specs", "dot_a_4x1_kw2_64x64.yaml")
WGMMA_A = {"kind": "dot_operand", "operand_index": 0, "k_width": 2, "shape": [64, 64],
           "parent": {"kind": "nvidia_mma", "version": [3, 0], "warps_per_cta": [4, 1], "instr_shape": [16, 64, 16]}}
MMA_B = {"kind": "dot_operand", "operand_index": 1, "k_width": 2, "shape": [32, 32],
         "parent": {"kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": [4, 1], "instr_shape": [16, 8]}}
B_SRC = {"kind": "blocked", "size_per_thread": [8, 1], "threads_per_warp": [4, 8], "warps_per_cta": [1, 4],
         "order": [0, 1], "shape": [32, 32]}
FOUR = {"kind": "blocked", "size_per_thread": [1, 4], "threads_per_warp": [8, 4], "warps_per_cta": [4, 1],
        "order": [1, 0], "shape": [32, 16]}
FOUR_SRC = {"kind": "blocked", "size_per_thread": [1, 4], "threads_per_warp": [8, 4], "warps_per_cta": [4, 1],
            "order": [0, 1], "shape": [32, 16]}
GLOBAL = os.path.join(EX, "global_64x64.yaml")
SWIZZLED = os.path.join(EX, "swizzled_shared_64x64.yaml")
TWO = {"kind": "blocked", "size_per_thread": [1, 2], "threads_per_warp": [4, 8], "warps_per_cta": [4, 1],
       "order": [1, 0], "shape": [16, 16]}
TWO_SRC = {"kind": "blocked", "size_per_thread": [1, 2], "threads_per_warp": [4, 8], "warps_per_cta": [4, 1],
           "order": [0, 1], "shape": [16, 16]}


#: scaled upcasts: (name, source, destination, source type, destination type, --scales, arch)
SCALED = [("w4a16_g128", BLOCKED, WGMMA_A, "u4", "bf16", "128", "sm_90"),
          ("w4a16_g64_zero", BLOCKED, WGMMA_A, "i4", "f16", "64,zero", "sm_90"),
          ("mxfp4_e8m0", BLOCKED, MMA_A, "e2m1", "bf16", "32,e8m0", "sm_80"),
          ("load_global_zero", GLOBAL, WGMMA_A, "u4", "bf16", "32,zero", "sm_90"),
          ("mma_b_dim0_zero", B_SRC, MMA_B, "i8", "bf16", "16,dim=0,zero", "sm_80"),
          ("load_shared_fp8", SWIZZLED, MMA_A, "f8e4m3", "f16", "16", "sm_90"),
          ("two_e8m0", TWO_SRC, TWO, "e2m1", "bf16", "8,e8m0", "sm_90")]


def upcast_cases() -> list[tuple[str, object, tuple[str, ...]]]:
    """(name, plan, tags) of every GPU case."""
    from ll_codegen.api import plan_conversion
    layouts = [("wgmma_a", BLOCKED, WGMMA_A, ("sm_90",)), ("mma_a", BLOCKED, MMA_A, ("sm_80", "sm_90")),
               ("mma_b", B_SRC, MMA_B, ("sm_80", "sm_90")), ("four", FOUR_SRC, FOUR, ("sm_90",)),
               ("two", TWO_SRC, TWO, ("sm_80",)),
               ("load_global_wgmma_a", GLOBAL, WGMMA_A, ("sm_90",)), ("load_shared_mma_a", SWIZZLED, MMA_A, ("sm_80",))]
    out = []
    for k, (name, s, d, src, dst, scales, arch) in enumerate(SCALED):
        p = plan_conversion(s, d, dtype=src, dst_dtype=dst, scales=scales, arch=arch)
        out.append((f"ups{k:02d}_{name}_{src}_{dst}_{arch}", p, (name, src, dst, arch, "scaled")))
    for src in SOURCES:
        for dst in ("f16", "bf16"):
            for name, s, d, archs in layouts:
                for arch in archs:
                    if src.startswith("f8") and arch == "sm_80":
                        continue
                    p = plan_conversion(s, d, dtype=src, dst_dtype=dst, arch=arch)
                    out.append((f"up{len(out):03d}_{name}_{src}_{dst}_{arch}", p, (name, src, dst, arch)))
    return out


CASES = upcast_cases()


@pytest.fixture(scope="session")
def results():
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="llgen_upcast_gpu_") as d:
        b = gpu.Batch([(n, p) for n, p, _ in CASES], d).compile(batch_size=24)
        rng = np.random.default_rng(41)
        res = {n: b.run(n, RUNS, rng) for n, _, _ in CASES}
    print(f"\n[gpu_tests] {len(CASES)} upcast harnesses in {time.time() - t0:.1f} s")
    out = os.environ.get("LLGEN_GPU_REPORT")
    if out:
        with open(out, "w") as f:
            json.dump([{"name": n, "tags": list(t), "ok": res[n].ok, "message": res[n].message}
                       for n, p, t in CASES], f, indent=1)
    return res


def test_coverage():
    """Every source and destination type, the wgmma and mma.sync fragments, both archs."""
    tags = collections.Counter(t for _, _, ts in CASES for t in ts)
    for t in SOURCES + ("f16", "bf16", "wgmma_a", "mma_a", "mma_b", "four", "two", "load_global_wgmma_a",
                        "load_shared_mma_a", "scaled", "sm_80", "sm_90"):
        assert tags[t] >= 1, (t, tags)
    assert len(CASES) >= 100


@pytest.mark.parametrize("name", [n for n, _, _ in CASES])
def test_upcast_bit_exact(results, name):
    r = results[name]
    assert r.ok, r.message
