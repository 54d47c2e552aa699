"""Shape operations on layouts (paper 000 §4.4): each tensor op that only
moves data between logical positions maps to a change of *output* dims; the
hardware input dims (register, lane, warp, block / offset) are untouched
except for ``broadcast`` (more registers) and ``join``/``split`` (one
register bit more or less).  The rules follow Triton's ``tt.trans``,
``tt.reshape``, ``tt.expand_dims``, ``tt.broadcast``, ``tt.join`` and
``tt.split`` on linear layouts.

Example: a 16x8 layout whose ``register=1 -> (0, 1)`` becomes, after
``transpose(L, [1, 0])``, an 8x16 layout with ``register=1 -> (1, 0)``;
``reshape(L, [128])`` flattens row-major, so ``(i, j) -> 8 i + j`` and the
same register maps to ``(1)``.
"""
from __future__ import annotations

import math
from typing import Sequence

from ll_codegen.core.layout import LinearLayout
from ll_codegen.layouts.base import LayoutError


def _names(rank: int) -> list[str]:
    return [f"dim{i}" for i in range(rank)]


def _shape(L: LinearLayout) -> list[int]:
    return [L.out_dim_size(n) for n in L.out_dims]


def _rebuild(L: LinearLayout, bases, sizes: Sequence[int]) -> LinearLayout:
    return LinearLayout(bases, dict(zip(_names(len(sizes)), sizes)), require_surjective=False)


def transpose(L: LinearLayout, order: Sequence[int]) -> LinearLayout:
    """``tt.trans``: result dim ``i`` is source dim ``order[i]``; every basis is
    permuted the same way.  ``transpose(blocked(spt, tpw, wpc, ord), p)`` equals
    the blocked layout with ``spt, tpw, wpc`` permuted by ``p`` and ``ord``
    renamed by ``p``'s inverse.  Example: ``order = [1, 0]`` swaps the two
    coordinates of every basis."""
    rank = len(L.out_dims)
    if sorted(order) != list(range(rank)):
        raise LayoutError("order", f"{list(order)} is not a permutation of 0..{rank - 1}")
    bases = {d: [[b[o] for o in order] for b in bs] for d, bs in L.bases.items()}
    shape = _shape(L)
    return _rebuild(L, bases, [shape[o] for o in order])


def reshape(L: LinearLayout, new_shape: Sequence[int]) -> LinearLayout:
    """``tt.reshape``: flatten the tensor row-major (last dim fastest) and split
    it again as ``new_shape``; a basis keeps its flat image.  Example: in a
    16x8 layout the basis ``(1, 2)`` has flat image ``1*8 + 2 = 10``, which is
    ``(0, 1, 2)`` in shape ``(2, 8, 8)``."""
    new_shape = [int(s) for s in new_shape]
    if any(s < 1 or s & (s - 1) for s in new_shape):
        raise LayoutError("shape", f"{new_shape} has a size that is not a power of two")
    if math.prod(new_shape) != math.prod(_shape(L)):
        raise LayoutError("shape", f"cannot reshape {_shape(L)} into {new_shape}: element counts differ")
    tmp = [f"_r{i}" for i in range(len(new_shape))]
    R = (L.transpose_outs(list(reversed(L.out_dims)))
         .reshape_outs([(tmp[i], new_shape[i]) for i in reversed(range(len(new_shape)))])
         .transpose_outs(tmp))
    return _rebuild(R, R.bases, new_shape)


def expand_dims(L: LinearLayout, dim: int) -> LinearLayout:
    """``tt.expand_dims``: insert a size-1 dim at position ``dim`` (every basis
    gets a 0 there); the inverse of slicing at that dim."""
    rank = len(L.out_dims)
    if not 0 <= dim <= rank:
        raise LayoutError("dim", f"{dim} is not in 0..{rank}")
    bases = {d: [b[:dim] + [0] + b[dim:] for b in bs] for d, bs in L.bases.items()}
    shape = _shape(L)
    return _rebuild(L, bases, shape[:dim] + [1] + shape[dim:])


def broadcast(L: LinearLayout, dim: int, size: int) -> LinearLayout:
    """``tt.broadcast`` of a size-1 dim to ``size``: each thread holds the new
    elements in extra registers appended after the existing ones (Triton's
    ``ensureLayoutNotSmallerThan`` on that dim): ``register=2**k -> size/2, ...``
    Example: a blocked layout with one element per thread along dim1 broadcast
    to 4 columns equals the same blocked layout at the larger shape."""
    shape = _shape(L)
    if not 0 <= dim < len(shape):
        raise LayoutError("dim", f"{dim} is not a dim of a rank-{len(shape)} layout")
    if shape[dim] != 1:
        raise LayoutError("dim", f"dim {dim} has size {shape[dim]}; only size-1 dims broadcast")
    if size < 1 or size & (size - 1):
        raise LayoutError("shape", f"broadcast size {size} is not a power of two")
    if "register" not in L.in_dims:
        raise LayoutError("dim", "only distributed layouts (with a register dim) broadcast")
    bases = L.bases
    bases["register"] = bases["register"] + [[(1 << i) if k == dim else 0 for k in range(len(shape))]
                                             for i in range(size.bit_length() - 1)]
    new_shape = list(shape)
    new_shape[dim] = size
    return _rebuild(L, bases, new_shape)


def join(L: LinearLayout) -> LinearLayout:
    """``tt.join`` of two tensors with layout ``L``: a new last dim of size 2 held
    in registers, as the *first* register bit (``register=1 -> (0, .., 0, 1)``);
    every other basis gets a 0 in the new dim."""
    if "register" not in L.in_dims:
        raise LayoutError("dim", "join needs a distributed layout (with a register dim)")
    rank = len(L.out_dims)
    bases = {d: [b + [0] for b in bs] for d, bs in L.bases.items()}
    bases["register"] = [[0] * rank + [1]] + bases["register"]
    return _rebuild(L, bases, _shape(L) + [2])


def split(L: LinearLayout) -> LinearLayout:
    """``tt.split`` along a last dim of size 2: that dim must be held by exactly
    one register bit (and no other basis may touch it); the bit and the dim are
    removed.  ``split(join(L)) == L``."""
    shape = _shape(L)
    if not shape or shape[-1] != 2:
        raise LayoutError("shape", f"split needs a last dim of size 2, got {shape}")
    unit = [0] * (len(shape) - 1) + [1]
    regs = L.bases.get("register", [])
    hits = [i for i, b in enumerate(regs) if b == unit]
    touching = [(d, b) for d, bs in L.bases.items() for b in bs if b[-1] and b != unit]
    if len(hits) != 1 or touching:
        raise LayoutError("dim", "the last dim must be held by exactly one register bit to split")
    bases = {d: [b[:-1] for b in bs] for d, bs in L.bases.items()}
    del bases["register"][hits[0]]
    return _rebuild(L, bases, shape[:-1])
