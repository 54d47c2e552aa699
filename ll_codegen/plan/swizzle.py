"""Shared-memory conversion planner: optimal swizzle (paper 000 §5.4 and
App. 9.2) and the bank-conflict prediction of Lemma 9.4.

The memory layout is ``S = [S_vec | S_bank | S_idx]``: offset bits (in
elements, low to high) -> tensor bit vectors.

* ``S_vec = V``: a basis of A_reg ∩ B_reg, up to 16 bytes per access -- or,
  per-side widths, ``V`` widened by one side's registers (``_widened``): that
  side accesses the wider tile, the other the prefix of it its registers hold.
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

from dataclasses import dataclass

from ll_codegen.core import f2
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.model import AccessCost, SmemAccess, SmemPlan, SmemRound, XorForm
from ll_codegen.core.target import Target


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


def predict_wavefronts(lane_offsets: list[int], access_bytes: int, target: Target,
                       active_lanes: int | None = None, load: bool = False) -> tuple[int, int]:
    """(wavefronts, bank conflicts) of one warp-wide access whose byte address
    is ``base ^ XOR of lane_offsets[k] over the lane's bits`` (Lemma 9.4);
    lanes ``>= active_lanes`` do not access (ldmatrix .x1/.x2 row providers).

    Phases are fixed runs of consecutive lanes, broadcast lanes included --
    except an NVIDIA 8/16-byte load (``load=True``) whose lane bits 0 and 1
    address at most two places (rank <= 1): its phases span twice the lanes
    (``Target.load_quad_merge``).  Example, 16-byte loads, lane offsets
    ``[0, 16, 32, 64, 128]``: phases of lane bits 0..2, 4 wavefronts; with
    ``[16, 0, 32, 64, 128]`` (lane bit 1 a broadcast) on an H100, phases of
    lane bits 0..3, 2 wavefronts."""
    p = phase_lanes_log2(access_bytes, target)
    granule = max(access_bytes, target.bank_bytes)
    if target.merges_quads(access_bytes, load) and f2.rank([c // granule for c in lane_offsets[:2]]) <= 1:
        p = min(p + 1, target.warp_size.bit_length() - 1)
    words = [c // granule for c in lane_offsets[:p]]
    groups = target.wavefront_bytes // granule       # bank groups in a row
    per_phase = 1 << (f2.rank(words) - f2.rank([w % groups for w in words]))
    phases = max(1, (active_lanes or target.warp_size) >> p)
    return phases * per_phase, phases * (per_phase - 1)


@dataclass(frozen=True)
class _Side:
    """How one side (store from src, or load into dst) touches shared memory.

    ``tile``: tensor vectors at element offsets 1, 2, 4, ... inside one access
    (paper §5.3: the layout must divide on the left by this tile);
    ``phase``: vectors spanning the accesses one wavefront serves (they must
    land in distinct bank groups); ``merged``: for a load that NVIDIA serves in
    double phases (``Target.load_quad_merge``) the vectors of such a phase,
    else empty; ``providers``: for matrix instructions the vectors that lane
    bits 0..4 of a row-providing lane select."""
    instr: str
    tile: tuple[int, ...]
    phase: tuple[int, ...]
    regs_per_access: tuple[int, ...]      # register-index offsets of one access, in packing order
    providers: tuple[int, ...] = ()
    merged: tuple[int, ...] = ()


def _vector_side(reg: list[int], thr: list[int], V: list[int], elem_bytes: int, target: Target,
                 load: bool = False) -> _Side:
    solver = f2.Solver(reg)
    p = phase_lanes_log2(elem_bytes << len(V), target)
    merges = target.merges_quads(elem_bytes << len(V), load) and f2.rank(thr[:2]) <= 1 and p < len(thr)
    return _Side("vector", tuple(V), tuple(v for v in thr[:p] if v),
                 tuple(solver.solve(f2.apply(V, j)) for j in range(1 << len(V))),
                 merged=tuple(v for v in thr[:p + 1] if v) if merges else ())


def matrix_side(reg: list[int], thr: list[int], elem_bytes: int, trans: bool) -> _Side | None:
    """ldmatrix/stmatrix m8n8 b16 (x1/x2/x4), or None when the layout does not
    divide by its tile: register bits 0..k-1 (k = log2(4/w)) and lane bits 0,1
    fill a 16-byte row, lane bits 2..4 pick the row (non-trans); with .trans
    (16-bit only) lane bits 2..4 run along the row and register bit 0 and lane
    bits 0,1 pick it."""
    if len(thr) != 5 or elem_bytes > 4 or (trans and elem_bytes != 2):
        return None
    k = (4 // elem_bytes).bit_length() - 1
    if len(reg) < k:
        return None
    matrices = []                     # register bits k, k+1 pick the matrix; a zero one (broadcast) ends the list
    for v in reg[k:k + 2]:
        if not v:
            break
        matrices.append(v)
    if trans:
        tile, rows = thr[2:5], [reg[0], thr[0], thr[1]]
    else:
        tile, rows = reg[:k] + thr[:2], thr[2:5]
    if 0 in tile or f2.rank(tile + rows + [m for m in matrices if m]) != len(tile) + len([r for r in rows if r]) + \
            len([m for m in matrices if m]):
        return None
    x = 1 << len(matrices)
    per_word = 4 // elem_bytes
    regs = tuple(j | (m << k) for m in range(x) for j in range(per_word))
    return _Side("matrix.trans" if trans else "matrix", tuple(tile), tuple(r for r in rows if r), regs,
                 tuple(rows + matrices + [0] * (2 - len(matrices))))


def _widened(V: list[int], reg: list[int], other_lanes: list[int], Rd: list[int], max_vec: int,
             elem_bytes: int, target: Target) -> list[list[int]]:
    """Access tiles ``V + more`` for one side alone (each side may access wider than the common ``V``),
    ``more`` from that side's registers outside ``V`` and the round bits:

    * its registers in order, as wide as it goes (up to 16 bytes);
    * its registers up to one bank word, then only those that are *lanes* of the
      other side (Triton's getVbasis): the other side's lanes then read or write
      different parts of the same word or 16-byte chunk, which costs no extra
      wavefront, so its narrow accesses stay conflict-free.

    Example: an i8 row -> column transpose with one common register (rows r and
    r + 64): V = [row 64]; the source widens to [row 64, col 1, col 2, col 4]
    (16-byte stores; cols 1, 2, 4 are destination lanes) and the destination
    loads the 2-byte prefix -- 48 wavefronts a warp instead of 80 for
    st1B + ldmatrix."""
    if len(V) >= max_vec.bit_length() - 1:
        return []
    free = [v for v in _extend(V + Rd, reg) if v]
    cap = max_vec.bit_length() - 1 - len(V)
    word = max(0, (target.bank_bytes // elem_bytes).bit_length() - 1 - len(V))
    lanes = set(other_lanes)
    out = [V + free[:cap],
           V + free[:word] + [v for v in free[word:] if v in lanes][:cap - min(word, len(free))]]
    return [t for i, t in enumerate(out) if len(t) > len(V) and t not in out[:i]]


def _swizzle(low: list[int], phases: list[list[int]], fixed: list[int], d: int, row_bits: int) -> list[int]:
    """Memory layout ``low + bank + idx`` (paper App. 9.2) with idx avoiding
    span(low ∪ phase) for every phase when Lemma 9.5 allows it."""
    b = max(0, row_bits - len(low))
    ell = d - len(fixed) - len(low) - b
    if ell < 0:
        b, ell = b + ell, 0
    pa, pb = (phases + [[]])[:2]
    inter = f2.intersect(low + pa, low + pb)
    E, F = _extend(inter, pa), _extend(inter, pb)
    G = [e ^ f for e, f in zip(E, F)]
    C = f2.complete_basis(low + pa + pb + fixed, d)
    idx = _extend(low + fixed, C + G)[:ell]
    if len(idx) < ell:                       # conflicts unavoidable (Lemma 9.5)
        idx += _extend(low + fixed + idx, pa + pb + [1 << i for i in range(d)])[:ell - len(idx)]
    return low + f2.complete_basis(low + idx + fixed, d) + idx


def plan_smem(src: LinearLayout, dst: LinearLayout, elem_bytes: int, target: Target,
              swizzle: str = "optimal", budget: int = 48 * 1024,
              max_vector_bytes: int | None = None, matrix: bool = True, per_warp: bool = False) -> list[SmemPlan]:
    """Candidate plans for ``src -> dst`` through shared memory (always legal
    within a CTA), one per legal pairing of store and load instructions:
    vector ld/st.shared, and with ``swizzle="optimal"`` ldmatrix (sm_75+) /
    stmatrix (sm_90) [.trans] where the target has them and the layouts divide by their tiles
    (paper §5.3).  Each candidate has its own optimal swizzle.

    ``per_warp``: for a warp-local pair in one round, the warp bases become the
    top offset bits (each warp its own contiguous slice; the swizzle works
    within the slice, where every phase's lanes are) and both barriers are
    warp-scope (``SmemPlan.per_warp``); other pairs are planned as without it."""
    d = src.total_out_size_log2
    a_reg, a_thr, a_wrp = (src.flat_bases(k) for k in ("register", "lane", "warp"))
    b_reg, b_thr, b_wrp = (dst.flat_bases(k) for k in ("register", "lane", "warp"))
    max_vec = max(1, min(max_vector_bytes or target.max_vector_bytes, target.max_vector_bytes) // elem_bytes)
    common = [v for v in _extend([], a_reg) if f2.in_span(v, b_reg)]
    # a round bit splits the tile by a register bit both sides share, and no lane or warp may cross
    # rounds: the round bits must be independent of every lane and warp vector of both sides
    moving = [v for v in a_thr + a_wrp + b_thr + b_wrp if v]

    def round_bits(pool: list[int], n: int) -> list[int]:
        """Up to ``n`` vectors of ``pool``, the highest first, independent of ``moving`` and each other."""
        picked: list[int] = []
        for v in reversed(pool):
            if len(picked) < n and f2.rank(moving + picked + [v]) == f2.rank(moving) + len(picked) + 1:
                picked.append(v)
        return picked[::-1]
    n_round_bits = 0
    while n_round_bits < d and (elem_bytes << (d - n_round_bits)) > budget:
        n_round_bits += 1

    def too_small(splittable: int) -> ValueError:
        # rounds split the tile by register bits both layouts share: at most 2^splittable of them
        k = min(splittable, d)
        return ValueError(f"shared-memory budget of {budget} bytes (--smem-budget) is too small: this conversion "
                          f"needs at least {elem_bytes << (d - k)} bytes (its {elem_bytes << d}-byte tile in "
                          f"{1 << k} round(s), the most its registers allow)")

    def prefix_in(vectors: list[int], reg: list[int]) -> list[int]:
        out = []
        for v in vectors:
            if not f2.in_span(v, reg) or 1 << len(out) >= max_vec:
                break
            out.append(v)
        return out

    if swizzle == "none":
        # memory is the row-major tensor; each side accesses as many
        # row-major-contiguous elements as its own registers hold
        row_major = _row_major_bits(src)
        Va, Vb = prefix_in(row_major, a_reg), prefix_in(row_major, b_reg)
        spare = [v for v in common if v not in Va + Vb and v & (v - 1) == 0]
        Rd = round_bits(spare, n_round_bits)
        if len(Rd) < n_round_bits or (elem_bytes << (d - n_round_bits)) > budget:
            raise too_small(len(round_bits(spare, d)))
        S = [v for v in row_major if v not in Rd]
        plan = _build(src, dst, elem_bytes, target, "none", S, Rd, _vector_side(a_reg, a_thr, Va, elem_bytes, target),
                      _vector_side(b_reg, b_thr, Vb, elem_bytes, target, load=True))
        if not aligned(plan, elem_bytes) and max_vec > 1:      # a lane starts inside a vector: narrower
            return plan_smem(src, dst, elem_bytes, target, swizzle, budget, max_vec // 2 * elem_bytes, matrix, per_warp)
        return [plan]
    if swizzle != "optimal":
        raise ValueError(f"unknown swizzle {swizzle!r} (known: optimal, none)")
    Rd = round_bits(common, n_round_bits)              # rounds: the highest common registers allowed
    if len(Rd) < n_round_bits or (elem_bytes << (d - n_round_bits)) > budget:
        raise too_small(len(round_bits(common, d)))
    top = [v for v in a_wrp if v] if per_warp and not Rd and warp_local(src, dst) else []
    V = [v for v in common if v not in Rd][:max_vec.bit_length() - 1]
    pairs = [(_vector_side(a_reg, a_thr, V, elem_bytes, target),
              _vector_side(b_reg, b_thr, V, elem_bytes, target, load=True))]
    # per-side widths: one side's access widened beyond V by its own registers, the other
    # side accessing the V prefix of the same words (see _widened)
    for tile in _widened(V, a_reg, b_thr, Rd, max_vec, elem_bytes, target):
        pairs.append((_vector_side(a_reg, a_thr, tile, elem_bytes, target),
                      _vector_side(b_reg, b_thr, prefix_in(tile, b_reg), elem_bytes, target, load=True)))
    for tile in _widened(V, b_reg, a_thr, Rd, max_vec, elem_bytes, target):
        pairs.append((_vector_side(a_reg, a_thr, prefix_in(tile, a_reg), elem_bytes, target),
                      _vector_side(b_reg, b_thr, tile, elem_bytes, target, load=True)))
    if matrix and target.has_ldmatrix and max_vec * elem_bytes >= 16:
        for trans in (False, True):
            st = matrix_side(a_reg, a_thr, elem_bytes, trans) if target.has_stmatrix else None
            ld = matrix_side(b_reg, b_thr, elem_bytes, trans)
            if st:
                vb = prefix_in(list(st.tile), b_reg)
                pairs.append((st, _vector_side(b_reg, b_thr, vb, elem_bytes, target, load=True)))
            if ld:
                va = prefix_in(list(ld.tile), a_reg)
                pairs.append((_vector_side(a_reg, a_thr, va, elem_bytes, target), ld))
        for ts in (False, True):
            for tl in (False, True):
                st, ld = matrix_side(a_reg, a_thr, elem_bytes, ts), matrix_side(b_reg, b_thr, elem_bytes, tl)
                if st and ld and st.tile == ld.tile and target.has_stmatrix:
                    pairs.append((st, ld))
    plans = []
    for st, ld in dict.fromkeys(pairs):           # (widened tiles may repeat a pairing)
        low = list(st.tile if len(st.tile) >= len(ld.tile) else ld.tile)
        used = set(low) | set(st.providers) | set(ld.providers)
        if any(v in used for v in Rd) or f2.rank(low + Rd) < len(low) + len(Rd):
            continue
        row_bits = (target.wavefront_bytes // elem_bytes).bit_length() - 1
        # a load served in double phases may also avoid conflicts across its merged phase; keep
        # that swizzle only where it is strictly cheaper (Lemma 9.5 may not allow both phases)
        built = [_build(src, dst, elem_bytes, target, "optimal",
                        _swizzle(low, [list(st.phase), list(ph)], Rd + top, d, row_bits) + top, Rd, st, ld,
                        per_warp=bool(top))
                 for ph in [ld.phase] + ([ld.merged] if ld.merged else [])]
        plans.append(min(built, key=lambda p: (p.store.total_wavefronts + p.load.total_wavefronts,
                                               p.store.bank_conflicts + p.load.bank_conflicts)))
    fitting = [p for p in plans if aligned(p, elem_bytes)]
    if plans and not fitting and max_vec > 1:   # every tile misaligned by some lane: narrower accesses
        return plan_smem(src, dst, elem_bytes, target, swizzle, budget, max_vec // 2 * elem_bytes, matrix, per_warp)
    plans = fitting
    # one plan per instructions and costs (different tiles can give the same); the first stays
    unique: dict[tuple, SmemPlan] = {}
    for p in plans:
        unique.setdefault((p.store_instr, p.load_instr, p.store_vec, p.load_vec, p.store, p.load), p)
    return list(unique.values())


def aligned(plan: SmemPlan, elem_bytes: int) -> bool:
    """Whether every access of ``plan`` starts at a multiple of its width (``vec * elem_bytes``
    bytes for a vector access; for a matrix one of ``x`` matrices the 16-byte rows lanes
    0 .. 8x - 1 give), on every lane and warp: the address is ``base(lane, warp) ^ offset``, so
    each base column and each offset must be such a multiple.  A side's lane column with a
    component along that side's own access tile -- a linear layout whose lane column is a
    register column xor another -- is not: that lane would start inside a vector."""
    for instr, vec, base, accesses in ((plan.store_instr, plan.store_vec, plan.store_base,
                                        [a for r in plan.rounds for a in r.stores]),
                                       (plan.load_instr, plan.load_vec, plan.load_base,
                                        [a for r in plan.rounds for a in r.loads])):
        width, lanes = vec * elem_bytes, base.lane
        if instr != "vector":                       # x = width / 4 matrices: 8x rows from lanes 0 .. 8x - 1
            width, lanes = 16, base.lane[:(2 * vec * elem_bytes).bit_length() - 1]
        if any(o % width for o in (*lanes, *base.warp, *(a.offset for a in accesses))):
            return False
    return True


def warp_local(src: LinearLayout, dst: LinearLayout) -> bool:
    """Whether every element lives in exactly one warp, the same one in ``src`` and ``dst``.

    With V = span(register and lane bases of src), the in-warp subspace, that is:
    dst's register and lane bases span the same V; the warp bases are independent
    modulo V (no warp holds a copy of another's data); and the k-th warp bases of
    src and dst agree modulo V.  Then an element's warp is its coordinate along the
    warp bases in both layouts, so in a one-round shared-memory plan (each element
    stored once, by its own warp) warp w loads only bytes warp w stored, and a
    warp-scope barrier between the stores and the loads is enough (Triton's
    conversions check the same before they use a warp barrier).

    Example: blocked 64x64 with 4 warps along dim 0, regs 1x8 -> 1x4 (both with
    warps [[16, 0], [32, 0]]) is warp-local; a row -> column transpose is not."""
    V = [v for k in ("register", "lane") for v in src.flat_bases(k) if v]
    Vd = [v for k in ("register", "lane") for v in dst.flat_bases(k) if v]
    ws, wd = src.flat_bases("warp"), dst.flat_bases("warp")
    r = f2.rank(V)
    return (len(ws) == len(wd) and f2.rank(Vd) == r == f2.rank(V + Vd)
            and f2.rank(V + ws) == r + len(ws)
            and all(f2.in_span(a ^ b, V) for a, b in zip(ws, wd)))


def _build(src: LinearLayout, dst: LinearLayout, elem_bytes: int, target: Target, swizzle: str,
           S: list[int], Rd: list[int], st: _Side, ld: _Side, per_warp: bool = False) -> SmemPlan:
    """Offsets, accesses and predicted costs for memory layout S (+ round bits Rd)."""
    d = src.total_out_size_log2
    assert f2.rank(S + Rd) == d == len(S) + len(Rd)
    solver = f2.Solver(S + Rd)
    n_off = len(S)

    def offset(x: int) -> tuple[int, int]:
        """(byte offset, round) of tensor element x."""
        c = solver.solve(x)
        return (c & ((1 << n_off) - 1)) * elem_bytes, c >> n_off

    def side(L: LinearLayout, how: _Side, load: bool) -> tuple[XorForm, list[list[SmemAccess]], AccessCost]:
        reg, thr, wrp = (L.flat_bases(k) for k in ("register", "lane", "warp"))
        lane_vecs = list(how.providers) if how.instr != "vector" else thr
        base = XorForm(tuple(offset(v)[0] for v in lane_vecs), tuple(offset(v)[0] for v in wrp))
        # an access holds the registers r ^ j, j in span(regs_per_access) (a j may combine several
        # register bits); r runs over the coset leaders, the indices without a pivot bit of that span
        leading = sum(1 << p for p in f2.echelon_basis(how.regs_per_access)[1])
        free = sum(1 << i for i in range(len(reg)) if i not in set(f2.independent_subset(reg)))
        per_round: list[list[SmemAccess]] = [[] for _ in range(1 << len(Rd))]
        for r in range(1 << len(reg)):
            if r & leading or r & free:
                continue                      # not an access's first register, or a broadcast copy
            off, rnd = offset(f2.apply(reg, r))
            per_round[rnd].append(SmemAccess(tuple(r ^ j for j in how.regs_per_access), off))
        n = sum(len(x) for x in per_round)
        if how.instr == "vector":
            w, c = predict_wavefronts(list(base.lane), elem_bytes * len(how.regs_per_access), target, load=load)
        else:
            x = len(how.regs_per_access) * elem_bytes // 4
            w, c = predict_wavefronts(list(base.lane), 16, target, active_lanes=8 * x)
        return base, per_round, AccessCost(wavefronts=w, bank_conflicts=c, instructions=n, total_wavefronts=w * n)

    store_base, stores, store_cost = side(src, st, False)
    load_base, loads, load_cost = side(dst, ld, True)
    as_bases = LinearLayout.from_flat({"offset": S, "round": Rd}, src.out_dim_sizes).bases
    st_vec, ld_vec = len(st.regs_per_access), len(ld.regs_per_access)
    return SmemPlan(
        layout=as_bases, swizzle=swizzle, store_vec=st_vec, load_vec=ld_vec,
        vector_bytes=elem_bytes * max(1 << len(st.tile), 1 << len(ld.tile)),
        bytes=elem_bytes << n_off,
        store_base=store_base, load_base=load_base,
        store_warp_skip=sum(1 << k for k, v in enumerate(src.flat_bases("warp")) if v == 0),
        rounds=tuple(SmemRound(tuple(s), tuple(l)) for s, l in zip(stores, loads)),
        store=store_cost, load=load_cost, store_instr=st.instr, load_instr=ld.instr,
        barrier="warp" if not Rd and warp_local(src, dst) else "block", per_warp=per_warp)
