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
7. Per warp (``per_warp``): warp bases that differ while every warp holds what the
   destination's same warp needs (``held_per_warp``) -- warp 0's pair planned as above,
   the other warps' by a warp-dependent xor of the source lane and the sent registers:
   ``src_lane`` and the selects read the thread index ``lane + warp_size * warp``.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from ll_codegen.core import f2
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.model import LaneSelect, ShufflePlan, ShuffleRound, swap_stages, with_partners
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
    crosses warps.  Where the warp columns differ but every warp already holds what
    it needs (``held_per_warp``), the plan is the first of ``shuffle_plans`` (``per_warp``):
    selects and source lanes that depend on the warp id too."""
    if len(src.flat_bases("lane")) != len(dst.flat_bases("lane")):
        raise NotShuffleable("data crosses warps")
    if src.flat_bases("warp") != dst.flat_bases("warp"):
        return shuffle_plans(src, dst, elem_bytes)[0]
    return _build(_solve(src, dst, elem_bytes))


def held_per_warp(src: LinearLayout, dst: LinearLayout) -> bool:
    """Whether every warp w of ``dst`` holds only elements warp w of ``src`` holds.  Warp w
    holds the coset ``span(register, lane columns) ^ warp(w)``, so this is: ``dst``'s
    register and lane columns lie in P = the span of ``src``'s, and so does the xor of the
    two layouts' warp columns k, for every k (then ``dst``'s coset of w is in ``src``'s)."""
    p = f2.Solver(src.flat_bases("register") + src.flat_bases("lane"))
    wanted = dst.flat_bases("register") + dst.flat_bases("lane")
    wanted += [a ^ b for a, b in zip(src.flat_bases("warp"), dst.flat_bases("warp"))]
    return len(src.flat_bases("warp")) == len(dst.flat_bases("warp")) and all(p.solve(v) is not None for v in wanted)


def per_warp(src: LinearLayout, dst: LinearLayout, elem_bytes: int, registers_first: bool = False,
             eager: bool = False) -> ShufflePlan:
    """The shuffle plan of a pair whose warp columns differ while every warp holds what it
    needs (``held_per_warp``): one plan for every warp, its choices depending on the warp id.

    Warp 0 first: the pair of the two layouts without their warp columns, ``a`` (``src``'s
    registers and lanes, onto P) -> ``b`` (``dst``'s, onto Q in P), planned by steps 1-4 with
    the rounds covering Q.  Warp w: with S_k, D_k the warp columns of ``src``, ``dst``, warp w
    of ``dst`` wants ``b(r, l) ^ D(w)``, and ``src``'s warp w holds ``a(r, l) ^ S(w)``;
    delta_k = S_k ^ D_k lies in P, delta_k = a(rho_k, lam_k), so by linearity the element warp 0's
    plan finds at (register r, lane t) of ``a`` is, for warp w, at register r ^ rho(w) of lane
    t ^ lam(w).  The receivers read lane ``L(lane) ^ c_i ^ lam(w)``, which sends the registers
    ``s_i ^ Ms(t ^ lam(w)) ^ rho(w)`` with t' = t ^ lam(w) its own lane: ``s_i ^ Ms(t') ^ Ms(lam(w))
    ^ rho(w)``; the received registers do not change.  So the source lane map takes columns
    lam_k for the warp bits and the sent registers columns Ms(lam_k) ^ rho_k: ``src_lane`` and
    ``send_select`` over the thread index ``lane + warp_size * warp`` (``model.LaneSelect``), a
    warp-uniform term each.  ``registers_first``: delta_k solved in the registers where it can
    be (a warp-dependent register is a select per word; a warp-dependent source lane costs
    nothing where the rounds shuffle anyway, but makes a round that keeps its payload a shuffle);
    ``eager``: ``_solve``'s."""
    if not held_per_warp(src, dst):
        raise NotShuffleable("data crosses warps")
    a_reg, a_thr = src.flat_bases("register"), src.flat_bases("lane")
    nl, nr = len(a_thr), len(a_reg)
    solver = f2.Solver(a_reg + a_thr if registers_first else a_thr + a_reg)
    shifts = [solver.solve(s ^ d) for s, d in zip(src.flat_bases("warp"), dst.flat_bases("warp"))]
    if registers_first:
        lam, rho = [c >> nr for c in shifts], [c & ((1 << nr) - 1) for c in shifts]
    else:
        lam, rho = [c & ((1 << nl) - 1) for c in shifts], [c >> nl for c in shifts]

    def warp0(L: LinearLayout) -> LinearLayout:
        return LinearLayout(dict(L.bases, warp=[]), L.out_dim_sizes, require_surjective=False)
    # warp 0 wants Q = span(b); the lane and register columns of ``a`` outside Q are dead there
    # (a sender in warp 0 has those lane bits clear), which needs them independent modulo Q:
    # then the positions of Q in ``a`` are the positions with the dead bits clear
    b = dst.flat_bases("register") + dst.flat_bases("lane")
    q = f2.Solver(b)
    out = [v for v in a_reg + a_thr if q.solve(v) is None]
    if f2.rank(b + out) != f2.rank(b) + len(out):
        raise NotShuffleable("the elements warp 0 wants are not a sub-product of the source's registers and lanes")
    dead = sum(1 << k for k, v in enumerate(a_thr) if v and q.solve(v) is None)
    lanes = [[0] * len(v) if dead >> k & 1 else v for k, v in enumerate(src.bases["lane"])]
    a0 = LinearLayout(dict(src.bases, lane=lanes, warp=[]), src.out_dim_sizes, require_surjective=False)
    parts = _solve(a0, warp0(dst), elem_bytes, cover=b, dead=dead, eager=eager)
    send_lin = parts["send_lin"]
    parts.update(lane_lin=parts["lane_lin"] + lam, recv_lin=parts["recv_lin"] + [0] * len(lam),
                 send_lin=send_lin + [f2.apply(send_lin, x) ^ r for x, r in zip(lam, rho)])
    return _build(parts)


def shuffle_plans(src: LinearLayout, dst: LinearLayout, elem_bytes: int) -> list[ShufflePlan]:
    """``plan_shuffle``'s plan; for a pair of different warp columns the distinct plans of
    ``per_warp`` with the warp shifts solved in the lanes first or the registers first, spare
    lanes given vectors eagerly or not (NotShuffleable when none exists)."""
    if src.flat_bases("warp") == dst.flat_bases("warp"):
        return [plan_shuffle(src, dst, elem_bytes)]
    out: list[ShufflePlan] = []
    for registers_first in (False, True):
        for eager in (False, True):
            try:
                sp = per_warp(src, dst, elem_bytes, registers_first, eager)
            except NotShuffleable:
                continue
            out += [sp] if sp not in out else []
    if not out:
        per_warp(src, dst, elem_bytes)                  # raises: why the first form fails
    return out


def _solve(src: LinearLayout, dst: LinearLayout, elem_bytes: int, cover: list[int] | None = None,
           dead: int = 0, eager: bool = False) -> dict:
    """Steps 1-4 for a pair with equal warp columns: the rounds' lane and register maps,
    fitted affine in the lane (``_build`` makes the plan of them).  ``cover``: the columns
    whose span the rounds cover (``per_warp``'s warp 0: the destination's registers and
    lanes); the whole tensor when None.  ``dead``: lane bits (zero columns of ``src``) of
    lanes holding nothing the destination wants: a sender has them clear, and step 1 gives
    them no vector.  ``eager``: step 1 gives spare lanes vectors while F has any, not only
    while |F| > |E| -- fewer G vectors, so fewer lane-dependent received registers, for more
    lane-dependent sent ones."""
    a_reg, a_thr, a_wrp = (src.flat_bases(d) for d in ("register", "lane", "warp"))
    b_reg, b_thr, b_wrp = (dst.flat_bases(d) for d in ("register", "lane", "warp"))
    nl = len(a_thr)
    cover = [1 << i for i in range(src.total_out_size_log2)] if cover is None else cover

    def split(own_thr: list[int]):
        inter = f2.intersect(own_thr, b_thr)
        return inter, _extend(inter, own_thr), _extend(inter, b_thr)

    # 1. ownership: spare (broadcast) A lanes take vectors that B keeps in lanes
    own_thr = list(a_thr)
    I, E, F = split(own_thr)
    free = [k for k, v in enumerate(own_thr) if not v and not dead >> k & 1]
    while (len(F) > len(E) or eager and F) and free:
        # the vector without its part in the owned lanes (the same span): what the copies hold
        # in registers, so a copy lane sends it (a unit vector F[0] is that already)
        c = f2.Solver(own_thr + a_wrp + a_reg).solve(F[0])
        own_thr[free.pop(0)] = F[0] ^ f2.apply(own_thr, c & ((1 << nl) - 1)) if c is not None else F[0]
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
    R += _extend(V + I + G + R + a_wrp, cover)
    if f2.rank(V + I + G + R + a_wrp) != f2.rank(cover + a_wrp):
        raise NotShuffleable("round basis does not cover the tensor")
    W = I + G                                   # lane-carrying part of a round
    b_lanes_first = f2.Solver(b_thr + b_wrp + b_reg)
    b_regs_first = f2.Solver(b_reg + b_thr + b_wrp)
    owner_solver, a_reg_solver = f2.Solver(owner), f2.Solver(a_reg)
    lanes_mask, regs_mask = (1 << nl) - 1, (1 << len(b_reg)) - 1
    b_lane_of = f2.Solver((_coords(b_lanes_first, np.array(W, dtype=np.int64)) & lanes_mask).tolist())
    b_live = sum(1 << k for k, v in enumerate(b_thr) if v)
    spare = sum(1 << k for k, v in enumerate(own_thr) if not v) & ~dead   # lanes that hold copies

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
    vec = f2.apply_array(V, np.arange(1 << len(V), dtype=np.int64))
    return dict(lane_xor=lane_xor, lane_lin=lane_lin, send_base=send_base, send_lin=send_lin, recv_base=recv_base,
                recv_lin=recv_lin, a_vec=_coords(a_reg_solver, vec).tolist(), b_vec=b_reg_of(vec).tolist(),
                vec=1 << len(V), words=words, lanes=nl,
                sets={"V": tuple(V), "I": tuple(I), "E": tuple(E), "F": tuple(F), "G": tuple(G), "R": tuple(R)})


def _build(parts: dict) -> ShufflePlan:
    """Step 5's select-tree form of ``_solve``'s maps: per round the payload's registers for
    every value of the lane selects, the source lane ``L(lane) ^ c_i``."""
    lane_xor, lane_lin, send_base, recv_base = (parts[k] for k in ("lane_xor", "lane_lin", "send_base", "recv_base"))
    a_vec, b_vec, n_rounds = parts["a_vec"], parts["b_vec"], len(lane_xor)
    send_sel, send_basis = _lane_select(parts["send_lin"])
    recv_sel, recv_basis = _lane_select(parts["recv_lin"])
    send_regs = [[f2.apply(send_basis, c) ^ a for a in a_vec] for c in range(send_sel.size)]
    recv_regs = [[f2.apply(recv_basis, c) ^ b for b in b_vec] for c in range(recv_sel.size)]
    rounds = [ShuffleRound(send=tuple(tuple(send_base[i] ^ r for r in regs) for regs in send_regs),
                           lane_xor=lane_xor[i],
                           recv=tuple(tuple(recv_base[i] ^ r for r in regs) for regs in recv_regs))
              for i in range(n_rounds)]
    # the identity on the lane bits (and no warp term): an xor shuffle
    identity = all(v == (1 << k if k < parts["lanes"] else 0) for k, v in enumerate(lane_lin))
    return ShufflePlan(vec=parts["vec"], words=parts["words"], send_select=send_sel, recv_select=recv_sel,
                       src_lane=None if identity else tuple(lane_lin), rounds=tuple(rounds), sets=parts["sets"])


def swap_form(plan: ShufflePlan) -> ShufflePlan:
    """The same rounds with lane-dependent registers as swap stages (step 5):
    a side whose round lists c-indexed tuples ``base ^ X(c)`` keeps the c = 0
    tuple, and its stage j xors by ``X(2^j)`` (the tuples at c = 2^j and 0 differ by it)."""
    def side(listed: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
        return tuple(listed[1 << j][0] ^ listed[0][0] for j in range(len(listed).bit_length() - 1))
    first = plan.rounds[0]
    send_swaps = side(first.send) if plan.send_select.size > 1 else ()
    recv_swaps = side(first.recv) if plan.recv_select.size > 1 else ()
    if recv_swaps:
        # the first receive stage swaps received words whole: each tuple it reads, and its partner
        # t ^ x, must be a received word with the registers in that order (a word holding them in
        # another byte order would need a permute as well); else the select trees stay
        received = {r.recv[0] for r in plan.rounds}
        stage = swap_stages([r.recv[0] for r in plan.rounds], recv_swaps)[0]
        if not set(with_partners(stage, recv_swaps[0])) <= received:
            recv_swaps = ()
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
