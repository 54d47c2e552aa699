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
"""
from __future__ import annotations

from . import f2
from .layout import LinearLayout
from .plan import LaneSelect, ShufflePlan, ShuffleRound


class NotShuffleable(ValueError):
    """The pair cannot be converted by warp shuffles."""


def _extend(base: list[int], vectors: list[int]) -> list[int]:
    """The vectors (in order) that each raise the rank of ``base`` + chosen."""
    out: list[int] = []
    for v in vectors:
        if v and f2.rank(base + out + [v]) > len(f2.independent_subset(base + out)):
            out.append(v)
    return out


def _coords(solver: f2.Solver, x: int) -> int:
    c = solver.solve(x)
    if c is None:
        raise NotShuffleable("element outside the layout's span")
    return c


def _fit_affine(values: dict[tuple[int, int], int], n_rounds: int, n_lane_bits: int) -> tuple[list[int], list[int]]:
    """Fit ``values[(round, lane)] = const[round] ^ apply(lin, lane)`` with one
    linear part for all rounds; entries absent from ``values`` are free."""
    keys = sorted(values)
    width = max([v.bit_length() for v in values.values()] + [1])
    # unknowns: lin[k] for each lane bit, then const[i]; one equation per key
    cols = []
    for k in range(n_lane_bits):
        cols.append(sum(1 << e for e, (i, t) in enumerate(keys) if t >> k & 1))
    for r in range(n_rounds):
        cols.append(sum(1 << e for e, (i, t) in enumerate(keys) if i == r))
    lin = [0] * n_lane_bits
    const = [0] * n_rounds
    solver = f2.Solver(cols)
    for bit in range(width):
        rhs = sum(1 << e for e, key in enumerate(keys) if values[key] >> bit & 1)
        x = solver.solve(rhs)
        if x is None:
            raise NotShuffleable("per-lane registers are not affine in the lane id")
        for k in range(n_lane_bits):
            lin[k] |= (x >> k & 1) << bit
        for r in range(n_rounds):
            const[r] |= (x >> (n_lane_bits + r) & 1) << bit
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
    """Plan a conversion by warp shuffles; raises NotShuffleable if data crosses warps."""
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
    b_lane_of = f2.Solver([_coords(b_lanes_first, w) & ((1 << nl) - 1) for w in W])
    b_live = sum(1 << k for k, v in enumerate(b_thr) if v)
    spare = sum(1 << k for k, v in enumerate(own_thr) if not v)   # lanes that hold copies

    def b_reg_of(x: int) -> int:
        """Destination register of x (its lane part is the receiving lane's)."""
        c = _coords(b_regs_first, x)
        if c >> (len(b_reg) + nl):
            raise NotShuffleable("element lands in another warp")
        return c & ((1 << len(b_reg)) - 1)

    def a_reg_of(x: int, lane: int) -> int:
        return _coords(a_reg_solver, x ^ f2.apply(a_thr, lane))

    n_rounds = 1 << len(R)
    recv: dict[tuple[int, int], int] = {}
    srcl: dict[tuple[int, int], int] = {}
    sent: dict[tuple[int, int], int] = {}
    for i in range(n_rounds):
        ri = f2.apply(R, i)
        for u in range(1 << nl):
            want = (u & b_live) ^ (_coords(b_lanes_first, ri) & ((1 << nl) - 1))
            c = b_lane_of.solve(want)
            if c is None:
                raise NotShuffleable("destination lanes not covered by a round")
            x = ri ^ f2.apply(W, c)
            t = (_coords(owner_solver, x) & ((1 << nl) - 1) & ~spare) | (u & spare)
            recv[i, u] = b_reg_of(x)
            srcl[i, u] = t
            reg = a_reg_of(x, t)
            if sent.setdefault((i, t), reg) != reg:
                raise NotShuffleable("a lane would have to send two registers in one round")
    lane_xor, lane_lin = _fit_affine(srcl, n_rounds, nl)
    send_base, send_lin = _fit_affine(sent, n_rounds, nl)
    recv_base, recv_lin = _fit_affine(recv, n_rounds, nl)

    send_sel, send_basis = _lane_select(send_lin)
    recv_sel, recv_basis = _lane_select(recv_lin)
    a_vec = [_coords(a_reg_solver, f2.apply(V, j)) for j in range(1 << len(V))]
    b_vec = [b_reg_of(f2.apply(V, j)) for j in range(1 << len(V))]
    rounds = []
    for i in range(n_rounds):
        send = tuple(tuple(send_base[i] ^ f2.apply(send_basis, c) ^ a for a in a_vec) for c in range(send_sel.size))
        rcv = tuple(tuple(recv_base[i] ^ f2.apply(recv_basis, c) ^ b for b in b_vec) for c in range(recv_sel.size))
        rounds.append(ShuffleRound(send=send, lane_xor=lane_xor[i], recv=rcv))
    identity = all(v == 1 << k for k, v in enumerate(lane_lin))
    return ShufflePlan(vec=1 << len(V), words=words, send_select=send_sel, recv_select=recv_sel,
                       src_lane=None if identity else tuple(lane_lin), rounds=tuple(rounds),
                       sets={"V": tuple(V), "I": tuple(I), "E": tuple(E), "F": tuple(F),
                             "G": tuple(G), "R": tuple(R)})
