"""Gather along one axis (paper 000 §5.5): plans for ``out = gather(src, index, axis)``.

Semantics (Triton's ``tl.gather``): ``src`` and ``index`` have the same rank
and equal sizes on every dim but ``axis``; ``out`` has the index's shape and
layout and ``out[i] = src[i with i[axis] replaced by index[i] mod n]``, ``n``
the source's size along ``axis`` (a power of two, so the modulo is a mask:
``index & (n - 1)``; a negative index wraps as in Python, -1 -> n - 1).
Compiled with ``-DLLGEN_GATHER_CHECK`` the generated code traps on an index
outside ``[0, n)`` instead.

The math.  Work in the source's tensor space (bit vectors, dim0 in the low
bits).  An output register ``r`` of lane ``l`` in warp ``w`` holds index
element ``c = I(r, l, w)`` (``I`` the index layout) and needs source element
``c' = N(c) ^ A(v)``: ``N`` keeps the non-axis coordinates of ``c`` (axis
coordinate 0, re-packed into the source's shape), ``A(v)`` puts the index
value ``v`` on the axis.  ``N``, ``A`` and ``I`` are linear, so ``c'`` is an
XOR of one term per set bit of ``r``, ``l``, ``w`` and ``v``.

* ``shuffle`` (warp-local).  Warp ``w`` of the source holds
  ``span(S_reg, S_lane) ^ S(warp=w)``.  The gather stays in the warp iff
  ``c' ^ S(warp=w)`` lies in ``span(S_reg, S_lane)`` for every thread, register
  and value, i.e. (by linearity) iff every axis basis ``A(e_j)``, every
  ``N(I(reg/lane basis))`` and every ``N(I(warp basis k)) ^ S(warp basis k)``
  does -- Triton's ``isWarpLocal`` (axis held by registers and lanes only, the
  index's warp bases equal to the source's off the axis) is the special case.
  Solving ``c' ^ S(warp=w) = S(r', l', 0)`` with a fixed pivot choice is
  linear too, so the source register and lane are XOR forms::

      r' = R_r ^ Rt(l, w) ^ Rv(v)        l' = L_r ^ Lt(l, w) ^ Lv(v)

  The shuffle reads register ``r'`` of lane ``l'``, but the sender picks the
  register, so the receiver cannot: every lane sends each *candidate*
  register ``R_r ^ span(Rt, Rv)`` (only the registers whose non-axis
  coordinates can match) and the receiver selects ``r'``.  With the span in
  reduced echelon form (pivot bits ``p_j``) the candidate index is
  ``c_j = bit p_j of (r' ^ R_r)``: a select tree, no search.  8/16-bit
  elements travel 4/w candidates per 32-bit word.
* ``smem``.  Store ``src`` once into a tile whose element offset is the source
  hardware index re-ordered ``[first vector registers | lanes | other
  registers | warps]`` (independent columns only; broadcast copies do not
  store): every store is a 16-byte (or narrower) vector, lanes consecutive,
  conflict-free.  Barrier; then one load per output element at
  ``M(c') = M(N(c)) ^ M(A(v))`` -- again an XOR form plus a per-bit term of v.

Worked example (``testing.corpus.GATHER_NAMED[0]``): 64x64 i32, blocked size_per_thread [1, 4],
threads [8, 4], warps [4, 1], axis 1.  Axis bits: registers {0, 1}, lanes
{2, 3}, registers {4, 5} (repetitions): warp-local.  ``Rv`` spans 4 register
bits, so 16 candidates per output element: 32 x 16 = 512 shuffles per
thread, while the smem path stores 8 x 16 B and loads 32 x 4 B per thread.
Cost (units of ``planner``): shuffle ~ 660, smem ~ 200 -> ``auto`` = smem.
With ``[1, 1]``/``[1, 32]``/``[4, 1]`` on 4x32 (the axis all in lanes) there is
one candidate: one shuffle per element and ``auto`` = shuffle.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from ll_codegen.core import f2
from ll_codegen.core.dtypes import dtype_bytes, index_bytes
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.model import AccessCost, Candidate, SmemAccess, XorForm
from ll_codegen.plan.planner import ALU, BARRIER, SHUFFLE, WAVEFRONT, check_distributed, check_threads, normalise
from ll_codegen.core.target import Target, get_target

GATHER_STRATEGIES = ("shuffle", "smem")
#: random index sets the smem cost averages its load wavefronts over (seeded: plans are deterministic)
LOAD_SAMPLES = 16


class NotWarpLocal(ValueError):
    """The gather needs data from another warp (no ``shuffle`` plan)."""


# ------------------------------------------------------------------ plans
@dataclass(frozen=True)
class GatherShuffleOut:
    """Output register r: source register ``reg ^ ...`` and lane ``lane ^ ...``
    (the constant parts), and the candidate source registers shuffled, in
    select order (``cands[0] == reg``)."""
    reg: int
    lane: int
    cands: tuple[int, ...]


@dataclass(frozen=True)
class GatherShufflePlan:
    """Warp-local gather: for output register r and masked index value v,
    source register ``R = outs[r].reg ^ reg(lane, warp) ^ apply(v_reg, v)`` of
    lane ``L = outs[r].lane ^ lane(lane, warp) ^ apply(v_lane, v)``.  Word k
    of a round packs candidates ``cands[k*per .. k*per+per-1]`` (lowest in the
    low bits; ``words`` 32-bit words per element for 8-byte data, lo first);
    each word is one ``shfl`` from lane L.  The candidate index is
    ``c = sum_j bit select_bits[j] of (R ^ cands[0]) << j``."""
    per: int
    words: int
    reg: XorForm
    lane: XorForm
    v_reg: tuple[int, ...]
    v_lane: tuple[int, ...]
    select_bits: tuple[int, ...]
    outs: tuple[GatherShuffleOut, ...]

    @property
    def shuffles(self) -> int:
        """Shuffles per thread (all output registers)."""
        return sum(-(-len(o.cands) // self.per) * self.words for o in self.outs)


@dataclass(frozen=True)
class GatherSmemPlan:
    """Store ``src`` once, barrier, one load per output element.  Stores:
    byte address ``store_base(lane, warp) ^ s.offset`` (``SmemAccess``, regs
    packed lowest address first); lanes with ``lane & lane_skip`` and warps
    with ``warp & warp_skip`` hold copies and do not store.  Output register
    r loads the element at byte ``load_base(lane, warp) ^ load_offsets[r] ^
    apply(v_offset, v)``.  ``layout``: the tile's bases (offset -> tensor).
    ``load_wavefronts``: mean wavefronts of one load instruction over
    ``LOAD_SAMPLES`` uniformly random index sets (the loads depend on data)."""
    bytes: int
    store_vec: int
    vector_bytes: int
    layout: dict[str, Any]
    store_base: XorForm
    stores: tuple[SmemAccess, ...]
    lane_skip: int
    warp_skip: int
    load_base: XorForm
    load_offsets: tuple[int, ...]
    v_offset: tuple[int, ...]
    store: AccessCost
    load_wavefronts: float


@dataclass(frozen=True)
class GatherPlan:
    """A complete, deterministic gather plan; exactly one of ``shuffle`` /
    ``smem`` is set (``strategy``).  ``axis_size``: the source's size along
    ``axis`` (indices are taken modulo it)."""
    operation: ClassVar[str] = "gather"
    strategy: str
    dtype: str
    index_dtype: str
    elem_bytes: int
    index_bytes: int
    target: str
    arch: str
    warp_size: int
    num_warps: int
    axis: int
    axis_size: int
    n_src: int
    n_idx: int
    src_bases: dict[str, Any]
    idx_bases: dict[str, Any]
    src_shape: tuple[int, ...]
    idx_shape: tuple[int, ...]
    shuffle: GatherShufflePlan | None = None
    smem: GatherSmemPlan | None = None
    candidates: tuple[Candidate, ...] = ()
    kind: str = field(default="gather")


    @property
    def threads(self) -> int:
        return self.warp_size * self.num_warps

    @property
    def smem_bytes(self) -> int:
        return self.smem.bytes if self.smem is not None else 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


# ------------------------------------------------------------------ tensor bits
def _bits(n: int) -> int:
    return n.bit_length() - 1


def _split(v: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for s in shape:
        out.append(v & (s - 1))
        v >>= _bits(s)
    return out


def _join(coords: list[int], shape: tuple[int, ...]) -> int:
    v, shift = 0, 0
    for c, s in zip(coords, shape):
        v |= c << shift
        shift += _bits(s)
    return v


def _check(src: LinearLayout, idx: LinearLayout, axis: int, target: Target) -> None:
    for name, L in (("source", src), ("index", idx)):
        check_distributed(name, L)
        check_threads(name, L, target, "gathers")
    s, i = list(src.out_dim_sizes.values()), list(idx.out_dim_sizes.values())
    if len(s) != len(i):
        raise ValueError(f"ranks differ: source {s} vs index {i}")
    if not 0 <= axis < len(s):
        raise ValueError(f"axis {axis} is out of range for rank {len(s)} (0..{len(s) - 1})")
    for d, (a, b) in enumerate(zip(s, i)):
        if d != axis and a != b:
            raise ValueError(f"shapes differ off the axis: source {s} vs index {i} (dim {d}; only dim {axis} may differ)")
    if src.in_dim_size("warp") != idx.in_dim_size("warp"):
        raise ValueError(f"warp counts differ: source {src.in_dim_size('warp')} vs index {idx.in_dim_size('warp')}")
    for name, L in (("source", src), ("index", idx)):
        if not L.is_surjective():
            raise ValueError(f"the {name} layout does not cover its tensor (some elements are held by no thread)")


class _Space:
    """The linear maps of the module docstring: N (index vector -> source
    vector, axis cleared) and A (axis bit j -> source vector)."""

    def __init__(self, src: LinearLayout, idx: LinearLayout, axis: int):
        self.s_shape = tuple(src.out_dim_sizes.values())
        self.i_shape = tuple(idx.out_dim_sizes.values())
        self.axis = axis
        self.axis_bits = _bits(self.s_shape[axis])

    def nonaxis(self, u: int) -> int:
        c = _split(u, self.i_shape)
        c[self.axis] = 0
        return _join(c, self.s_shape)

    def axis_vec(self, j: int) -> int:
        c = [0] * len(self.s_shape)
        c[self.axis] = 1 << j
        return _join(c, self.s_shape)


# ------------------------------------------------------------------ shuffle
def plan_gather_shuffle(src: LinearLayout, idx: LinearLayout, axis: int, elem_bytes: int) -> GatherShufflePlan:
    """The warp-local lowering; raises NotWarpLocal when data crosses warps."""
    sp = _Space(src, idx, axis)
    s_reg, s_lane, s_warp = (src.flat_bases(d) for d in ("register", "lane", "warp"))
    nr = len(s_reg)
    solver = f2.Solver(s_reg + s_lane)

    def solve(t: int, what: str) -> tuple[int, int]:
        x = solver.solve(t)
        if x is None:
            raise NotWarpLocal(f"not warp-local: {what} is not held by the registers and lanes of one warp")
        return x & ((1 << nr) - 1), x >> nr

    v = [solve(sp.axis_vec(j), f"axis bit {j}") for j in range(sp.axis_bits)]
    lane = [solve(sp.nonaxis(u), "an index lane basis") for u in idx.flat_bases("lane")]
    warp = [solve(sp.nonaxis(u) ^ s_warp[k], f"index warp basis {k} (vs the source's)")
            for k, u in enumerate(idx.flat_bases("warp"))]
    reg = [solve(sp.nonaxis(u), "an index register basis") for u in idx.flat_bases("register")]
    Q, pivots = f2.echelon_basis([a for a, _ in lane + warp + v])
    outs = []
    for r in range(1 << len(reg)):
        rr = f2.apply([a for a, _ in reg], r)
        outs.append(GatherShuffleOut(reg=rr, lane=f2.apply([b for _, b in reg], r),
                                     cands=tuple(rr ^ x for x in f2.span(Q))))
    per = 4 // elem_bytes if elem_bytes < 4 else 1
    return GatherShufflePlan(per=per, words=2 if elem_bytes == 8 else 1,
                             reg=XorForm(tuple(a for a, _ in lane), tuple(a for a, _ in warp)),
                             lane=XorForm(tuple(b for _, b in lane), tuple(b for _, b in warp)),
                             v_reg=tuple(a for a, _ in v), v_lane=tuple(b for _, b in v),
                             select_bits=tuple(pivots), outs=tuple(outs))


# ------------------------------------------------------------------ smem
def _wavefronts(addr: np.ndarray, nbytes: int, target: Target) -> np.ndarray:
    """Wavefronts of warp-wide accesses (``addr``: byte address per lane, one
    access per row): phases of ``wavefront_bytes // max(nbytes, bank_bytes)``
    lanes, per phase the most distinct words in one bank (the project's bank
    model, ``verify/emulate/``); a negative address is an inactive lane."""
    addr = np.atleast_2d(addr)
    n, lanes = addr.shape
    phase = max(1, min(lanes, target.wavefront_bytes // max(nbytes, target.bank_bytes)))
    words_per = max(1, nbytes // target.bank_bytes)
    words = (addr // target.bank_bytes)[:, :, None] + np.arange(words_per)          # (n, lanes, k)
    words = np.where(addr[:, :, None] < 0, -1, words)
    words = np.sort(words.reshape(n, lanes // phase, -1), axis=2)                   # per phase
    new = np.ones(words.shape, dtype=bool)
    new[:, :, 1:] = words[:, :, 1:] != words[:, :, :-1]                              # distinct words
    new &= words >= 0
    counts = np.zeros((n, lanes // phase, target.banks), dtype=np.int64)
    rows, ph, k = np.nonzero(new)
    np.add.at(counts, (rows, ph, words[rows, ph, k] % target.banks), 1)
    return counts.max(axis=2).sum(axis=1)


def plan_gather_smem(src: LinearLayout, idx: LinearLayout, axis: int, elem_bytes: int,
                     target: Target) -> GatherSmemPlan:
    """Through shared memory (module docstring)."""
    sp = _Space(src, idx, axis)
    s_reg, s_lane, s_warp = (src.flat_bases(d) for d in ("register", "lane", "warp"))
    nr, nl = len(s_reg), len(s_lane)
    cols = s_reg + s_lane + s_warp
    ind = f2.independent_subset(cols)
    reg_ind = [i for i in ind if i < nr]
    lane_ind = [i for i in ind if nr <= i < nr + nl]
    warp_ind = [i for i in ind if i >= nr + nl]
    kv = min(len(reg_ind), _bits(max(1, 16 // elem_bytes)))
    order = reg_ind[:kv] + lane_ind + reg_ind[kv:] + warp_ind          # offset bit q <- column order[q]
    M = f2.Solver([cols[i] for i in order])                              # tensor vector -> element offset

    def off(t: int) -> int:
        return M.solve(t) * elem_bytes

    store_base = XorForm(tuple(off(v) if k + nr in lane_ind else 0 for k, v in enumerate(s_lane)),
                         tuple(off(v) if k + nr + nl in warp_ind else 0 for k, v in enumerate(s_warp)))
    vec_regs = [1 << i for i in reg_ind[:kv]]
    stores = []
    for hi in f2.span([1 << i for i in reg_ind[kv:]]):
        regs = tuple(hi ^ f2.apply(vec_regs, q) for q in range(1 << kv))
        stores.append(SmemAccess(regs=regs, offset=off(f2.apply(s_reg, hi))))
    lane_skip = sum(1 << k for k in range(nl) if k + nr not in lane_ind)
    warp_skip = sum(1 << k for k in range(len(s_warp)) if k + nr + nl not in warp_ind)
    i_reg, i_lane, i_warp = (idx.flat_bases(d) for d in ("register", "lane", "warp"))
    load_base = XorForm(tuple(off(sp.nonaxis(u)) for u in i_lane), tuple(off(sp.nonaxis(u)) for u in i_warp))
    load_offsets = tuple(off(sp.nonaxis(f2.apply(i_reg, r))) for r in range(1 << len(i_reg)))
    v_offset = tuple(off(sp.axis_vec(j)) for j in range(sp.axis_bits))
    nbytes = elem_bytes << kv
    lanes = np.arange(target.warp_size)
    st_addr = np.array([-1 if l & lane_skip else store_base(int(l)) for l in lanes])
    store_waves = int(_wavefronts(st_addr, nbytes, target)[0])
    phase = max(1, min(target.warp_size, target.wavefront_bytes // max(nbytes, target.bank_bytes)))
    active = (st_addr >= 0).reshape(-1, phase).sum(axis=1)
    store_min = int(sum(-(-int(a) * nbytes // target.wavefront_bytes) for a in active if a))
    rng = np.random.default_rng(0)
    vals = rng.integers(0, 1 << sp.axis_bits, size=(LOAD_SAMPLES, len(load_offsets), target.warp_size))
    vo = np.zeros_like(vals)
    for j, c in enumerate(v_offset):
        vo ^= ((vals >> j) & 1) * c
    base = np.array([load_base(int(l)) for l in lanes])
    waves = _wavefronts((base ^ np.array(load_offsets)[:, None] ^ vo).reshape(-1, target.warp_size),
                        elem_bytes, target)
    size = 1 << len(order)
    layout = {"offset": [[int(x) for x in _split(cols[i], sp.s_shape)] for i in order]}
    return GatherSmemPlan(bytes=size * elem_bytes, store_vec=1 << kv, vector_bytes=nbytes, layout=layout,
                          store_base=store_base, stores=tuple(stores), lane_skip=lane_skip, warp_skip=warp_skip,
                          load_base=load_base, load_offsets=load_offsets, v_offset=v_offset,
                          store=AccessCost(store_waves, store_waves - store_min, len(stores),
                                           store_waves * len(stores)),
                          load_wavefronts=round(float(np.mean(waves)), 4))


# ------------------------------------------------------------------ choice
# A gather's shuffles (runtime source lanes, selects on the index) measured about 1.5x a conversion's
# against its own smem path (H100 sweep and the cases, bench/RESULTS.md): with 1.5 `auto` picks
# the faster of ours on all 20 timed cases; with 1.0 it kept shuffles on the 4-register cases (2-5% slower).
GATHER_SHUFFLE = 1.5 * SHUFFLE


def score(plan: GatherPlan) -> tuple[float, str]:
    """Predicted cost in the planner's units (SM issue slots per warp)."""
    if plan.shuffle is not None:
        s = plan.shuffle
        n = len(s.outs[0].cands)
        words = -(-n // s.per)
        selects = (words - 1) * s.words + (1 if s.per > 1 and n > 1 else 0)
        packs = words * (min(n, s.per) - 1)
        alu = plan.n_idx * (selects + packs + 4)          # 4: index mask, lane and register terms
        return GATHER_SHUFFLE * s.shuffles + ALU * alu, f"{s.shuffles} shuffles ({n} candidates/element), {alu} ALU ops"
    m = plan.smem
    loads = plan.n_idx * m.load_wavefronts
    instrs = len(m.stores) + plan.n_idx * 4               # a load and its address terms
    return (WAVEFRONT * (m.store.total_wavefronts + loads) + ALU * instrs + BARRIER * 2,
            f"store {m.vector_bytes} B x{len(m.stores)} ({m.store.total_wavefronts} wavefronts), "
            f"load x{plan.n_idx} (~{loads:.1f} wavefronts on random indices), 2 barriers")


def plan_gather(src: LinearLayout, idx: LinearLayout, axis: int, dtype: str = "f16", index_dtype: str = "i32",
                target: Target | str = "cuda", arch: str | None = None, strategy: str = "auto") -> GatherPlan:
    """Plan ``out = gather(src, idx, axis)``; ``auto`` takes the cheaper legal
    strategy (``score``).  Raises ValueError with one sentence on bad input or
    an illegal forced strategy."""
    if isinstance(target, str):
        target = get_target(target, arch)
    w, index_w = dtype_bytes(dtype), index_bytes(index_dtype)
    if strategy not in GATHER_STRATEGIES + ("auto",):
        raise ValueError(f"unknown gather strategy {strategy!r} (known: auto, {', '.join(GATHER_STRATEGIES)})")
    _check(src, idx, axis, target)
    src, idx = normalise(src), normalise(idx)
    s_shape, i_shape = tuple(src.out_dim_sizes.values()), tuple(idx.out_dim_sizes.values())
    base = GatherPlan(strategy="", dtype=dtype, index_dtype=index_dtype, elem_bytes=w,
                      index_bytes=index_w, target=target.name, arch=target.arch,
                      warp_size=target.warp_size, num_warps=src.in_dim_size("warp"), axis=axis,
                      axis_size=s_shape[axis], n_src=src.in_dim_size("register"), n_idx=idx.in_dim_size("register"),
                      src_bases={"in_dims": src.bases, "out_dims": src.out_dim_sizes},
                      idx_bases={"in_dims": idx.bases, "out_dims": idx.out_dim_sizes},
                      src_shape=s_shape, idx_shape=i_shape)
    plans = []
    if strategy in ("auto", "shuffle"):
        try:
            plans.append(replace(base, strategy="shuffle", shuffle=plan_gather_shuffle(src, idx, axis, w)))
        except NotWarpLocal as e:
            if strategy == "shuffle":
                raise ValueError(f"strategy shuffle is illegal for this pair: {e}") from None
    if strategy in ("auto", "smem"):
        plans.append(replace(base, strategy="smem", smem=plan_gather_smem(src, idx, axis, w, target)))
    scored = [(score(p), p) for p in plans]
    reports = tuple(sorted((Candidate(p.strategy, sc, d) for (sc, d), p in scored), key=lambda c: c.score))
    best = min(scored, key=lambda t: t[0][0])[1]
    return replace(best, candidates=reports)
