"""Legacy (Triton/Gluon) layouts as small frozen dataclasses with ``to_linear``.

Each class mirrors one Gluon layout (``triton/experimental/gluon/language/
_layouts.py`` and ``amd/_layouts.py``), with the same snake_case field names,
and ``to_linear(shape)`` returns the ``LinearLayout`` that Triton's
``toLinearLayout(shape, attr)`` builds (``lib/Dialect/TritonGPU/IR/
LinearLayoutConversions.cpp``): input dims ``register, lane, warp, block`` for
distributed layouts, ``offset, block`` for memory layouts; output dims
``dim0 .. dim{r-1}`` in tensor order.  Bad parameters raise ``LayoutError``.

Every conversion follows the same three steps (``combine``, Triton's
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

This module holds what every kind shares: ``LayoutError``, the field checks,
the three conversion steps above (``combine``, ``fit_up``, ``fit_down``), the
CTA-tiling fields (``CgaFields``) and the base class ``Layout``.  The kinds,
one family per module:

* ``distributed``: ``blocked``, ``slice``, ``linear``;
* ``nvidia``: ``nvidia_mma``;
* ``amd``: ``amd_mfma``, ``amd_wmma``;
* ``dot_operand``: ``dot_operand`` (of a blocked, mma, mfma or wmma parent);
* ``memory``: ``swizzled_shared``, ``nvmma_shared``, ``shared_linear``,
  ``cute``, ``global``;

and ``kinds`` maps the YAML ``kind`` to its class (``LAYOUT_KINDS``,
``from_dict``).
"""
from __future__ import annotations

import math
from dataclasses import fields
from typing import Any, ClassVar, Mapping, Optional, Sequence

from ll_codegen.core import limits
from ll_codegen.core.layout import LinearLayout
from ll_codegen.core.limits import short


class LayoutError(ValueError):
    """A bad layout parameter: ``field`` names it, ``message`` says what is wrong."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


# ----------------------------------------------------------------- validation
def is_pow2(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1 and x & (x - 1) == 0


def check_int(field: str, value: Any, choices: Optional[Sequence[int]] = None) -> int:
    """One integer field: an int (not a bool or float: ``2.0 in (1, 2)`` is
    true in Python), one of ``choices`` if given."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise LayoutError(field, f"expected an integer, got {short(value)}")
    if choices is not None and value not in choices:
        raise LayoutError(field, f"{short(value)} is not one of {', '.join(map(str, choices))}")
    return value


def check_ints(field: str, value: Any, rank: Optional[int] = None, pow2: bool = True) -> tuple[int, ...]:
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
        if pow2 and not is_pow2(v):
            raise LayoutError(field, f"{v} is not a power of two")
    if rank is not None and len(out) != rank:
        raise LayoutError(field, f"has {len(out)} entries, expected {rank} (the rank)")
    return out


def check_order(field: str, value: Any, rank: int) -> tuple[int, ...]:
    out = check_ints(field, value, rank, pow2=False)
    if sorted(out) != list(range(rank)):
        raise LayoutError(field, f"{list(out)} is not a permutation of 0..{rank - 1}")
    return out


def check_bases(field: str, value: Any, rank: Optional[int]) -> tuple[tuple[int, ...], ...]:
    """Normalise a list of bases (each a list of ``rank`` non-negative ints)."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise LayoutError(field, f"expected a list of bases, got {short(value)}")
    if len(value) > limits.MAX_BASES:
        raise LayoutError(field, f"{len(value)} bases; at most {limits.MAX_BASES}")
    out = []
    for b in value:
        b = check_ints(field, b, rank, pow2=False)
        if any(v < 0 for v in b):
            raise LayoutError(field, f"basis {list(b)} has a negative entry")
        out.append(b)
    return tuple(out)


def set_field(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


def check_shape(shape: Any, rank: int) -> tuple[int, ...]:
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise LayoutError("shape", f"expected a list of sizes, got {short(shape)}")
    shape = tuple(shape)
    if len(shape) != rank:
        raise LayoutError("shape", f"{short(list(shape))} has rank {len(shape)}, the layout has rank {rank}")
    for s in shape:
        if not is_pow2(s):
            raise LayoutError("shape", f"size {short(s)} is not a power of two")
    if math.prod(shape) > limits.MAX_TILE_ELEMENTS:
        raise LayoutError("shape", f"{list(shape)} is {math.prod(shape)} elements; at most "
                                   f"{limits.MAX_TILE_ELEMENTS} per tile")
    return shape


def check_warps(field: str, warps: Sequence[int], warp_size: int) -> None:
    """At most ``MAX_THREADS_PER_CTA`` threads: 32 warps of 32, 16 of 64."""
    most = limits.MAX_THREADS_PER_CTA // warp_size
    if math.prod(warps) > most:
        raise LayoutError(field, f"{list(warps)} is {math.prod(warps)} warps; at most {most} warps of {warp_size} "
                                 f"threads ({limits.MAX_THREADS_PER_CTA} threads per CTA)")


def dim_names(rank: int) -> list[str]:
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
def id_1d(size: int, in_dim: str, out_dim: str) -> LinearLayout:
    """``identity1D``; sizes below 1 (integer division that ran out) are 1."""
    return LinearLayout.identity_1d(max(int(size), 1), in_dim, out_dim)


def fit_up(L: LinearLayout, shape: Mapping[str, int]) -> LinearLayout:
    """``ensureLayoutNotSmallerThan``: append bases of the first input dim,
    output dim by output dim in ``L``'s output order."""
    first = L.in_dims[0]
    for n in L.out_dims:
        have, want = L.out_dim_size(n), shape[n]
        if want > have:
            L = L * LinearLayout.identity_1d(want // have, first, n)
    return L


def fit_down(L: LinearLayout, shape: Mapping[str, int]) -> LinearLayout:
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


def combine(cta: LinearLayout, cga: LinearLayout, shape: Sequence[int]) -> LinearLayout:
    """Triton's ``combineCtaCgaWithShape``: fit the CGA layout (block -> dims,
    in units of CTA tiles) into ``shape``, fit the CTA tile into
    ``shape / cga size``, multiply, and put the output dims in tensor order."""
    names = dim_names(len(shape))
    labeled = dict(zip(names, shape))
    cga = fit_down(cga, labeled).transpose_outs(cta.out_dims)
    cta_shape = {n: max(1, labeled[n] // cga.out_dim_size(n)) for n in names}
    cta = fit_down(fit_up(cta, cta_shape), cta_shape)
    return (cta * cga).transpose_outs(names)


def drop_zero_registers(L: LinearLayout) -> LinearLayout:
    """Remove the register bases that fitting into a smaller shape zeroed.
    Triton does this for blocked layouts only (their register count is a
    free parameter); mma/mfma/wmma layouts and dot operands keep them."""
    bases = L.bases
    bases["register"] = [b for b in bases["register"] if any(b)]
    return LinearLayout(bases, L.out_dim_sizes, require_surjective=False)


def broadcast_dot(shape: Sequence[int], order: Sequence[int], k_dim: int, in_dim: str) -> LinearLayout:
    """``broadcastedDotOperandLayout``: identity over ``shape`` in ``order``,
    except zeros (broadcast) along the K dim."""
    L = LinearLayout.empty()
    for d in order:
        if d == k_dim:
            L = L * LinearLayout.zeros_1d(shape[d], in_dim, f"dim{d}")
        else:
            L = L * LinearLayout.identity_1d(shape[d], in_dim, f"dim{d}")
    return L


def zero_out_dim(L: LinearLayout, dim: str) -> LinearLayout:
    """``L`` with the ``dim`` component of every basis set to 0."""
    k = L.out_dims.index(dim)
    bases = {d: [[0 if i == k else v for i, v in enumerate(b)] for b in bs] for d, bs in L.bases.items()}
    sizes = dict(L.out_dim_sizes)
    sizes[dim] = 1
    return LinearLayout(bases, sizes, require_surjective=False)


# ------------------------------------------------------------------ CTA / CGA
class CgaFields:
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
            set_field(self, "cga_layout", check_bases("cga_layout", self.cga_layout, rank))
        if self.ctas_per_cga is not None:
            set_field(self, "ctas_per_cga", check_ints("ctas_per_cga", self.ctas_per_cga, rank))
        if self.cta_split_num is not None:
            set_field(self, "cta_split_num", check_ints("cta_split_num", self.cta_split_num, rank))
        if self.cta_order is not None:
            set_field(self, "cta_order", check_order("cta_order", self.cta_order, rank))
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
        names = dim_names(rank)
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

    def default_shape(self) -> Optional[tuple[int, ...]]:
        """The shape a spec without ``shape`` gets, when the layout states one
        itself (a CuTe descriptor's modes); None: the spec must give it."""
        return None

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


# ------------------------------------------------------------ explicit bases
def explicit_bases(bases: Mapping[str, Sequence[Sequence[int]]], shape: Sequence[int]) -> LinearLayout:
    """The layout of explicit ``bases`` (``linear``, ``shared_linear``) over
    ``shape``: every basis must fit the shape, and together they must cover it."""
    sizes = dict(zip(dim_names(len(shape)), shape))
    for d, bs in bases.items():
        for b in bs:
            for v, (n, s) in zip(b, sizes.items()):
                if v >= s:
                    raise LayoutError(d, f"basis {list(b)} exceeds size {s} of {n} (shape {list(shape)})")
    L = LinearLayout({d: [list(b) for b in bs] for d, bs in bases.items()}, sizes, require_surjective=False)
    if not L.is_surjective():
        raise LayoutError("shape", f"the bases do not cover every element of shape {list(shape)}")
    return L
