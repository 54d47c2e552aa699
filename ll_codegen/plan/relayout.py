"""Plan a shared tile -> shared tile relayout (a transpose, a re-swizzle): ``RelayoutPlan``.

The source tile ``S`` and the destination tile ``D`` are bijective layouts offset -> tensor
(elements).  A relayout is three steps by the same ``num_warps`` warps: a load of ``S`` into a
register layout R1 (``LoadPlan``: vector ``ld.shared`` or ``ldmatrix[.trans]``), a conversion
R1 -> R2 that stays out of shared memory (``ConvertPlan``: ``noop``, ``register`` -- register
moves, byte permutes in the word view -- or ``shuffle``), and a store of R2 into ``D``
(``StorePlan``: vector ``st.shared`` or ``stmatrix[.trans]``).  The planner chooses R1 and R2.

Candidates
----------
Write ``U_T[i] = T(1 << i)``, the tensor vector at offset bit i of tile ``T``.  An access kind
fixes some slots of the register layout that performs it (its *template*; ``w`` the element
bytes, ``k`` the bits of the widest vector, at most 16 bytes):

* ``vector``: registers ``0 .. k-1`` take ``U_T[0 .. k)`` (one thread's vector is contiguous);
* ``matrix`` (m8n8 rows of 16 bytes): registers ``0 .. j-1`` (``j = log2(4 / w)``) take
  ``U_T[0 .. j)`` and lanes 0, 1 take ``U_T[j]``, ``U_T[j + 1]``; lanes 2..4 pick the rows;
* ``matrix.trans`` (16-bit): lanes 2..4 take ``U_T[0 .. 3)``; register 0, lanes 0, 1 pick the rows.

For every pair of templates (one for ``S``'s load, one for ``D``'s store), every fill order
(``S``'s offset bits, ``D``'s, or the *diagonal* ``U_S[i] ^ U_D[i]`` first: a vector that moves
both tiles' addresses by their i-th bit, which keeps a transpose's lanes apart in both) and with or without *crossing*, R1 is the load template with its
free slots filled and R2 the store template with its: crossing puts the other side's fixed
vectors into this side's free slots first (the same lane slot, else any free lane; registers as
registers while they last), so R1 and R2 differ only where the two templates disagree; the rest
is filled in the fill order, lanes before registers.  Both take the same warps (no data crosses
warps): the free vectors of the fill order right after the lanes', or its last ones.  Two R1 = R2 candidates are added:
each tile's own order (vector registers, then lanes, warps, registers in offset order).

Block candidates (R1 = R2, ``block_layouts``): registers ``0 .. 2j-1`` take ``U_S[0 .. j)`` and
``U_D[0 .. j)``, so a thread holds ``2^j`` elements along each tile's fast direction and both sides
move ``2^j``-element vectors with no conversion.  Where the fast directions differ (a transpose),
one side's full vector is the other side's column of single elements; a block splits the vector
between them.  The 8-bit 128 x 128 transpose between the two 128-byte swizzles: 8 x 8-byte blocks,
``ld.shared`` and ``st.shared`` of 8 bytes, 32 wavefronts a warp on each side -- the bound --, cost 72
(the template pairs' best: 90 from the K-major side, 116 from the MN-major side).
They come after the template candidates: a tie keeps the earlier one.

Cost: the planner's scores of the three steps (``planner.py``'s weights: wavefronts, ALU per
instruction, ``STMATRIX``, shuffles, selects, pack ops) plus ``ALU`` per byte permute of an
in-register conversion in the word view (the convert planner prices register moves at 0: in the
element view they are renames).  The cheapest candidate wins (ties: the first); every candidate
is reported.  A pair whose conversion would need shared memory (data crossing warps) is no
candidate.

Warps: the warp bits take distinct vectors either after the widest vector of both templates (a
small tile leaves warp bits broadcast rather than narrow the vector) or as many as the tile has
room for (``d - log2(lanes)``, narrower vectors); both are candidates and the per-warp cost decides
-- a warp that moves half the bytes spends about half the wavefronts, so a tile that fits gives
every warp distinct work (ties keep the one with more broadcast warp bits: the same time a
warp, less traffic).
Where warp bits stay broadcast (zero bases of R1 and R2), the warps with those bits hold copies:
the store skips them (``warp_skip``, ``plan/memory.py``) and so does the load -- the load's
``warp_skip`` is the store's, and ``relayout()`` returns at once in those warps (a conversion
never crosses warps, so the storing warps need nothing from them).  Every cost is per warp, of a
warp that runs (as a store's).  Lanes never broadcast: every candidate's lanes take nonzero
vectors (the tile has at least one element per lane), so no lane skips.

The wavefront bound of a side: every wavefront moves at most ``wavefront_bytes`` (128), so a
warp that moves ``b`` bytes of a tile needs ``ceil(b / 128)`` wavefronts (``wavefront_bound``).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterable, NamedTuple

from ll_codegen.core import f2
from ll_codegen.core.dtypes import DTYPE_BYTES, dtype_bytes
from ll_codegen.core.layout import LinearLayout, layout_of
from ll_codegen.core.target import Target, get_target
from ll_codegen.plan import planner
from ll_codegen.plan.memory import skip_mask
from ll_codegen.plan.model import Candidate, MemoryPlan, instruction_name, word_view
from ll_codegen.plan.plans import ConvertPlan, LoadPlan, RelayoutPlan, StorePlan
from ll_codegen.plan.words import compose_ops


class Template(NamedTuple):
    """The slots an access kind fixes: ``regs`` (registers 0, 1, .. in order) and ``lanes`` (slot -> vector)."""
    kind: str
    regs: tuple[int, ...]
    lanes: tuple[tuple[int, int], ...]


def _log2(n: int) -> int:
    return max(0, n.bit_length() - 1)


def templates(units: list[int], elem_bytes: int, target: Target, direction: str, cap: int) -> list[Template]:
    """The templates of the access kinds ``target`` has for a tile with offset units ``units``."""
    d, nl = len(units), _log2(target.warp_size)
    out = [Template("vector", tuple(units[:min(_log2(cap // elem_bytes), d)]), ())]
    if not (target.has_ldmatrix if direction == "load" else target.has_stmatrix) or cap < 16 or nl != 5:
        return out
    if elem_bytes <= 4:
        j = _log2(4 // elem_bytes)
        if d >= j + 5:
            out.append(Template("matrix", tuple(units[:j]), ((0, units[j]), (1, units[j + 1]))))
    if elem_bytes == 2 and d >= 6:
        out.append(Template("matrix.trans", (), ((2, units[0]), (3, units[1]), (4, units[2]))))
    return out


class _Span:
    """span(vectors) in fully reduced echelon form ({pivot bit: row}, each pivot bit set in its row
    only), grown one vector at a time: ``free(v)`` is ``v != 0 and v not in span`` without
    re-eliminating the vectors taken so far (what ``f2.in_span`` would redo at every test)."""
    __slots__ = ("rows",)

    def __init__(self, vectors: Iterable[int] = ()) -> None:
        self.rows: dict[int, int] = {}
        for v in vectors:
            self.add(v)

    def _reduce(self, v: int) -> int:
        for p, r in self.rows.items():
            if v >> p & 1:
                v ^= r
        return v

    def free(self, v: int) -> bool:
        return v != 0 and self._reduce(v) != 0

    def add(self, v: int) -> None:
        v = self._reduce(v)
        if v:
            p = v.bit_length() - 1
            for q, r in self.rows.items():
                if r >> p & 1:
                    self.rows[q] = r ^ v
            self.rows[p] = v


def fill_side(t: Template, other: Template, fill: list[int], warps: list[int], nl: int, nr: int,
              cross: bool) -> tuple[list[int], list[int]]:
    """(registers, lanes) of one side: ``t``'s fixed slots, with ``cross`` the ``other`` side's fixed
    vectors next (module docstring), then ``fill`` -- lanes first, then registers."""
    regs, lanes = list(t.regs[:nr]), [0] * nl
    for s, v in t.lanes:
        lanes[s] = v
    used = _Span(regs + [v for v in lanes if v] + [w for w in warps if w])

    def put(v: int, slot: int | None = None, as_reg: bool = False) -> None:
        if not used.free(v):
            return
        if slot is not None and not lanes[slot]:
            lanes[slot] = v
        elif as_reg and len(regs) < nr:
            regs.append(v)
        elif 0 in lanes:
            lanes[lanes.index(0)] = v
        elif len(regs) < nr:
            regs.append(v)
        else:
            return
        used.add(v)
    if cross:
        for s, v in other.lanes:
            if not lanes[s]:
                put(v, s)
        for _, v in other.lanes:
            put(v)
        for v in other.regs:
            put(v, as_reg=True)
    for v in fill:
        put(v)
    return regs, lanes


def _layout(regs: list[int], lanes: list[int], warps: list[int], shape: dict[str, int]) -> LinearLayout:
    return planner.normalise(LinearLayout.from_flat({"register": regs, "lane": lanes, "warp": warps, "block": []},
                                                    shape, require_surjective=True))


def register_layouts(src_tile: LinearLayout, dst_tile: LinearLayout, elem_bytes: int, target: Target,
                     num_warps: int, cap: int) -> list[tuple[str, LinearLayout, LinearLayout]]:
    """The candidate (label, R1, R2) pairs (module docstring), duplicates removed."""
    S, D = src_tile.flat_bases("offset"), dst_tile.flat_bases("offset")
    d, nl, nw = len(S), _log2(target.warp_size), _log2(num_warps)
    shape = dict(src_tile.out_dim_sizes)
    ts, td = templates(S, elem_bytes, target, "load", cap), templates(D, elem_bytes, target, "store", cap)
    kv = max(len(ts[0].regs), len(td[0].regs))
    out: list[tuple[str, LinearLayout, LinearLayout]] = []
    seen: set = set()
    # warp bits that take distinct data: after the widest vector (a small tile leaves warps broadcast
    # before it narrows the vector), or every warp bit the tile has room for (narrower vectors)
    for nwv in sorted({min(nw, max(0, d - nl - kv)), min(nw, d - nl)}):
        out += _layouts_at(S, D, ts, td, nl, nw, nwv, shape, seen)
    return out + [(label, L, L) for label, L in block_layouts(src_tile, dst_tile, elem_bytes, target, num_warps, cap)]


def _take(fill: list[int], span: _Span, n: int) -> list[int]:
    """The first ``n`` vectors of ``fill`` outside ``span`` and independent of each other (``span`` grows)."""
    out: list[int] = []
    for v in fill:
        if len(out) == n:
            break
        if span.free(v):
            span.add(v)
            out.append(v)
    return out


def block_layouts(src_tile: LinearLayout, dst_tile: LinearLayout, elem_bytes: int, target: Target,
                  num_warps: int, cap: int) -> list[tuple[str, LinearLayout]]:
    """The block register layouts of a load from ``src_tile`` and a store to ``dst_tile`` (R1 = R2).

    With ``U_S``, ``U_D`` the tiles' offset units, registers ``0 .. 2j-1`` take
    ``U_S[0 .. j) + U_D[0 .. j)``: a thread holds a ``2^j x 2^j`` block whose ``2^j`` elements
    along each tile's fast direction are contiguous in that tile, so the load and the store both
    move ``2^j``-element vectors out of the same registers (no conversion).  Where the tiles'
    fast directions differ (a transpose) no other R1 = R2 layout vectorises both sides, and a
    single-side vector of ``2^(2j)`` elements cannot be stored wider than one element.  ``j``
    runs while the block's vectors are independent and its ``2^j`` elements fit ``cap`` bytes;
    the lanes, warps and remaining registers take the other vectors of a fill order (the
    diagonal ``U_S[i] ^ U_D[i]`` first, ``U_S`` first or ``U_D`` first), the warps right after
    the lanes or last; warp bits the tile has no room for stay broadcast."""
    S, D = src_tile.flat_bases("offset"), dst_tile.flat_bases("offset")
    d, nl, nw = len(S), _log2(target.warp_size), _log2(num_warps)
    shape = dict(src_tile.out_dim_sizes)
    out: list[tuple[str, LinearLayout]] = []
    for j in range(1, _log2(cap // elem_bytes) + 1):
        block = S[:j] + D[:j]
        nwv = min(nw, d - nl - 2 * j)
        if nwv < 0 or f2.rank(block) < 2 * j:
            break
        nr = d - nl - nwv
        tag = "" if nwv == nw else f", {nw - nwv} broadcast warp bit{'s' if nw - nwv > 1 else ''}"
        for name, fill in (("diagonal", [x ^ y for x, y in zip(S, D)] + S + D), ("source", S + D),
                           ("destination", D + S)):
            for high in (False, True):
                span = _Span(block)
                lanes = _take(fill, span, nl)
                rest = _take(fill + [1 << i for i in range(d)], span, d)
                warps = (rest[len(rest) - nwv:] if high else rest[:nwv]) if nwv else []
                regs = block + [v for v in rest if v not in warps]
                L = _layout(regs, lanes, warps + [0] * (nw - nwv), shape) if len(lanes) == nl and len(regs) == nr \
                    else None
                if L is None or any(L == x for _, x in out):
                    continue
                out.append((f"{1 << j}x{1 << j} blocks, {name} order{', high warps' if high else ''}{tag}", L))
    return out


def _layouts_at(S: list[int], D: list[int], ts: list[Template], td: list[Template], nl: int, nw: int, nwv: int,
                shape: dict[str, int], seen: set) -> list[tuple[str, LinearLayout, LinearLayout]]:
    """``register_layouts``' candidates whose warps take ``nwv`` distinct vectors (the other
    ``nw - nwv`` warp bits broadcast), the rest registers."""
    nr = len(S) - nl - nwv
    out: list[tuple[str, LinearLayout, LinearLayout]] = []
    tag = "" if nwv == nw else f", {nw - nwv} broadcast warp bit{'s' if nw - nwv > 1 else ''}"

    def add(label: str, a: tuple[list[int], list[int]], b: tuple[list[int], list[int]], warps: list[int]) -> None:
        key = (tuple(a[0]), tuple(a[1]), tuple(b[0]), tuple(b[1]), tuple(warps))
        if key in seen or len(a[0]) != nr or len(b[0]) != nr or 0 in a[1] or 0 in b[1] or len(warps) != nwv:
            return
        seen.add(key)
        ws = warps + [0] * (nw - len(warps))
        out.append((label + tag, _layout(a[0], a[1], ws, shape), _layout(b[0], b[1], ws, shape)))

    def pick_warps(fill: list[int], fixed: list[int], skip: int) -> list[int]:
        """The last ``nwv`` free vectors of ``fill`` (``skip`` < 0), or those after the first ``skip`` free ones."""
        free: list[int] = []
        span = _Span(fixed)
        for v in fill:
            if span.free(v):
                free.append(v)
                span.add(v)
        return free[-nwv:] if skip < 0 and nwv else free[skip:skip + nwv] if skip >= 0 else []

    for name, own, t in (("source", S + D, ts[0]), ("destination", D + S, td[0])):
        t = t._replace(regs=t.regs[:nr])                     # a narrower vector where warps take its bits
        warps = pick_warps(own, list(t.regs), nl)           # copy_threads' order: vector, lanes, warps, registers
        side = fill_side(t, t, own, warps, nl, nr, False)
        add(f"R1 = R2 in {name} order", side, side, warps)
    for a in ts:
        for b in td:
            fixed = list(a.regs[:nr]) + [v for _, v in a.lanes] + list(b.regs[:nr]) + [v for _, v in b.lanes]
            diagonal = [a_ ^ b_ for a_, b_ in zip(S, D)] + S + D
            for name, fill in (("source", S + D), ("destination", D + S), ("diagonal", diagonal)):
                for skip in (-1, nl - min(len(a.lanes), len(b.lanes))):
                    warps = pick_warps(fill, fixed, skip)
                    for cross in (True, False):
                        add(f"{a.kind} / {b.kind}, {name} order{', crossed' if cross else ''}"
                            f"{', high warps' if skip < 0 else ''}",
                            fill_side(a, b, fill, warps, nl, nr, cross), fill_side(b, a, fill, warps, nl, nr, cross),
                            warps)
    return out


def permute_ops(cv: ConvertPlan) -> int:
    """Byte permutes of an in-register conversion in the word view (0 in the element view)."""
    per = word_view(cv)
    if cv.strategy != "register" or not per:
        return 0
    src = cv.register.dst_from_src
    return compose_ops(per, *([(r // per, r % per) for r in src[j:j + per]] for j in range(0, len(src), per)))


def wavefront_bound(plan: RelayoutPlan, side: str) -> int:
    """The fewest wavefronts a warp can spend on its share of a tile (``side``: ``load`` or
    ``store``): ``ceil(bytes / wavefront_bytes)``, a warp's bytes being the tile's over the
    warps that hold distinct data (the register layout's nonzero warp bases)."""
    R = layout_of(plan.load.dst_bases if side == "load" else plan.store.src_bases)
    m = plan.load.memory if side == "load" else plan.store.memory
    share = m.bytes >> sum(1 for v in R.flat_bases("warp") if v)
    return -(-share // get_target(plan.target, plan.arch).wavefront_bytes)


def _step_score(plan) -> float:
    return min(c.score for c in plan.candidates)


def _conversion(R1: LinearLayout, R2: LinearLayout, dtype: str, target: Target) -> ConvertPlan | None:
    level = planner.classify(R1, R2)
    if level == "smem":
        return None
    try:
        return planner.plan_conversion(R1, R2, dtype=dtype, target=target,
                                       strategy="shuffle" if level == "shuffle" else "register")
    except ValueError:                  # NotShuffleable
        return None


def _access(m: MemoryPlan, target: str, elem_bytes: int) -> str:
    name = instruction_name(target, m.instr, m.direction, m.vec * elem_bytes)
    return f"{name} {m.vector_bytes} B x{m.cost.instructions} ({m.cost.wavefronts} wf, {m.cost.bank_conflicts} cf)"


def plan_relayout(src_tile: LinearLayout, dst_tile: LinearLayout, dtype: str = "f16",
                  target: Target | str = "cuda", arch: str | None = None, num_warps: int = 4,
                  max_vector_bytes: int | None = None) -> RelayoutPlan:
    """Plan ``src_tile -> dst_tile`` (two shared tiles of one tensor) by ``num_warps`` warps; see the
    module docstring.  Raises ValueError with one clear sentence for bad input."""
    if isinstance(target, str):
        target = get_target(target, arch)
    dtype_bytes(dtype)
    if isinstance(num_warps, bool) or not isinstance(num_warps, int) or num_warps < 1 \
            or num_warps & (num_warps - 1) or num_warps > 32:
        raise ValueError(f"--warps {num_warps}: a power of two from 1 to 32")
    for name, t in (("source", src_tile), ("destination", dst_tile)):
        if "offset" not in t.in_dims:
            raise ValueError(f"the {name} layout is not a shared-memory layout (needs offset bases)")
        if t.in_dim_size("block") != 1:
            raise ValueError(f"the {name} tile is split over several CTAs (block bases): not supported")
        S = t.flat_bases("offset")
        if len(S) != t.total_out_size_log2 or f2.rank(S) != len(S):
            raise ValueError(f"the {name} tile is not a bijection between offsets and tensor elements "
                             f"(padding or broadcast offsets are not supported)")
    if src_tile.out_dim_sizes != dst_tile.out_dim_sizes:
        raise ValueError(f"shapes differ: source {list(src_tile.out_dim_sizes.values())} vs destination "
                         f"{list(dst_tile.out_dim_sizes.values())}")
    w = DTYPE_BYTES[dtype]
    d = src_tile.total_out_size_log2
    if d < _log2(target.warp_size):
        raise ValueError(f"the tile has {1 << d} elements, fewer than the {target.warp_size} lanes of a warp")
    cap = min(max_vector_bytes or target.max_vector_bytes, target.max_vector_bytes)
    scored = []
    accesses: dict[tuple[str, LinearLayout], LoadPlan | StorePlan] = {}     # candidates share R1s and R2s

    def access(R: LinearLayout, direction: str) -> LoadPlan | StorePlan:
        if (direction, R) not in accesses:
            q = planner.plan_memory(R, src_tile if direction == "load" else dst_tile, direction, "shared",
                                    dtype=dtype, target=target, max_vector_bytes=max_vector_bytes)
            if direction == "load":         # the store's skipped warps: their loads would feed nothing
                q = replace(q, memory=replace(q.memory, warp_skip=skip_mask(R.flat_bases("warp"))))
            accesses[direction, R] = q
        return accesses[direction, R]
    for label, R1, R2 in register_layouts(src_tile, dst_tile, w, target, num_warps, cap):
        cv = _conversion(R1, R2, dtype, target)
        if cv is None:
            continue
        load, store = access(R1, "load"), access(R2, "store")
        perms = permute_ops(cv)
        score = _step_score(load) + _step_score(cv) + planner.ALU * perms + _step_score(store)
        conv = next(c.detail for c in cv.candidates if c.score == _step_score(cv))
        detail = (f"{label}: load {_access(load.memory, target.name, w)}; {cv.strategy} ({conv}"
                  f"{f', {perms} byte permutes' if perms else ''}); store {_access(store.memory, target.name, w)}")
        scored.append((score, len(scored), detail, load, cv, store))
    if not scored:
        raise ValueError("no register layout moves this pair without shared memory in between")
    scored.sort(key=lambda t: (t[0], t[1]))
    _, _, _, load, cv, store = scored[0]
    strip = dict(candidates=())
    return RelayoutPlan(
        strategy="relayout", dtype=dtype, elem_bytes=w, target=target.name, arch=target.arch,
        warp_size=target.warp_size, num_warps=num_warps, n_src=0, n_dst=0,
        src_bases={"in_dims": src_tile.bases, "out_dims": src_tile.out_dim_sizes},
        dst_bases={"in_dims": dst_tile.bases, "out_dims": dst_tile.out_dim_sizes},
        shape=tuple(src_tile.out_dim_sizes.values()),
        load=replace(load, **strip), convert=replace(cv, **strip), store=replace(store, **strip),
        candidates=tuple(Candidate(f"{c[3].memory.instr}+{c[4].strategy}+{c[5].memory.instr}", c[0], c[2])
                         for c in scored))


__all__ = ["RelayoutPlan", "LoadPlan", "StorePlan", "plan_relayout", "register_layouts", "block_layouts",
           "templates", "fill_side", "wavefront_bound", "permute_ops"]
