"""Emulator of conversion plans (register moves, shuffles, shared memory) --
the independent checker of the planner (DESIGN.md, "Verification chain", step 3).

Nothing here imports the planner or reuses its formulas: ``emulate`` reads
only the plan data (``plan/model.py``) and executes it thread by thread
(vectorised over all warps and lanes with numpy) with the semantics of
``common`` (real shuffle intrinsics; shared memory as a poisoned byte
array with race, uninitialised-read, alignment and bounds checks).

``emulate(plan, src_regs)``
    the destination registers ``(num_warps, warp_size, n_dst)`` the plan produces.
``check_plan(plan, src, dst, rng)``
    random raw bits (full range: NaN payloads, signed zeros, ... occur
    naturally) through ``reference.reference`` and ``emulate``; every thread
    and register compared (AssertionError on a difference).
"""
from __future__ import annotations

import numpy as np

from ll_codegen.core.dtypes import NP_RAW
from ll_codegen.core.layout import LinearLayout, layout_of
from ll_codegen.plan.plans import ConvertPlan, Transfer, without_via
from ll_codegen.verify.emulate.common import (POISON, SmemError, as_bytes, from_bytes, lane_select, shuffle_words,
                                              smem_access, store_warps, xor_form)
from ll_codegen.verify.emulate.reference import reference


def _emulate_shuffle(plan: Transfer, src: np.ndarray, dst: np.ndarray, written: np.ndarray) -> None:
    s = plan.shuffle
    W, L, _ = src.shape
    w = plan.elem_bytes
    nbytes = s.vec * w
    if nbytes > 4 * s.words:
        raise AssertionError(f"payload of {s.vec} x {w} bytes does not fit {s.words} words")
    # selects and the source lane read the thread index tid = lane + L * warp (its bits above
    # the lane's: the warp id); the source lane's images are lanes of the thread's own warp
    lanes, warps = np.arange(L)[None, :], np.arange(W)[:, None]
    tid = lanes + L * warps                                      # (W, L)
    at = (warps[..., None], lanes[..., None])                    # (W, L, 1) indices of a thread's registers
    sb = as_bytes(src)                                          # (W, L, n_src, w)
    send_c, recv_c = lane_select(s.send_select, tid), lane_select(s.recv_select, tid)
    for rnd in s.rounds:
        sent, received = s.sent(rnd), s.received(rnd)
        send = np.array(sent, dtype=np.int64).reshape(len(sent), -1)
        recv = np.array(received, dtype=np.int64).reshape(len(received), -1)
        if send.shape[1] != s.vec or recv.shape[1] != s.vec:
            raise AssertionError(f"round {rnd} does not move {s.vec} registers per lane")
        regs = send[send_c]                                      # (W, L, vec)
        payload = np.zeros((W, L, 4 * s.words), dtype=np.uint8)
        payload[:, :, :nbytes] = sb[at + (regs,)].reshape(W, L, nbytes)
        words = payload.view("<u4")                              # (W, L, words)
        if s.src_lane is None:
            got = shuffle_words(plan.target, words, rnd.lane_xor, xor=True)
        else:
            form = s.lane_form(L.bit_length() - 1)
            got = shuffle_words(plan.target, words, xor_form(form, lanes, warps) ^ rnd.lane_xor, xor=False)
        gb = np.ascontiguousarray(got).view(np.uint8)[:, :, :nbytes].reshape(W, L, s.vec, w)
        rregs = recv[recv_c]                                     # (W, L, vec)
        dst[at + (rregs,)] = from_bytes(gb, w)
        written[at + (rregs,)] = True


def _emulate_smem(plan: Transfer, src: np.ndarray, dst: np.ndarray, written: np.ndarray) -> None:
    m = plan.smem
    mem = np.full(m.bytes, POISON, dtype=np.uint8)
    valid = np.zeros(m.bytes, dtype=bool)
    writer = np.full(m.bytes, -1, dtype=np.int64)       # the storing warp (barrier "warp" only)
    sb = as_bytes(src)
    dbytes = as_bytes(dst).copy()
    st_warps, all_warps = store_warps(plan), np.arange(plan.num_warps)
    slice_bytes = m.bytes // plan.num_warps

    def own_slice(addr: np.ndarray, warps: np.ndarray, what: str, ri: int) -> None:
        """Per-warp scratch (``SmemPlan.per_warp``): warp w touches only its slice."""
        bad = addr // slice_bytes != warps[:, None, None]
        if m.per_warp and np.any(bad):
            w, lane = np.argwhere(bad)[0][:2]
            raise SmemError(f"round {ri}: per-warp scratch, but warp {warps[w]} lane {lane} {what} byte "
                            f"{addr[tuple(np.argwhere(bad)[0])]} outside its slice of {slice_bytes}")
    for ri, rnd in enumerate(m.rounds):
        # barrier; stores
        addrs, vals = [], []
        for acc in rnd.stores:
            addr, reg, byte, _, _ = smem_access(plan, acc, m.store_base, m.store_instr, st_warps)
            own_slice(addr, st_warps, "stores", ri)
            L = addr.shape[1]
            val = sb[st_warps[:, None, None], np.arange(L)[None, :, None], reg[None], byte[None]]
            if m.barrier == "warp":
                who = np.broadcast_to(st_warps[:, None, None], addr.shape).ravel()
                other = (writer[addr.ravel()] >= 0) & (writer[addr.ravel()] != who)
                if np.any(other):
                    raise SmemError(f"round {ri}: warp barrier, but two warps store byte {addr.ravel()[np.argmax(other)]}")
                writer[addr.ravel()] = who
            addrs.append(addr.ravel())
            vals.append(val.ravel())
        if addrs:
            a, v = np.concatenate(addrs), np.concatenate(vals)
            order = np.argsort(a, kind="stable")
            a, v = a[order], v[order]
            same = a[1:] == a[:-1]
            clash = same & (v[1:] != v[:-1])
            if np.any(clash):
                i = int(np.argmax(clash))
                raise SmemError(f"round {ri}: race -- two threads write different values to byte {a[i]}")
            mem[a] = v
            valid[a] = True
        # barrier; loads
        for acc in rnd.loads:
            addr, reg, byte, _, _ = smem_access(plan, acc, m.load_base, m.load_instr, all_warps)
            own_slice(addr, all_warps, "loads", ri)
            if not np.all(valid[addr]):
                bad = np.argwhere(~valid[addr])[0]
                raise SmemError(f"round {ri}: warp {bad[0]} lane {bad[1]} loads byte {addr[tuple(bad)]} "
                                f"that no store wrote (poison)")
            if m.barrier == "warp" and np.any(writer[addr] != all_warps[:, None, None]):
                bad = np.argwhere(writer[addr] != all_warps[:, None, None])[0]
                raise SmemError(f"round {ri}: warp barrier, but warp {all_warps[bad[0]]} loads byte "
                                f"{addr[tuple(bad)]} that warp {writer[addr][tuple(bad)]} stored")
            L = addr.shape[1]
            dbytes[all_warps[:, None, None], np.arange(L)[None, :, None], reg[None], byte[None]] = mem[addr]
            written[:, np.arange(L)[:, None], reg] = True
    dst[...] = from_bytes(dbytes, plan.elem_bytes)


def emulate(plan: Transfer, src_regs: np.ndarray) -> np.ndarray:
    """Execute ``plan`` on every warp; returns dst regs (num_warps, warp_size, n_dst).
    A staged plan runs its ``via`` step, then the rest on the registers in between."""
    if plan.via is not None:
        return emulate(without_via(plan), emulate(plan.via, src_regs))
    W, L = plan.num_warps, plan.warp_size
    if src_regs.shape != (W, L, plan.n_src):
        raise ValueError(f"src_regs has shape {src_regs.shape}, plan wants {(W, L, plan.n_src)}")
    dt = NP_RAW[plan.elem_bytes]
    src = src_regs.astype(dt, copy=False)
    dst = np.zeros((W, L, plan.n_dst), dtype=dt)
    written = np.zeros(dst.shape, dtype=bool)
    kinds = [k for k in ("register", "shuffle", "smem") if getattr(plan, k) is not None]
    if len(kinds) != 1:
        raise AssertionError(f"plan sets {kinds or 'none'} of register/shuffle/smem (exactly one expected)")
    if kinds == ["register"]:
        idx = np.array(plan.register.dst_from_src, dtype=np.int64)
        if idx.size != plan.n_dst:
            raise AssertionError(f"register plan fills {idx.size} of {plan.n_dst} registers")
        dst[...] = src[:, :, idx]
        written[...] = True
    elif kinds == ["shuffle"]:
        _emulate_shuffle(plan, src, dst, written)
    else:
        _emulate_smem(plan, src, dst, written)
    for d, f in plan.dst_copies:
        if not written[:, :, f].all():
            raise AssertionError(f"dst_copies ({d}, {f}): register {f} was never written")
        dst[:, :, d] = dst[:, :, f]
        written[:, :, d] = True
    if not written.all():
        w, l, r = np.argwhere(~written)[0]
        raise AssertionError(f"{plan.strategy} plan never writes dst register {r} (warp {w}, lane {l})")
    return dst


def check_plan(plan: Transfer, src: LinearLayout, dst: LinearLayout,
               rng: np.random.Generator | int | None = 0) -> None:
    """Random raw bits through reference and emulator; AssertionError on any difference."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    dt = NP_RAW[plan.elem_bytes]
    shape = tuple(src.out_dim_sizes.values())
    tensor = rng.integers(0, np.iinfo(dt).max, size=shape, dtype=dt, endpoint=True)
    src_regs, want = reference(src, dst, tensor)
    got = emulate(plan, src_regs)
    if got.shape != want.shape:
        raise AssertionError(f"{plan.strategy} plan: dst shape {got.shape}, expected {want.shape}")
    bad = got != want
    if bad.any():
        w, l, r = (int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{plan.strategy} plan ({plan.dtype}, {plan.target}): warp {w} lane {l} register {r}: "
            f"expected {int(want[w, l, r]):#x}, got {int(got[w, l, r]):#x} "
            f"({int(bad.sum())} of {bad.size} registers differ)")


def check_convert(plan: ConvertPlan, rng: np.random.Generator | int | None = 0, **_) -> None:
    """``check_plan`` against the layouts the plan was made for."""
    check_plan(plan, layout_of(plan.src_bases), layout_of(plan.dst_bases), rng)
