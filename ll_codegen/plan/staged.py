"""The layout in between of a staged conversion (strategy ``shuffle+smem``):
warp shuffles first, then a round trip through shared memory.  Besides the
layouts below, ``distinct_lanes_layout``: a source whose lanes hold copies
first keeps a different part of its registers on each copy (selects, no
shuffle), so that its stores carry no duplicate bytes.

Why.  A shared-memory conversion moves ``v`` elements per access only where
the source and the destination both hold them in ``v`` consecutive registers
of one thread (they span the same low offset bits of the scratch).  When the
two layouts share no register basis -- an 8-bit transpose: the source's
registers run along columns, the destination's along rows -- one side is one
byte wide, and a warp-wide access of 32 bytes costs a whole wavefront: T
64x64 f8 with 4 warps stores 32 single bytes a thread (32 wavefronts a warp)
where 4-byte stores would need 8.

How.  The destination's first k register bases ``d_0 .. d_{k-1}`` (registers
0 .. 2^k - 1: one access) are brought into the registers of every thread by
warp shuffles before the round trip.  Each ``d_i`` that the source holds in a
lane bit j is swapped with a source register basis ``r`` (a transposition of
a lane bit and a register bit: half the data crosses lanes, between lanes
``lane`` and ``lane ^ 2^j``).  ``r`` is the destination's lane basis j when
the source keeps it in a register (then lane bit j already holds what the
destination wants there), else the first source register basis the
destination does not keep in its registers.  The layout in between has
registers ``[d_0 .. d_{k-1}, the other source registers]`` and the source's
lanes with those swaps; its warps are the source's, so the shuffles stay in
each warp.

Example (T 64x64 f8, 4 warps; bases as (row, col)): the source has registers
(0,1) (0,2) (0,4) (16,0) (32,0) and lanes (0,8) (0,16) (0,32) (1,0) (2,0); the
destination registers (1,0) (2,0) (4,0) (0,16) (0,32) and lanes (8,0) (16,0)
(32,0) (0,1) (0,2).  For k = 2: (1,0) is source lane 3, swapped with (0,1)
(the destination's lane 3); (2,0) is source lane 4, swapped with (0,2).  In
between: registers (1,0) (2,0) (0,4) (16,0) (32,0), lanes (0,8) (0,16) (0,32)
(0,1) (0,2).  A thread then stores 4 bytes an access (rows 4i .. 4i+3 of one
column) instead of 1: 8 wavefronts a warp instead of 32, for 6 shuffles.
"""
from __future__ import annotations

from ll_codegen.core.layout import LinearLayout


def mid_layout(src: LinearLayout, dst: LinearLayout, k: int) -> LinearLayout | None:
    """The layout in between for the destination's first ``k`` register bases
    (module docstring); None when one of them is neither a source register
    basis nor a source lane basis, or no source register is left to swap."""
    reg = [list(b) for b in src.bases["register"]]
    lane = [list(b) for b in src.bases["lane"]]
    want = [list(b) for b in dst.bases["register"][:k]]
    if len(want) < k:
        return None
    for d in want:
        if d in reg:
            continue
        if d not in lane:
            return None
        j = lane.index(d)
        r = list(dst.bases["lane"][j])
        if r not in reg or r in want or not any(r):
            spare = [b for b in reg if b not in want and b not in dst.bases["register"] and any(b)]
            if not spare:
                return None
            r = spare[0]
        reg[reg.index(r)], lane[j] = d, r
    bases = dict(src.bases, register=want + [b for b in reg if b not in want], lane=lane)
    return LinearLayout(bases, src.out_dim_sizes)


def distinct_lanes_layout(src: LinearLayout) -> LinearLayout | None:
    """``src`` with each broadcast lane basis (zero: lanes that hold the same
    elements) replaced by one of its register bases, the last ones first: every
    lane keeps the part of its registers that its lane bits pick, so that no two
    lanes of a warp hold the same element.  None when ``src`` has no broadcast
    lane or too few registers.

    Why.  Lanes that hold copies store the same bytes: a store wavefront of
    T3 dims 021 f16's blocked [8,1,1]/[8,4,1]/[1,1,4] layout (lane bits 0..2
    broadcast) carries 16 distinct bytes -- 128 wavefronts a warp for its 2 KB.
    Selecting by lane first (no shuffle: each lane already holds what it keeps;
    7 selects a kept word) stores them in 16.  Example: registers
    ``r0 .. r7`` and lanes ``(0, 0, 0, l3, l4)`` become registers ``r0 .. r4``
    and lanes ``(r5, r6, r7, l3, l4)``."""
    reg = [list(b) for b in src.bases["register"]]
    lane = [list(b) for b in src.bases["lane"]]
    zero = [j for j, b in enumerate(lane) if not any(b)]
    spare = [i for i, b in enumerate(reg) if any(b)]
    if not zero or len(spare) < len(zero):
        return None
    take = spare[len(spare) - len(zero):]
    for j, i in zip(zero, take):
        lane[j] = reg[i]
    bases = dict(src.bases, register=[b for i, b in enumerate(reg) if i not in take], lane=lane)
    return LinearLayout(bases, src.out_dim_sizes)


def mid_layouts(src: LinearLayout, dst: LinearLayout, elem_bytes: int) -> list[LinearLayout]:
    """Every distinct layout in between for accesses of 2^k elements up to 16
    bytes that moves some data across lanes (a layout with the source's lanes
    would make the first step a register permutation: the shared-memory plan
    alone does that), and ``distinct_lanes_layout`` of a source whose lanes
    hold copies."""
    out: list[LinearLayout] = []
    distinct = distinct_lanes_layout(src)
    if distinct is not None:
        out.append(distinct)
    k = 1
    while (elem_bytes << k) <= 16:
        mid = mid_layout(src, dst, k)
        if mid is not None and mid.bases["lane"] != src.bases["lane"] and mid not in out:
            out.append(mid)
        k += 1
    return out
