"""Emulator of gather plans (``plan/gather.py``), executed from their data alone.

``emulate_gather(plan, src_regs, idx_regs)`` computes the output registers:
shuffle plans with the target's real ``shfl`` semantics (candidate registers
packed into 32-bit words, the right word and slot selected per index),
shared-memory plans through a poisoned byte array with race,
uninitialised-read, alignment and bounds checks (``SmemError``).
``check_gather`` compares it with ``reference.gather_reference`` on random
inputs (``reference.gather_tensors``: repeated, extreme and out-of-range
indices).
"""
from __future__ import annotations

import numpy as np

from ll_codegen.core.dtypes import NP_RAW
from ll_codegen.core.layout import layout_of
from ll_codegen.verify.emulate.common import POISON, SmemError, as_bytes, from_bytes, shfl_source, xor_form
from ll_codegen.verify.emulate.reference import gather_reference, gather_tensors, regs_of


def emulate_gather(plan, src_regs: np.ndarray, idx_regs: np.ndarray) -> np.ndarray:
    """Output registers a ``GatherPlan`` produces from source registers (raw
    bits) and index registers (integers, any sign)."""
    W, L = plan.num_warps, plan.warp_size
    lanes = np.arange(L)[None, :]
    warps = np.arange(W)[:, None]
    v_all = idx_regs.astype(np.int64) & (plan.axis_size - 1)      # two's complement mask: Python's mod
    w = plan.elem_bytes
    out = np.zeros((W, L, plan.n_idx), dtype=NP_RAW[w])

    def terms(coefs, v):
        t = np.zeros(v.shape, dtype=np.int64)
        for j, c in enumerate(coefs):
            t ^= ((v >> j) & 1) * c
        return t

    if plan.shuffle is not None:
        s = plan.shuffle
        src64 = src_regs.astype(np.uint64)
        for r, o in enumerate(s.outs):
            v = v_all[:, :, r]
            R = o.reg ^ xor_form(s.reg, lanes, warps) ^ terms(s.v_reg, v)
            Ls = o.lane ^ xor_form(s.lane, lanes, warps) ^ terms(s.v_lane, v)
            c = np.zeros_like(R)
            for j, p in enumerate(s.select_bits):
                c |= ((R ^ o.cands[0]) >> p & 1) << j
            cands = np.array(o.cands, dtype=np.int64)
            if (cands[c] != R).any():
                raise AssertionError(f"output register {r}: the selected candidate is not the needed register")
            per = s.per
            nk = -(-len(cands) // per)
            word_of, slot = c // per, c % per
            srcl = shfl_source(plan.target, L, np.arange(L)[None, :], Ls, xor=False)      # (W, L)
            got = np.zeros((W, L), dtype=np.uint64)
            padded = np.resize(cands, nk * per).reshape(nk, per)                         # (nk, per)
            live = (np.arange(nk * per) < len(cands)).reshape(nk, per)
            for h in range(s.words):                     # 8-byte elements: lo word, then hi word
                elems = (src64[:, :, padded] >> np.uint64(32 * h)) & np.uint64(0xFFFFFFFF)   # (W, L, nk, per)
                elems = np.where(live, elems, np.uint64(0))
                shifts = np.uint64(8 * w) * np.arange(per, dtype=np.uint64) if w < 4 else np.zeros(1, np.uint64)
                payload = np.bitwise_or.reduce(elems << shifts, axis=3)                  # (W, L, nk): the words sent
                recv = payload[np.arange(W)[:, None], srcl]                              # (W, L, nk): from lane Ls
                word = np.take_along_axis(recv, word_of[..., None], axis=2)[..., 0]
                part = (word >> (np.uint64(8 * w) * slot.astype(np.uint64))) if w < 4 else word
                part &= np.uint64((1 << min(32, 8 * w)) - 1)
                got |= part << np.uint64(32 * h)
            out[:, :, r] = got.astype(NP_RAW[w])
        return out
    m = plan.smem
    mem = np.full(m.bytes, POISON, dtype=np.uint8)
    sb = as_bytes(src_regs)                                     # (W, L, n_src, w)
    ws = np.array([x for x in range(W) if not x & m.warp_skip])[:, None]
    ls = np.array([x for x in range(L) if not x & m.lane_skip])[None, :]
    addrs, vals = [], []
    for acc in m.stores:
        nb = len(acc.regs) * w
        a = xor_form(m.store_base, ls, ws) ^ acc.offset          # (W', L')
        if (a % nb).any() or (a < 0).any() or (a + nb > m.bytes).any():
            raise SmemError(f"a store of {nb} bytes is misaligned or out of bounds")
        addrs.append((a[..., None] + np.arange(nb)).reshape(-1))
        vals.append(sb[ws, ls][:, :, list(acc.regs)].reshape(-1))
    addr, val = np.concatenate(addrs), np.concatenate(vals)
    order = np.lexsort((val, addr))
    addr, val = addr[order], val[order]
    same = addr[1:] == addr[:-1]
    if (same & (val[1:] != val[:-1])).any():
        raise SmemError("race: two threads write different values to one byte")
    mem[addr] = val
    if len(np.unique(addr)) != m.bytes:
        raise SmemError(f"{m.bytes - len(np.unique(addr))} tile bytes never written")
    for r in range(plan.n_idx):
        v = v_all[:, :, r]
        a = xor_form(m.load_base, lanes, warps) ^ m.load_offsets[r] ^ terms(m.v_offset, v)
        if (a % w).any() or (a < 0).any() or (a + w > m.bytes).any():
            raise SmemError("load misaligned or out of bounds")
        b = mem[a[..., None] + np.arange(w)]
        out[:, :, r] = from_bytes(b, w)
    return out


def check_gather(plan, rng: np.random.Generator | int | None = 0, runs: int = 2) -> None:
    """Emulate on random data (``gather_tensors``) and compare every thread's
    output registers with ``gather_reference``; raises AssertionError."""
    rng = np.random.default_rng(rng)
    src_l, idx_l = layout_of(plan.src_bases), layout_of(plan.idx_bases)
    for _ in range(runs):
        src_t, idx_t = gather_tensors(plan, rng)
        want = gather_reference(src_l, idx_l, plan.axis, src_t, idx_t)
        got = emulate_gather(plan, regs_of(src_l, src_t), regs_of(idx_l, idx_t))
        bad = np.argwhere(got != want)
        if len(bad):
            wi, li, r = bad[0]
            raise AssertionError(f"{plan.strategy} gather: {len(bad)} wrong registers; first warp {wi} lane {li} "
                                 f"register {r}: got {got[wi, li, r]:#x}, want {want[wi, li, r]:#x}")
