"""Run-time alignment: one header for any leading dimension.

A global tile's `alignment` is a promise about the tile pointer and the strides; where the layout
allows wider vectors than the promise, the plan carries a path per vector width (``plan.paths``)
and the header's store/load/copy read the actual pointer and strides and take the widest path
they allow.  Checked here: which paths the planner makes; each path through the emulator; every
path's harness variant (strides and a pointer offset of exactly that alignment) bit-exact on the
host SIMT runtime, which reports a misaligned vector access -- so a dispatch that takes a path
too wide fails (a mutation test below); the header compiles for CUDA and HIP.
"""
from __future__ import annotations

import os
import re

import pytest

from ll_codegen import api
from ll_codegen.emit.harness_tiles import global_access, harness_tile, harness_variants
from ll_codegen.operations import check
from ll_codegen.run import host

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ACC = os.path.join(ROOT, "examples", "gemm", "acc.yaml")               # mma.sync f32 accumulator, 128 x 128
BLOCKED = os.path.join(ROOT, "examples", "blocked_64x64.yaml")
WAVE64 = os.path.join(ROOT, "examples", "specs", "blocked_wave64_64x64.yaml")
NVMMA = os.path.join(ROOT, "examples", "nvmma_shared_64x64.yaml")


def glob(shape, alignment: int) -> dict:
    """A row-major global tile spec (a mapping, as a YAML file holds it)."""
    return {"kind": "global", "order": [1, 0], "alignment": alignment, "shape": list(shape)}


def plan(src, dst, dtype, target="cuda", arch=None):
    return api.plan_conversion(src, dst, dtype=dtype, target=target, arch=arch)


def vectors(p) -> list[int]:
    return [global_access(q).vector_bytes for q in (p, *p.paths)]


def test_paths_widest_first_down_to_the_promise():
    assert not plan(ACC, glob((128, 128), 16), "f32", arch="sm_80").paths        # promise 16: as before
    p = plan(ACC, glob((128, 128), 4), "f32", arch="sm_80")
    assert vectors(p) == sorted(set(vectors(p)), reverse=True) and vectors(p)[0] == 8 and vectors(p)[-1] == 4
    assert p.paths[-1].memory.alignment == 4 and p.memory.alignment >= 8
    c = plan(glob((64, 64), 2), NVMMA, "f16", arch="sm_80")                       # a copy: 16, 8, 4, 2 bytes
    assert vectors(c) == [16, 8, 4, 2] and c.paths[-1].load.alignment == 2
    # strides the caller fixes rule alignments out: 999 elements of 4 bytes allow 4 only
    s = api.plan_conversion(ACC, glob((128, 128), 4), dtype="f32", arch="sm_80", strides=(999, 1))
    assert not s.paths and s.memory.vector_bytes == 4


def test_harness_variants_steer_each_path():
    p = plan(ACC, glob((128, 128), 2), "f16", arch="sm_80")
    assert len(p.paths) >= 2
    for q in (p, *p.paths):
        v = q.memory.vector_bytes
        variant = "" if q is p else f"_a{v}"
        assert variant in harness_variants(p) and variant + "_masked" in harness_variants(p)
        strides, offset = harness_tile(p, variant)
        align = offset * p.elem_bytes | strides[0] * p.elem_bytes | 64
        assert align & -align >= v, variant                         # this path's vectors are allowed
        narrower = [w for w in vectors(p) if w > v]
        assert all((align & -align) < w for w in narrower), variant   # and no wider path's


@pytest.mark.compile
@pytest.mark.parametrize("case", ["store_f32", "store_f16", "store_i8", "load_f16", "copy_f16", "hip_store_i8",
                                  "hip_load_f16"])
def test_every_path_emulated_and_host_run(case):
    p = {"store_f32": lambda: plan(ACC, glob((128, 128), 4), "f32", arch="sm_80"),
         "store_f16": lambda: plan(ACC, glob((128, 128), 2), "f16", arch="sm_80"),
         "store_i8": lambda: plan(BLOCKED, glob((64, 64), 1), "i8"),
         "load_f16": lambda: plan(glob((64, 64), 2), BLOCKED, "f16"),
         "copy_f16": lambda: plan(glob((64, 64), 2), NVMMA, "f16", arch="sm_80"),
         "hip_store_i8": lambda: plan(WAVE64, glob((64, 64), 1), "i8", "hip", "gfx942"),
         "hip_load_f16": lambda: plan(glob((64, 64), 2), WAVE64, "f16", "hip", "gfx90a")}[case]()
    assert p.paths, case
    check(p, 0)
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    [r] = host.verify_host([(f"rta_{case}", p)])
    assert r.ok, r.message


@pytest.mark.compile
def test_a_dispatch_too_wide_is_caught(tmp_path):
    """Mutation: the header's dispatch always takes the widest path -- the misaligned harness
    variants then make misaligned vector accesses, which the host runtime reports."""
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    p = plan(ACC, glob((128, 128), 4), "f32", arch="sm_80")
    host.write_sources(str(tmp_path), [("rta_mut", p)])
    path = tmp_path / "rta_mut.cuh"
    text = path.read_text()
    assert re.search(r"if \(align % 8 == 0\) a8::store", text)
    path.write_text(re.sub(r"if \(align % 8 == 0\) (a8::store\w*\([^;]*;)\s*else [^;]*;", r"\1", text))
    [r] = host.verify_host([("rta_mut", p)], sources=str(tmp_path))
    assert not r.ok and "align" in r.message.lower(), r.message


def test_one_signature_whatever_the_paths():
    """store()/store_masked() of a plan with paths read like those of one without."""
    heads = [api.plan_render(plan(ACC, glob((128, 128), a), "f32", arch="sm_80"), "header", "x") for a in (16, 4)]
    for fn in ("store", "store_masked"):
        pat = re.compile(rf"__device__ __forceinline__ void {fn}\(([^)]*)\)", re.S)
        a, b = (re.sub(r"\s+", " ", pat.findall(h)[-1]) for h in heads)
        assert a == b, (a, b)
    assert "constexpr int kSmemBytes = 0;" in heads[0]
