"""The candidate layouts of a chain's free tensors, read off the steps around them.

A free tensor's family (``description``'s module docstring) is far too large to plan
each member: a distributed layout of ``d`` tensor bits is one of the invertible
``d x d`` matrices over F2 split into register, lane and warp columns.  The good
members are the ones an adjacent step already wants, and the F2 view names them:

**Free registers** ``T`` (``warps`` warps, ``per_thread`` elements a thread):

* a register neighbour ``X`` (``X -> T`` or ``T -> X``, a conversion): ``X``'s own
  layout -- the conversion is then a no-op;
* tile neighbours ``A`` and ``B`` (shared or global: ``A -> T`` a load, ``T -> B`` a
  store, or the same tile on both sides): every register layout
  ``relayout.register_layouts(A, B)`` builds for a tile -> tile move -- each access
  kind's template (the vector of a thread contiguous in the tile, the m8n8 rows of
  ``ldmatrix``/``stmatrix``) with its free slots filled in each tile's offset order
  or the diagonal one (a vector that moves both tiles' addresses by their i-th bit,
  which keeps a transpose's lanes apart in both) -- both its R1 (the load side's)
  and R2 (the store side's).  A register tensor between a load and a store is one
  layout, so R1 = R2 is what vectorises both sides; among them the relayout
  planner's *block* layouts (``relayout.block_layouts``): a thread's registers take
  ``A``'s first ``j`` offset bits and ``B``'s first ``j`` (a ``2^j x 2^j`` block,
  ``2^j``-element vectors on both sides where the two full vectors cannot share one
  layout: an 8-bit transpose).

Only members of the family survive: ``warps`` warps, the target's lanes, ``per_thread``
registers, every element held once.

**Free global** ``T`` (pre-shuffled offline, ``preshuffle``): for each register layout ``R``
it is loaded into, the layouts whose packed offsets take ``R``'s images in the order
vector registers, lanes, other registers, warps (``preshuffle.candidates``).

**Free shared** ``T`` (one element width ``w``):

* for every ordered pair ``(X, Y)`` of the register layouts around it (``X -> T``
  stores, ``T -> Y`` loads; a tile neighbour contributes the coalesced register
  layout it would be moved with, ``register_layouts``' first), every memory layout
  the swizzle planner builds for ``X -> Y`` (``swizzle.plan_smem``: optimal swizzle
  per pairing of vector and matrix instructions, and the unswizzled one) -- the
  planner's own answer for that store and load;
* a tile neighbour's own layout (a copy or relayout into the same tile);
* the wgmma/TMA swizzles of the shape (``nvmma_shared`` of every swizzle width, both
  majors), the layouts an MMA or a TMA box reads.

Each candidate is given as the spec a user pastes: a named kind where one gives the
same layout (``nvmma_shared``, ``swizzled_shared``), else ``linear`` /
``shared_linear`` with its bases.  Candidates are in a fixed order (named families
first), duplicates dropped: the search is deterministic.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ll_codegen.chain import preshuffle
from ll_codegen.chain.description import Free
from ll_codegen.core import f2
from ll_codegen.core.dtypes import DTYPE_BYTES
from ll_codegen.core.layout import LinearLayout
from ll_codegen.core.target import Target
from ll_codegen.plan.planner import normalise
from ll_codegen.plan.relayout import register_layouts
from ll_codegen.plan.swizzle import plan_smem
from ll_codegen.spec import Spec, flow_yaml, spec_from_dict

#: the swizzle planner's budget for a candidate tile: the whole tile in one round
WHOLE_TILE = 1 << 30


@dataclass(frozen=True)
class Neighbour:
    """A tensor one step away from a free tensor: its name, its layout under the current
    choice, the element width of the step between them, whether it is that step's source
    (``into``: data flows from it into the free tensor) and the warps the step runs on when
    the neighbour's layout does not say (a copy's, a relayout's)."""
    name: str
    layout: LinearLayout
    bits: int                   # of one element: 4 for the packed 4-bit types
    into: bool = True
    warps: int = 4

    @property
    def elem_bytes(self) -> int:
        """Bytes the step's plans move an element as (a packed 4-bit plan moves bytes)."""
        return max(1, self.bits // 8)


def _sides(items: list, into: list[bool]) -> list[tuple]:
    """The (from, to) pairs of a free tensor's neighbours: every source with every destination;
    each with itself where the other side has none."""
    a = [x for x, i in zip(items, into) if i]
    b = [x for x, i in zip(items, into) if not i]
    return [(x, y) for x in a for y in b] if a and b else [(x, x) for x in a + b]


@dataclass(frozen=True)
class Placement:
    """One layout of a free tensor: how it was found (``label``), its spec as a one-line YAML
    mapping a user pastes (``text``), and the ``Spec`` that text parses to.  A pre-shuffled
    global layout (``preshuffle``) has no spec kind of its own: ``offsets`` are its packed
    offset bases (``G``'s columns, flat tensor indices), ``spec`` the packed buffer the load
    reads, ``text`` ``G`` as coordinates."""
    label: str
    text: str
    spec: Spec
    offsets: tuple[int, ...] = ()

    @property
    def key(self) -> tuple:
        """What tells two placements apart (a pre-shuffle's packed spec is the same for every ``G``)."""
        return self.spec.linear, self.offsets


def placement(label: str, mapping: dict[str, Any], source: str) -> Placement:
    """The ``Placement`` of a spec mapping: its YAML flow text and the spec it builds."""
    return Placement(label, flow_yaml(mapping), spec_from_dict(mapping, source))


def _key(L: LinearLayout, dims: tuple[str, ...]) -> tuple:
    return tuple(tuple(L.flat_bases(d)) for d in dims)


def bijective(L: LinearLayout, dims: tuple[str, ...]) -> bool:
    """Every element of the tensor at exactly one index of ``dims`` (block dims of size 1)."""
    if L.in_dim_size("block") != 1:
        return False
    bases = [v for d in dims for v in L.flat_bases(d)]
    return len(bases) == L.total_out_size_log2 and f2.rank(bases) == len(bases)


def in_family(L: LinearLayout, free: Free, warp_size: int) -> bool:
    """A member of a free register family: its warps, the target's lanes, ``per_thread``
    registers, every element held once."""
    return ("lane" in L.in_dims and L.in_dim_size("warp") == free.warps and L.in_dim_size("lane") == warp_size
            and L.in_dim_size("register") == free.per_thread and bijective(L, ("register", "lane", "warp")))


def _linear_mapping(L: LinearLayout, shape: list[int]) -> dict[str, Any]:
    return {"kind": "linear", **{d: L.bases.get(d, []) for d in ("register", "lane", "warp")}, "shape": shape}


def register_candidates(t_name: str, free: Free, shape: tuple[int, ...], neighbours: list[Neighbour],
                        target: Target, source: str) -> list[Placement]:
    """The candidate layouts of a free register tensor (module docstring), in order."""
    found: list[tuple[str, LinearLayout]] = []
    for n in neighbours:
        if "lane" in n.layout.in_dims:
            found.append((f"{n.name}'s layout", n.layout))
    tiles = [n for n in neighbours if "offset" in n.layout.in_dims and bijective(n.layout, ("offset",))]
    for a, b in _sides(tiles, [n.into for n in tiles]):
        try:
            pairs = register_layouts(a.layout, b.layout, a.elem_bytes, target, free.warps,
                                     target.max_vector_bytes)
        except ValueError:
            continue
        for label, r1, r2 in pairs:
            found += ([(f"{a.name} -> {b.name}: {label}", r1)] if r1 == r2 else
                      [(f"{a.name} -> {b.name}: {label}, load side", r1),
                       (f"{a.name} -> {b.name}: {label}, store side", r2)])
    out, seen = [], set()
    for label, L in found:
        L = normalise(L)
        k = _key(L, ("register", "lane", "warp"))
        if k in seen or not in_family(L, free, target.warp_size):
            continue
        seen.add(k)
        out.append(placement(label, _linear_mapping(L, list(shape)), f"{source}: {t_name} ({label})"))
    return out


def _swizzled_offsets(shape: tuple[int, ...], vec: int, per_phase: int, max_phase: int,
                      order: tuple[int, int]) -> tuple[int, ...]:
    """The flat offset bases of ``swizzled_shared`` (2-D) by its definition: column bit ``i`` is
    ``2^i`` along ``order[0]``; row ``r = 2^i`` moves ``r`` along ``order[1]`` and XORs the column
    by ``vec * ((r // per_phase) % max_phase) % columns``.  Only a lookup key: a name found with
    it is checked against the layout class (``named_shared``)."""
    col, row = order
    shift = (0, shape[0].bit_length() - 1)
    ncol, nrow = shape[col], shape[row]
    out = [1 << (i + shift[col]) for i in range(ncol.bit_length() - 1)]
    for i in range(nrow.bit_length() - 1):
        r = 1 << i
        out.append(r << shift[row] | (vec * ((r // per_phase) % max_phase) % ncol) << shift[col])
    return tuple(out)


@lru_cache(maxsize=64)
def named_shared(shape: tuple[int, ...], elem_bytes: int) -> tuple[tuple[tuple, dict], ...]:
    """(offset bases, spec mapping) of the named shared layouts of a 2-D ``shape``: ``nvmma_shared``
    of every swizzle width and major, then ``swizzled_shared`` of every (vec, per_phase,
    max_phase) up to the row's 128 bytes, both orders; each tile once.  Empty for other ranks."""
    if len(shape) != 2:
        return ()
    out: list[tuple[tuple, dict]] = []
    seen: set[tuple] = set()
    if 8 * elem_bytes in (8, 16, 32):
        for swizzle in (128, 64, 32, 0):
            for transposed in (False, True):
                m = {"kind": "nvmma_shared", "swizzle_byte_width": swizzle, "element_bitwidth": 8 * elem_bytes,
                     "transposed": transposed, "shape": list(shape)}
                try:
                    L = spec_from_dict(m, "<named shared>").linear
                except ValueError:
                    continue
                k = tuple(L.flat_bases("offset"))
                if k not in seen and bijective(L, ("offset",)):
                    seen.add(k)
                    out.append((k, m))
    row = 128 // elem_bytes
    for order in ((1, 0), (0, 1)):
        for vec in (1 << i for i in range(row.bit_length())):
            for per_phase in (1, 2, 4, 8):
                for max_phase in (1 << i for i in range(row.bit_length())):
                    k = _swizzled_offsets(shape, vec, per_phase, max_phase, order)
                    if k not in seen and f2.rank(list(k)) == len(k):
                        seen.add(k)
                        out.append((k, {"kind": "swizzled_shared", "vec": vec, "per_phase": per_phase,
                                        "max_phase": max_phase, "order": list(order), "shape": list(shape)}))
    return tuple(out)


def _name_of(k: tuple[int, ...], shape: tuple[int, ...], elem_bytes: int) -> dict | None:
    """The named spec whose tile has offset bases ``k``, checked by building it; None if none."""
    for key, m in named_shared(tuple(shape), elem_bytes):
        if key == k:
            try:
                if tuple(spec_from_dict(m, "<named shared>").linear.flat_bases("offset")) == k:
                    return m
            except ValueError:
                pass
    return None


def _coalesced(n: Neighbour, target: Target) -> LinearLayout | None:
    """The register layout a tile neighbour is moved with when nothing else constrains it: vectors
    contiguous in the tile, then lanes, warps, registers in its offset order."""
    try:
        pairs = register_layouts(n.layout, n.layout, n.elem_bytes, target, n.warps, target.max_vector_bytes)
    except ValueError:
        return None
    return pairs[0][1] if pairs else None


def shared_candidates(t_name: str, shape: tuple[int, ...], dtype: str, neighbours: list[Neighbour],
                      target: Target, source: str) -> list[Placement]:
    """The candidate tiles of a free shared tensor (module docstring), in order."""
    w = DTYPE_BYTES[dtype]
    named = named_shared(tuple(shape), w)
    found: list[tuple[str, tuple[int, ...]]] = [(f"{m['kind']}", k) for k, m in named if m["kind"] == "nvmma_shared"]
    regs: list[tuple[str, LinearLayout]] = []
    into: list[bool] = []
    for n in neighbours:
        if "lane" in n.layout.in_dims:
            regs.append((n.name, n.layout))
            into.append(n.into)
        elif bijective(n.layout, ("offset",)):
            found.append((f"{n.name}'s tile", tuple(n.layout.flat_bases("offset"))))
            c = _coalesced(n, target)
            if c is not None:
                regs.append((f"{n.name}'s coalesced registers", c))
                into.append(n.into)
    for (xa, a), (xb, b) in _sides(regs, into):
        for swizzle in ("optimal", "none"):
            try:
                plans = plan_smem(a, b, w, target, swizzle, WHOLE_TILE)
            except ValueError:
                continue
            for p in plans:
                if not p.layout.get("round"):
                    found.append((f"swizzle planner {xa} -> {xb} ({swizzle}, {p.store_instr}/{p.load_instr})",
                                  tuple(LinearLayout(p.layout, a.out_dim_sizes).flat_bases("offset"))))
    out, seen = [], set()
    for label, k in found:
        if k in seen:
            continue
        seen.add(k)
        mapping = _name_of(k, shape, w)
        if mapping is None:
            L = LinearLayout.from_flat({"offset": list(k), "block": []}, dict(zip(
                [f"dim{i}" for i in range(len(shape))], shape)))
            if not bijective(L, ("offset",)):
                continue
            mapping = {"kind": "shared_linear", "offset": L.bases["offset"], "shape": list(shape)}
        out.append(placement(label, mapping, f"{source}: {t_name} ({label})"))
    return out


def global_candidates(t_name: str, shape: tuple[int, ...], neighbours: list[Neighbour],
                      source: str) -> list[Placement]:
    """The candidate pre-shuffled layouts of a free global tensor: for each register layout it is
    loaded into or stored from, ``preshuffle.candidates`` (its vectors, then lanes, the thread's
    other registers, warps), in neighbour order, each ``G`` once."""
    out, seen = [], set()
    for n in neighbours:
        if "lane" not in n.layout.in_dims:
            continue
        for label, g in preshuffle.candidates(n.layout, n.bits):
            if g in seen:
                continue
            seen.add(g)
            out.append(Placement(f"for {n.name}: {label}", flow_yaml(preshuffle.offset_mapping(g, shape)),
                                 preshuffle.packed_spec(shape, f"{source}: {t_name} (packed)"), g))
    return out
