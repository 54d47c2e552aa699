"""Warp-shuffle conversion planner -- paper 000 §5.4, read it side by side.

Input: distributed layouts A (source) and B (destination) over the same tensor
whose warp bases are equal (no data crosses warps).  Work in the tensor space:
every layout column is a tensor bit vector.

1. Ownership.  A lane basis of A that is zero means two lanes hold the same
   data; when B needs more distinct lanes than A has (|F| > |E| below) such a
   lane column is given an A register vector that B keeps in lanes, so the two
   copies send different elements.  Solving against the owner matrix
   ``[A_lane_own | A_warp | A_reg]`` (lanes first) tells who sends what.
2. V ⊆ A_reg ∩ B_reg: elements packed into one 32-bit payload.
3. I = A_thr ∩ B_thr (no movement), E = A_thr ∖ I, F = B_thr ∖ I,
   G = {e_i ⊕ f_i}: every element of span(V ∪ I ∪ G) sits in a different lane
   of A and of B.
4. R completes V ∪ I ∪ G to a basis (taken from B_reg); round i moves the
   coset R(i) ⊕ span(V ∪ I ∪ G): each lane sends one payload and receives one.
   Rounds = 2^|R| = 2^(|B_reg| - |V|), the minimum for B's register count.

The per-round facts (register sent, source lane, register received) are
computed for every lane and then fitted to affine maps of the lane id, which
is what the generated code evaluates: ``src_lane = L(lane) ^ c_i`` (an xor
shuffle when L is the identity), ``sent = s_i ^ Ms(lane)``,
``received = b_i ^ Mr(lane)``.  Ms, Mr ≠ 0 (lane-dependent registers, i.e.
selects) exactly when G is not empty.

5. Selects, two forms (``ShufflePlan``).  Select trees pick the round's
   register among the 2^rank(Ms) candidates (2^rank - 1 selects a word and
   round).  Swap stages (Triton's "swap" factorisation of a permutation of
   register and lane bits into transpositions) xor the whole register file by
   Ms(lane) before the rounds, one basis vector of Ms's image at a time:
   ``r <-> r ^ x`` where the lane's select bit is set, one select a word --
   rank(Ms) x words instead of rounds x (2^rank - 1); Mr likewise after the
   rounds (``swap_form`` of the select-tree plan).  The planner scores both.
6. Fused (``fuse_form``, 8/16-bit data in packed words): a lane-dependent
   word is built by ``__byte_perm`` with per-lane selectors (constants of the
   thread), no select at all: one permute when its alternatives draw on two
   words, a share of a byte transpose's on four (``words.lane_perm``).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from ll_codegen.core import f2
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.model import LaneSelect, ShufflePlan, ShuffleRound
from ll_codegen.plan.words import lane_perms


class NotShuffleable(ValueError):
    """The pair cannot be converted by warp shuffles."""


def _extend(base: list[int], vectors: list[int]) -> list[int]:
    """The vectors (in order) that each raise the rank of ``base`` + chosen."""
    out: list[int] = []
    for v in vectors:
        if v and f2.rank(base + out + [v]) > len(f2.independent_subset(base + out)):
            out.append(v)
    return out


def _coords(solver: f2.Solver, xs: np.ndarray, what: str = "element outside the layout's span") -> np.ndarray:
    c, ok = solver.solve_array(xs)
    if not ok.all():
        raise NotShuffleable(what)
    return c


def _fit_affine(rounds: np.ndarray, lanes: np.ndarray, values: np.ndarray, n_rounds: int,
                n_lane_bits: int) -> tuple[list[int], list[int]]:
    """Fit ``values[k] = const[rounds[k]] ^ apply(lin, lanes[k])`` with one
    linear part for all rounds (entries sorted by round; rounds without
    entries are free).

    Within a round, ``value ^ value0 = apply(lin, lane ^ lane0)`` (index 0:
    the round's first entry): a linear equation in the lane bits.  The
    distinct equations are kept in echelon form keyed by the leading bit of
    the lane difference (one that reduces to ``0 = d`` with ``d != 0``: not
    affine); back-substitution in increasing bit order gives ``lin`` with the
    free lane bits mapped to zero."""
    heads, first = np.unique(rounds, return_index=True)      # entries come sorted by round
    start = first[np.searchsorted(heads, rounds)]
    pairs = np.unique(((lanes ^ lanes[start]) << 32) | (values ^ values[start]))
    pivots: dict[int, tuple[int, int]] = {}
    for delta, d in zip((pairs >> 32).tolist(), (pairs & 0xFFFFFFFF).tolist()):
        while delta:
            h = delta.bit_length() - 1
            if h not in pivots:
                pivots[h] = (delta, d)
                break
            delta, d = delta ^ pivots[h][0], d ^ pivots[h][1]
        if not delta and d:
            raise NotShuffleable("per-lane registers are not affine in the lane id")
    lin = [0] * n_lane_bits
    for h in sorted(pivots):
        delta, d = pivots[h]
        lin[h] = d ^ f2.apply(lin, delta & ~(1 << h))
    const = [0] * n_rounds
    for r, k in zip(heads.tolist(), first.tolist()):
        const[r] = int(values[k]) ^ f2.apply(lin, int(lanes[k]))
    return const, lin


def _lane_select(lin: list[int]) -> tuple[LaneSelect, list[int]]:
    """Express ``apply(lin, lane)`` as ``apply(basis, c(lane))`` with a LaneSelect c."""
    basis = [lin[k] for k in f2.independent_subset(lin)]
    masks = [0] * len(basis)
    for k, v in enumerate(lin):
        c = f2.solve(basis, v)
        for j in range(len(basis)):
            if c >> j & 1:
                masks[j] |= 1 << k
    return LaneSelect(tuple(masks)), basis


def plan_shuffle(src: LinearLayout, dst: LinearLayout, elem_bytes: int) -> ShufflePlan:
    """Plan a conversion by warp shuffles (lane-dependent registers as select
    trees; ``swap_form`` gives the swap stages); raises NotShuffleable if data
    crosses warps."""
    a_reg, a_thr, a_wrp = (src.flat_bases(d) for d in ("register", "lane", "warp"))
    b_reg, b_thr, b_wrp = (dst.flat_bases(d) for d in ("register", "lane", "warp"))
    if a_wrp != b_wrp or len(a_thr) != len(b_thr):
        raise NotShuffleable("data crosses warps")
    nl = len(a_thr)

    def split(own_thr: list[int]):
        inter = f2.intersect(own_thr, b_thr)
        return inter, _extend(inter, own_thr), _extend(inter, b_thr)

    # 1. ownership: spare (broadcast) A lanes take vectors that B keeps in lanes
    own_thr = list(a_thr)
    I, E, F = split(own_thr)
    while len(F) > len(E) and 0 in own_thr:
        own_thr[own_thr.index(0)] = F[0]
        I, E, F = split(own_thr)
    if len(F) > len(E):
        raise NotShuffleable("destination needs more distinct lanes than the source can feed")
    owner = own_thr + a_wrp + a_reg

    # 2. vectorisation, 3. G, 4. rounds
    words = 2 if elem_bytes == 8 else 1
    max_v = (4 // elem_bytes).bit_length() - 1 if elem_bytes <= 4 else 0
    V = [v for v in _extend([], a_reg) if f2.in_span(v, b_reg)][:max_v]
    G = [e ^ f for e, f in zip(E, F)]
    R = _extend(V + I + G, b_reg)
    R += _extend(V + I + G + R + a_wrp, [1 << i for i in range(src.total_out_size_log2)])
    if f2.rank(V + I + G + R + a_wrp) != src.total_out_size_log2:
        raise NotShuffleable("round basis does not cover the tensor")
    W = I + G                                   # lane-carrying part of a round
    b_lanes_first = f2.Solver(b_thr + b_wrp + b_reg)
    b_regs_first = f2.Solver(b_reg + b_thr + b_wrp)
    owner_solver, a_reg_solver = f2.Solver(owner), f2.Solver(a_reg)
    lanes_mask, regs_mask = (1 << nl) - 1, (1 << len(b_reg)) - 1
    b_lane_of = f2.Solver((_coords(b_lanes_first, np.array(W, dtype=np.int64)) & lanes_mask).tolist())
    b_live = sum(1 << k for k, v in enumerate(b_thr) if v)
    spare = sum(1 << k for k, v in enumerate(own_thr) if not v)   # lanes that hold copies

    def b_reg_of(x: np.ndarray) -> np.ndarray:
        """Destination register of x (its lane part is the receiving lane's)."""
        c = _coords(b_regs_first, x)
        if (c >> (len(b_reg) + nl)).any():
            raise NotShuffleable("element lands in another warp")
        return c & regs_mask

    # every (round i, receiving lane u) at once: the element x lane u gets in
    # round i, the lane t that owns it, and the registers on both sides
    n_rounds = 1 << len(R)
    i, u = (a.ravel() for a in np.meshgrid(np.arange(n_rounds, dtype=np.int64),
                                           np.arange(1 << nl, dtype=np.int64), indexing="ij"))
    ri = f2.apply_array(R, i)
    want = (u & b_live) ^ (_coords(b_lanes_first, ri) & lanes_mask)
    x = ri ^ f2.apply_array(W, _coords(b_lane_of, want, "destination lanes not covered by a round"))
    t = (_coords(owner_solver, x) & lanes_mask & ~spare) | (u & spare)
    recv = b_reg_of(x)
    sent = _coords(a_reg_solver, x ^ f2.apply_array(a_thr, t))
    slot = (i << nl) | t                         # (round, sending lane)
    by_slot = np.full(n_rounds << nl, -1, dtype=np.int64)
    by_slot[slot] = sent
    if (by_slot[slot] != sent).any():
        raise NotShuffleable("a lane would have to send two registers in one round")
    senders = np.flatnonzero(by_slot >= 0)
    lane_xor, lane_lin = _fit_affine(i, u, t, n_rounds, nl)
    send_base, send_lin = _fit_affine(senders >> nl, senders & lanes_mask, by_slot[senders], n_rounds, nl)
    recv_base, recv_lin = _fit_affine(i, u, recv, n_rounds, nl)

    send_sel, send_basis = _lane_select(send_lin)
    recv_sel, recv_basis = _lane_select(recv_lin)
    vec = f2.apply_array(V, np.arange(1 << len(V), dtype=np.int64))
    a_vec, b_vec = _coords(a_reg_solver, vec).tolist(), b_reg_of(vec).tolist()
    send_regs = [[f2.apply(send_basis, c) ^ a for a in a_vec] for c in range(send_sel.size)]
    recv_regs = [[f2.apply(recv_basis, c) ^ b for b in b_vec] for c in range(recv_sel.size)]
    rounds = [ShuffleRound(send=tuple(tuple(send_base[i] ^ r for r in regs) for regs in send_regs),
                           lane_xor=lane_xor[i],
                           recv=tuple(tuple(recv_base[i] ^ r for r in regs) for regs in recv_regs))
              for i in range(n_rounds)]
    identity = all(v == 1 << k for k, v in enumerate(lane_lin))
    return ShufflePlan(vec=1 << len(V), words=words, send_select=send_sel, recv_select=recv_sel,
                       src_lane=None if identity else tuple(lane_lin), rounds=tuple(rounds),
                       sets={"V": tuple(V), "I": tuple(I), "E": tuple(E), "F": tuple(F),
                             "G": tuple(G), "R": tuple(R)})


def swap_form(plan: ShufflePlan) -> ShufflePlan:
    """The same rounds with lane-dependent registers as swap stages (step 5):
    a side whose round lists c-indexed tuples ``base ^ X(c)`` keeps the c = 0
    tuple, and its stage j xors by ``X(2^j)`` (the tuples at c = 2^j and 0 differ by it)."""
    def side(listed: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
        return tuple(listed[1 << j][0] ^ listed[0][0] for j in range(len(listed).bit_length() - 1))
    first = plan.rounds[0]
    send_swaps = side(first.send) if plan.send_select.size > 1 else ()
    recv_swaps = side(first.recv) if plan.recv_select.size > 1 else ()
    rounds = tuple(ShuffleRound(send=r.send[:1] if send_swaps else r.send, lane_xor=r.lane_xor,
                                recv=r.recv[:1] if recv_swaps else r.recv) for r in plan.rounds)
    return replace(plan, rounds=rounds, send_swaps=send_swaps, recv_swaps=recv_swaps)


def fuse_form(plan: ShufflePlan, per: int, copies: Sequence[tuple[int, int]] = ()) -> ShufflePlan | None:
    """The same rounds with a side's lane-dependent words built by byte permutes with per-lane
    selectors (``words.lane_perm``), no selects, where that side has lane-dependent registers and
    no word draws on more than four words; None when no side can (or ``per`` is 0: no word view).
    ``copies``: the plan's ``dst_copies``, composed into the destination words."""
    if not per:
        return None
    send = plan.send_select.size > 1 and lane_perms(plan.send_words(per), per) is not None
    recv = plan.recv_select.size > 1 and lane_perms(list(plan.recv_words(per, copies).values()), per) is not None
    if not (send or recv):
        return None
    # a fused side lists every select value's registers (as select trees do): its swap stages are gone
    rounds = tuple(ShuffleRound(send=plan.sent(r) if send else r.send, lane_xor=r.lane_xor,
                                recv=plan.received(r) if recv else r.recv) for r in plan.rounds)
    return replace(plan, rounds=rounds, send_fused=send, recv_fused=recv,
                   send_swaps=() if send else plan.send_swaps, recv_swaps=() if recv else plan.recv_swaps)
