"""Registers <-> memory laid out as given: the access plans of a
distributed layout ``L`` (register, lane, warp -> tensor) against a shared
tile or a global tile the caller fixes.  ``planner.plan_memory`` scores the
candidates and wraps the chosen one in a ``Transfer``.

Shared tiles (paper 000 §5.1, §5.3, App. 9)
-------------------------------------------
The tile is a bijective linear layout ``S``: offset (elements) -> tensor.
The element a thread holds in register ``r`` lives at offset
``C(r, lane, warp) = S⁻¹(L(r, lane, warp))``, and ``C`` is linear: the byte
address is ``base(lane, warp) ^ offset(r)`` (``XorForm`` + constants).

* Vector accesses: ``2^k`` elements per lane when offsets ``1, 2, ..,
  2^(k-1)`` are images of registers (``C`` restricted to registers spans
  them) and no lane or warp moves those low bits (else a lane's vector would
  start unaligned).  ``k`` is as large as 16 bytes and the target allow --
  the layout is given, so its contiguity is all there is.  Registers are
  grouped by their offset with the low ``k`` bits cleared; each group is one
  access, ordered by the low bits.
* ``ldmatrix``/``stmatrix`` [.trans] (m8n8.b16): when the layout divides by
  the instruction's tile (``swizzle.matrix_side``) and the tile's elements
  are offsets ``1, 2, 4, ..`` of a 16-byte row, with every row address
  16-byte aligned.
* Cost: Lemma 9.4 on the given layout (``swizzle.predict_wavefronts``) --
  wavefronts and bank conflicts per instruction.

Global tiles
------------
Element ``(c_0 .. c_{r-1})`` lives at ``tile + sum_d c_d * stride_d`` with
``stride[order[0]] = 1`` and the other strides known only at run time, so
addresses are kept per dimension: the thread's coordinate along ``d`` is
``coord_base[d](lane, warp) ^ coords[d]`` (``XorForm`` + per-access constants).
Vectors run along ``order[0]``: ``2^k`` elements when coordinates ``1, 2, ..
2^(k-1)`` of that dim are register images, no lane or warp moves those bits,
and ``2^k * elem_bytes`` is at most 16 bytes and the tile's ``alignment``
(which every stride shares, so every vector is aligned).  Cost: the 32-byte
sectors each warp instruction touches at the given strides (default: the
dense tile), counted over the plan's own addresses.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ll_codegen.core import f2
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.model import AccessCost, GlobalAccess, GlobalCost, MemoryPlan, SmemAccess, XorForm
from ll_codegen.plan.swizzle import matrix_side, predict_wavefronts
from ll_codegen.plan.tma import tile_alignment
from ll_codegen.core.target import Target

SECTOR = 32


def _vector_log2(cap_bytes: int, elem_bytes: int) -> int:
    """log2 of the elements in the widest vector of at most ``cap_bytes``."""
    return max(0, (cap_bytes // elem_bytes).bit_length() - 1)


def _canonical_registers(reg: Sequence[int]) -> list[int]:
    """Register indices that are not broadcast copies (bits of dependent or
    zero bases clear)."""
    keep = set(f2.independent_subset(list(reg)))
    free = sum(1 << i for i in range(len(reg)) if i not in keep)
    return [r for r in range(1 << len(reg)) if not r & free]


def skip_mask(vectors: Sequence[int]) -> int:
    """Bits of an index whose basis vectors are zero (broadcast copies)."""
    return sum(1 << k for k, v in enumerate(vectors) if v == 0)


def _low_bits_width(units: Sequence[int], reg: Sequence[int], others: Sequence[int],
                    low_mask, limit: int) -> int:
    """Largest k <= limit with units[:k] in span(reg) and no vector of
    ``others`` touching the low k bits (``low_mask(k)``)."""
    k = 0
    while k < limit and k < len(units) and f2.in_span(units[k], list(reg)) and \
            not any(v & low_mask(k + 1) for v in others):
        k += 1
    return k


# ------------------------------------------------------------------ shared
def shared_plans(dist: LinearLayout, tile: LinearLayout, elem_bytes: int, target: Target, direction: str,
                 max_vector_bytes: int | None = None) -> list[MemoryPlan]:
    """Candidate plans storing ``dist``'s registers into (or loading them
    from) the shared tile ``tile`` (offset -> tensor): the widest vector
    access, and ldmatrix/stmatrix [.trans] where they apply."""
    S = tile.flat_bases("offset")
    d = dist.total_out_size_log2
    if tile.in_dim_size("block") != 1:
        raise ValueError("shared tiles split over several CTAs (block bases) are not supported")
    if len(S) != d or f2.rank(S) != d:
        raise ValueError("the shared layout is not a bijection between offsets and tensor elements "
                         "(padding or broadcast offsets are not supported)")
    solver = f2.Solver(S)

    def off(x: int) -> int:
        return solver.solve(x)

    reg, thr, wrp = (dist.flat_bases(k) for k in ("register", "lane", "warp"))
    R, T, W = [off(v) for v in reg], [off(v) for v in thr], [off(v) for v in wrp]
    cap = min(max_vector_bytes or target.max_vector_bytes, target.max_vector_bytes)
    k = _low_bits_width([1 << i for i in range(d)], R, T + W, lambda n: (1 << n) - 1, _vector_log2(cap, elem_bytes))
    canon = _canonical_registers(reg)
    warp_skip = skip_mask(wrp) if direction == "store" else 0
    layout = {"offset": [list(b) for b in tile.bases["offset"]]}
    common = dict(space="shared", direction=direction, layout=layout, bytes=elem_bytes << d,
                  alignment=tile_alignment(tile, elem_bytes), warp_skip=warp_skip)

    # vector: group registers by their offset with the low k bits cleared
    groups: dict[int, dict[int, int]] = {}
    for r in canon:
        o = f2.apply(R, r)
        groups.setdefault(o >> k, {})[o & ((1 << k) - 1)] = r
    vec = 1 << k
    accesses = tuple(sorted((SmemAccess(tuple(g[j] for j in range(vec)), (hi << k) * elem_bytes)
                            for hi, g in groups.items()), key=lambda a: min(a.regs)))
    base = XorForm(tuple(t * elem_bytes for t in T), tuple(x * elem_bytes for x in W))
    waves, conflicts = predict_wavefronts(list(base.lane), elem_bytes * vec, target, load=direction == "load")
    plans = [MemoryPlan(instr="vector", vec=vec, vector_bytes=elem_bytes * vec, accesses=accesses, base=base,
                        cost=AccessCost(waves, conflicts, len(accesses), waves * len(accesses)), **common)]
    if not (target.has_ldmatrix if direction == "load" else target.has_stmatrix) or cap < 16:
        return plans
    for trans in (False, True):
        side = matrix_side(reg, thr, elem_bytes, trans)
        if side is None or 0 in side.providers[:3]:
            continue                          # broadcast rows (.x1/.x2 pad the matrix selectors with zeros)
        if [off(v) for v in side.tile] != [1 << i for i in range(len(side.tile))]:
            continue                          # the 16-byte row is not contiguous in this tile
        row_elems = (1 << len(side.tile)) - 1
        providers = [off(v) for v in side.providers]
        in_access = 0
        for r in side.regs_per_access:
            in_access |= r
        leaders = [r for r in canon if not r & in_access]
        if any(x & row_elems for x in providers + W + [f2.apply(R, r) for r in leaders]):
            continue                          # a row address would not be 16-byte aligned
        if len(leaders) * len(side.regs_per_access) != len(canon):
            continue                          # broadcast registers inside a matrix access
        acc = tuple(SmemAccess(tuple(r | j for j in side.regs_per_access), f2.apply(R, r) * elem_bytes)
                    for r in leaders)
        mbase = XorForm(tuple(p * elem_bytes for p in providers), tuple(x * elem_bytes for x in W))
        x = len(side.regs_per_access) * elem_bytes // 4
        waves, conflicts = predict_wavefronts(list(mbase.lane), 16, target, active_lanes=8 * x)
        plans.append(MemoryPlan(instr=side.instr, vec=len(side.regs_per_access), vector_bytes=16, accesses=acc,
                                base=mbase, cost=AccessCost(waves, conflicts, len(acc), waves * len(acc)),
                                **common))
    return plans


# ------------------------------------------------------------------ global
def dense_strides(shape: Sequence[int], order: Sequence[int], align_elems: int = 1) -> tuple[int, ...]:
    """Strides (elements) of the dense tile, ``order[0]`` fastest, each
    rounded up to a multiple of ``align_elems`` (a row narrower than the
    alignment is padded to it)."""
    strides, s = [0] * len(shape), 1
    for d in order:
        strides[d] = s
        s = -(-(s * shape[d]) // align_elems) * align_elems
    return tuple(strides)


def global_order(tile: LinearLayout) -> list[int]:
    """The dims of a dense global tile (``layouts.GlobalLayout``), fastest first."""
    names = list(tile.out_dims)
    order: list[int] = []
    for b in tile.bases["offset"]:
        d = next(i for i, c in enumerate(b) if c)
        if d not in order:
            order.append(d)
    return order + [i for i in range(len(names)) if i not in order]


def _coords(x: int, sizes: Sequence[int]) -> tuple[int, ...]:
    out, shift = [], 0
    for s in sizes:
        k = s.bit_length() - 1
        out.append(x >> shift & ((1 << k) - 1))
        shift += k
    return tuple(out)


def global_plan(dist: LinearLayout, order: Sequence[int], alignment: int, elem_bytes: int, target: Target,
                direction: str, strides: Sequence[int] | None = None,
                max_vector_bytes: int | None = None) -> MemoryPlan:
    """The plan storing ``dist``'s registers into (or loading them from) a
    global tile with contiguous dim ``order[0]`` and ``alignment``-byte
    aligned base and strides (module docstring); ``strides`` (elements) are
    the ones the cost is predicted for."""
    sizes = list(dist.out_dim_sizes.values())
    shape = tuple(sizes)
    strides = tuple(strides) if strides is not None else dense_strides(shape, order, max(1, alignment // elem_bytes))
    f = order[0]
    if len(strides) != len(shape) or strides[f] != 1 or any(s < 1 for s in strides):
        raise ValueError(f"strides {list(strides)} must give each of the {len(shape)} dims a positive stride, "
                         f"1 for the contiguous dim {f}")
    if alignment < elem_bytes:
        raise ValueError(f"the global tile's alignment ({alignment} bytes) is less than one element "
                         f"({elem_bytes} bytes)")
    if any(s * elem_bytes % alignment for d, s in enumerate(strides) if d != f):
        raise ValueError(f"strides {list(strides)} are not multiples of the alignment ({alignment} bytes)")
    shift = sum(s.bit_length() - 1 for s in sizes[:f])
    reg, thr, wrp = (dist.flat_bases(k) for k in ("register", "lane", "warp"))
    cap = min(max_vector_bytes or target.max_vector_bytes, target.max_vector_bytes, alignment)
    units = [1 << (shift + i) for i in range(sizes[f].bit_length() - 1)]
    k = _low_bits_width(units, reg, thr + wrp, lambda n: ((1 << n) - 1) << shift, _vector_log2(cap, elem_bytes))
    low = ((1 << k) - 1) << shift
    groups: dict[int, dict[int, int]] = {}
    for r in _canonical_registers(reg):
        x = f2.apply(reg, r)
        groups.setdefault(x & ~low, {})[(x & low) >> shift] = r
    vec = 1 << k
    accesses = tuple(sorted((GlobalAccess(tuple(g[j] for j in range(vec)), _coords(key, sizes))
                            for key, g in groups.items()), key=lambda a: min(a.regs)))
    coord_base = tuple(XorForm(tuple(_coords(v, sizes)[dd] for v in thr), tuple(_coords(v, sizes)[dd] for v in wrp))
                       for dd in range(len(sizes)))
    warp_skip = skip_mask(wrp) if direction == "store" else 0
    lane_skip = skip_mask(thr) if direction == "store" else 0
    plan = MemoryPlan(space="global", direction=direction, instr="vector", vec=vec, vector_bytes=vec * elem_bytes,
                      layout={"order": list(order), "alignment": alignment}, bytes=elem_bytes * math.prod(shape), alignment=alignment, accesses=accesses,
                      cost=GlobalCost(0, 0, 0, 0), coord_base=coord_base, strides=strides,
                      warp_skip=warp_skip, lane_skip=lane_skip)
    return _with_sector_cost(plan, dist.in_dim_size("lane"), dist.in_dim_size("warp"), elem_bytes)


def _with_sector_cost(plan: MemoryPlan, warp_size: int, num_warps: int, elem_bytes: int) -> MemoryPlan:
    """The plan with its ``GlobalCost``: every warp instruction's lanes'
    addresses (the plan's own formula) -> distinct 32-byte sectors."""
    from dataclasses import replace
    lanes = np.arange(warp_size)
    lanes = lanes[(lanes & plan.lane_skip) == 0]
    coords = np.array([a.coords for a in plan.accesses], dtype=np.int64).reshape(len(plan.accesses), -1)
    span = np.arange(plan.vec * elem_bytes)
    worst, best, total = 0, 0, 0
    for w in range(num_warps):
        if w & plan.warp_skip or not len(plan.accesses):
            continue
        e = np.zeros((len(plan.accesses), len(lanes)), dtype=np.int64)      # accesses x lanes: element index
        for d, (cb, s) in enumerate(zip(plan.coord_base, plan.strides)):
            base = np.full(len(lanes), cb(0, w), dtype=np.int64)
            for k, c in enumerate(cb.lane):
                base ^= ((lanes >> k) & 1) * c
            e += (base[None, :] ^ coords[:, d:d + 1]) * s
        touched = np.sort(((e * elem_bytes)[..., None] + span).reshape(len(e), -1), axis=-1)
        sectors = np.sort(touched // SECTOR, axis=-1)
        n_sectors = 1 + np.count_nonzero(np.diff(sectors, axis=-1), axis=-1)
        n_bytes = 1 + np.count_nonzero(np.diff(touched, axis=-1), axis=-1)
        worst = max(worst, int(n_sectors.max()))
        best = max(best, int((-(-n_bytes // SECTOR)).max()))
        total = max(total, int(n_sectors.sum()))
    return replace(plan, cost=GlobalCost(worst, best, len(plan.accesses), total))


# -------------------------------------------------------------------- copies
def _global_bits(sizes: Sequence[int], order: Sequence[int]) -> list[int]:
    """Unit tensor vectors in a global tile's address order (``order[0]`` fastest)."""
    shifts = [sum(x.bit_length() - 1 for x in sizes[:i]) for i in range(len(sizes))]
    return [1 << (shifts[d] + i) for d in order for i in range(sizes[d].bit_length() - 1)]


def _threads(vec: list[int], seq: list[int], lanes_log2: int, warps_log2: int,
             shape: dict[str, int]) -> LinearLayout:
    """Registers take ``vec``; lanes, then warps, then the remaining
    registers take the other vectors of ``seq`` in order.  A tile smaller
    than the threads leaves lanes/warps broadcast (zero)."""
    rest = [v for v in seq if v not in vec]
    lane = rest[:lanes_log2] + [0] * max(0, lanes_log2 - len(rest))
    warp = rest[lanes_log2:lanes_log2 + warps_log2]
    warp += [0] * (warps_log2 - len(warp))
    return LinearLayout.from_flat({"register": vec + rest[lanes_log2 + warps_log2:], "lane": lane, "warp": warp,
                                   "block": []}, shape, require_surjective=True)


def copy_threads(shared_tile: LinearLayout, order: Sequence[int], alignment: int, elem_bytes: int, target: Target,
                 num_warps: int, max_vector_bytes: int | None = None) -> list[tuple[str, LinearLayout]]:
    """Candidate thread mappings for a global -> shared copy: distributed
    layouts (register, lane, warp -> tensor) the planner builds itself.

    Registers first take the vector: tensor bits that are contiguous in
    BOTH tiles -- offsets 1, 2, .. 2^(k-1) of the shared tile are the
    coordinates 1, 2, .. of the global tile's contiguous dim -- up to 16 bytes
    and the alignment.  Lanes, then warps, then the remaining registers take
    the other tensor bits in one of two orders: the global tile's (``global``:
    a warp reads consecutive bytes, coalesced) or the shared tile's offsets
    (``shared``: a warp writes consecutive bytes, conflict-free).  The
    planner keeps the cheaper."""
    S = shared_tile.flat_bases("offset")
    glob = _global_bits(list(shared_tile.out_dim_sizes.values()), order)
    cap = min(max_vector_bytes or target.max_vector_bytes, target.max_vector_bytes, alignment)
    k = 0
    while k < min(_vector_log2(cap, elem_bytes), len(S)) and S[k] == glob[k]:
        k += 1
    nl, nw = target.warp_size.bit_length() - 1, num_warps.bit_length() - 1
    shape = dict(shared_tile.out_dim_sizes)
    return [(label, _threads(glob[:k], seq, nl, nw, shape)) for label, seq in (("global", glob), ("shared", S))]


def coalesced_threads(dist: LinearLayout, order: Sequence[int], alignment: int, elem_bytes: int,
                      target: Target) -> LinearLayout:
    """The distributed layout that reads or writes a global tile best, with
    ``dist``'s lanes and warps: registers take the widest vector along
    ``order[0]`` (16 bytes and the alignment at most), lanes then warps the
    next tensor bits in the tile's order, registers the rest -- every warp
    instruction touches consecutive bytes.  ``via`` plans convert to it."""
    glob = _global_bits(list(dist.out_dim_sizes.values()), order)
    k = min(_vector_log2(min(target.max_vector_bytes, alignment), elem_bytes), len(glob))
    return _threads(glob[:k], glob, dist.in_dim_size("lane").bit_length() - 1,
                    dist.in_dim_size("warp").bit_length() - 1, dict(dist.out_dim_sizes))
