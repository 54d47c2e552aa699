"""Generic distributed layouts: ``blocked`` (``#ttg.blocked``), ``slice``
(``#ttg.slice``) and ``linear`` (``#ttg.linear``, explicit bases).

Input dims ``register, lane, warp, block``, output dims ``dim0 ..
dim{r-1}``; the conversion steps (CTA tile, CGA layout, fit to the shape)
are described in ``ll_codegen.layouts.base``.  ``WARP_SIZES`` bounds the
threads of a blocked layout's warp.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Optional, Sequence

from ll_codegen.core import limits
from ll_codegen.core.layout import LinearLayout, identity_nd
from ll_codegen.core.limits import short
from ll_codegen.layouts.base import (CgaFields, Layout, LayoutError, check_bases, check_ints, check_order,
                                     check_shape, check_warps, combine, dim_names, drop_zero_registers,
                                     explicit_bases, set_field)


#: Allowed values of prod(threads_per_warp) for blocked layouts (CUDA warps,
#: CDNA/RDNA wavefronts).  ``None`` allows any power of two (Triton's unit
#: tests use toy warps of 4 or 16 threads).
WARP_SIZES: Optional[tuple[int, ...]] = (32, 64)


# ------------------------------------------------------------------- blocked
@dataclass(frozen=True)
class BlockedLayout(CgaFields, Layout):
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
        spt = check_ints("size_per_thread", self.size_per_thread)
        rank = len(spt)
        if rank == 0:
            raise LayoutError("size_per_thread", "needs at least one dim")
        set_field(self, "size_per_thread", spt)
        tpw = check_ints("threads_per_warp", self.threads_per_warp, rank)
        if WARP_SIZES is not None and math.prod(tpw) not in WARP_SIZES:
            raise LayoutError("threads_per_warp", f"product {math.prod(tpw)} is not a warp size {list(WARP_SIZES)}")
        set_field(self, "threads_per_warp", tpw)
        if math.prod(spt) > limits.MAX_REGISTERS:
            raise LayoutError("size_per_thread", f"{list(spt)} is {math.prod(spt)} registers per thread; at most "
                                                 f"{limits.MAX_REGISTERS}")
        set_field(self, "warps_per_cta", check_ints("warps_per_cta", self.warps_per_cta, rank))
        check_warps("warps_per_cta", self.warps_per_cta, math.prod(tpw))
        set_field(self, "order", check_order("order", self.order, rank))
        self._check_cga(rank)

    @property
    def rank(self) -> int:
        return len(self.size_per_thread)

    def cta_tile(self) -> LinearLayout:
        return (identity_nd("register", self.size_per_thread, self.order)
                * identity_nd("lane", self.threads_per_warp, self.order)
                * identity_nd("warp", self.warps_per_cta, self.order))

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = check_shape(shape, self.rank)
        return drop_zero_registers(combine(self.cta_tile(), self._cga(self.rank), shape))


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
        shape = check_shape(shape, self.rank)
        parent_shape = list(shape)
        parent_shape.insert(self.dim, 1)
        P = self.parent.to_linear(parent_shape)
        keep = [i for i in range(self.parent.rank) if i != self.dim]
        bases = {d: [[b[i] for i in keep] for b in bs] for d, bs in P.bases.items()}
        bases["register"] = [b for b in bases["register"] if any(b)]
        return LinearLayout(bases, dict(zip(dim_names(self.rank), shape)))


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
            bs = check_bases(name, getattr(self, name), rank)
            if bs and rank is None:
                rank = len(bs[0])
                bs = check_bases(name, bs, rank)
            set_field(self, name, bs)
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
        shape = check_shape(shape, self.rank)
        return explicit_bases({"register": self.register, "lane": self.lane, "warp": self.warp,
                          "block": self.block}, shape)
