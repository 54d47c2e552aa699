"""The layouts in between of a butterfly conversion (strategy ``butterfly``): a chain of warp
shuffle steps, each exchanging one lane bit with one register bit.

Why.  A warp-local conversion whose destination thread needs elements of many source lanes (a
transpose inside the warp) moves, by one direct exchange (``shuffle.plan_shuffle``), one element
per shuffle when no two of a thread's elements share their source and destination lanes: an 8-bit
8x8 transpose over 8 lanes costs 8 shuffles of one byte each, and its lane-dependent registers
selects or byte permutes.  A butterfly step moves half of every thread's data to one partner lane,
as whole 32-bit words: each step costs ``words / 2`` shuffles, so a chain of s steps costs
``s * words / 2`` against the direct exchange's one shuffle per element.

The step.  Layouts are matrices over F2 with register, lane and warp columns (tensor bit
vectors).  A transposition of lane column j with register column k: the layout in between has
column j of the lanes and column k of the registers exchanged.  Lane ``u`` keeps the half of its
registers with register bit k equal to bit j of u and exchanges the other half with lane
``u ^ 2^j`` (one ``shfl.sync.bfly`` per 32-bit word of that half; the lane-dependent choice of the
half is ``plan_shuffle``'s G set, done by byte permutes with per-lane selectors for 8/16-bit data).
Every step is an ordinary ``ShufflePlan`` between two layouts and is checked as one.

The chain.  Where the two layouts hold the same nonzero tensor bit vectors in their register and
lane columns (a permutation of the columns; warps equal), the lane columns that differ are fixed
one transposition at a time: a lane column j whose destination vector sits in a source register
takes it (the register then holds lane j's old vector, which the next step moves on to the lane that
wants it, or keeps when the destination holds it in a register).  A cycle among lane columns only
(lane j wants what lane j' holds and so on back to j) is broken by parking lane j's vector in a
register first.  Each path of L lane columns from a register back to a register costs L
transpositions, each cycle L + 1: the fewest transpositions of lane and register columns that
permute the one into the other (register columns among themselves are free: in-thread moves).  The
last step goes to the destination itself, its register order included.

Example (``bench/bench_convert.py``'s warp transpose; bases as (row, col)): source registers
(0,1) (0,2) (0,4), lanes (0,8) (0,16) (1,0) (2,0) (4,0); destination registers (1,0) (2,0) (4,0),
lanes (0,1) (0,2) (0,4) (0,8) (0,16).  Lane 0 wants (0,1), a register: swap, and the register holds
(0,8); lanes 1 and 2 take (0,2) and (0,4) likewise, leaving (0,16) and (1,0) in registers; lane 3
takes (0,8), freeing (2,0) into a register (the destination keeps it there), and lane 4 takes (0,16),
freeing (4,0): 5 steps, 1 shuffle each for 8-bit data (2 for 16-bit, 4 for 32-bit).  Five is the
fewest: lanes 0 and 1 hold (0,8) and (0,16), which the destination holds in lanes 3 and 4, so each
passes through a register (two swaps), and lane 2 takes (0,4) from one.

Registers.  Each layout in between keeps the other registers in place; the vector a swap brings
into the registers may take any register position, and lane j may be stored sheared by it
(``sheared``: lane column j xor that vector, the same elements per lane in other registers), so
that every lane receives into the same registers -- placed at the top register bit, the received
half is whole 32-bit words and no permute places it.  ``butterfly_step`` builds the rounds of such
a step (kept words by ``lane_xor`` 0, received ones by ``lane_xor`` 2^j); ``plan_shuffle``'s coset
rounds would mix the two halves.  The chain is built greedily, each step's layout the one whose
shuffle plan scores least, once with shears and once without, and the planner keeps the cheaper.
For the example in 8-bit data each step is 1 shuffle and 2 byte permutes with per-lane selectors
(the word sent, the word kept) and the last 4 (its received word lands lane-dependently in the
destination's order): 5 ``SHFL.BFLY`` and 12 ``PRMT`` a thread, against 8 single-byte shuffles of
the direct exchange.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ll_codegen.core import f2
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.model import LaneSelect, ShufflePlan, ShuffleRound
from ll_codegen.plan.plans import ConvertPlan
from ll_codegen.plan.shuffle import NotShuffleable, plan_shuffle

Bases = list[list[int]]


def butterfly_chain(base: ConvertPlan, src: LinearLayout, dst: LinearLayout, shear: bool,
                    forms: Callable[[ConvertPlan, ShufflePlan], list[ConvertPlan]],
                    cost: Callable[[ConvertPlan], float]) -> ConvertPlan | None:
    """The butterfly plan of ``src -> dst`` (strategy ``butterfly``): one shuffle step per
    transposition of ``swap_sequence`` (two at least), the layout after each chosen greedily among
    ``step_options`` (``shear``: sheared ones too; the last step lands on ``dst``) by the ``cost``
    of the cheapest of the ``forms`` of its shuffle plans (``step_plans``); the steps nested as
    ``via`` chains, the first innermost: each step after the first is a ``butterfly`` plan whose
    ``shuffle`` is that step's and whose ``via`` holds the steps before it.  ``base``: the
    conversion's header (element type, target, both layouts).  None without such a chain."""
    seq = swap_sequence(src, dst)
    if seq is None or len(seq) < 2:
        return None
    plan, prev, logical, shears, w = None, src, src, {}, base.elem_bytes
    for n, (j, vector) in enumerate(seq):
        options = [(dst, dst, {})] if n == len(seq) - 1 else step_options(logical, shears, j, vector, shear)
        scored = []
        for mid, t, sh in options:
            step = replace(base, strategy="shuffle", src_bases={"in_dims": prev.bases, "out_dims": prev.out_dim_sizes},
                           dst_bases={"in_dims": mid.bases, "out_dims": mid.out_dim_sizes}, dst_copies=(),
                           n_dst=base.n_src, candidates=())
            for sp in step_plans(prev, mid, w):
                scored += [(cost(p), k, p, mid, t, sh) for k, p in enumerate(forms(step, sp))
                           if same_choices(p.shuffle, sp)]
        if not scored:
            return None
        _, _, step, prev, logical, shears = min(scored, key=lambda x: x[:2])
        plan = step if plan is None else replace(step, strategy="butterfly", src_bases=base.src_bases,
                                                 n_src=base.n_src, via=plan)
    return plan


def swap_sequence(src: LinearLayout, dst: LinearLayout) -> list[tuple[int, list[int]]] | None:
    """The transpositions (lane column j, the register vector it swaps with) that take ``src``'s lane columns to
    ``dst``'s, in order (module docstring); None when the two layouts do not hold the same nonzero
    vectors in their register and lane columns, hold no register, or their warp columns differ."""
    reg, lane = _columns(src)
    dreg, dlane = _columns(dst)
    if src.bases.get("warp") != dst.bases.get("warp") or sorted(reg + lane) != sorted(dreg + dlane):
        return None
    vectors = reg + lane
    if not reg or any(not any(v) for v in vectors) or len({tuple(v) for v in vectors}) != len(vectors):
        return None                             # (no register to swap with: one element a thread)
    out: list[tuple[int, list[int]]] = []
    for _ in range(2 * len(lane) + 1):          # a path of L lanes costs L swaps, a cycle L + 1
        wrong = [j for j in range(len(lane)) if lane[j] != dlane[j]]
        if not wrong:
            return out
        j = next((j for j in wrong if dlane[j] in reg), None)
        if j is not None:
            k = reg.index(dlane[j])
        else:                                   # a cycle among lane columns: park lane j in a register
            j = wrong[0]
            k = next(k for k in range(len(reg)) if reg[k] not in dlane)
        out.append((j, reg[k]))
        reg[k], lane[j] = lane[j], reg[k]
    raise AssertionError("transposition chain did not close")        # each swap fixes a lane column


def swapped(layout: LinearLayout, j: int, vector: list[int], at: int) -> LinearLayout:
    """``layout`` with lane column ``j`` and the register column holding ``vector`` exchanged and
    the vector that lane j held placed at register position ``at`` (the other registers keep
    their order)."""
    reg, lane = _columns(layout)
    moved = lane[j]
    lane[j] = reg.pop(reg.index(list(vector)))
    reg.insert(at, moved)
    return LinearLayout(dict(layout.bases, register=reg, lane=lane), layout.out_dim_sizes)


def sheared(layout: LinearLayout, shears: dict[int, list[int]]) -> LinearLayout:
    """``layout`` storing lane k's elements with register vector ``shears[k]``'s bit flipped where
    lane bit k is set: lane column k xor that vector -- every lane holds the same elements, in
    other registers.  Sheared by the vector its step brought in, a lane column's step receives
    into the same registers in every lane (``butterfly_step``: the received words land whole, no
    byte permute places them); the later steps' permutes, lane-dependent anyway, read the flipped
    registers at no cost, and the last step (to the destination) undoes what is left."""
    reg, lane = _columns(layout)
    for k, v in shears.items():
        lane[k] = [a ^ b for a, b in zip(lane[k], v)]
    return LinearLayout(dict(layout.bases, register=reg, lane=lane), layout.out_dim_sizes)


def step_options(logical: LinearLayout, shears: dict[int, list[int]], j: int, vector: list[int],
                 shear: bool = True) -> list[tuple[LinearLayout, LinearLayout, dict[int, list[int]]]]:
    """(layout stored, layout without shears, shears) after the swap of lane ``j`` with the
    register ``vector``, for each register position of the vector brought in: with ``shear``, lane
    j sheared by it (alone, or with the earlier shears whose vector is still in a register), then
    without shears; without ``shear``, no shears.  Dropping an earlier shear costs nothing (the
    step's permutes, lane-dependent anyway, undo it) and keeps the per-lane byte selectors of the
    later steps to fewer lane bits, so of equal scores the first listed wins."""
    out = []
    moved = list(logical.bases["lane"][j])
    for at in range(len(logical.bases["register"])):
        t = swapped(logical, j, vector, at)
        kept = {k: v for k, v in shears.items() if k != j and v in t.bases["register"]}
        options = [{j: moved}, {}, {**kept, j: moved}, kept] if shear else [{}]
        for sh in [o for i, o in enumerate(options) if o not in options[:i]]:
            out.append((sheared(t, sh), t, sh))
    return out


def butterfly_step(src: LinearLayout, dst: LinearLayout, elem_bytes: int) -> ShufflePlan | None:
    """The shuffle plan of one step in which every lane u keeps some of its elements and receives
    the others from lane ``u ^ b`` (one b for every lane): rounds with ``lane_xor`` 0 move the kept
    elements in registers, rounds with ``lane_xor`` b the received ones, a 32-bit word of them a
    round (``vec`` = 4 / element bytes), in the destination's register order; the registers sent
    and received are listed for each value of a ``LaneSelect`` over the lane bits they depend on.
    ``plan_shuffle`` solves any exchange by its coset rounds, which put the two halves of a
    sheared layout (``swapped``) in one round; this builds the rounds from the halves.  None
    when the step is not of that form (other warps, several partners, halves that do not fill
    whole payloads, or registers that are not affine in the lane)."""
    a_reg, a_lane = src.flat_bases("register"), src.flat_bases("lane")
    b_reg, b_lane = dst.flat_bases("register"), dst.flat_bases("lane")
    if src.flat_bases("warp") != dst.flat_bases("warp") or len(a_reg) != len(b_reg):
        return None
    vec = 4 // elem_bytes if elem_bytes < 4 else 1
    solver, nr = f2.Solver(a_reg + a_lane), len(a_reg)
    # per lane u, per destination register r: the (lane, register) of the source holding it
    c, ok = solver.solve_array(f2.apply_array(b_lane, np.arange(1 << len(b_lane)))[:, None]
                               ^ f2.apply_array(b_reg, np.arange(1 << len(b_reg)))[None, :])
    if not ok.all():
        return None
    where = [list(zip(t, r)) for t, r in zip((c >> nr).tolist(), (c & ((1 << nr) - 1)).tolist())]
    partners = {t ^ u for u, row in enumerate(where) for t, _ in row if t != u}
    if len(partners) != 1:
        return None
    b = partners.pop()
    halves = [([r for r, (t, _) in enumerate(row) if t == u], [r for r, (t, _) in enumerate(row) if t != u])
              for u, row in enumerate(where)]
    if any(len(k) % vec or len(m) % vec or len(m) != len(halves[0][1]) for k, m in halves):
        return None
    n_kept = len(halves[0][0]) // vec

    def recv(u: int) -> list[tuple[int, ...]]:
        kept, moved = halves[u]
        if len(kept) // vec != n_kept:
            return []
        return [tuple(x[i:i + vec]) for x in (kept, moved) for i in range(0, len(x), vec)]

    def send(v: int) -> list[tuple[int, ...]]:
        u = v ^ b                                       # the lane v's remote payloads go to
        mine = [tuple(where[v][r][1] for r in chunk) for chunk in recv(v)[:n_kept]]
        return mine + [tuple(where[u][r][1] for r in chunk) for chunk in recv(u)[n_kept:]]

    lanes = range(len(where))
    send_sel, sends = _by_lane([send(v) for v in lanes])
    recv_sel, recvs = _by_lane([recv(u) for u in lanes])
    if sends is None or recvs is None:
        return None
    rounds = tuple(ShuffleRound(send=tuple(s[i] for s in sends), lane_xor=0 if i < n_kept else b,
                                recv=tuple(x[i] for x in recvs)) for i in range(len(recvs[0])))
    return ShufflePlan(vec=vec, words=2 if elem_bytes == 8 else 1, send_select=send_sel, recv_select=recv_sel,
                       src_lane=None, rounds=rounds)


def step_plans(src: LinearLayout, dst: LinearLayout, elem_bytes: int) -> list[ShufflePlan]:
    """The shuffle plans of one butterfly step: ``butterfly_step``'s, ``plan_shuffle``'s."""
    out = [sp for sp in (butterfly_step(src, dst, elem_bytes),) if sp is not None]
    try:
        out.append(plan_shuffle(src, dst, elem_bytes))
    except NotShuffleable:                  # a sheared layout: plan_shuffle's coset rounds mix its halves
        pass
    return out


def same_choices(a: ShufflePlan, b: ShufflePlan) -> bool:
    """Whether two forms of a shuffle plan send and receive the same registers in every round for
    every select value (a swap-stage form assumes registers that are translates of each other,
    which ``butterfly_step``'s need not be)."""
    return (a.send_select == b.send_select and a.recv_select == b.recv_select and len(a.rounds) == len(b.rounds)
            and all(a.sent(x) == b.sent(y) and a.received(x) == b.received(y) for x, y in zip(a.rounds, b.rounds)))


def _by_lane(data: list[list[tuple[int, ...]]]) -> tuple[LaneSelect, list | None]:
    """(a ``LaneSelect`` over the lane bits ``data`` depends on, the data for each of its values);
    None for the data when some lane's differs from the lane with the same select value."""
    bits = [k for k in range(len(data).bit_length() - 1) if any(data[u] != data[u ^ 1 << k] for u in range(len(data)))]
    sel = LaneSelect(tuple(1 << k for k in bits))
    values = [data[sum(1 << k for i, k in enumerate(bits) if c >> i & 1)] for c in range(sel.size)]
    if any(not row for row in data) or any(data[u] != values[sel(u)] for u in range(len(data))):
        return sel, None
    return sel, values


def _columns(layout: LinearLayout) -> tuple[Bases, Bases]:
    return [list(b) for b in layout.bases["register"]], [list(b) for b in layout.bases["lane"]]
