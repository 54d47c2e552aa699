"""HIP's fused shuffle words: byte permutes with a per-lane selector as ``v_perm_b32``.

A shuffle plan's lane-dependent word can be one byte permute whose selector is a per-lane constant
(``shuffle.fuse_form``).  CUDA writes it ``__byte_perm(a, b, s)`` (PRMT); HIP's ``__byte_perm``
with a run-time selector indexes a byte array in memory, so HIP writes ``detail::byte_perm(a, b,
s')`` = ``__builtin_amdgcn_perm(b, a, s')`` (v_perm_b32), where s' holds s's nibble q in its byte
q (``cexpr.amd_perm_selector``).  Both select byte ``sel_q & 7`` of the pair (a: bytes 0-3, b:
4-7) into byte q.  Checked here: the selector translation against both instructions' definitions
(no compiler); HIP plans' fused words rendered with the translated selectors and every permute
``detail::byte_perm``; random wave64 and wave32 fused plans bit-exact on the host SIMT runtime and,
compiled by hipcc for gfx90a, one v_perm_b32 a fused word, no private (scratch) memory, and the
device branch folding constant operands to the value the host branch and CUDA compute.
"""
from __future__ import annotations

import random
import re
import subprocess
from dataclasses import replace

import numpy as np
import pytest

from ll_codegen.api import plan_conversion
from ll_codegen.emit.cexpr import amd_perm_selector
from ll_codegen.operations import render, write_files
from ll_codegen.plan.model import word_view
from ll_codegen.plan.planner import normalise
from ll_codegen.plan.shuffle import fuse_form, plan_shuffle
from ll_codegen.run import host
from ll_codegen.testing.corpus import random_pair
from ll_codegen.verify.emulate.convert import check_plan


def cuda_byte_perm(x: int, y: int, s: int) -> int:
    """PTX ``prmt.b32`` default mode, selector nibbles 0-7: byte q = byte (s >> 4q) & 7 of y:x."""
    pair = y << 32 | x
    return sum((pair >> 8 * (s >> 4 * q & 7) & 0xFF) << 8 * q for q in range(4))


def amd_perm(hi: int, lo: int, s: int) -> int:
    """``v_perm_b32 D, hi, lo, s``, selector bytes 0-7: byte q = byte (s >> 8q) & 0xff of hi:lo."""
    pair = hi << 32 | lo
    return sum((pair >> 8 * (s >> 8 * q & 0xFF) & 0xFF) << 8 * q for q in range(4))


def test_amd_selector_is_the_same_permute():
    rng = random.Random(1)
    for _ in range(500):
        x, y = rng.getrandbits(32), rng.getrandbits(32)
        sel = sum(rng.randrange(8) << 4 * q for q in range(4))
        assert amd_perm(y, x, amd_perm_selector(sel)) == cuda_byte_perm(x, y, sel)
    for bad in (0x8000, 0x10000):           # sign-replicate nibble; a fifth nibble
        with pytest.raises(ValueError, match="byte selector"):
            amd_perm_selector(bad)


def _fused_plans(target: str, arch: str, lanes: int, count: int, seed: int) -> list:
    """``count`` random warp-local pairs' shuffle plans (i8 / f16) whose fused form exists, that form
    forced (send or receive lane-dependent words fused)."""
    rng, out = random.Random(seed), []
    while len(out) < count:
        src, dst = random_pair(rng, lanes=lanes, same_warps=True)
        dtype = rng.choice(("i8", "f16"))
        try:
            p = plan_conversion(src, dst, dtype, target, arch, strategy="shuffle")
        except ValueError:
            continue
        f = fuse_form(plan_shuffle(normalise(src), normalise(dst), p.elem_bytes), word_view(p), p.dst_copies)
        if f is not None:
            out.append((src, dst, replace(p, shuffle=f)))
    return out


def _selectors(code: str, call: str) -> list[str]:
    """The last argument of every call ``call...)`` in ``code`` (parentheses balanced)."""
    out, i = [], code.find(call)
    while i >= 0:
        depth, j, last = 1, i + len(call), i + len(call)
        while depth:
            c = code[j]
            depth += {"(": 1, ")": -1}.get(c, 0)
            if c == "," and depth == 1:
                last = j + 1
            j += 1
        out.append(code[last:j - 1].strip())
        i = code.find(call, j)
    return out


def test_hip_fused_words_render_v_perm_selectors():
    """Every permute with a per-lane selector is ``detail::byte_perm`` and every selector constant
    is a v_perm_b32 selector (bytes 0-7); the plans emulate bit-exact."""
    for src, dst, p in _fused_plans("hip", "gfx90a", 64, 12, seed=5):
        check_plan(p, src, dst, np.random.default_rng(0))
        code = render(p, "header", "k")
        assert "uint32_t byte_perm(" in code and "detail::byte_perm(" in code
        assert all(not re.fullmatch(r"perm\d+", sel) for sel in _selectors(code, "__byte_perm("))
        assert all(re.fullmatch(r"perm\d+", sel) for sel in _selectors(code, "detail::byte_perm("))
        consts = [int(c, 16) for line in re.findall(r"perm\d+ = [^;]*", code) for c in re.findall(r"0x([0-9a-f]+)u", line)]
        assert consts and all(v >> 8 * q & 0xFF < 8 for v in consts for q in range(4)), consts


@pytest.mark.compile
@pytest.mark.skipif(host.compiler() is None, reason="no clang++ for the host SIMT runtime")
def test_hip_fused_plans_run_bit_exact_on_the_host_runtime():
    items = [(f"fused_w64_{k}", p) for k, (_, _, p) in enumerate(_fused_plans("hip", "gfx90a", 64, 3, seed=11))]
    items += [(f"fused_w32_{k}", p) for k, (_, _, p) in enumerate(_fused_plans("hip", "gfx1030", 32, 2, seed=12))]
    results = host.verify_host(items, runs=2, jobs=1)
    bad = [r.message for r in results if not r.ok]
    assert not bad, bad[0]


@pytest.mark.compile
def test_hip_fused_word_is_one_v_perm_without_scratch(tmp_path):
    from toolchain import HIP_ENV, need
    hipcc = need("hipcc")
    _, _, p = _fused_plans("hip", "gfx90a", 64, 1, seed=13)[0]
    write_files(p, str(tmp_path), "m", emit=("header", "harness"))
    src = tmp_path / "m_harness.hip"
    asm = tmp_path / "m.s"
    r = subprocess.run([hipcc, "--offload-arch=gfx90a", "-O3", "-S", "--cuda-device-only", "-o", str(asm), str(src)],
                       capture_output=True, text=True, env=HIP_ENV, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    text = asm.read_text()
    fused = (tmp_path / "m.h").read_text().count("detail::byte_perm(") - 1     # less the definition
    assert fused > 0 and text.count("v_perm_b32") >= fused
    # the device branch permutes as the host branch (and CUDA) does: hipcc folds constant operands
    x, y, sel = 0x33221100, 0x77665544, 0x4715
    (tmp_path / "fold.hip").write_text(
        f'#include "m.h"\nextern "C" __global__ void fold(unsigned* p) {{ '
        f'p[0] = m::detail::byte_perm({x:#x}u, {y:#x}u, {amd_perm_selector(sel):#x}u); }}\n')
    r = subprocess.run([hipcc, "--offload-arch=gfx90a", "-O3", "-S", "--cuda-device-only", "-o", "fold.s", "fold.hip"],
                       capture_output=True, text=True, env=HIP_ENV, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"{cuda_byte_perm(x, y, sel):#x}" in (tmp_path / "fold.s").read_text()
    assert ".private_segment_fixed_size: 0" in text and not re.search(r"^\s+(scratch|buffer)_(load|store)", text, re.M) and "ds_read_u8" not in text
