"""Shared-memory addresses of generated conversions: one register per distinct overlapping xor.

A planned access touches ``base ^ offset`` (``base`` the thread's byte offset, a function of lane and
warp whose possible bits are ``support``).  ``emit/body.py`` writes it as
``(base ^ (offset & support)) + (offset & ~support)``: the xor only with the bits ``base`` may have, the
rest as the instruction's immediate, so accesses whose offsets differ outside ``support`` share one
address register (the compiler hoists each distinct address out of a loop: blocked -> dot B 64 x 128
f16 held 34 shared address registers, now 10).  Checked here without a compiler: the identity for
every base the support allows, and, in the rendered header of conversions through shared memory, that
every access's register operand xors only support bits, its immediate has none, and the number of
distinct register operands is the number of distinct ``offset & support``.  (The PTX interpreter of
``tests/test_ptx_text.py`` and the host runtime check the addresses per thread.)
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from ll_codegen.api import plan_conversion
from ll_codegen.operations import render_files
from ll_codegen.spec import spec_from_dict
from ll_codegen.testing.corpus import COL, MMA, ROW, blocked, dot, mma_v2


def test_split_equals_the_xor_for_every_base_of_the_support():
    rng = np.random.default_rng(11)
    for _ in range(200):
        support = int(rng.integers(0, 1 << 14))
        offset = int(rng.integers(0, 1 << 15))
        bases = [b for b in range(1 << 14) if b & ~support == 0][:512]
        for b in bases:
            assert (b ^ (offset & support)) + (offset & ~support) == b ^ offset


PAIRS = [("dotB_64x128_f16", blocked([1, 8], [4, 8], [4, 1], [1, 0], [64, 128]),
          dot(mma_v2([4, 1], [64, 128]), 1, 2, [64, 128]), "f16"),
         ("row_col_f32", ROW, COL, "f32"), ("mma_row_f16", MMA, ROW, "f16")]
ACCESS = re.compile(r"detail::(?:st_shared|ld_shared|ldmatrix|stmatrix)\w*<(\d+)>\((\w+_addr|smem_u32 \+ \((\w+)_base"
                    r"(?: \^ (0x[0-9a-f]+))?\))")


@pytest.mark.parametrize("name,src,dst,dtype", PAIRS, ids=[p[0] for p in PAIRS])
def test_rendered_accesses_share_address_registers(name, src, dst, dtype):
    s, d = spec_from_dict(dict(src)).linear, spec_from_dict(dict(dst)).linear
    plan = plan_conversion(s, d, dtype, "cuda", "sm_90", strategy="smem")
    text = next(iter(render_files(plan, name, ("header",)).values()))
    m = plan.smem
    supports = {"st": m.store_base.support, "ld": m.load_base.support}
    operands: dict[str, set] = {"st": set(), "ld": set()}
    wanted: dict[str, set] = {"st": set(), "ld": set()}
    for rnd in m.rounds:
        wanted["st"] |= {a.offset & supports["st"] for a in rnd.stores}
        wanted["ld"] |= {a.offset & supports["ld"] for a in rnd.loads}
    found = ACCESS.findall(text)
    accesses = sum(len(r.stores) + len(r.loads) for r in m.rounds)
    assert found and len(found) % accesses == 0, (len(found), accesses)      # convert() (and convert_words())
    for imm, operand, side, xor in found:
        side = side or operand.split("_")[0]
        x = int(xor, 16) if xor else 0
        assert x & ~supports[side] == 0 and int(imm) & supports[side] == 0, (operand, imm)
        operands[side].add(x)
    assert operands == wanted
