"""Emulator of reduction plans (``plan/reduce.py``), executed from their data alone.

``emulate_reduce(plan, src)`` runs a ``ReducePlan`` on every thread's source values
``(num_warps, warp_size, n_src)`` (the element type's arithmetic values,
``reference.reduce_values``), step by step:

1. ``groups``: each destination register the pairwise tree (``reference.tree_fold``) of its
   source registers (every destination written exactly once);
2. ``lane_xors``: per round every register ``v = op(v, shfl_xor(v, mask))`` with the target's
   real ``shfl_xor`` semantics (``common.shfl_source``: CUDA warp 32, HIP wave 32 / 64);
3. ``warps``: a modelled scratch of ``bytes`` bytes, one slot per element: the threads with
   ``lane & lane_skip == 0`` and ``warp & warp_skip == 0`` store every result register as partial
   ``k`` (the warp's reduced bits, compressed) of its result element ``e`` (the element's
   row-major index in the result, from the result layout ``dst_bases``) at slot
   ``k * outputs + e`` (``vec`` adjacent slots an access, ``vector_slots``: SmemError where the
   plan's vector groups are not adjacent and aligned in every thread); a block barrier; every thread loads the ``parts`` partials of each result
   register and combines them as a pairwise tree over ``k``.  Two stores of different values to one slot (a
   race), a load of a slot never written and a slot outside the scratch are ``SmemError``.  In the
   spread form (``warps.spread``) thread ``t`` (of all the block's threads) instead combines, for
   each output ``o = t, t + stride, ...`` below ``outputs``, the ``parts`` partials of ``o`` the same
   way and stores the result at slot ``results + o``; a block barrier; every thread loads slot
   ``results + e`` of each result register.  Between those barriers a slot one thread stores and
   another loads is a race too, two different results stored to one slot are a race, and a
   final load of a slot no thread stored a result to reads an unwritten slot;
4. the broadcast back: source register ``r`` gets result register ``dst_of_src[r]``.

``check_reduce`` draws random inputs (``reference.reduce_tensor``) and compares every thread's
result registers and broadcast-back registers with ``reference.reduce_reference``, which knows
only the source layout, bit for bit.
"""
from __future__ import annotations

import numpy as np

from ll_codegen.core.layout import layout_of
from ll_codegen.verify.emulate.common import SmemError, shfl_source
from ll_codegen.verify.emulate.reference import (coords_of, dim_images, reduce_op, reduce_raw, reduce_reference,
                                                 reduce_tensor, reduce_values, regs_of, tree_fold)


def _compress(x: np.ndarray, bits) -> np.ndarray:
    out = np.zeros_like(x)
    for i, b in enumerate(bits):
        out |= ((x >> b) & 1) << i
    return out


def result_elements(plan) -> np.ndarray:
    """``(num_warps, warp_size, n_dst)``: the row-major index in the result tensor of the element
    each result register holds, by the plan's result layout (``dst_bases``)."""
    D = layout_of(plan.dst_bases)
    sizes = list(D.out_dim_sizes.values())
    img = {d: dim_images(D, d) if d in D.in_dims else np.zeros(1, np.int64) for d in ("register", "lane", "warp")}
    flat = img["warp"][:, None, None] ^ img["lane"][None, :, None] ^ img["register"][None, None, :]
    coords = coords_of(flat, sizes)
    e = np.zeros(flat.shape, dtype=np.int64)
    for c, n in zip(coords, sizes):
        e = e * n + c
    return np.broadcast_to(e, (plan.num_warps, plan.warp_size, plan.n_dst))


def partial_slots(plan) -> tuple[np.ndarray, np.ndarray]:
    """(slot, writer), each ``(num_warps, warp_size, n_dst)``: the scratch element ``k * outputs + e``
    that result register ``j`` of a thread is stored to as the warp's partial ``k`` (its reduced warp
    bits, compressed; ``e`` its result element), and whether that thread stores (``lane & lane_skip
    == 0`` and ``warp & warp_skip == 0``).  The direct form's loads read the same slots, every
    ``k``."""
    m = plan.warps
    e = result_elements(plan)
    warps = np.arange(plan.num_warps)[:, None, None]
    lanes = np.arange(plan.warp_size)[None, :, None]
    k = _compress(np.broadcast_to(warps, e.shape), m.warp_bits)
    writer = np.broadcast_to(((warps & m.warp_skip) == 0) & ((lanes & m.lane_skip) == 0), e.shape)
    return k * m.outputs + e, writer


def combine_pairs(plan) -> tuple[np.ndarray, np.ndarray]:
    """Spread form: the (thread, output) pairs of the combine loops, ``o = t, t + stride, ...``
    below ``outputs``, in the loops' order per thread."""
    m = plan.warps
    threads = plan.num_warps * plan.warp_size
    reps = -(-m.outputs // m.stride)
    t = np.repeat(np.arange(threads), reps)
    o = t + np.tile(np.arange(reps), threads) * m.stride
    return t[o < m.outputs], o[o < m.outputs]


def vector_slots(plan) -> np.ndarray:
    """``(num_warps, warp_size, len(vectors))``: the scratch element of element 0 of each of a
    thread's accesses ``warps.vectors`` (the slot of partial 0 / of the result of its register
    ``vectors[a][0]``, from the result layout).  SmemError unless every thread's registers of
    access ``a`` sit at that slot ``+ 0, 1, ...`` in the vector's order (register ``vectors[a][i]``
    at ``+ i``), the slot is a multiple of ``vec`` (the ``vec * elem_bytes``-byte access aligned,
    for every partial ``k`` and for the spread form's results) and the accesses cover every result
    register once."""
    m = plan.warps
    e = result_elements(plan)
    v = len(m.vectors[0]) if m.vectors else 0
    flat = sorted(j for g in m.vectors for j in g)
    if not v or any(len(g) != v for g in m.vectors) or flat != list(range(plan.n_dst)):
        raise SmemError(f"warp stage accesses {m.vectors}: not equal groups covering the {plan.n_dst} result "
                        f"registers once")
    if v * plan.elem_bytes not in (plan.elem_bytes, 4, 8, 16):
        raise SmemError(f"warp stage accesses of {v} elements x {plan.elem_bytes} B: not a 4-, 8- or 16-byte access")
    first = np.stack([e[:, :, g[0]] for g in m.vectors], axis=-1)
    for a, g in enumerate(m.vectors):
        for i, j in enumerate(g):
            if (e[:, :, j] != first[:, :, a] + i).any():
                raise SmemError(f"warp stage access {a}: register {j}'s result element is not element {i} of the "
                                f"access in every thread (registers {g} not adjacent in that order)")
    for base in {m.outputs % v, m.results % v} | set((first % v).ravel().tolist()):
        if base:
            raise SmemError(f"warp stage accesses of {v} elements: a slot not a multiple of {v} (misaligned "
                            f"{v * plan.elem_bytes}-byte access)")
    return first


def warp_stage_accesses(plan) -> list[tuple[str, np.ndarray, int]]:
    """The warp stage's shared-memory accesses in program order, one entry per instruction of
    the generated code (``emit/reduce.py``): ``(direction, byte addresses (num_warps, warp_size),
    access bytes)``, ``-1`` where a thread does not access (a guarded store, a combine loop past
    ``outputs``).  The partials' stores (one per access ``warps.vectors``, ``vec * elem_bytes``
    bytes at its element 0, ``vector_slots``), then in the direct form every thread's loads of
    the ``parts`` partials of each access (access-major); in the spread form, per iteration of
    the combine loop the ``parts`` loads and the result's store (one element each), then every
    thread's loads of its results (one per access).  ``[]`` without a warp stage."""
    m = plan.warps
    if m is None:
        return []
    W, L, w = plan.num_warps, plan.warp_size, plan.elem_bytes
    slot, writer = partial_slots(plan)
    first = vector_slots(plan)
    nb = len(m.vectors[0]) * w
    k = slot[:, :, 0] - result_elements(plan)[:, :, 0]              # k * outputs of each warp
    out = [("store", np.where(writer[:, :, 0], (k + first[:, :, a]) * w, -1), nb) for a in range(len(m.vectors))]
    if not m.spread:
        return out + [("load", (q * m.outputs + first[:, :, a]) * w, nb)
                      for a in range(len(m.vectors)) for q in range(m.parts)]
    tid = np.arange(W * L).reshape(W, L)
    for i in range(-(-m.outputs // m.stride)):
        o = tid + i * m.stride
        on = o < m.outputs
        out += [("load", np.where(on, (q * m.outputs + o) * w, -1), w) for q in range(m.parts)]
        out.append(("store", np.where(on, (m.results + o) * w, -1), w))
    return out + [("load", (m.results + first[:, :, a]) * w, nb) for a in range(len(m.vectors))]


def emulate_reduce(plan, src: np.ndarray, trace: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(result registers ``(W, L, n_dst)``, broadcast back ``(W, L, n_src)``) a ``ReducePlan``
    computes from the source values ``src`` ``(W, L, n_src)``; see the module docstring.
    ``trace``: a list that gets the result registers after the in-thread step and after each
    shuffle round (what each round sends, then what the warp stage stores) and, with a warp
    stage, after it (the results)."""
    W, L = plan.num_warps, plan.warp_size
    if src.shape != (W, L, plan.n_src):
        raise ValueError(f"source registers of shape {src.shape}, the plan has {(W, L, plan.n_src)}")
    op = reduce_op(plan.combine, plan.dtype)
    dst = np.zeros((W, L, plan.n_dst), dtype=src.dtype)
    written = np.zeros(plan.n_dst, dtype=int)
    for g in plan.groups:                                           # 1. in each thread
        if not 0 <= g.dst < plan.n_dst or not g.srcs or any(not 0 <= r < plan.n_src for r in g.srcs):
            raise AssertionError(f"register group {g}: a register out of range (n_src {plan.n_src}, "
                                 f"n_dst {plan.n_dst})")
        if len(g.srcs) & (len(g.srcs) - 1):
            raise AssertionError(f"register group {g}: {len(g.srcs)} source registers, not a power of two "
                                 f"(a tree over reduced register bits)")
        dst[:, :, g.dst] = tree_fold([src[:, :, r] for r in g.srcs], op)
        written[g.dst] += 1
    if (written != 1).any():
        j = int(np.argmax(written != 1))
        raise AssertionError(f"result register {j} is written by {written[j]} register groups, not 1")
    if trace is not None:
        trace.append(dst.copy())
    lanes = np.arange(L)
    for i, x in enumerate(plan.lane_xors):                          # 2. butterfly rounds
        if not 0 < x < L:
            raise AssertionError(f"shuffle round {i}: lane mask {x:#x} outside the warp of {L} lanes")
        partner = shfl_source(plan.target, L, lanes, x, xor=True)
        dst = op(dst, dst[:, partner])
        if trace is not None:
            trace.append(dst)
    if plan.warps is not None:                                      # 3. across warps, through shared memory
        dst = _warp_stage(plan, dst, op)
        if trace is not None:
            trace.append(dst)
    back = dst[:, :, list(plan.dst_of_src)]                         # 4. the broadcast back
    return dst, back


def _warp_stage(plan, dst: np.ndarray, op) -> np.ndarray:
    m, w = plan.warps, plan.elem_bytes
    W = plan.num_warps
    slots = m.bytes // w
    if m.bytes % w or slots < m.outputs * m.parts:
        raise SmemError(f"scratch of {m.bytes} B holds {slots} elements of {w} B, the warp stage needs "
                        f"{m.outputs} outputs x {m.parts} partials")
    if m.parts != 1 << len(m.warp_bits) or any(not 1 <= 1 << b < W for b in m.warp_bits):
        raise AssertionError(f"warp stage: {m.parts} partials over warp bits {m.warp_bits} of {W} warps")
    raw = reduce_raw(dst, plan.dtype)
    e = result_elements(plan)
    if (e >= m.outputs).any():
        raise SmemError(f"a result element index {int(e.max())} beyond the stage's {m.outputs} outputs")
    vector_slots(plan)                # the plan's vector accesses move exactly these slots
    slot, writer = partial_slots(plan)
    s, v = slot[writer], raw[writer]
    if (s >= slots).any() or (s < 0).any():
        raise SmemError(f"a store to scratch element {int(s.max())} beyond the {slots} of {m.bytes} B")
    order = np.lexsort((v, s))
    s, v = s[order], v[order]
    if (((s[1:] == s[:-1]) & (v[1:] != v[:-1]))).any():
        i = int(np.argmax((s[1:] == s[:-1]) & (v[1:] != v[:-1])))
        raise SmemError(f"race: two threads store different values to scratch element {int(s[i])} "
                        f"(partial {int(s[i]) // m.outputs} of output {int(s[i]) % m.outputs})")
    scratch = np.zeros(slots, dtype=raw.dtype)
    full = np.zeros(slots, dtype=bool)
    scratch[s], full[s] = v, True
    if m.spread:                     # block barrier, then the threads share the outputs' combines
        return _spread(plan, m, e, scratch, full, slots, op)
    # block barrier, then every thread loads its partials and combines them as a pairwise tree over k
    parts = []
    for kk in range(m.parts):
        at = kk * m.outputs + e
        if not full[at].all():
            bad = np.argwhere(~full[at])[0]
            raise SmemError(f"warp {bad[0]} lane {bad[1]} result register {bad[2]}: partial {kk} of output "
                            f"{int(e[tuple(bad)])} (scratch element {int(at[tuple(bad)])}) was never stored")
        parts.append(reduce_values(scratch[at], plan.dtype))
    return tree_fold(parts, op)


def _spread(plan, m, e: np.ndarray, scratch: np.ndarray, full: np.ndarray, slots: int, op) -> np.ndarray:
    """The spread form's combine (after the partials' barrier) and its results' loads."""
    if m.stride < 1:
        raise AssertionError(f"warp stage: spread form with a stride of {m.stride} threads")
    t, o = combine_pairs(plan)                                      # (thread, output) pairs of the loops
    reads = [kk * m.outputs + o for kk in range(m.parts)]
    for kk, at in enumerate(reads):
        if (at >= slots).any():
            raise SmemError(f"a load of scratch element {int(at.max())} beyond the {slots} of {m.bytes} B")
        if not full[at].all():
            i = int(np.argmin(full[at]))
            raise SmemError(f"thread {int(t[i])}: partial {kk} of output {int(o[i])} (scratch element "
                            f"{int(at[i])}) was never stored")
    res = reduce_raw(tree_fold([reduce_values(scratch[at], plan.dtype) for at in reads], op), plan.dtype)
    ws = m.results + o
    if (ws >= slots).any() or (ws < 0).any():
        raise SmemError(f"a result store to scratch element {int(ws.max())} beyond the {slots} of {m.bytes} B")
    order = np.lexsort((res, ws))
    s, v = ws[order], res[order]
    clash = (s[1:] == s[:-1]) & (v[1:] != v[:-1])
    if clash.any():
        i = int(np.argmax(clash))
        raise SmemError(f"race: two threads store different results to scratch element {int(s[i])}")
    # between the two barriers: a slot stored by one thread and loaded by another is a race
    writer = np.full(slots, -1, dtype=np.int64)
    writer[ws] = t
    for at in reads:
        other = (writer[at] >= 0) & (writer[at] != t)
        if other.any():
            i = int(np.argmax(other))
            raise SmemError(f"race: thread {int(writer[at[i]])} stores a result to scratch element {int(at[i])} "
                            f"while thread {int(t[i])} loads it (partial of output {int(o[i])}) between the same "
                            f"barriers")
    scratch = scratch.copy()
    scratch[ws] = res
    # block barrier, then every thread loads its results
    at = m.results + e
    if (at >= slots).any() or (at < 0).any():
        raise SmemError(f"a result load of scratch element {int(at.max())} beyond the {slots} of {m.bytes} B")
    done = writer >= 0
    if not done[at].all():
        bad = np.argwhere(~done[at])[0]
        raise SmemError(f"warp {bad[0]} lane {bad[1]} result register {bad[2]}: the result of output "
                        f"{int(e[tuple(bad)])} (scratch element {int(at[tuple(bad)])}) was never stored")
    return reduce_values(scratch[at], plan.dtype)


def check_reduce(plan, rng: np.random.Generator | int | None = 0, runs: int = 2, **_) -> None:
    """Emulate ``plan`` on random data (``reduce_tensor``) and compare every thread's result and
    broadcast-back registers with ``reduce_reference`` bit for bit; AssertionError naming the
    first difference."""
    rng = np.random.default_rng(rng)
    L = layout_of(plan.src_bases)
    for _ in range(runs):
        flat = reduce_tensor(plan.dtype, plan.combine, int(np.prod(plan.shape)), rng)
        _, want, want_back = reduce_reference(L, plan.dims, plan.combine, plan.dtype, flat)
        src = regs_of(L, reduce_values(flat.reshape(plan.shape), plan.dtype))
        got, back = emulate_reduce(plan, src)
        for what, g, wnt in (("result register", reduce_raw(got, plan.dtype).reshape(plan.threads, -1), want),
                             ("broadcast-back register", reduce_raw(back, plan.dtype).reshape(plan.threads, -1),
                              want_back)):
            if g.shape != wnt.shape:
                raise AssertionError(f"reduce {plan.combine} {plan.dtype}: {what}s of shape {g.shape}, the "
                                     f"reference has {wnt.shape}")
            bad = np.argwhere(g != wnt)
            if len(bad):
                t, r = (int(x) for x in bad[0])
                raise AssertionError(f"reduce {plan.combine} {plan.dtype} over dims {list(plan.dims)}: {len(bad)} "
                                     f"wrong {what}s; first thread {t} (warp {t // plan.warp_size}, lane "
                                     f"{t % plan.warp_size}) register {r}: got {int(g[t, r]):#x}, "
                                     f"want {int(wnt[t, r]):#x}")
