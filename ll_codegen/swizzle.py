"""Shared-memory conversion planner: optimal swizzle (paper 000 §5.4 and
App. 9.2) and the bank-conflict prediction of Lemma 9.4.

The memory layout is ``S = [S_vec | S_bank | S_idx]``: offset bits (in
elements, low to high) -> tensor bit vectors.

* ``S_vec = V``: a basis of A_reg ∩ B_reg, up to 16 bytes per access.
* ``b = log2(128 / (2^v w))`` bank bits fill one 128-byte row.
* ``S_idx`` (ℓ = d - v - b vectors) must avoid the lanes that one wavefront
  serves: with ``A_bank``/``B_bank`` the lane vectors of one phase
  (``128 / max(2^v w, 4)`` lanes), P = span(V ∪ A_bank) ∪ span(V ∪ B_bank),
  we take C (a complement of span(P)) and G = {e_i ⊕ f_i} with
  E = A_bank ∖ B_bank, F = B_bank ∖ A_bank.  If |C| + |G| < ℓ, conflicts are
  unavoidable (Lemma 9.5: conflict-free iff ℓ ≤ d - max(dim U, dim V)) and A_bank
  vectors fill the rest.
* ``S_bank`` completes the basis.

Round bits: when one tile exceeds the shared-memory budget, vectors common to
A_reg and B_reg (outside V) split the tile into rounds that reuse the buffer.

Wavefronts of one warp-wide access (the target's bank model): the lanes of a
phase touch the affine image of a linear map lane -> word; each bank serves
one word per wavefront, so a phase needs |image| / |image mod banks|
wavefronts, i.e. ``2^(rank(words) - rank(bank groups))`` -- Lemma 9.4 computed
exactly, including the sub-word case the lemma only bounds.
"""
from __future__ import annotations

from . import f2
from .layout import LinearLayout
from .plan import AccessCost, SmemAccess, SmemPlan, SmemRound, XorForm
from .target import Target


def _extend(base: list[int], vectors: list[int]) -> list[int]:
    out: list[int] = []
    r = f2.rank(base)
    for v in vectors:
        if v and f2.rank(base + out + [v]) > r + len(out):
            out.append(v)
    return out


def _row_major_bits(layout: LinearLayout) -> list[int]:
    """Unit tensor vectors in row-major order (last dim fastest)."""
    shifts, shift = {}, 0
    for n, s in layout.out_dim_sizes.items():
        shifts[n] = (shift, s.bit_length() - 1)
        shift += s.bit_length() - 1
    return [1 << (lo + i) for n in reversed(layout.out_dims) for lo, k in [shifts[n]] for i in range(k)]


def phase_lanes_log2(access_bytes: int, target: Target) -> int:
    """log2 of the lanes one wavefront phase serves."""
    lanes = target.wavefront_bytes // max(access_bytes, target.bank_bytes)
    return min(lanes, target.warp_size).bit_length() - 1


def predict_wavefronts(lane_offsets: list[int], access_bytes: int, target: Target) -> tuple[int, int]:
    """(wavefronts, bank conflicts) of one warp-wide access whose byte address
    is ``base ^ XOR of lane_offsets[k] over the lane's bits`` (Lemma 9.4)."""
    p = phase_lanes_log2(access_bytes, target)
    granule = max(access_bytes, target.bank_bytes)
    words = [c // granule for c in lane_offsets[:p]]
    groups = target.wavefront_bytes // granule       # bank groups in a row
    per_phase = 1 << (f2.rank(words) - f2.rank([w % groups for w in words]))
    phases = target.warp_size >> p
    return phases * per_phase, phases * (per_phase - 1)


def plan_smem(src: LinearLayout, dst: LinearLayout, elem_bytes: int, target: Target,
              swizzle: str = "optimal", budget: int = 48 * 1024,
              max_vector_bytes: int | None = None) -> SmemPlan:
    """Plan ``src -> dst`` through shared memory (always legal within a CTA)."""
    d = src.total_out_size_log2
    a_reg, a_thr, a_wrp = (src.flat_bases(k) for k in ("register", "lane", "warp"))
    b_reg, b_thr, b_wrp = (dst.flat_bases(k) for k in ("register", "lane", "warp"))
    max_vec = max(1, min(max_vector_bytes or target.max_vector_bytes, target.max_vector_bytes) // elem_bytes)
    common = [v for v in _extend([], a_reg) if f2.in_span(v, b_reg)]

    n_round_bits = 0
    while (elem_bytes << (d - n_round_bits)) > budget:
        n_round_bits += 1
    if swizzle == "optimal":
        # rounds take the highest common registers (outer loop), V the lowest
        if n_round_bits > len(common):
            raise ValueError(f"tile of {elem_bytes << d} bytes does not fit the shared-memory budget of "
                             f"{budget} bytes in rounds (only {len(common)} splittable register bits)")
        Rd = common[len(common) - n_round_bits:]
        V = common[:min(max_vec.bit_length() - 1, len(common) - n_round_bits)]
    elif swizzle == "none":
        V = []
        for v in _row_major_bits(src):
            if v not in common or 1 << len(V) >= max_vec:
                break
            V.append(v)
        spare = [v for v in common if v not in V and v & (v - 1) == 0]
        if n_round_bits > len(spare):
            raise ValueError(f"tile of {elem_bytes << d} bytes does not fit the shared-memory budget of "
                             f"{budget} bytes in rounds (only {len(spare)} splittable register bits)")
        Rd = spare[len(spare) - n_round_bits:]
    else:
        raise ValueError(f"unknown swizzle {swizzle!r} (known: optimal, none)")
    vec = 1 << len(V)
    vbytes = vec * elem_bytes

    p_a = phase_lanes_log2(vbytes, target)
    if swizzle == "optimal":
        b = max(0, (target.wavefront_bytes // vbytes).bit_length() - 1)
        ell = d - len(Rd) - len(V) - b
        if ell < 0:
            b, ell = b + ell, 0
        a_bank = [v for v in a_thr[:p_a] if v]
        b_bank = [v for v in b_thr[:p_a] if v]
        inter = f2.intersect(V + a_bank, V + b_bank)
        E = _extend(inter, a_bank)
        F = _extend(inter, b_bank)
        G = [e ^ f for e, f in zip(E, F)]
        C = f2.complete_basis(V + a_bank + b_bank + Rd, d)
        idx = _extend(V + Rd, C + G)[:ell]
        if len(idx) < ell:                       # conflicts unavoidable (Lemma 9.5)
            idx += _extend(V + Rd + idx, a_bank + b_bank + [1 << i for i in range(d)])[:ell - len(idx)]
        bank = f2.complete_basis(V + idx + Rd, d)
        S = V + bank + idx
    else:
        S = V + [v for v in _row_major_bits(src) if v not in V and v not in Rd]
    assert f2.rank(S + Rd) == d == len(S) + len(Rd)

    solver = f2.Solver(S + Rd)
    n_off = len(S)

    def offset(x: int) -> tuple[int, int]:
        """(byte offset, round) of tensor element x."""
        c = solver.solve(x)
        return (c & ((1 << n_off) - 1)) * elem_bytes, c >> n_off

    def form(thr: list[int], wrp: list[int]) -> XorForm:
        return XorForm(tuple(offset(v)[0] for v in thr), tuple(offset(v)[0] for v in wrp))

    def accesses(reg: list[int]) -> list[list[SmemAccess]]:
        per_round: list[list[SmemAccess]] = [[] for _ in range(1 << len(Rd))]
        regs = f2.Solver(reg)
        free = set(range(len(reg))) - set(f2.independent_subset(reg))
        free_mask = sum(1 << i for i in free)
        elems = [regs.solve(f2.apply(V, j)) for j in range(vec)]
        for r in range(1 << len(reg)):
            if r & free_mask:
                continue                      # a broadcast copy of a lower register
            off, rnd = offset(f2.apply(reg, r))
            if (off // elem_bytes) % vec:
                continue                      # not the first element of its vector
            per_round[rnd].append(SmemAccess(tuple(r ^ e for e in elems), off))
        return per_round

    stores, loads = accesses(a_reg), accesses(b_reg)
    rounds = tuple(SmemRound(tuple(s), tuple(l)) for s, l in zip(stores, loads))
    store_base, load_base = form(a_thr, a_wrp), form(b_thr, b_wrp)

    def cost(base: XorForm, n: int) -> AccessCost:
        w, c = predict_wavefronts(list(base.lane), vbytes, target)
        return AccessCost(wavefronts=w, bank_conflicts=c, instructions=n, total_wavefronts=w * n)

    as_bases = LinearLayout.from_flat({"offset": S, "round": Rd}, src.out_dim_sizes).bases
    return SmemPlan(
        layout=as_bases,
        swizzle=swizzle, vec=vec, vector_bytes=vbytes, bytes=elem_bytes << n_off,
        store_base=store_base, load_base=load_base,
        store_warp_skip=sum(1 << k for k, v in enumerate(a_wrp) if v == 0),
        rounds=rounds,
        store=cost(store_base, sum(len(r.stores) for r in rounds)),
        load=cost(load_base, sum(len(r.loads) for r in rounds)))
