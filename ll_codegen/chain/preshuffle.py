"""Pre-shuffled global layouts: a tensor the caller reorders once, offline (weights), so its
layout in global memory is free.

Write a tensor ``W`` of ``d = log2(elements)`` bits by its flat index (dim 0 in the low bits)
and a global layout as an invertible map ``G`` over F2 from the ``d`` bits of a *packed* offset
to the flat index: the pre-shuffled buffer ``P`` (one dense run of elements) holds
``P[o] = W[G(o)]``.  The reference layout is the tensor as written: a dense tile (row-major, or
the spec given), ``G_ref`` its offset bases.

The step after the load fixes a register layout ``R`` (an mma.sync operand fragment, a
wgmma-from-registers operand, an upcast's input): register ``r`` of lane ``l`` of warp ``w``
holds ``W[R_reg r ^ R_lane l ^ R_warp w]``.  Loading it from ``P`` reads offset
``G^-1 R(r, l, w)``, so in the packed frame the load is the dense 1-D tile ``P`` (stride 1)
into ``R_P = G^-1 o R``, which holds in every register exactly the element ``R`` holds: the
step's header fills the registers the next step reads, nothing is converted.

The choice of ``G`` (``candidates``): its columns are ``R``'s images in the order

    R_reg[0 .. k)  (a V-byte vector, k = log2(V / element bytes)),  R_lane,  R_reg[k ..),  R_warp

keeping each image that is nonzero and independent of those before (a broadcast register or
warp bit -- a zero image, or one in the span of the earlier ones -- takes no offset bit: those
threads or registers load the same element), then the tensor's unit vectors that complete a
basis.  Then ``R_P`` is the identity on the kept bits: a thread's registers ``0 .. k-1`` are
offsets ``0 .. 2^k - 1`` of its vector (V bytes, contiguous and V-aligned); the 32 lanes of a
warp instruction read 32 consecutive vectors (``32 V`` bytes, every 32-byte sector whole); the
thread's other vectors and then the warps follow.  Every load is a V-byte vector of exactly the
elements the next step wants, and no register moves after it.  V is 16 bytes where the thread
holds that many (``16, 8, 4, ..`` down to one element are all candidates), and one more candidate
keeps a thread's registers contiguous (``R_reg, R_lane, R_warp``: each thread's bytes in one
run, a warp instruction's lanes ``2^|R_reg|`` elements apart); the load planner's costs decide.

4-bit elements (``i4``, ``u4``, ``e2m1``; ``plan/packed.py``) are planned as the byte tensor of
the layouts' quotients by their *pair* vector (the two elements of a byte): ``R``'s register
basis 0 is its pair, and ``G``'s first column is that basis, so the packed buffer keeps each pair
in one byte (``o`` and ``o ^ 1``) and a 16-byte vector is 32 elements (``k = 5``).  The reference
loads plan only where the tile's offset basis 0 is that pair too (its contiguous dim).

The offline reorder is ``packed[o] = w[G(o)]`` for every ``o`` in ``[0, 2^d)``, its inverse
``w[G(o)] = packed[o]`` (``reorder``, ``restore``; the generated numpy module and CUDA kernels
of ``emit/reorder.py`` compute the same from ``G``'s columns).
"""
from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from ll_codegen.core import f2
from ll_codegen.core.layout import LinearLayout
from ll_codegen.spec import Spec, spec_from_dict

#: vector widths of the candidates, bytes (the widest global vector first)
VECTOR_BYTES = (16, 8, 4, 2, 1)


def packed_mapping(shape: tuple[int, ...], alignment: int = 16) -> dict[str, Any]:
    """The packed buffer of a tensor of ``shape`` as a spec mapping: a dense 1-D global tile."""
    return {"kind": "global", "order": [0], "alignment": alignment, "shape": [prod(shape)]}


def packed_spec(shape: tuple[int, ...], source: str = "<packed>") -> Spec:
    """The packed buffer's spec (``packed_mapping``)."""
    return spec_from_dict(packed_mapping(shape), source)


def complete(vectors: list[int], d: int) -> tuple[int, ...]:
    """The nonzero ``vectors`` independent of those before them, in order, then the unit vectors
    of ``d`` bits that complete a basis: the columns of an invertible ``G``."""
    out: list[int] = []
    for v in list(vectors) + [1 << i for i in range(d)]:
        if len(out) == d:
            break
        if v and f2.rank(out + [v]) > len(out):
            out.append(v)
    return tuple(out)


def candidates(R: LinearLayout, elem_bits: int) -> list[tuple[str, tuple[int, ...]]]:
    """(label, ``G``'s columns) of the pre-shuffled layouts for a load into ``R`` of ``elem_bits``-bit
    elements (module docstring), widest vector first, each ``G`` once."""
    reg, lane, warp = (R.flat_bases(x) if x in R.in_dims else [] for x in ("register", "lane", "warp"))
    d = R.total_out_size_log2
    out: list[tuple[str, tuple[int, ...]]] = []
    for v in VECTOR_BYTES:
        if 8 * v < elem_bits:
            break
        k = (8 * v // elem_bits).bit_length() - 1
        if k > len(reg):
            continue
        out.append((f"{v}-byte vectors, then lanes, the thread's other registers, warps",
                    complete(reg[:k] + lane + reg[k:] + warp, d)))
    out.append(("a thread's registers contiguous, then lanes, warps", complete(reg + lane + warp, d)))
    seen: set[tuple[int, ...]] = set()
    return [(label, g) for label, g in out if not (g in seen or seen.add(g))]


def reference_offsets(tile: LinearLayout) -> tuple[int, ...]:
    """``G_ref``: the offset bases of a dense global tile (the tensor as written)."""
    return tuple(tile.flat_bases("offset"))


def packed_registers(R: LinearLayout, offsets: tuple[int, ...], source: str = "<packed>") -> Spec:
    """``R_P = G^-1 o R`` as a ``linear`` spec over the packed buffer's one dim: register, lane and
    warp bases the packed offsets of ``R``'s images."""
    solver = f2.Solver(list(offsets))

    def image(v: int) -> list[int]:
        x = solver.solve(v)
        if x is None:
            raise ValueError(f"the pre-shuffled layout does not reach tensor element {v}")
        return [x]
    bases = {x: [image(v) for v in R.flat_bases(x)] for x in ("register", "lane", "warp") if x in R.in_dims}
    return spec_from_dict({"kind": "linear", **bases, "shape": [1 << len(offsets)]}, source)


def coordinates(v: int, shape: tuple[int, ...]) -> list[int]:
    """A flat tensor index (dim 0 in the low bits) as per-dim coordinates."""
    out, shift = [], 0
    for s in shape:
        k = s.bit_length() - 1
        out.append(v >> shift & ((1 << k) - 1))
        shift += k
    return out


def offset_mapping(offsets: tuple[int, ...], shape: tuple[int, ...]) -> dict[str, Any]:
    """``G`` as data a reader pastes: ``offset`` (packed offset bit i -> the element's
    coordinates) and the tensor's ``shape``."""
    return {"offset": [coordinates(v, shape) for v in offsets], "shape": list(shape)}


def flat_elements(offsets: tuple[int, ...]) -> np.ndarray:
    """``G(o)`` for every packed offset ``o``: the flat tensor index each packed element holds."""
    vals = np.zeros(1, dtype=np.int64)
    for v in offsets:
        vals = np.concatenate([vals, vals ^ v])
    return vals


def reorder(tensor: np.ndarray, offsets: tuple[int, ...]) -> np.ndarray:
    """The packed buffer of ``tensor``: ``packed[o] = tensor[G(o)]`` (1-D)."""
    return tensor.reshape(-1, order="F")[flat_elements(offsets)]


def restore(packed: np.ndarray, offsets: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    """The inverse of ``reorder``: the tensor of ``shape`` whose packed buffer is ``packed``."""
    out = np.empty(prod(shape), dtype=packed.dtype)
    out[flat_elements(offsets)] = packed.reshape(-1)
    return out.reshape(shape, order="F")
