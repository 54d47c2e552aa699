"""Emulate an MMA plan with the independent PTX model (``ptx_model.py``; AMD MFMA: ``mfma_model.py``)
and compare with numpy.

The plan's steps are executed as the generated ``mma()`` issues them: for every warp group (wgmma)
or warp (mma.sync) and every step, the operands are read as the hardware would -- shared operands
through the 64-bit descriptor the header builds (the model's address function, written from the
PTX ISA), register operands through the model's fragment tables -- and the result is written into
the accumulator registers the step names, through the model's D/C fragment.  Every thread's
accumulator registers must end as ``C + A @ B`` at the coordinates the accumulator layout gives
them (``reference.regs_of``).

Accumulator registers: a step names 32-bit registers; for .f16 accumulators register w is the
user's elements 2w (low half) and 2w + 1 (high half), and the model's ``accumulator_registers``
says which D elements the instruction keeps in the two halves of each of its registers.  Each
instruction's D is rounded to the accumulator type (f16: numpy's float16, round to nearest even).
"""
from __future__ import annotations

import numpy as np

from ll_codegen.core.layout import layout_of
from ll_codegen.plan.mma import AB_BYTES
from ll_codegen.verify.models import mfma_model
from ll_codegen.verify.models import ptx_model
from ll_codegen.verify.emulate.reference import encode_small, mma_tensors, regs_of

PTX_TYPE = {"f16": "f16", "bf16": "bf16", "tf32": "tf32", "f8e4m3": "e4m3", "f8e5m2": "e5m2", "i8": "s8", "u8": "u8"}


def shared_image(plan, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """The shared bytes holding the shared operand tiles (each at its alignment) and their addresses."""
    e = AB_BYTES[plan.dtype]
    mem, where, top = [], {}, 0
    for name, op, values, dtype in (("a", plan.a, a, plan.a_type), ("b", plan.b, b, plan.dtype)):
        if op.space != "shared":
            continue
        top = -(-top // op.align) * op.align
        where[name] = top
        tile = layout_of(op.layout)
        coords = tile.apply_all()[: tile.in_dim_size("offset")]
        raw = encode_small(values[coords[:, 0], coords[:, 1]], dtype).astype(np.uint64)
        data = np.zeros(raw.size * e, np.uint8)
        for j in range(e):
            data[j::e] = (raw >> np.uint64(8 * j)) & np.uint64(0xFF)
        mem.append((top, data))
        top += data.size
    smem = np.zeros(max(top, 16), np.uint8)
    for at, data in mem:
        smem[at:at + data.size] = data
    return smem, where


def _register_values(plan, which: str, values: np.ndarray) -> np.ndarray:
    """(warps, lanes, elements) operand values each thread holds in its register layout."""
    return regs_of(layout_of(getattr(plan, which).layout), values)


ACC_BITS = {"f32": 32, "i32": 32, "f16": 16}


def _elements(plan, words: tuple[int, ...]) -> np.ndarray:
    """The user's accumulator elements of registers ``words``, register-major (half h of register
    w is element per w + h, per = elements per register)."""
    per = plan.acc_per_reg
    return np.array([w * per + h for w in words for h in range(per)])


def _rounded(d: np.ndarray, acc_dtype: str) -> np.ndarray:
    """D as the instruction writes it: f16 accumulators hold float16 values."""
    return d.astype(np.float16).astype(np.float64) if acc_dtype == "f16" else d


def emulate(plan, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Every thread's accumulator registers (warps, lanes, regs) after ``mma()`` from ``c``."""
    acc = regs_of(layout_of(plan.acc_layout), c).astype(np.int64 if plan.acc_dtype == "i32" else np.float64)
    smem, where = shared_image(plan, a, b)
    e = AB_BYTES[plan.dtype]
    per = max(1, 4 // e)                                 # elements per 32-bit register word
    regs = {w: _register_values(plan, w, v) for w, v in (("a", a), ("b", b)) if getattr(plan, w).space == "registers"}
    m_i, n_i, k_i = plan.instr_shape
    if plan.kind == "mfma":
        return _emulate_mfma(plan, regs, acc, per)
    bits = ACC_BITS[plan.acc_dtype]
    if plan.kind == "wgmma":
        frag_d = ptx_model.accumulator_registers(ptx_model.wgmma_d_fragment(n_i, bits), bits).reshape(128, -1, 2)
        frag_a = ptx_model.wgmma_a_fragment(k_i, 8 * e)
        for g in range(plan.num_warps // 4):
            warps = np.arange(4 * g, 4 * g + 4)
            t_w, t_l = np.repeat(warps, 32), np.tile(np.arange(32), 4)
            for s in plan.steps:
                mine = _elements(plan, s.acc)[None, :]
                d_in = np.zeros((64, n_i), acc.dtype)
                d_in[frag_d[..., 0], frag_d[..., 1]] = acc[t_w[:, None], t_l[:, None], mine]
                descs = {}
                for name in ("a", "b"):
                    op = getattr(plan, name)
                    if op.space == "shared":
                        start, = getattr(s, name)
                        descs[name] = op.descriptor.bits(where[name] + (start ^ op.warp_offset(0, 4 * g)))
                a_vals = None
                if "a" not in descs:
                    elems = [w * per + j for w in s.a for j in range(per)]
                    a_vals = np.zeros((64, k_i))
                    a_vals[frag_a[..., 0], frag_a[..., 1]] = regs["a"][t_w[:, None], t_l[:, None], np.array(elems)[None, :]]
                d = ptx_model.wgmma_reference(smem, descs.get("a"), a_vals, descs["b"], n_i, PTX_TYPE[plan.dtype],
                                              d_in, plan.a.descriptor is None or plan.a.descriptor.k_major,
                                              plan.b.descriptor.k_major, a_dtype=PTX_TYPE[plan.a_type])
                d = _rounded(d, plan.acc_dtype)
                acc[t_w[:, None], t_l[:, None], mine] = d[frag_d[..., 0], frag_d[..., 1]]
        return acc
    shape = f"m16n8k{k_i}"
    frags = ptx_model.mma_sync_fragments(shape, PTX_TYPE[plan.dtype])
    frag_c = ptx_model.accumulator_registers(frags["c"], bits).reshape(32, -1, 2)
    lanes = np.arange(32)
    for w in range(plan.num_warps):
        for s in plan.steps:
            A = np.zeros((16, k_i)); B = np.zeros((k_i, 8)); C = np.zeros((16, 8), acc.dtype)
            ea = [x * per + j for x in s.a for j in range(per)]
            eb = [x * per + j for x in s.b for j in range(per)]
            A[frags["a"][..., 0], frags["a"][..., 1]] = regs["a"][w, lanes[:, None], np.array(ea)[None, :]]
            B[frags["b"][..., 0], frags["b"][..., 1]] = regs["b"][w, lanes[:, None], np.array(eb)[None, :]]
            mine = _elements(plan, s.acc)[None, :]
            C[frag_c[..., 0], frag_c[..., 1]] = acc[w, lanes[:, None], mine]
            D = _rounded(C + (A @ B).astype(acc.dtype), plan.acc_dtype)
            acc[w, lanes[:, None], mine] = D[frag_c[..., 0], frag_c[..., 1]]
    return acc


def _emulate_mfma(plan, regs: dict[str, np.ndarray], acc: np.ndarray, per: int) -> np.ndarray:
    """AMD MFMA: every wave issues every step; the instruction's first source is A's words (B's
    when ``swap_ab``), read as the model's items (word w's part h = item per w + h), and D goes
    back into the step's accumulator registers through the model's VGPR table."""
    first, second = ("b", "a") if plan.swap_ab else ("a", "b")
    for w in range(plan.num_warps):
        for s in plan.steps:
            src = [regs[x][w][:, [v * per + j for v in getattr(s, x) for j in range(per)]] for x in (first, second)]
            mine = np.array(s.acc)
            acc[w][:, mine] = mfma_model.mfma(plan.instr, src[0], src[1], acc[w][:, mine])
    return acc


def check_mma(plan, rng=0, **options) -> None:
    """Run ``plan`` on random small integers; AssertionError naming the first wrong register."""
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    a, b, c, want = mma_tensors(plan, rng)
    try:
        got = emulate(plan, a, b, c)
    except ValueError as e:                 # the model refuses a read: outside the tiles, a bad descriptor
        raise AssertionError(f"mma: {e}") from None
    expect = regs_of(layout_of(plan.acc_layout), want)
    bad = np.argwhere(got != expect)
    if len(bad):
        w, l, r = (int(x) for x in bad[0])
        raise AssertionError(f"mma: warp {w} lane {l} acc[{r}] = {got[w, l, r]}, expected {expect[w, l, r]} "
                             f"({len(bad)} of {got.size} registers differ)")
