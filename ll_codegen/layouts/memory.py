"""Memory layouts (``is_memory``; input dims ``offset, block``):
``swizzled_shared`` (``#ttg.swizzled_shared``), ``nvmma_shared``
(``#ttg.nvmma_shared``), ``shared_linear`` (``#ttg.shared_linear``, explicit
bases), ``cute`` (a CuTe-style descriptor, parsed by
``ll_codegen.layouts.cute``) and ``global`` (a tile of a tensor in global
memory).  The conversion steps are described in ``ll_codegen.layouts.base``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Optional, Sequence

from ll_codegen.core import limits
from ll_codegen.core.layout import LinearLayout
from ll_codegen.core.limits import short
from ll_codegen.layouts.base import (CgaFields, Layout, LayoutError, check_bases, check_int, check_ints, check_order,
                                     check_shape, combine, dim_names, explicit_bases, fit_up, id_1d, is_pow2,
                                     set_field)
from ll_codegen.layouts.cute import parse


# ---------------------------------------------------------- explicit shared
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
        off = check_bases("offset", self.offset, None)
        if not off:
            raise LayoutError("offset", "no bases given; cannot tell the rank")
        rank = len(off[0])
        set_field(self, "offset", check_bases("offset", off, rank))
        set_field(self, "block", check_bases("block", self.block, rank))

    @property
    def rank(self) -> int:
        return len(self.offset[0])

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = check_shape(shape, self.rank)
        return explicit_bases({"offset": self.offset, "block": self.block}, shape)


# ------------------------------------------------------------ shared layouts
@dataclass(frozen=True)
class SwizzledSharedLayout(CgaFields, Layout):
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
            if not is_pow2(v) or v > limits.MAX_INT:
                raise LayoutError(name, f"{short(v)} is not a power of two from 1 to {limits.MAX_INT}")
        order = check_ints("order", self.order, pow2=False)
        if not order:
            raise LayoutError("order", "needs at least one dim")
        set_field(self, "order", check_order("order", order, len(order)))
        self._check_cga(len(order))

    @property
    def rank(self) -> int:
        return len(self.order)

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = check_shape(shape, self.rank)
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
        return combine(cta, self._cga(self.rank), shape)


@dataclass(frozen=True)
class NVMMASharedLayout(CgaFields, Layout):
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
        check_int("swizzle_byte_width", self.swizzle_byte_width, (0, 32, 64, 128))
        check_int("element_bitwidth", self.element_bitwidth, (8, 16, 32, 64))
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
        shape = check_shape(shape, self.rank)
        rank, names = self.rank, dim_names(self.rank)
        spc = self._split_shape(shape)
        tma = [min(s, 256) for s in spc]
        if self.swizzle_byte_width == 0:
            # row-major; transposed (rank 2): dim 0 contiguous
            L = LinearLayout.empty()
            for d in (range(rank) if self.transposed else reversed(range(rank))):
                L = L * LinearLayout.identity_1d(tma[d], "offset", names[d])
            L = fit_up(L, dict(zip(names, spc)))
            return combine(L, self._cga(rank), shape)
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
        L = fit_up(core, {"dim0": collapsed[0], "dim1": collapsed[1]})
        # row-major reshape of (rows, cols) into the N-d TMA block (rotated left
        # when transposed, so the contiguous dim 0 comes last), then un-rotate
        target = tma[1:] + tma[:1] if self.transposed else tma
        tmp = [f"t{d}" for d in range(rank)]
        L = L.transpose_outs(["dim1", "dim0"]).reshape_outs(
            [(tmp[d], target[d]) for d in reversed(range(rank))]).transpose_outs(tmp)
        order = [rank - 1] + list(range(rank - 1)) if self.transposed else list(range(rank))
        L = LinearLayout({"offset": [[b[o] for o in order] for b in L.bases["offset"]]},
                         {names[i]: target[o] for i, o in enumerate(order)}, require_surjective=False)
        L = fit_up(L, dict(zip(names, spc)))
        return combine(L, self._cga(rank), shape)


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
        if not isinstance(self.descriptor, str):
            raise LayoutError("descriptor", f"expected a string, got {short(self.descriptor)}")
        if len(self.descriptor) > limits.MAX_DESCRIPTOR_CHARS:
            raise LayoutError("descriptor", f"{len(self.descriptor)} characters; at most {limits.MAX_DESCRIPTOR_CHARS}")
        if self.element_bitwidth is not None and (not is_pow2(self.element_bitwidth) or self.element_bitwidth > 64):
            raise LayoutError("element_bitwidth", f"{short(self.element_bitwidth)} is not a power of two from 1 to 64")
        parsed = parse(self.descriptor)
        set_field(self, "_rank", len(parsed.modes))
        set_field(self, "_tile", parsed.to_linear(self.element_bitwidth))   # validates bijectivity

    @property
    def rank(self) -> int:
        return self._rank

    def tile(self) -> LinearLayout:
        """The descriptor's own layout: offset -> dims (the tile's shape)."""
        return self._tile

    def default_shape(self) -> tuple[int, ...]:
        """The descriptor's modes say the shape: ``<(128,64),...>`` needs no ``shape: [128, 64]``."""
        return tuple(self._tile.out_dim_size(n) for n in dim_names(self.rank))

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = check_shape(shape, self.rank)
        tile = self.tile()
        names = dim_names(self.rank)
        for n, s in zip(names, shape):
            if s < tile.out_dim_size(n):
                raise LayoutError("shape", f"{list(shape)} is smaller than the descriptor's shape "
                                           f"{[tile.out_dim_size(m) for m in names]}")
        L = fit_up(tile, dict(zip(names, shape)))
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
        set_field(self, "order", check_order("order", self.order, len(self.order)))
        if not is_pow2(self.alignment) or self.alignment > 16:
            raise LayoutError("alignment", f"{short(self.alignment)} is not a power of two from 1 to 16 (bytes)")

    @property
    def rank(self) -> int:
        return len(self.order)

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = check_shape(shape, self.rank)
        names = dim_names(self.rank)
        L = LinearLayout.empty()
        for d in self.order:
            L = L * id_1d(shape[d], "offset", names[d])
        L = L.transpose_outs(names) if len(names) > 1 else L
        return L * LinearLayout({"block": []}, {n: 1 for n in names})
