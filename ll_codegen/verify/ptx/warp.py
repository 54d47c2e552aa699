"""Warp collectives and asynchronous instructions of ``sim``: ``shfl.sync``, ``ldmatrix`` /
``stmatrix`` (the whole warp's operands at once), the ``cp.async`` family (copies that land at the
``cp.async.wait_group`` covering their committed group) and the Hopper instructions recorded for
their operands (mbarrier, fences, TMA, wgmma, mma.sync).  Semantics: the PTX ISA sections named
at each function.
"""
from __future__ import annotations

import re
from typing import Callable

from ll_codegen.verify.ptx.ops import SMEM_WINDOW, UNMODELLED, Compiler, PtxError, advancing, record_event


def shfl_instr(c: Compiler, ins, mods) -> Callable:
    mode = next(x for x in mods if x in ("up", "down", "bfly", "idx"))
    a = ins.args
    names = a[0].split("|")
    d, p = Compiler.setter(names[0], 32), (Compiler.setter(names[1], 1) if len(names) > 1 else None)
    x, b, cc, mask = (c.get(v) for v in a[1:5])

    def shfl(th):
        th.state = "warp"
        th.waiting = ("shfl", mode, x(th) & 0xffffffff, b(th) & 0xffffffff, cc(th) & 0xffffffff,
                      mask(th) & 0xffffffff, d, p, ins)
    return shfl


def shuffle_op(m, lanes) -> None:
    """shfl.sync for one warp (PTX ISA): j from the mode, then ``j <= maxLane`` (``>= minLane``
    for .up) or the lane keeps its own value; the member mask must name every lane."""
    full = (1 << len(lanes)) - 1
    vals = [t.waiting[2] for t in lanes]
    for t in lanes:
        _, mode, _, b, cval, mask, d, p, ins = t.waiting
        if len({u.waiting[1] for u in lanes}) != 1:
            raise PtxError(f"warp {t.warp}: lanes run different shfl modes")
        if mask & full != full:
            raise PtxError(f"thread {t.tid}: shfl.sync member mask {mask:#x} does not name every lane of the warp")
        lane, segmask, clamp = t.lane, (cval >> 8) & 0x1f, cval & 0x1f
        max_lane, min_lane = (lane & segmask) | (clamp & ~segmask & 0x1f), lane & segmask
        bv = b & 0x1f
        if mode == "up":
            j, ok = lane - bv, lane - bv >= max_lane
        elif mode == "down":
            j, ok = lane + bv, lane + bv <= max_lane
        elif mode == "bfly":
            j, ok = lane ^ bv, (lane ^ bv) <= max_lane
        else:
            j = min_lane | (bv & ~segmask & 0x1f)
            ok = j <= max_lane
        j = j if ok else lane
        got = vals[j] if 0 <= j < len(lanes) else 0
        d(t, got)
        if p is not None:
            p(t, ok)
        record_event(t, ins, data=(t.waiting[2],), extra=(b, cval, mask))


def matrix_instr(c: Compiler, ins, base: str, mods) -> Callable:
    x = int(next(v for v in mods if re.fullmatch(r"x\d", v))[1:])
    trans = "trans" in mods
    a = ins.args
    if base == "ldmatrix":
        sets, addr = c.setv(a[0], 32), c.addr(a[1])
        gets = None
    else:
        addr, gets, sets = c.addr(a[0]), c.getv(a[1]), None
    if len(sets or gets) != x:
        raise PtxError(f"{ins.op}: {len(sets or gets)} registers for .x{x}")

    def matrix(th):
        th.state = "warp"
        words = [g(th) & 0xffffffff for g in gets] if gets else None
        th.waiting = ("matrix", base, x, trans, addr(th), words, sets, ins)
    return matrix


def matrix_op(m, lanes) -> None:
    """ldmatrix / stmatrix .m8n8 .b16 for one warp: lane 8 mat + row gives the address of row ``row``
    of matrix ``mat``; fragment element (i, j) of matrix mat is register mat of lane 4 i + j // 2,
    half j % 2; .trans: fragment (i, j) is memory row j, column i."""
    _, base, x, trans, _, _, _, ins = lanes[0].waiting
    if len(lanes) != 32:
        raise PtxError(f"{ins.op} needs a 32-lane warp")
    if any(t.waiting[:4] != lanes[0].waiting[:4] for t in lanes):
        raise PtxError(f"warp {lanes[0].warp}: lanes run different ldmatrix/stmatrix shapes")
    words = [[0] * x for _ in lanes] if base == "ldmatrix" else [list(t.waiting[5]) for t in lanes]
    for mat in range(x):
        for row in range(8):
            provider = lanes[8 * mat + row]
            ad = provider.waiting[4]
            if base == "ldmatrix":
                raw = m.read("shared", ad, 16, provider)
            else:
                raw = bytearray(16)
            for col in range(8):
                i, j = (col, row) if trans else (row, col)
                holder, shift = 4 * i + j // 2, 16 * (j % 2)
                if base == "ldmatrix":
                    words[holder][mat] |= int.from_bytes(raw[2 * col:2 * col + 2], "little") << shift
                else:
                    raw[2 * col:2 * col + 2] = ((words[holder][mat] >> shift) & 0xffff).to_bytes(2, "little")
            if base == "stmatrix":
                m.write("shared", ad, bytes(raw), provider)
    for t, w in zip(lanes, words):
        if base == "ldmatrix":
            for s, v in zip(t.waiting[6], w):
                s(t, v)
        record_event(t, ins, "shared", t.waiting[4], w)


def cp_async_instr(m, c: Compiler, ins, mods) -> Callable:
    op, a = ins.op, ins.args
    if op == "cp.async.commit_group":
        def commit(th):
            th.cp_groups.append(th.cp_pending)
            th.cp_pending = []
            record_event(th, ins)
        return advancing(commit)
    if op in ("cp.async.wait_group", "cp.async.wait_all"):
        keep = c.get(a[0]) if a else (lambda th: 0)

        def wait(th):
            if op == "cp.async.wait_all":
                th.cp_groups.append(th.cp_pending)
                th.cp_pending = []
            m.land(th, keep(th))
            record_event(th, ins, extra=(keep(th),))
        return advancing(wait)
    if not {"shared", "global"} <= {x.split("::")[0] for x in mods}:
        raise PtxError(f"{op} is not modelled")
    dst, src, size = c.addr(a[0]), c.addr(a[1]), c.get(a[2])
    src_size = c.get(a[3]) if len(a) > 3 else None

    def cp(th):
        n = size(th)
        k = src_size(th) if src_size is not None else n
        d, s = dst(th), src(th)
        if n not in (4, 8, 16) or d % n or (k and s % n) or ("cg" in mods and n != 16):
            raise PtxError(f"thread {th.tid}: {op} of {n} bytes from {s:#x} to {d:#x}: bad size or alignment")
        data = (m.read(*m.resolve("global", s, th), min(k, n), th) if k else b"") + bytes(n - min(k, n))
        off = d - SMEM_WINDOW
        for x in range(off, off + n):
            m.inflight[x] = m.inflight.get(x, 0) + 1
        th.cp_pending.append((d, data))
        record_event(th, ins, "shared", d, (), (n, k, s))
    return advancing(cp)


def recorded_instr(m, c: Compiler, ins) -> Callable:
    """mbarrier / fence / TMA / wgmma / mma.sync: the operands' values are recorded, no data moves
    (``mbarrier.try_wait`` succeeds at once, so a kernel waiting on a TMA load goes on)."""
    op, a = ins.op, ins.args

    def operand(x: str) -> Callable:
        """The value-of-this-operand function of one operand text, decided once."""
        x = x.strip()
        if x == "_":
            return lambda th: None
        if x.startswith("["):
            inner = x[1:-1]
            if "," in inner:                    # [map, {c0, c1}]
                head, rest = inner.split(",", 1)
                hg, rg = c.get(head), c.getv(rest.strip())
                return lambda th: (hg(th), tuple(g(th) for g in rg))
            return c.addr(x)
        if x.startswith("{"):              # a register in flight: its value at the wgmma's issue
            parts = [(g, v.strip(), plain(v)) for g, v in zip(c.getv(x), x[1:-1].split(","))]
            return lambda th: tuple(th.wg_inflight[v][1] if v in th.wg_inflight else
                                    th.r.get(v) if p else g(th) for g, v, p in parts)
        g = c.get(x)
        if plain(x):
            return lambda th: th.r.get(x)
        return g

    def lazily(x: str) -> Callable:
        try:
            return operand(x)
        except PtxError as e:            # an operand not modelled fails when the instruction runs
            def fail(th, e=e):
                raise e
            return fail
    getters = [lazily(x) for x in a]

    def values(th) -> tuple:
        return tuple(g(th) for g in getters)
    first_dst = Compiler.setter(a[0], 1) if op.startswith("mbarrier.try_wait") else None
    unmodelled = op.startswith(UNMODELLED)

    def rec(th):
        if first_dst is not None:
            first_dst(th, True)
        record_event(th, ins, extra=values(th))
        if unmodelled:
            m.unmodelled.add(op)
    return advancing(rec)


def wgmma_instr(m, c: Compiler, ins) -> Callable:
    """wgmma.mma_async / commit_group / wait_group (PTX ISA "Asynchronous Warpgroup Level Matrix
    Multiply-Accumulate"): a wgmma.mma_async is in flight from its issue until the thread's
    ``wgmma.wait_group N`` leaves at most N newer committed groups; until then its accumulator
    registers are taken out of the thread's registers (a read is an error, ``ops.unwritten``; a
    write is found at the next wgmma naming the register or at the wait).  A wgmma naming a register
    still in flight chains on it (same-shape accumulator chaining).  The operands are recorded as
    ``recorded_instr`` does; D is not computed (the registers get their values at the issue back)."""
    op, a = ins.op, ins.args
    record = recorded_instr(m, c, ins)
    if op.startswith("wgmma.mma_async"):
        names = [x.strip() for x in a[0].strip()[1:-1].split(",")]

        def issue(th):
            record(th)
            k = len(th.wg_issued)
            th.wg_issued.append((ins.line, names))
            th.wg_open.append(k)
            for n in names:
                held = th.wg_inflight.get(n)
                if held is not None and n in th.r:
                    m.error(f"thread {th.tid}: register {n} written while the wgmma.mma_async of PTX line "
                            f"{th.wg_issued[held[0]][0]} writing it is in flight (no wgmma.wait_group covers it)")
                th.wg_inflight[n] = (k, held[1] if held is not None else th.r.pop(n, None))
        return issue
    if op.startswith("wgmma.commit_group"):
        def commit(th):
            record(th)
            th.wg_groups.append(th.wg_open)
            th.wg_open = []
        return commit
    if op.startswith("wgmma.wait_group"):
        keep = c.get(a[0])

        def wait(th):
            record(th)
            n = keep(th)
            if th.wg_open:
                m.error(f"thread {th.tid}: wgmma.wait_group {n} (PTX line {ins.line}) with the wgmma.mma_async of "
                        f"PTX line {th.wg_issued[th.wg_open[0]][0]} not committed: the wait does not cover it")
            while len(th.wg_groups) > n:
                for k in th.wg_groups.pop(0):
                    for name in th.wg_issued[k][1]:
                        held = th.wg_inflight.get(name)
                        if held is None or held[0] != k:
                            continue
                        if name in th.r:
                            m.error(f"thread {th.tid}: register {name} written while the wgmma.mma_async of PTX "
                                    f"line {th.wg_issued[k][0]} writing it was in flight")
                        del th.wg_inflight[name]
                        if held[1] is not None:
                            th.r[name] = held[1]
        return wait
    return record


def plain(tok: str) -> bool:
    """A register operand (not an immediate, special register or symbol): recorded as None while
    never written (wgmma accumulators the first step ignores), as its value otherwise."""
    tok = tok.strip()
    return tok.startswith("%") and "." not in tok
