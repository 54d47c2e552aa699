"""Packed 4-bit elements (``i4``, ``u4``, ``e2m1``): two per byte, the byte-internal position a layout bit.

A layout over a tensor of 4-bit elements is the same ``LinearLayout`` in element
coordinates.  In registers, register basis 0 is the nibble position: registers
``2i`` and ``2i + 1`` share byte ``i``, low nibble first.  In memory, offset basis
0 is the nibble position: element offset ``o`` lives in byte ``o >> 1``, nibble
``o & 1``.  The *pair vector* of a layout is the tensor vector ``v`` that basis
maps to: the two elements of every byte differ by ``v``.

When both layouts of a transfer pair the same elements -- the same ``v``, one
tensor bit ``e_k`` of dim ``d``, which no other basis of either layout moves --
the nibble of element ``x`` is bit ``k`` of ``x`` on both sides, and the byte
holding ``x`` is the same on both sides up to where it lives.  The transfer is
then the byte transfer of the *quotient* layouts: ``L / v`` drops the pair
basis and reads every other image modulo ``v`` (bit ``k`` of dim ``d`` removed,
the higher bits of ``d`` shifted down: the dim halves).  Its tensor is the
*packed tensor*: byte ``y`` holds the elements ``lift(y)`` (low nibble, bit
``k`` = 0) and ``lift(y) + v`` (high nibble).  When the pair bit is bit 0 of the
row-major tensor's last dim, the packed tensor is the row-major packed array.

So a 4-bit plan *is* the 8-bit plan of the quotient layouts: its registers,
offsets, vectors and costs count bytes; ``Packing`` records the 4-bit layouts
and the pair bit beside it (``Transfer.packing``), and its ``dtype`` names the
4-bit type.  Layouts that pair different elements are refused here in one line
naming both pair vectors.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any, Sequence

from ll_codegen.core.dtypes import PACKED_BITS
from ll_codegen.core.layout import LinearLayout

#: the byte type a packed plan is planned as (its plans then state the 4-bit dtype: ``relabel``)
CARRIER = "u8"

#: the in dim whose basis 0 is the nibble position, by where the layout's data lives
PAIR_DIM = {"registers": "register", "shared": "offset", "global": "offset"}


@dataclass(frozen=True)
class Packing:
    """How a byte plan moves a 4-bit tensor: ``dtype`` (``i4``, ``u4``, ``e2m1``), the pair
    bit of the byte plan (bit ``bit`` of tensor dim ``dim``: the two nibbles of a byte differ
    there, the low nibble has it clear), the 4-bit layouts the plan was asked for
    (``src_bases``, ``dst_bases``, as plans record bases) and the 4-bit tensor's ``shape``.
    ``src_swap = j > 0``: the source registers pair another vector, register basis ``j``'s;
    each thread first exchanges register bits 0 and ``j`` of its nibbles (a repack in
    registers), then the byte plan runs.  ``dst_swap = j > 0``: the byte plan fills the
    destination with register bits 0 and ``j`` exchanged, and each thread repacks last."""
    dtype: str
    dim: int
    bit: int
    src_bases: dict[str, Any]
    dst_bases: dict[str, Any]
    shape: tuple[int, ...]
    src_swap: int = 0
    dst_swap: int = 0

    @property
    def repacks(self) -> bool:
        """Whether a side repacks nibbles in registers around the byte plan."""
        return bool(self.src_swap or self.dst_swap)

    @property
    def pair(self) -> tuple[int, ...]:
        """The pair vector as tensor coordinates."""
        return tuple((1 << self.bit) if d == self.dim else 0 for d in range(len(self.shape)))

    def lines(self) -> list[str]:
        """What a reader of the plan must know, one line each."""
        repack = []
        for side, j in (("source", self.src_swap), ("destination", self.dst_swap)):
            if j:
                when = "first" if side == "source" else "last"
                repack.append(f"  repack: the {side} pairs register basis {j}'s vector; each thread exchanges register "
                              f"bits 0 and {j} of its nibbles {when} (shifts and masks over {1 << (j - 1)}-byte-apart "
                              f"bytes), the byte plan moves the rest")
        after = ", the swapped side after its repack" if self.repacks else ""
        return repack + [
                f"packed: {self.dtype} two per byte; the pair vector {self.pair} (bit {self.bit} of dim {self.dim}) "
                f"is register basis 0 / offset basis 0 of both layouts{after}",
                f"  registers, offsets, vectors and tile bytes count bytes of the packed tensor (shape "
                f"{list(self.packed_shape)}); byte i of a thread holds its elements 2i (low nibble) and 2i+1 "
                f"(high nibble)"]

    @property
    def packed_shape(self) -> tuple[int, ...]:
        return tuple(s // 2 if d == self.dim else s for d, s in enumerate(self.shape))


def bases_of(L: LinearLayout) -> dict[str, Any]:
    """``L`` as plans record layouts."""
    return {"in_dims": L.bases, "out_dims": L.out_dim_sizes}


def pair_vector(L: LinearLayout, space: str, role: str, dtype: str) -> tuple[int, ...]:
    """The tensor vector of ``L``'s nibble basis (register basis 0, or offset basis 0 of a
    memory layout); ValueError in one line when the layout has none or it is zero."""
    dim = PAIR_DIM[space]
    if L.in_dim_size(dim) < 2:
        per = "thread" if dim == "register" else "tile"
        raise ValueError(f"{dtype} packs two elements per byte along {dim} basis 0, but the {role} layout has "
                         f"{L.in_dim_size(dim)} {dim}: give it at least 2 {dim}s per {per}")
    v = tuple(L.bases[dim][0])
    if not any(v):
        raise ValueError(f"{dim} basis 0 of the {role} layout is a broadcast (zero): the two {dtype} elements of a "
                         f"byte must be two different tensor elements")
    return v


def pair_bit(v: Sequence[int], role: str, what: str) -> tuple[int, int]:
    """(dim, bit) of a pair vector that is one tensor bit; ValueError otherwise."""
    nz = [(d, x) for d, x in enumerate(v) if x]
    if len(nz) != 1 or nz[0][1] & (nz[0][1] - 1):
        raise ValueError(f"the {role} layout's pair vector {tuple(v)} ({what} basis 0) is not one tensor bit: "
                         f"packed tiles pair two elements that differ in one coordinate bit")
    d, x = nz[0]
    return d, x.bit_length() - 1


def quotient(L: LinearLayout, space: str, dim: int, bit: int, role: str) -> LinearLayout:
    """``L`` modulo the pair vector ``e_bit`` of tensor dim ``dim``: the pair basis dropped, bit
    ``bit`` of dim ``dim`` removed from every other image (the dim halves).  ValueError when
    another basis moves the pair bit (the nibble of an element would then depend on more
    than its own coordinate)."""
    pin = PAIR_DIM[space]
    low = (1 << bit) - 1
    out = {}
    for d, bs in L.bases.items():
        kept = bs[1:] if d == pin else bs
        for i, b in enumerate(kept):
            if b[dim] >> bit & 1:
                at = i + 1 if d == pin else i
                raise ValueError(f"{d} basis {at} of the {role} layout {tuple(b)} also moves the pair bit (bit {bit} "
                                 f"of dim {dim}): the nibble of an element must be that bit alone")
        out[d] = [[((x >> (bit + 1)) << bit) | (x & low) if k == dim else x for k, x in enumerate(b)] for b in kept]
    sizes = {n: (s // 2 if k == dim else s) for k, (n, s) in enumerate(L.out_dim_sizes.items())}
    return LinearLayout(out, sizes, require_surjective=False)


def quotient_pair(src: LinearLayout, src_space: str, dst: LinearLayout, dst_space: str,
                  dtype: str) -> tuple[LinearLayout, LinearLayout, Packing]:
    """(source / v, destination / v, the ``Packing``) of a 4-bit transfer whose two layouts pair
    the same elements; ValueError in one line otherwise, naming both pair vectors."""
    if dtype not in PACKED_BITS:
        raise ValueError(f"{dtype} is not a packed type (packed: {', '.join(PACKED_BITS)})")
    vs = pair_vector(src, src_space, "source", dtype)
    vd = pair_vector(dst, dst_space, "destination", dtype)
    ws, wd = PAIR_DIM[src_space], PAIR_DIM[dst_space]
    for v, role, w, L, space in ((vs, "source", ws, src, src_space), (vd, "destination", wd, dst, dst_space)):
        quotient(L, space, *pair_bit(v, role, w), role)        # each side's own packing must be one too
    s2, d2, src_swap, dst_swap = src, dst, 0, 0
    if vs != vd:
        j = _register_basis(src, src_space, vd)
        if j:
            s2, src_swap = swap_registers(src, j), j
        else:
            j = _register_basis(dst, dst_space, vs)
            if not j:
                raise ValueError(f"the layouts pair different {dtype} elements in a byte: the source pairs {vs} "
                                 f"({ws} basis 0), the destination {vd} ({wd} basis 0), and neither is a register "
                                 f"basis of the other side (an in-thread repack); give layouts that pair the same "
                                 f"elements")
            d2, dst_swap = swap_registers(dst, j), j
    d, k = pair_bit(tuple(s2.bases[PAIR_DIM[src_space]][0]), "source", ws)
    packing = Packing(dtype, d, k, bases_of(src), bases_of(dst), tuple(src.out_dim_sizes.values()), src_swap, dst_swap)
    return quotient(s2, src_space, d, k, "source"), quotient(d2, dst_space, d, k, "destination"), packing


def _register_basis(L: LinearLayout, space: str, v: tuple[int, ...]) -> int:
    """The register basis j >= 1 of a register layout whose image is ``v``; 0 when none is."""
    if space != "registers":
        return 0
    return next((j for j, b in enumerate(L.bases["register"]) if j and tuple(b) == v), 0)


def swap_registers(L: LinearLayout, j: int) -> LinearLayout:
    """``L`` with register bases 0 and ``j`` exchanged (the layout after an in-thread repack)."""
    bases = L.bases
    reg = list(bases["register"])
    reg[0], reg[j] = reg[j], reg[0]
    return LinearLayout({**bases, "register": reg}, L.out_dim_sizes, require_surjective=False)


def side_bytes(packing: Packing, side: str) -> LinearLayout:
    """The byte layout of one side as its caller holds it: its 4-bit layout modulo its own pair
    vector (register basis 0 or offset basis 0) -- the byte plan's layout unless that side repacks."""
    L = LinearLayout(**_layout_args(packing.src_bases if side == "src" else packing.dst_bases))
    space = "shared" if "offset" in L.in_dims else "registers"
    d, k = pair_bit(tuple(L.bases[PAIR_DIM[space]][0]), side, PAIR_DIM[space])
    return quotient(L, space, d, k, side)


def side_pair(packing: Packing, side: str) -> tuple[int, int]:
    """(dim, bit) of one side's own pair vector (the packing of the tensor its caller holds)."""
    L = LinearLayout(**_layout_args(packing.src_bases if side == "src" else packing.dst_bases))
    dim = "offset" if "offset" in L.in_dims else "register"
    return pair_bit(tuple(L.bases[dim][0]), side, dim)


def _layout_args(bases: dict[str, Any]) -> dict[str, Any]:
    return {"bases": bases["in_dims"], "out_dims": bases["out_dims"], "require_surjective": False}


def quotient_strides(strides: Sequence[int], packing: Packing) -> tuple[int, ...]:
    """Global strides of the 4-bit tensor (elements) as strides of the packed tensor (bytes): the pair
    dim's stride is 1 (the pair bit is bit 0 of the contiguous dim) and every other stride an even
    number of elements, halved; ValueError otherwise."""
    out = []
    for d, s in enumerate(strides):
        if d == packing.dim:
            if s != 1 or packing.bit != 0:
                raise ValueError(f"--stride: dim {d} holds the {packing.dtype} pair, so its stride must be 1 and "
                                 f"the pair its bit 0, got stride {s}")
            out.append(1)
        elif s % 2:
            raise ValueError(f"--stride: {packing.dtype} rows start on whole bytes, so the stride of dim {d} must be "
                             f"even (in elements), got {s}")
        else:
            out.append(s // 2)
    return tuple(out)


def relabel(plan: Any, dtype: str, packing: Packing | None = None) -> Any:
    """``plan`` and every plan inside it (``via``, ``paths``, a relayout's steps) stating the 4-bit
    ``dtype`` they move packed; the outermost also its ``packing``.  The byte counts stay."""
    changes: dict[str, Any] = {"dtype": dtype}
    for f in fields(plan):
        v = getattr(plan, f.name)
        if _is_plan(v):
            changes[f.name] = relabel(v, dtype)
        elif isinstance(v, tuple) and v and all(_is_plan(x) for x in v):
            changes[f.name] = tuple(relabel(x, dtype) for x in v)
    if packing is not None:
        changes["packing"] = packing
    return replace(plan, **changes)


def _is_plan(v: Any) -> bool:
    return is_dataclass(v) and not isinstance(v, type) and hasattr(v, "elem_bytes") and hasattr(v, "dtype")
