"""Legacy (Triton/Gluon) layouts as small frozen dataclasses with ``to_linear``.

Each class mirrors one Gluon layout (``triton/experimental/gluon/language/
_layouts.py`` and ``amd/_layouts.py``), with the same snake_case field names,
and ``to_linear(shape)`` returns the ``LinearLayout`` that Triton's
``toLinearLayout(shape, attr)`` builds (``lib/Dialect/TritonGPU/IR/
LinearLayoutConversions.cpp``): input dims ``register, lane, warp, block`` for
distributed layouts, ``offset, block`` for memory layouts; output dims
``dim0 .. dim{r-1}`` in tensor order.  Bad parameters raise ``LayoutError``.

Every conversion follows the same three steps (``_combine``, Triton's
``combineCtaCgaWithShape``):

1. build the *CTA tile*: a layout of one block, usually a product of
   ``identity_1d`` pieces (the closed forms are in each class's docstring);
2. build the *CGA layout* ``block -> dims`` (``cga_layout`` bases, or the older
   ``ctas_per_cga / cta_split_num / cta_order`` triple), shrunk to the shape;
3. fit the tile to ``shape / cga size``: a tile smaller than that gets more
   bases of its first input dim (``register`` or ``offset``), appended dim by
   dim in the tile's output-dim order (``ensureLayoutNotSmallerThan``); a tile
   larger than that has every basis component ``>= size`` zeroed, i.e. it
   broadcasts (``ensureLayoutNotLargerThan``).  Then ``tile * cga``.

Worked example (paper 000 §4.1, layout A): a 16x16 tensor, 2x2 registers,
4x8 threads, 2x1 warps, dim1 fastest::

    >>> BlockedLayout([2, 2], [4, 8], [2, 1], [1, 0]).to_linear((16, 16))
     - register=1 -> (0, 1)
       register=2 -> (1, 0)
     - lane=1 -> (0, 2)
       lane=2 -> (0, 4)
       lane=4 -> (0, 8)
       lane=8 -> (2, 0)
       lane=16 -> (4, 0)
     - warp=1 -> (8, 0)
     - block is a size 1 dimension
    where out dims are: [dim0 (size 16), dim1 (size 16)]

With shape (32, 16) the tile (16x16) is too small: one more register basis
``(16, 0)`` appears; with shape (8, 16) it is too large: ``warp=1 -> (0, 0)``.
"""
from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, Mapping, Optional, Sequence

from ll_codegen.core import limits
from ll_codegen.core.layout import LinearLayout, identity_nd
from ll_codegen.core.limits import short


class LayoutError(ValueError):
    """A bad layout parameter: ``field`` names it, ``message`` says what is wrong."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


#: Allowed values of prod(threads_per_warp) for blocked layouts (CUDA warps,
#: CDNA/RDNA wavefronts).  ``None`` allows any power of two (Triton's unit
#: tests use toy warps of 4 or 16 threads).
WARP_SIZES: Optional[tuple[int, ...]] = (32, 64)


# ----------------------------------------------------------------- validation
def _is_pow2(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1 and x & (x - 1) == 0


def _int(field: str, value: Any, choices: Optional[Sequence[int]] = None) -> int:
    """One integer field: an int (not a bool or float: ``2.0 in (1, 2)`` is
    true in Python), one of ``choices`` if given."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise LayoutError(field, f"expected an integer, got {short(value)}")
    if choices is not None and value not in choices:
        raise LayoutError(field, f"{short(value)} is not one of {', '.join(map(str, choices))}")
    return value


def _ints(field: str, value: Any, rank: Optional[int] = None, pow2: bool = True) -> tuple[int, ...]:
    """Normalise a list of ints to a tuple; check length, range and powers of two."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise LayoutError(field, f"expected a list of integers, got {short(value)}")
    if len(value) > limits.MAX_RANK:
        raise LayoutError(field, f"{len(value)} entries; at most {limits.MAX_RANK} (dims)")
    out = tuple(value)
    for v in out:
        if not isinstance(v, int) or isinstance(v, bool):
            raise LayoutError(field, f"expected integers, got {short(v)}")
        if not 0 <= v <= limits.MAX_INT:
            raise LayoutError(field, f"{short(v)} is out of range (0 to {limits.MAX_INT})")
        if pow2 and not _is_pow2(v):
            raise LayoutError(field, f"{v} is not a power of two")
    if rank is not None and len(out) != rank:
        raise LayoutError(field, f"has {len(out)} entries, expected {rank} (the rank)")
    return out


def _order(field: str, value: Any, rank: int) -> tuple[int, ...]:
    out = _ints(field, value, rank, pow2=False)
    if sorted(out) != list(range(rank)):
        raise LayoutError(field, f"{list(out)} is not a permutation of 0..{rank - 1}")
    return out


def _bases(field: str, value: Any, rank: Optional[int]) -> tuple[tuple[int, ...], ...]:
    """Normalise a list of bases (each a list of ``rank`` non-negative ints)."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise LayoutError(field, f"expected a list of bases, got {short(value)}")
    if len(value) > limits.MAX_BASES:
        raise LayoutError(field, f"{len(value)} bases; at most {limits.MAX_BASES}")
    out = []
    for b in value:
        b = _ints(field, b, rank, pow2=False)
        if any(v < 0 for v in b):
            raise LayoutError(field, f"basis {list(b)} has a negative entry")
        out.append(b)
    return tuple(out)


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


def _check_shape(shape: Any, rank: int) -> tuple[int, ...]:
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise LayoutError("shape", f"expected a list of sizes, got {short(shape)}")
    shape = tuple(shape)
    if len(shape) != rank:
        raise LayoutError("shape", f"{short(list(shape))} has rank {len(shape)}, the layout has rank {rank}")
    for s in shape:
        if not _is_pow2(s):
            raise LayoutError("shape", f"size {short(s)} is not a power of two")
    if math.prod(shape) > limits.MAX_TILE_ELEMENTS:
        raise LayoutError("shape", f"{list(shape)} is {math.prod(shape)} elements; at most "
                                   f"{limits.MAX_TILE_ELEMENTS} per tile")
    return shape


def _check_warps(field: str, warps: Sequence[int], warp_size: int) -> None:
    """At most ``MAX_THREADS_PER_CTA`` threads: 32 warps of 32, 16 of 64."""
    most = limits.MAX_THREADS_PER_CTA // warp_size
    if math.prod(warps) > most:
        raise LayoutError(field, f"{list(warps)} is {math.prod(warps)} warps; at most {most} warps of {warp_size} "
                                 f"threads ({limits.MAX_THREADS_PER_CTA} threads per CTA)")


def _dims(rank: int) -> list[str]:
    return [f"dim{i}" for i in range(rank)]


def matrix_order(rank: int, row_major: bool) -> list[int]:
    """Triton's ``getMatrixOrder``: ``[r-1, r-2, ..., 0]``, first two swapped
    when not row-major (batch dims always slowest)."""
    order = list(range(rank - 1, -1, -1))
    if not row_major:
        order[0], order[1] = order[1], order[0]
    return order


def dot_operand_order(operand_index: int, rank: int, k_contig: bool = True) -> list[int]:
    """Triton's ``getOrderForDotOperand``: with ``k_contig`` the order is
    ``[k, non-k, batch...]`` (A is row-major, B column-major)."""
    k_is_last = operand_index == 0
    return matrix_order(rank, row_major=k_is_last == k_contig)


# ------------------------------------------------------------- layout algebra
def _id(size: int, in_dim: str, out_dim: str) -> LinearLayout:
    """``identity1D``; sizes below 1 (integer division that ran out) are 1."""
    return LinearLayout.identity_1d(max(int(size), 1), in_dim, out_dim)


def _fit_up(L: LinearLayout, shape: Mapping[str, int]) -> LinearLayout:
    """``ensureLayoutNotSmallerThan``: append bases of the first input dim,
    output dim by output dim in ``L``'s output order."""
    first = L.in_dims[0]
    for n in L.out_dims:
        have, want = L.out_dim_size(n), shape[n]
        if want > have:
            L = L * LinearLayout.identity_1d(want // have, first, n)
    return L


def _fit_down(L: LinearLayout, shape: Mapping[str, int]) -> LinearLayout:
    """``ensureLayoutNotLargerThan`` (registers kept): zero every basis
    component ``>= shape[dim]`` so the surplus becomes broadcast."""
    bases = L.bases
    sizes = L.out_dim_sizes
    for k, n in enumerate(L.out_dims):
        want = shape[n]
        if sizes[n] <= want:
            continue
        for bs in bases.values():
            for b in bs:
                if b[k] >= want:
                    b[k] = 0
        sizes[n] = want
    return LinearLayout(bases, sizes, require_surjective=False)


def _combine(cta: LinearLayout, cga: LinearLayout, shape: Sequence[int]) -> LinearLayout:
    """Triton's ``combineCtaCgaWithShape``: fit the CGA layout (block -> dims,
    in units of CTA tiles) into ``shape``, fit the CTA tile into
    ``shape / cga size``, multiply, and put the output dims in tensor order."""
    names = _dims(len(shape))
    labeled = dict(zip(names, shape))
    cga = _fit_down(cga, labeled).transpose_outs(cta.out_dims)
    cta_shape = {n: max(1, labeled[n] // cga.out_dim_size(n)) for n in names}
    cta = _fit_down(_fit_up(cta, cta_shape), cta_shape)
    return (cta * cga).transpose_outs(names)


def _drop_zero_registers(L: LinearLayout) -> LinearLayout:
    """Remove the register bases that fitting into a smaller shape zeroed.
    Triton does this for blocked layouts only (their register count is a
    free parameter); mma/mfma/wmma layouts and dot operands keep them."""
    bases = L.bases
    bases["register"] = [b for b in bases["register"] if any(b)]
    return LinearLayout(bases, L.out_dim_sizes, require_surjective=False)


def _broadcast_dot(shape: Sequence[int], order: Sequence[int], k_dim: int, in_dim: str) -> LinearLayout:
    """``broadcastedDotOperandLayout``: identity over ``shape`` in ``order``,
    except zeros (broadcast) along the K dim."""
    L = LinearLayout.empty()
    for d in order:
        if d == k_dim:
            L = L * LinearLayout.zeros_1d(shape[d], in_dim, f"dim{d}")
        else:
            L = L * LinearLayout.identity_1d(shape[d], in_dim, f"dim{d}")
    return L


def _zero_out_dim(L: LinearLayout, dim: str) -> LinearLayout:
    """``L`` with the ``dim`` component of every basis set to 0."""
    k = L.out_dims.index(dim)
    bases = {d: [[0 if i == k else v for i, v in enumerate(b)] for b in bs] for d, bs in L.bases.items()}
    sizes = dict(L.out_dim_sizes)
    sizes[dim] = 1
    return LinearLayout(bases, sizes, require_surjective=False)


# ------------------------------------------------------------------ CTA / CGA
class _CGA:
    """Mixin for the CTA-tiling fields.  Either ``cga_layout`` (Gluon's bases
    ``block -> dims`` in units of CTA tiles; a zero basis duplicates) or the
    older triple; ``cta_split_num[d]`` CTAs split dim d, the remaining
    ``ctas_per_cga[d] / cta_split_num[d]`` hold copies, dims walked in
    ``cta_order``: ``block = prod over d in cta_order of
    identity1D(split[d]) * zeros1D(ctas[d] / split[d])`` (``makeCgaLayout``)."""

    def _check_cga(self, rank: int) -> None:
        if self.cga_layout is not None:
            if any(v is not None for v in (self.ctas_per_cga, self.cta_split_num, self.cta_order)):
                raise LayoutError("cga_layout", "give either cga_layout or ctas_per_cga/cta_split_num/cta_order, not both")
            _set(self, "cga_layout", _bases("cga_layout", self.cga_layout, rank))
        if self.ctas_per_cga is not None:
            _set(self, "ctas_per_cga", _ints("ctas_per_cga", self.ctas_per_cga, rank))
        if self.cta_split_num is not None:
            _set(self, "cta_split_num", _ints("cta_split_num", self.cta_split_num, rank))
        if self.cta_order is not None:
            _set(self, "cta_order", _order("cta_order", self.cta_order, rank))
        ctas = self.ctas_per_cga or (1,) * rank
        if math.prod(ctas) > limits.MAX_CTAS_PER_CGA:
            raise LayoutError("ctas_per_cga", f"{list(ctas)} is {math.prod(ctas)} CTAs; at most "
                                              f"{limits.MAX_CTAS_PER_CGA} per cluster")
        if self.cga_layout is not None and 1 << len(self.cga_layout) > limits.MAX_CTAS_PER_CGA:
            raise LayoutError("cga_layout", f"{len(self.cga_layout)} bases are {1 << len(self.cga_layout)} CTAs; "
                                            f"at most {limits.MAX_CTAS_PER_CGA} per cluster")
        for d, s in enumerate(self.cta_split_num or ()):
            if ctas[d] % s:
                raise LayoutError("cta_split_num", f"{s} does not divide ctas_per_cga[{d}] = {ctas[d]}")
        self._cga(rank)  # validates cga_layout bases

    def _cga(self, rank: int) -> LinearLayout:
        names = _dims(rank)
        if self.cga_layout is not None:
            try:
                return LinearLayout({"block": [list(b) for b in self.cga_layout]}, names)
            except ValueError as e:
                raise LayoutError("cga_layout", f"bases {[list(b) for b in self.cga_layout]} do not tile the dims: {e}") from None
        ctas = self.ctas_per_cga or (1,) * rank
        split = self.cta_split_num or (1,) * rank
        order = self.cta_order or tuple(range(rank - 1, -1, -1))
        L = LinearLayout({"block": []}, {n: 1 for n in names})
        for d in order:
            L = L * LinearLayout.identity_1d(split[d], "block", names[d]) \
                  * LinearLayout.zeros_1d(ctas[d] // split[d], "block", names[d])
        return L.transpose_outs(names)

    def _split_shape(self, shape: Sequence[int]) -> list[int]:
        """``getShapePerCTA``: the shape divided by the CTA split of each dim."""
        cga = self._cga(len(shape))
        return [max(1, s // cga.out_dim_size(f"dim{d}")) for d, s in enumerate(shape)]


_CGA_DOC = "cga_layout=None, ctas_per_cga=None, cta_split_num=None, cta_order=None"


class Layout:
    """Base class: ``kind`` (YAML name), ``is_memory``, ``rank``, ``to_linear``."""

    kind: ClassVar[str] = ""
    is_memory: ClassVar[bool] = False
    space: ClassVar[str] = "registers"    # where the data lives: registers, shared or global

    @property
    def rank(self) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:  # pragma: no cover
        raise NotImplementedError

    def to_dict(self) -> dict:
        """Plain data in the YAML form (``kind`` plus fields; nested parents as dicts)."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None:
                continue
            if isinstance(v, Layout):
                v = v.to_dict()
            elif isinstance(v, tuple):
                v = [list(x) if isinstance(x, tuple) else x for x in v]
            out[f.name] = v
        return out


# ------------------------------------------------------------------- blocked
@dataclass(frozen=True)
class BlockedLayout(_CGA, Layout):
    """Triton's ``#ttg.blocked`` (Gluon ``BlockedLayout``).

    CTA tile = ``identity_nd(register, size_per_thread, order) *
    identity_nd(lane, threads_per_warp, order) * identity_nd(warp,
    warps_per_cta, order)``: register bit i of dim ``order[0]`` maps to
    ``2**i`` along that dim, then the next dim of ``order``; lanes continue
    above the registers, warps above the lanes (per dim).
    """

    kind: ClassVar[str] = "blocked"
    size_per_thread: Sequence[int]
    threads_per_warp: Sequence[int]
    warps_per_cta: Sequence[int]
    order: Sequence[int]
    cga_layout: Optional[Sequence[Sequence[int]]] = None
    ctas_per_cga: Optional[Sequence[int]] = None
    cta_split_num: Optional[Sequence[int]] = None
    cta_order: Optional[Sequence[int]] = None

    def __post_init__(self):
        spt = _ints("size_per_thread", self.size_per_thread)
        rank = len(spt)
        if rank == 0:
            raise LayoutError("size_per_thread", "needs at least one dim")
        _set(self, "size_per_thread", spt)
        tpw = _ints("threads_per_warp", self.threads_per_warp, rank)
        if WARP_SIZES is not None and math.prod(tpw) not in WARP_SIZES:
            raise LayoutError("threads_per_warp", f"product {math.prod(tpw)} is not a warp size {list(WARP_SIZES)}")
        _set(self, "threads_per_warp", tpw)
        if math.prod(spt) > limits.MAX_REGISTERS:
            raise LayoutError("size_per_thread", f"{list(spt)} is {math.prod(spt)} registers per thread; at most "
                                                 f"{limits.MAX_REGISTERS}")
        _set(self, "warps_per_cta", _ints("warps_per_cta", self.warps_per_cta, rank))
        _check_warps("warps_per_cta", self.warps_per_cta, math.prod(tpw))
        _set(self, "order", _order("order", self.order, rank))
        self._check_cga(rank)

    @property
    def rank(self) -> int:
        return len(self.size_per_thread)

    def cta_tile(self) -> LinearLayout:
        return (identity_nd("register", self.size_per_thread, self.order)
                * identity_nd("lane", self.threads_per_warp, self.order)
                * identity_nd("warp", self.warps_per_cta, self.order))

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = _check_shape(shape, self.rank)
        return _drop_zero_registers(_combine(self.cta_tile(), self._cga(self.rank), shape))


# --------------------------------------------------------------------- slice
@dataclass(frozen=True)
class SliceLayout(Layout):
    """Triton's ``#ttg.slice``: the parent layout at ``shape`` with a size-1
    dim inserted at ``dim``, that output dim dropped, and register bases that
    became zero removed (``SliceEncodingAttr::toLinearLayout``)."""

    kind: ClassVar[str] = "slice"
    dim: int
    parent: Layout

    def __post_init__(self):
        if not isinstance(self.parent, Layout) or self.parent.is_memory:
            raise LayoutError("parent", f"expected a distributed layout, "
                                        f"got {getattr(self.parent, 'kind', None) or short(self.parent)}")
        if not isinstance(self.dim, int) or isinstance(self.dim, bool) or not 0 <= self.dim < self.parent.rank:
            raise LayoutError("dim", f"{short(self.dim)} is not a dim of the rank-{self.parent.rank} parent "
                                     f"(0 to {self.parent.rank - 1})")
        if self.parent.rank < 2:
            raise LayoutError("parent", "slicing needs a parent of rank >= 2")

    @property
    def rank(self) -> int:
        return self.parent.rank - 1

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = _check_shape(shape, self.rank)
        parent_shape = list(shape)
        parent_shape.insert(self.dim, 1)
        P = self.parent.to_linear(parent_shape)
        keep = [i for i in range(self.parent.rank) if i != self.dim]
        bases = {d: [[b[i] for i in keep] for b in bs] for d, bs in P.bases.items()}
        bases["register"] = [b for b in bases["register"] if any(b)]
        return LinearLayout(bases, dict(zip(_dims(self.rank), shape)))


# ----------------------------------------------------------------- NVIDIA mma
def _mma_tile(rank: int, tile_shape: Sequence[int], k_width: int, order: Sequence[int],
              rep_order: Sequence[int]) -> LinearLayout:
    """Triton's ``nvidiaMmaTile``; with ``inner = order[0]``, ``outer = order[1]``,
    ``m = tile[outer]``, ``n = tile[inner]``: k_width registers along inner,
    4 lanes along inner, 8 lanes along outer, m/8 registers along outer,
    n/(4 k_width) registers along inner.  Output dims in ``rep_order``."""
    inner, outer = order[0], order[1]
    m, n = tile_shape[outer], tile_shape[inner]
    L = identity_nd("register", [1] * rank, rep_order)
    return (L * _id(k_width, "register", f"dim{inner}") * _id(4, "lane", f"dim{inner}")
            * _id(8, "lane", f"dim{outer}") * _id(m // 8, "register", f"dim{outer}")
            * _id(n // (k_width * 4), "register", f"dim{inner}"))


@dataclass(frozen=True)
class NVMMADistributedLayout(_CGA, Layout):
    """Triton's ``#ttg.nvidia_mma`` accumulator (Gluon ``NVMMADistributedLayout``).

    ``version`` ``[2, 0]`` (Ampere ``mma.sync``; ``instr_shape`` = [.., 16, 8])
    or ``[3, 0]`` (Hopper ``wgmma``; ``instr_shape`` = [16, N, K]).  Tile
    (``_mma_tile`` with k_width 2) of one m16nN block: ``register 1 -> (0,1)``,
    ``lane 1,2 -> (0,2),(0,4)``, ``lane 4,8,16 -> (1,0),(2,0),(4,0)``,
    ``register -> (8,0)``, then ``(0,8), (0,16) ..`` up to N.  Warps in
    row-major order (Ampere) or column-major (Hopper: warp groups along M).
    """

    kind: ClassVar[str] = "nvidia_mma"
    version: Sequence[int]
    warps_per_cta: Sequence[int]
    instr_shape: Sequence[int]
    cga_layout: Optional[Sequence[Sequence[int]]] = None
    ctas_per_cga: Optional[Sequence[int]] = None
    cta_split_num: Optional[Sequence[int]] = None
    cta_order: Optional[Sequence[int]] = None

    def __post_init__(self):
        v = self.version
        if isinstance(v, int) and not isinstance(v, bool):
            v = (v, 0)
        v = _ints("version", v, 2, pow2=False)
        if v[0] not in (2, 3) or v[1] > 15:
            raise LayoutError("version", f"{list(v)}: supported versions are [2, 0] (mma.sync) and [3, 0] (wgmma) "
                                         f"(minor 0 to 15)")
        _set(self, "version", v)
        warps = _ints("warps_per_cta", self.warps_per_cta)
        rank = len(warps)
        _set(self, "warps_per_cta", warps)
        _check_warps("warps_per_cta", warps, 32)
        instr = _ints("instr_shape", self.instr_shape)
        _set(self, "instr_shape", instr)
        if v[0] == 2:
            if rank not in (2, 3):
                raise LayoutError("warps_per_cta", f"mma v2 needs rank 2 or 3, got {rank}")
            if len(instr) != rank or tuple(instr[-2:]) != (16, 8) or any(s != 1 for s in instr[:-2]):
                raise LayoutError("instr_shape", f"{list(instr)}: mma v2 expects {[1] * (rank - 2) + [16, 8]}")
        else:
            if rank != 2:
                raise LayoutError("warps_per_cta", f"wgmma (v3) needs rank 2, got {rank}")
            if warps[0] % 4:
                raise LayoutError("warps_per_cta", f"wgmma needs whole warp groups along M (a multiple of 4), got {warps[0]}")
            if len(instr) != 3 or instr[0] != 16 or not 8 <= instr[1] <= 256:
                raise LayoutError("instr_shape", f"{list(instr)}: wgmma expects [16, N, K] with N a power of two in 8..256")
        self._check_cga(rank)

    @property
    def rank(self) -> int:
        return len(self.warps_per_cta)

    @property
    def is_hopper(self) -> bool:
        return self.version[0] == 3

    def tile_shape(self) -> list[int]:
        return list(self.instr_shape[:2]) if self.is_hopper else list(self.instr_shape)

    def cta_tile(self) -> LinearLayout:
        rank = self.rank
        order = matrix_order(rank, True)
        L = _mma_tile(rank, self.tile_shape(), 2, order, order)
        warp_order = matrix_order(rank, row_major=not self.is_hopper)
        return L * identity_nd("warp", self.warps_per_cta, warp_order).transpose_outs(L.out_dims)

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = _check_shape(shape, self.rank)
        return _combine(self.cta_tile(), self._cga(self.rank), shape)


# ---------------------------------------------------------------- AMD MFMA
_MFMA_SHAPES = ((32, 32), (16, 16), (64, 4), (4, 64))


@dataclass(frozen=True)
class AMDMFMALayout(_CGA, Layout):
    """Triton's ``#ttg.amd_mfma`` (Gluon ``AMDMFMALayout``), wave64.

    ``instr_shape`` = [M, N] or [M, N, K] with (M, N) in 32x32, 16x16, 64x4
    (must be ``transposed``), 4x64; ``element_bitwidth`` 32 (4 consecutive
    rows per lane, ``height`` 4) or 64 (height 1).  Non-transposed tile:
    ``height`` registers along M, lanes N first then ``64/N`` along M, then
    ``M*N/(64*height)`` registers along M; transposed swaps M and N.  Then
    ``tiles_per_warp[N]`` registers and ``warps_per_cta[N]`` warps along N,
    registers up to ``shape[N]``, ``tiles_per_warp[M]`` registers and the M
    warps (N-contiguous tile order).  Rank 3 adds a batch dim 0 (warps only).
    """

    kind: ClassVar[str] = "amd_mfma"
    version: int
    instr_shape: Sequence[int]
    transposed: bool
    warps_per_cta: Sequence[int]
    element_bitwidth: Optional[int] = None
    tiles_per_warp: Optional[Sequence[int]] = None
    cga_layout: Optional[Sequence[Sequence[int]]] = None
    ctas_per_cga: Optional[Sequence[int]] = None
    cta_split_num: Optional[Sequence[int]] = None
    cta_order: Optional[Sequence[int]] = None

    def __post_init__(self):
        if not isinstance(self.version, int) or self.version not in (1, 2, 3, 4) or isinstance(self.version, bool):
            raise LayoutError("version", f"{short(self.version)} is not in 1..4 (gfx908, gfx90a, gfx942, gfx950)")
        instr = _ints("instr_shape", self.instr_shape)
        if len(instr) not in (2, 3) or tuple(instr[:2]) not in _MFMA_SHAPES:
            raise LayoutError("instr_shape", f"{list(instr)}: (M, N) must be one of {[list(s) for s in _MFMA_SHAPES]}")
        _set(self, "instr_shape", instr)
        if not isinstance(self.transposed, bool):
            raise LayoutError("transposed", f"expected true/false, got {short(self.transposed)}")
        if tuple(instr[:2]) == (64, 4) and not self.transposed:
            raise LayoutError("transposed", "a 64x4 mfma layout must be transposed")
        warps = _ints("warps_per_cta", self.warps_per_cta)
        rank = len(warps)
        if rank not in (2, 3):
            raise LayoutError("warps_per_cta", f"mfma needs rank 2 or 3, got {rank}")
        _set(self, "warps_per_cta", warps)
        _check_warps("warps_per_cta", warps, 64)
        ebw = 32 if self.element_bitwidth is None else _int("element_bitwidth", self.element_bitwidth, (32, 64))
        _set(self, "element_bitwidth", ebw)
        tpw = (1,) * rank if self.tiles_per_warp is None else self.tiles_per_warp
        _set(self, "tiles_per_warp", _ints("tiles_per_warp", tpw, rank))
        if math.prod(self.tiles_per_warp) > limits.MAX_REGISTERS:
            raise LayoutError("tiles_per_warp", f"{list(self.tiles_per_warp)}: at most {limits.MAX_REGISTERS} tiles")
        self._check_cga(rank)

    @property
    def rank(self) -> int:
        return len(self.warps_per_cta)

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = _check_shape(shape, self.rank)
        rank = self.rank
        mi, ni = rank - 2, rank - 1
        dm, dn = f"dim{mi}", f"dim{ni}"
        m, n = self.instr_shape[0], self.instr_shape[1]
        height = 1 if self.element_bitwidth == 64 else 4
        tiles = m * n // (64 * height)
        if not self.transposed:
            tile = _id(height, "register", dm) * (_id(n, "lane", dn) * _id(64 // n, "lane", dm))
            tile = tile * _id(tiles, "register", dm)
        else:
            tile = _id(height, "register", dn) * (_id(m, "lane", dm) * _id(64 // m, "lane", dn))
            tile = tile * _id(tiles, "register", dn)
        tile = tile.transpose_outs([dn, dm])
        tpw, wpc = self.tiles_per_warp, self.warps_per_cta
        tile = tile * _id(tpw[ni], "register", dn) * _id(wpc[ni], "warp", dn)
        tile = tile * _id(shape[ni] // (n * wpc[ni] * tpw[ni]), "register", dn)
        tile = tile * _id(tpw[mi], "register", dm) * _id(wpc[mi], "warp", dm)
        if rank == 3:
            tile = tile * _id(1, "register", "dim0") * _id(1, "lane", "dim0") * _id(wpc[0], "warp", "dim0")
        return _combine(tile, self._cga(rank), shape)


# ---------------------------------------------------------------- AMD WMMA
@dataclass(frozen=True)
class AMDWMMALayout(_CGA, Layout):
    """Triton's ``#ttg.amd_wmma`` (Gluon ``AMDWMMALayout``), wave32, 16x16 output.

    Version 1 (RDNA3): ``register -> (2,0),(4,0),(8,0)``, ``lane -> (0,1)..(0,8),
    (1,0)`` (rows interleaved between the two half-waves); versions 2 (RDNA4)
    and 3 (gfx1250): ``register -> (1,0),(2,0),(4,0)``, ``lane -> (0,1)..(0,8),
    (8,0)``.  ``transposed`` swaps the two dims.  Warps row-major; the tile
    repeats N first.
    """

    kind: ClassVar[str] = "amd_wmma"
    version: int
    transposed: bool
    warps_per_cta: Sequence[int]
    instr_shape: Optional[Sequence[int]] = None
    cga_layout: Optional[Sequence[Sequence[int]]] = None
    ctas_per_cga: Optional[Sequence[int]] = None
    cta_split_num: Optional[Sequence[int]] = None
    cta_order: Optional[Sequence[int]] = None

    def __post_init__(self):
        if not isinstance(self.version, int) or self.version not in (1, 2, 3) or isinstance(self.version, bool):
            raise LayoutError("version", f"{short(self.version)} is not 1, 2 or 3 (RDNA3, RDNA4, gfx1250)")
        if not isinstance(self.transposed, bool):
            raise LayoutError("transposed", f"expected true/false, got {short(self.transposed)}")
        warps = _ints("warps_per_cta", self.warps_per_cta)
        if len(warps) not in (2, 3):
            raise LayoutError("warps_per_cta", f"wmma needs rank 2 or 3, got {len(warps)}")
        _set(self, "warps_per_cta", warps)
        _check_warps("warps_per_cta", warps, 32)
        if self.instr_shape is None and self.version == 3:
            raise LayoutError("instr_shape", "wmma v3 needs instr_shape [16, 16, K] with K 32, 64 or 128")
        instr = _ints("instr_shape", (16, 16, 16) if self.instr_shape is None else self.instr_shape, 3)
        if instr[:2] != (16, 16) or (self.version < 3 and instr[2] != 16) or (self.version == 3 and instr[2] not in (32, 64, 128)):
            raise LayoutError("instr_shape", f"{list(instr)}: wmma v1/v2 is [16, 16, 16], v3 is [16, 16, K] with K 32, 64 or 128")
        _set(self, "instr_shape", instr)
        self._check_cga(len(warps))

    @property
    def rank(self) -> int:
        return len(self.warps_per_cta)

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = _check_shape(shape, self.rank)
        rank = self.rank
        t = matrix_order(rank, row_major=not self.transposed)
        outs = [f"dim{t[0]}", f"dim{t[1]}"]
        if self.version == 1:
            tile = LinearLayout({"register": [[0, 2], [0, 4], [0, 8]],
                                 "lane": [[1, 0], [2, 0], [4, 0], [8, 0], [0, 1]]}, outs)
        else:
            tile = LinearLayout({"register": [[0, 1], [0, 2], [0, 4]],
                                 "lane": [[1, 0], [2, 0], [4, 0], [8, 0], [0, 8]]}, outs)
        if rank == 3:
            tile = tile * _id(1, "register", "dim0") * _id(1, "lane", "dim0")
        rep = [f"dim{d}" for d in matrix_order(rank, True)]
        warps = identity_nd("warp", self.warps_per_cta, matrix_order(rank, True))
        return _combine(tile.transpose_outs(rep) * warps.transpose_outs(rep), self._cga(rank), shape)


# --------------------------------------------------------------- dot operand
@dataclass(frozen=True)
class DotOperandLayout(Layout):
    """Triton's ``#ttg.dot_op``: operand A (``operand_index`` 0, M x K) or B
    (1, K x N) of a dot whose accumulator has layout ``parent``.

    * blocked parent (FMA dot, ``k_width`` 0): each thread holds the whole K
      extent; lanes and warps broadcast along K.
    * ``nvidia_mma`` parent: mma tile of A = 16 x 8k_width, B = 8k_width x 8
      (only A for wgmma): k_width registers along K, 4 lanes along K, 8 lanes
      along M/N; warps as the accumulator's but broadcast along K.
    * ``amd_mfma`` parent: k_width registers along K, lanes M/N-first then
      ``64/nonK`` along K, registers repeat K; warps not broadcast.
    * ``amd_wmma`` parent: k_width registers along K, 16 lanes along M/N, the
      other half-wave duplicates K (v1) or continues K (v2/v3).
    """

    kind: ClassVar[str] = "dot_operand"
    operand_index: int
    parent: Layout
    k_width: int = 0

    def __post_init__(self):
        if not isinstance(self.operand_index, int) or isinstance(self.operand_index, bool) \
                or self.operand_index not in (0, 1):
            raise LayoutError("operand_index", f"{short(self.operand_index)} is not 0 (A) or 1 (B)")
        if not isinstance(self.k_width, int) or isinstance(self.k_width, bool):
            raise LayoutError("k_width", f"expected an integer, got {short(self.k_width)}")
        p = self.parent
        if not isinstance(p, (BlockedLayout, NVMMADistributedLayout, AMDMFMALayout, AMDWMMALayout)):
            raise LayoutError("parent", f"expected a blocked, nvidia_mma, amd_mfma or amd_wmma layout, "
                                        f"got {getattr(p, 'kind', None) or short(p)}")
        if isinstance(p, BlockedLayout):
            if self.k_width != 0:
                raise LayoutError("k_width", "must be 0 for a blocked (FMA) parent")
            if p.rank < 2:
                raise LayoutError("parent", "a dot operand needs rank >= 2")
            return
        if not _is_pow2(self.k_width) or self.k_width > 64:
            raise LayoutError("k_width", f"{short(self.k_width)} is not a power of two from 1 to 64")
        if isinstance(p, AMDWMMALayout) and p.version < 3 and self.k_width not in ((8, 16) if p.version == 1 else (4, 8, 16)):
            raise LayoutError("k_width", f"{self.k_width}: a wmma v{p.version} operand needs k_width "
                                         f"{'8 or 16' if p.version == 1 else '4, 8 or 16'}")
        if isinstance(p, NVMMADistributedLayout) and p.is_hopper and self.operand_index == 1:
            raise LayoutError("operand_index", "wgmma takes operand B from shared memory; only A (0) can be in registers")

    @property
    def rank(self) -> int:
        return self.parent.rank

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = _check_shape(shape, self.rank)
        p, rank, op, kw = self.parent, self.rank, self.operand_index, self.k_width
        k_idx = rank - 1 if op == 0 else rank - 2
        cga = p._cga(rank)
        if not isinstance(p, AMDMFMALayout):
            # Triton's getCTALayout of a dot operand: the CTAs that split the
            # accumulator along K would each need the whole K extent, so the
            # K component of every CGA basis is zeroed (those CTAs hold
            # copies) and registers cover K.  The mfma conversion keeps them.
            cga = _zero_out_dim(cga, f"dim{k_idx}")
        if isinstance(p, BlockedLayout):
            size = list(p.size_per_thread)
            size[k_idx] = shape[k_idx]
            rep = [f"dim{d}" for d in p.order]
            cta = (identity_nd("register", size, p.order).transpose_outs(rep)
                   * _broadcast_dot(p.threads_per_warp, p.order, k_idx, "lane").transpose_outs(rep)
                   * _broadcast_dot(p.warps_per_cta, p.order, k_idx, "warp").transpose_outs(rep))
            return _combine(cta, cga, shape)
        order = dot_operand_order(op, rank)
        dk, dnk = f"dim{order[0]}", f"dim{order[1]}"
        if isinstance(p, NVMMADistributedLayout):
            tile = [1] * rank
            tile[-2:] = [16, kw * 8] if op == 0 else [kw * 8, 8]
            cta = _mma_tile(rank, tile, kw, order, order)
            warps = _broadcast_dot(p.warps_per_cta, matrix_order(rank, not p.is_hopper), k_idx, "warp")
            return _combine(cta * warps.transpose_outs(cta.out_dims), cga, shape)
        if isinstance(p, AMDMFMALayout):
            m, n = p.instr_shape[0], p.instr_shape[1]
            nonk = m if op == 0 else n
            tile = _id(kw, "register", dk) * (_id(nonk, "lane", dnk) * _id(64 // nonk, "lane", dk))
            k_tile = 64 // nonk * kw
            if (m, n, op) in ((64, 4, 0), (4, 64, 1)):
                tile = tile * _id(16, "register", dk)
                k_tile *= 16
            if shape[k_idx] > k_tile:
                tile = tile * _id(shape[k_idx] // k_tile, "register", dk)
            nonk_idx = rank - 2 if op == 0 else rank - 1
            tile = (tile * _id(p.tiles_per_warp[nonk_idx], "register", dnk)).transpose_outs([dk, dnk])
            if rank == 3:
                tile = tile * _id(1, "register", "dim0") * _id(1, "lane", "dim0")
            cta = tile * identity_nd("warp", p.warps_per_cta, matrix_order(rank, True))
            return _combine(cta, p._cga(rank), shape)
        # AMD WMMA
        nonk = p.instr_shape[0] if op == 0 else p.instr_shape[1]
        depth = 32 // nonk
        tile = _id(kw, "register", dk) * _id(nonk, "lane", dnk)
        tile = tile * (LinearLayout.zeros_1d(depth, "lane", dk) if p.version == 1 else _id(depth, "lane", dk))
        tile = tile * _id(p.instr_shape[2] // (depth * kw), "register", dk)
        if rank == 3:
            tile = tile * _id(1, "register", "dim0") * _id(1, "lane", "dim0")
        rep = [f"dim{d}" for d in order]
        warps = _broadcast_dot(p.warps_per_cta, matrix_order(rank, True), k_idx, "warp")
        return _combine(tile.transpose_outs(rep) * warps.transpose_outs(rep), cga, shape)


# ----------------------------------------------------------- explicit linear
@dataclass(frozen=True)
class DistributedLinearLayout(Layout):
    """Explicit bases (Triton's ``#ttg.linear``): ``register``, ``lane``,
    ``warp``, ``block``, each a list of bases with one int per tensor dim.
    ``to_linear(shape)`` checks the bases fit ``shape`` and cover it."""

    kind: ClassVar[str] = "linear"
    register: Sequence[Sequence[int]] = ()
    lane: Sequence[Sequence[int]] = ()
    warp: Sequence[Sequence[int]] = ()
    block: Sequence[Sequence[int]] = ()

    def __post_init__(self):
        rank = None
        for name in ("register", "lane", "warp", "block"):
            bs = _bases(name, getattr(self, name), rank)
            if bs and rank is None:
                rank = len(bs[0])
                bs = _bases(name, bs, rank)
            _set(self, name, bs)
        if rank is None:
            raise LayoutError("register", "no bases given; cannot tell the rank")
        if rank == 0:
            raise LayoutError("register", "bases must have at least one entry per basis")
        # checked from the spec's numbers: 28 (zero) register bases are 2^28 registers
        for name, most in (("register", limits.MAX_REGISTERS), ("block", limits.MAX_CTAS_PER_CGA)):
            n = len(getattr(self, name))
            if 1 << n > most:
                raise LayoutError(name, f"{n} bases are {1 << n} {'registers per thread' if name == 'register' else 'CTAs'}; "
                                        f"at most {most} ({most.bit_length() - 1} bases)")
        threads = 1 << (len(self.lane) + len(self.warp))
        if threads > limits.MAX_THREADS_PER_CTA:
            raise LayoutError("warp", f"{len(self.lane)} lane and {len(self.warp)} warp bases are {threads} threads; "
                                      f"at most {limits.MAX_THREADS_PER_CTA} per CTA")

    @property
    def rank(self) -> int:
        for bs in (self.register, self.lane, self.warp, self.block):
            if bs:
                return len(bs[0])
        return 0

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = _check_shape(shape, self.rank)
        return _explicit({"register": self.register, "lane": self.lane, "warp": self.warp,
                          "block": self.block}, shape)


def _explicit(bases: Mapping[str, Sequence[Sequence[int]]], shape: Sequence[int]) -> LinearLayout:
    sizes = dict(zip(_dims(len(shape)), shape))
    for d, bs in bases.items():
        for b in bs:
            for v, (n, s) in zip(b, sizes.items()):
                if v >= s:
                    raise LayoutError(d, f"basis {list(b)} exceeds size {s} of {n} (shape {list(shape)})")
    L = LinearLayout({d: [list(b) for b in bs] for d, bs in bases.items()}, sizes, require_surjective=False)
    if not L.is_surjective():
        raise LayoutError("shape", f"the bases do not cover every element of shape {list(shape)}")
    return L


@dataclass(frozen=True)
class SharedLinearLayout(Layout):
    """Explicit memory layout (Triton's ``#ttg.shared_linear``): ``offset``
    and ``block`` bases, one int per tensor dim."""

    kind: ClassVar[str] = "shared_linear"
    is_memory: ClassVar[bool] = True
    space: ClassVar[str] = "shared"
    offset: Sequence[Sequence[int]] = ()
    block: Sequence[Sequence[int]] = ()

    def __post_init__(self):
        off = _bases("offset", self.offset, None)
        if not off:
            raise LayoutError("offset", "no bases given; cannot tell the rank")
        rank = len(off[0])
        _set(self, "offset", _bases("offset", off, rank))
        _set(self, "block", _bases("block", self.block, rank))

    @property
    def rank(self) -> int:
        return len(self.offset[0])

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = _check_shape(shape, self.rank)
        return _explicit({"offset": self.offset, "block": self.block}, shape)


# ------------------------------------------------------------ shared layouts
@dataclass(frozen=True)
class SwizzledSharedLayout(_CGA, Layout):
    """Triton's ``#ttg.swizzled_shared``: rows of the two fastest dims
    (``order[0]`` = columns, ``order[1]`` = rows) XOR-swizzled in ``vec``-wide
    chunks: ``offset`` bits of the columns map to ``(0, 2**i)``, the bit of
    row ``r = 2**i`` maps to ``(r, vec * ((r // per_phase) % max_phase) % cols)``;
    slower dims follow ``order`` unswizzled."""

    kind: ClassVar[str] = "swizzled_shared"
    is_memory: ClassVar[bool] = True
    space: ClassVar[str] = "shared"
    vec: int
    per_phase: int
    max_phase: int
    order: Sequence[int]
    cga_layout: Optional[Sequence[Sequence[int]]] = None
    ctas_per_cga: Optional[Sequence[int]] = None
    cta_split_num: Optional[Sequence[int]] = None
    cta_order: Optional[Sequence[int]] = None

    def __post_init__(self):
        for name in ("vec", "per_phase", "max_phase"):
            v = getattr(self, name)
            if not _is_pow2(v) or v > limits.MAX_INT:
                raise LayoutError(name, f"{short(v)} is not a power of two from 1 to {limits.MAX_INT}")
        order = _ints("order", self.order, pow2=False)
        if not order:
            raise LayoutError("order", "needs at least one dim")
        _set(self, "order", _order("order", order, len(order)))
        self._check_cga(len(order))

    @property
    def rank(self) -> int:
        return len(self.order)

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = _check_shape(shape, self.rank)
        spc = self._split_shape(shape)
        if self.rank == 1:
            cta = LinearLayout.identity_1d(spc[0], "offset", "dim0")
        else:
            col, row = self.order[0], self.order[1]
            ncol, nrow = spc[col], spc[row]
            bases = [[0, 1 << i] for i in range(ncol.bit_length() - 1)]
            for i in range(nrow.bit_length() - 1):
                r = 1 << i
                bases.append([r, (self.vec * ((r // self.per_phase) % self.max_phase)) % ncol])
            cta = LinearLayout({"offset": bases}, {f"dim{row}": nrow, f"dim{col}": ncol})
            for d in self.order[2:]:
                cta = cta * LinearLayout.identity_1d(spc[d], "offset", f"dim{d}")
        return _combine(cta, self._cga(self.rank), shape)


@dataclass(frozen=True)
class NVMMASharedLayout(_CGA, Layout):
    """Triton's ``#ttg.nvmma_shared`` (the wgmma/tcgen05/TMA swizzle).

    Core matrix: 8 rows x ``8 * max(16, swizzle_byte_width) / element_bitwidth``
    columns (the contiguous dim: the last, or dim 0 when ``transposed``); row
    ``r`` is XOR-ed by ``vec * ((r // per_phase) % max_phase)`` with
    ``vec = 128 / element_bitwidth`` (16 bytes), ``per_phase = 128 /
    swizzle_byte_width``, ``max_phase = swizzle_byte_width / 16``.  The core
    matrix repeats over rows, then columns, up to the TMA block (256 rows,
    one swizzle width of columns), then over the rest of the shape.
    ``fp4_padded``: 8 real + 8 padding bytes per 16; padding offsets alias
    real ones.  ``swizzle_byte_width`` 0: row-major, no swizzle.
    """

    kind: ClassVar[str] = "nvmma_shared"
    is_memory: ClassVar[bool] = True
    space: ClassVar[str] = "shared"
    swizzle_byte_width: int
    element_bitwidth: int
    rank: int = 2
    transposed: bool = False
    fp4_padded: bool = False
    cga_layout: Optional[Sequence[Sequence[int]]] = None
    ctas_per_cga: Optional[Sequence[int]] = None
    cta_split_num: Optional[Sequence[int]] = None
    cta_order: Optional[Sequence[int]] = None

    def __post_init__(self):
        _int("swizzle_byte_width", self.swizzle_byte_width, (0, 32, 64, 128))
        _int("element_bitwidth", self.element_bitwidth, (8, 16, 32, 64))
        if not isinstance(self.rank, int) or isinstance(self.rank, bool) or not 1 <= self.rank <= limits.MAX_RANK:
            raise LayoutError("rank", f"{short(self.rank)} is not an integer from 1 to {limits.MAX_RANK}")
        for name in ("transposed", "fp4_padded"):
            if not isinstance(getattr(self, name), bool):
                raise LayoutError(name, f"expected true/false, got {short(getattr(self, name))}")
        if self.fp4_padded and self.element_bitwidth != 8:
            raise LayoutError("fp4_padded", "needs element_bitwidth 8 (packed fp4 pairs)")
        if self.fp4_padded and self.swizzle_byte_width != 128:
            raise LayoutError("fp4_padded", "needs swizzle_byte_width 128 (Triton supports padded fp4 only there)")
        if self.transposed and self.swizzle_byte_width == 0 and self.rank > 2:
            raise LayoutError("transposed", "an unswizzled transposed nvmma_shared layout of rank > 2 is not supported "
                                            "(Triton pads it to TMA blocks); use a shared_linear spec")
        if self.swizzle_byte_width and self.rank < 2:
            raise LayoutError("rank", "a swizzled nvmma layout needs rank >= 2")
        self._check_cga(self.rank)

    def core_matrix(self) -> LinearLayout:
        """``getCoreMatrixLinearLayout``: offset -> (row, col) of one 8-row tile."""
        swz, bits = self.swizzle_byte_width, self.element_bitwidth
        vec, per_phase, max_phase = 128 // bits, 128 // swz, swz // 16
        cols = 8 * max(16, swz) // bits
        pack = (lambda c: c // 16 * 8 + c % 8) if self.fp4_padded else (lambda c: c)
        bases = [[0, pack(1 << i)] for i in range(cols.bit_length() - 1)]
        bases += [[r, pack(vec * ((r // per_phase) % max_phase))] for r in (1, 2, 4)]
        return LinearLayout({"offset": bases}, ["dim0", "dim1"])

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = _check_shape(shape, self.rank)
        rank, names = self.rank, _dims(self.rank)
        spc = self._split_shape(shape)
        tma = [min(s, 256) for s in spc]
        if self.swizzle_byte_width == 0:
            # row-major; transposed (rank 2): dim 0 contiguous
            L = LinearLayout.empty()
            for d in (range(rank) if self.transposed else reversed(range(rank))):
                L = L * LinearLayout.identity_1d(tma[d], "offset", names[d])
            L = _fit_up(L, dict(zip(names, spc)))
            return _combine(L, self._cga(rank), shape)
        contig = 0 if self.transposed else rank - 1
        width = 8 * self.swizzle_byte_width // self.element_bitwidth
        tma[contig] = min(tma[contig], width // 2 if self.fp4_padded else width)
        if self.transposed and rank > 2 and tma[0] * (2 if self.fp4_padded else 1) < width:
            # rank 2 is caught by the core-matrix check below, which sees only
            # the collapsed rows; Triton's TMA block code aborts here
            raise LayoutError("shape", f"{list(shape)}: the contiguous dim 0 holds {tma[0]} elements per CTA, "
                                       f"less than one {self.swizzle_byte_width}-byte swizzle row ({width})")
        # collapse to (rows, cols): cols = the last dim, rows = all the others
        # (swapped when transposed: the contiguous dim 0 is then the columns)
        collapsed = [math.prod(tma[:-1]), tma[-1]]
        if self.transposed:
            collapsed.reverse()
        core = self.core_matrix()
        rows, cols = core.out_dim_size("dim0"), core.out_dim_size("dim1")
        if collapsed[1] * (2 if self.fp4_padded else 1) < cols or collapsed[0] < rows:
            raise LayoutError("shape", f"{list(shape)} is smaller than one {rows}x{cols} core matrix "
                                       f"of a {self.swizzle_byte_width}-byte swizzle")
        L = _fit_up(core, {"dim0": collapsed[0], "dim1": collapsed[1]})
        # row-major reshape of (rows, cols) into the N-d TMA block (rotated left
        # when transposed, so the contiguous dim 0 comes last), then un-rotate
        target = tma[1:] + tma[:1] if self.transposed else tma
        tmp = [f"t{d}" for d in range(rank)]
        L = L.transpose_outs(["dim1", "dim0"]).reshape_outs(
            [(tmp[d], target[d]) for d in reversed(range(rank))]).transpose_outs(tmp)
        order = [rank - 1] + list(range(rank - 1)) if self.transposed else list(range(rank))
        L = LinearLayout({"offset": [[b[o] for o in order] for b in L.bases["offset"]]},
                         {names[i]: target[o] for i, o in enumerate(order)}, require_surjective=False)
        L = _fit_up(L, dict(zip(names, spc)))
        return _combine(L, self._cga(rank), shape)


# ----------------------------------------------------------------- CuTe-style
@dataclass(frozen=True)
class CuteLayout(Layout):
    """A memory layout from a CuTe-style descriptor (seed 001), e.g.
    ``<(128,64),(64,1),swizzle<3,4,3>,elem=f16>``; see ``ll_codegen.layouts.cute``.
    ``element_bitwidth`` is the element width when the descriptor has no
    ``elem=`` (the swizzle acts on byte addresses)."""

    kind: ClassVar[str] = "cute"
    is_memory: ClassVar[bool] = True
    space: ClassVar[str] = "shared"
    descriptor: str
    element_bitwidth: Optional[int] = None

    def __post_init__(self):
        from ll_codegen.layouts.cute import parse
        if not isinstance(self.descriptor, str):
            raise LayoutError("descriptor", f"expected a string, got {short(self.descriptor)}")
        if len(self.descriptor) > limits.MAX_DESCRIPTOR_CHARS:
            raise LayoutError("descriptor", f"{len(self.descriptor)} characters; at most {limits.MAX_DESCRIPTOR_CHARS}")
        if self.element_bitwidth is not None and (not _is_pow2(self.element_bitwidth) or self.element_bitwidth > 64):
            raise LayoutError("element_bitwidth", f"{short(self.element_bitwidth)} is not a power of two from 1 to 64")
        parsed = parse(self.descriptor)
        _set(self, "_rank", len(parsed.modes))
        _set(self, "_tile", parsed.to_linear(self.element_bitwidth))   # validates bijectivity

    @property
    def rank(self) -> int:
        return self._rank

    def tile(self) -> LinearLayout:
        """The descriptor's own layout: offset -> dims (the tile's shape)."""
        return self._tile

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = _check_shape(shape, self.rank)
        tile = self.tile()
        names = _dims(self.rank)
        for n, s in zip(names, shape):
            if s < tile.out_dim_size(n):
                raise LayoutError("shape", f"{list(shape)} is smaller than the descriptor's shape "
                                           f"{[tile.out_dim_size(m) for m in names]}")
        L = _fit_up(tile, dict(zip(names, shape)))
        return L * LinearLayout({"block": []}, {n: 1 for n in names})


# --------------------------------------------------------------- global tiles
@dataclass(frozen=True)
class GlobalLayout(Layout):
    """A tile of a tensor in global memory (not a Triton layout): dim
    ``order[0]`` has stride 1, the other dims' strides are runtime arguments
    of the generated code.  ``alignment``: the bytes to which the tile's base
    address and every stride (in bytes) are aligned (1 to 16; vectors never
    exceed it).  As a linear layout it is the dense tile, offsets filling
    ``order[0]`` first::

        kind: global
        order: [1, 0]     # row-major: dim 1 is contiguous
        alignment: 16
        shape: [128, 64]
    """

    kind: ClassVar[str] = "global"
    is_memory: ClassVar[bool] = True
    space: ClassVar[str] = "global"
    order: Sequence[int]
    alignment: int = 16

    def __post_init__(self):
        if isinstance(self.order, (str, bytes)) or not isinstance(self.order, Sequence) or not self.order:
            raise LayoutError("order", f"expected a non-empty list of dims such as [1, 0], got {short(self.order)}")
        _set(self, "order", _order("order", self.order, len(self.order)))
        if not _is_pow2(self.alignment) or self.alignment > 16:
            raise LayoutError("alignment", f"{short(self.alignment)} is not a power of two from 1 to 16 (bytes)")

    @property
    def rank(self) -> int:
        return len(self.order)

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = _check_shape(shape, self.rank)
        names = _dims(self.rank)
        L = LinearLayout.empty()
        for d in self.order:
            L = L * _id(shape[d], "offset", names[d])
        L = L.transpose_outs(names) if len(names) > 1 else L
        return L * LinearLayout({"block": []}, {n: 1 for n in names})


# ------------------------------------------------------------------ registry
LAYOUT_KINDS: dict[str, type] = {cls.kind: cls for cls in (
    BlockedLayout, SliceLayout, NVMMADistributedLayout, DotOperandLayout, AMDMFMALayout,
    AMDWMMALayout, SwizzledSharedLayout, NVMMASharedLayout, DistributedLinearLayout,
    SharedLinearLayout, CuteLayout, GlobalLayout)}


def from_dict(spec: Mapping[str, Any]) -> Layout:
    """Build a layout from plain data: ``{"kind": ..., field: value, ...}``
    (nested ``parent`` mappings are built recursively; a ``shape`` key is
    ignored).  Unknown kinds or fields raise ``LayoutError``."""
    if not isinstance(spec, Mapping):
        raise LayoutError("kind", f"expected a mapping, got {short(spec)}")
    kind = spec.get("kind")
    if kind not in LAYOUT_KINDS:
        raise LayoutError("kind", f"{short(kind)} is not one of {sorted(LAYOUT_KINDS)}")
    cls = LAYOUT_KINDS[kind]
    names = {f.name for f in fields(cls)}
    args = {}
    for k, v in spec.items():
        if k in ("kind", "shape"):
            continue
        if k not in names:
            raise LayoutError(limits.cut(str(k), limits.MAX_ECHO), f"unknown field for kind {kind!r} (fields: {sorted(names)})")
        args[k] = from_dict(v) if k == "parent" and isinstance(v, Mapping) else v
    missing = [f.name for f in fields(cls) if f.name not in args and f.default is MISSING]
    if missing:
        raise LayoutError(missing[0], f"required for kind {kind!r}")
    return cls(**args)
