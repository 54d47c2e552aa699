"""HIP plans name AMD instructions, and the names are true.

* ``instruction_name``/``shuffle_name`` give AMDGPU mnemonics for HIP:
  ds_write_b8..b128, ds_read_u8/u16/b32..b128, global_load_ubyte/ushort/dword..
  dwordx4, global_store_byte/short/dword..dwordx4, ds_bpermute_b32;
* the plan text of HIP plans (``llgen plan``, the generated headers' comments,
  every candidate) uses them and no PTX name (st.shared, ld.global, shfl,
  cp.async, ...);
* compiled with hipcc for gfx90a, the kernel the plan describes contains every
  instruction its chosen plan names, and every LDS / shuffle instruction in it
  is one the plan names (up to the ``_d16``/``_d16_hi`` half-register forms).
"""
from __future__ import annotations

import os
import re

import pytest

from ll_codegen.api import plan_conversion
from ll_codegen.plan.model import instruction_name, shuffle_name
from ll_codegen.emit.render import file_names
from ll_codegen.operations import summary, write_files
from toolchain import HIP_ENV, counted_kernel, need, run, split_isa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")
SPECS = os.path.join(EX, "specs")
PTX = re.compile(r"\b(?:st|ld)\.(?:shared|global)\b|\b(?:ld|st)matrix\b|\bshfl\b|\bcp\.async\b|\bbar\.sync\b")
AMD = re.compile(r"\b(?:ds|global)_[a-z0-9_]+")

_L = [[0, 2], [0, 4], [0, 8], [0, 16], [0, 32]]
# lane bit 5 and the register bit trade places: a shuffle with lane ^ 32 (__shfl_xor)
XOR_SRC = dict(kind="linear", register=[[0, 1]], lane=_L + [[1, 0]], warp=[], block=[], shape=[2, 64])
XOR_DST = dict(kind="linear", register=[[1, 0]], lane=_L + [[0, 1]], warp=[], block=[], shape=[2, 64])


def _blocked(spt, tpw=(4, 16), order=(1, 0)):
    return dict(kind="blocked", size_per_thread=list(spt), threads_per_warp=list(tpw), warps_per_cta=[4, 1],
                order=list(order), shape=[64, 64])


def _path(*p):
    return os.path.join(*p)


# (name, src, dst, dtype, options): every instruction family and width of the HIP paths
CASES = [
    ("shfl_idx", _path(SPECS, "blocked_wave64_64x64.yaml"), _path(SPECS, "blocked_wave64_2x2_64x64.yaml"), "f16", {}),
    ("shfl_xor", XOR_SRC, XOR_DST, "f32", {}),
    ("smem_b64", _path(SPECS, "blocked_wave64_64x64.yaml"), _path(SPECS, "blocked_wave64_2x2_64x64.yaml"), "i8",
     {"strategy": "smem"}),
    ("smem_b16", _blocked([1, 4]), _blocked([4, 1], (16, 4), (0, 1)), "f16", {"strategy": "smem"}),
    ("smem_mfma", _path(SPECS, "mfma_32x32_2x2_64x64.yaml"), _path(SPECS, "blocked_wave64_64x64.yaml"), "f32", {}),
    ("lds_store_b32", _path(SPECS, "blocked_wave64_64x64.yaml"), _path(EX, "swizzled_shared_64x64.yaml"), "i8", {}),
    ("lds_store_b8", _blocked([1, 1], (1, 64)), _path(EX, "swizzled_shared_64x64.yaml"), "i8", {}),
    ("lds_load_b64", _path(EX, "swizzled_shared_64x64.yaml"), _path(SPECS, "blocked_wave64_64x64.yaml"), "f16", {}),
    ("lds_load_u16", _path(EX, "swizzled_shared_64x64.yaml"), _blocked([1, 1], (1, 64)), "f16", {}),
    ("gst_dword", _path(SPECS, "mfma_32x32_2x2_64x64.yaml"), _path(EX, "global_64x64.yaml"), "f32", {}),
    ("gst_short", _blocked([1, 1], (1, 64)), _path(EX, "global_64x64.yaml"), "f16", {"instr": "vector"}),
    ("gld_dwordx2", _path(EX, "global_64x64.yaml"), _path(SPECS, "blocked_wave64_64x64.yaml"), "f16", {}),
    ("gld_ubyte", _path(EX, "global_64x64.yaml"), _blocked([1, 1], (1, 64)), "i8", {"instr": "vector"}),
    ("copy_x4", _path(EX, "global_64x64.yaml"), _path(EX, "swizzled_shared_64x64.yaml"), "f16", {}),
]


@pytest.fixture(scope="module")
def plans():
    return {name: plan_conversion(src, dst, dtype, "hip", "gfx90a", **opts) for name, src, dst, dtype, opts in CASES}


def chosen_text(plan) -> str:
    """The plan's text without the candidates it did not choose."""
    return "\n".join(line for line in summary(plan).splitlines()
                     if not line.startswith("candidate ") or line.startswith("candidate*"))


def test_hip_instruction_names():
    assert [instruction_name("hip", "vector", "store", n) for n in (1, 2, 4, 8, 16)] == \
        ["ds_write_b8", "ds_write_b16", "ds_write_b32", "ds_write_b64", "ds_write_b128"]
    assert [instruction_name("hip", "vector", "load", n) for n in (1, 2, 4, 8, 16)] == \
        ["ds_read_u8", "ds_read_u16", "ds_read_b32", "ds_read_b64", "ds_read_b128"]
    assert [instruction_name("hip", "vector", "load", n, "global") for n in (1, 2, 4, 8, 16)] == \
        ["global_load_ubyte", "global_load_ushort", "global_load_dword", "global_load_dwordx2", "global_load_dwordx4"]
    assert [instruction_name("hip", "vector", "store", n, "global") for n in (1, 2, 4, 8, 16)] == \
        ["global_store_byte", "global_store_short", "global_store_dword", "global_store_dwordx2",
         "global_store_dwordx4"]
    assert shuffle_name("hip") == "ds_bpermute_b32"
    assert instruction_name("cuda", "vector", "store", 16) == "st.shared"      # CUDA keeps the PTX names


def test_hip_plan_text_names_amd_instructions(plans):
    """Every HIP plan's text (chosen plan and every candidate) names AMD
    instructions and no PTX; the cases cover the families the paths use."""
    named = set()
    for name, plan in plans.items():
        text = summary(plan)
        assert not PTX.search(text), (name, PTX.findall(text), text)
        assert AMD.search(text), (name, text)
        named |= set(AMD.findall(chosen_text(plan)))
    assert named >= {"ds_bpermute_b32", "ds_write_b8", "ds_write_b16", "ds_write_b32", "ds_write_b64",
                     "ds_read_u16", "ds_read_b64", "global_store_short", "global_store_dword",
                     "global_load_ubyte", "global_load_dwordx2", "global_load_dwordx4", "ds_write_b128"}, named


def _isa_pattern(name: str) -> str:
    """A plan's name as it may appear in the assembly: 8/16-bit accesses may
    use the half-register forms (ds_read_u16_d16_hi, global_load_short_d16,
    global_store_short_d16_hi)."""
    m = re.fullmatch(r"(ds_read|global_load)_u(8|16|byte|short)", name)
    base = f"{m.group(1)}_u?{m.group(2)}" if m else re.escape(name)
    return rf"\b{base}(?:_d16(?:_hi)?)?\b"


def _lds_ops(isa: str, plan) -> set[str]:
    """LDS and shuffle instructions of the kernel the plan describes, the
    half-register forms folded; of a shared-tile load (store, copy) only the
    reads (writes): its probe or harness fills (reads back) the tile itself."""
    ops = {re.sub(r"_d16(?:_hi)?$", "", op)
           for op in re.findall(r"^\s*(ds_(?:read|write|bpermute|swizzle)\w*)", isa, re.M)}
    if plan.operation == "copy":
        return {op for op in ops if op.startswith("ds_write")}
    if plan.operation in ("store", "load") and plan.memory.space == "shared":
        return {op for op in ops if op.startswith("ds_read" if plan.memory.direction == "load" else "ds_write")}
    return ops


@pytest.mark.compile
def test_hip_plan_names_are_what_hipcc_emits(plans, tmp_path):
    hipcc = need("hipcc")
    for name, plan in plans.items():
        write_files(plan, str(tmp_path), name, emit=("header", "harness"))
    tu = tmp_path / "all.hip"
    tu.write_text("".join(f'#include "{file_names("hip", n)["harness"]}"\n' for n in plans))
    rc, out = run([hipcc, "--offload-arch=gfx90a", "--genco", "-save-temps=obj", "-o", "all.co", "all.hip"],
                  str(tmp_path), HIP_ENV)
    assert rc == 0, out[-3000:]
    funcs = split_isa((tmp_path / "all-hip-amdgcn-amd-amdhsa-gfx90a.s").read_text())
    bad = []
    for name, plan in plans.items():
        kernels = [s for s in funcs if s in (f"{name}_harness", f"{name}_probe") and counted_kernel(s, name, plan)]
        assert len(kernels) == 1, (name, sorted(funcs))
        isa = funcs[kernels[0]]
        named = set(AMD.findall(chosen_text(plan)))
        bad += [f"{name}: the plan names {n}, {kernels[0]} has none" for n in sorted(named)
                if not re.search(_isa_pattern(n), isa)]
        lds_named = {n for n in named if n.startswith("ds_")}
        bad += [f"{name}: {kernels[0]} issues {op}, the plan does not name it" for op in sorted(_lds_ops(isa, plan))
                if op not in lds_named]
    assert not bad, "\n".join(bad)
