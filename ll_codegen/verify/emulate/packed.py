"""Packed 4-bit plans at nibble level: the byte plan must move the nibbles numpy's permutation moves.

A packed plan (``plan/packed.py``) is the byte plan of the quotient layouts.  The
operation's own emulator checks the byte plan against its byte layouts; this
module checks, from the 4-bit layouts alone (``plan.packing``), that those byte
layouts are faithful: packing a random nibble tensor ``T`` by the 4-bit layouts
gives exactly the bytes the byte layouts place.  Nothing here reads the
quotient code: the packed tensor is built from the pair bit by numpy indexing.

``packed_tensor(T, dim, bit)``
    the byte tensor: byte ``y`` holds ``T[lift(y)]`` (low nibble, the pair bit
    clear) and ``T[lift(y) + pair]`` (high nibble).
``pack_registers(nibbles)`` / ``unpack_registers(bytes)``
    a thread's 4-bit registers ``2i``, ``2i + 1`` <-> its byte ``i`` (low nibble first).
``check_packing(plan, rng)``
    both sides faithful: registers ``regs_of(L4, T)`` packed (after the thread's repack, which
    exchanges register bits 0 and ``j``) equal ``regs_of(Lq, packed)``; a tile's byte ``o`` is
    its 4-bit offsets ``2o`` and ``2o + 1``; a repacking side's bytes as its caller holds them
    (``plan.packed.side_bytes``, the header's index function) packed by its own pair vector.
"""
from __future__ import annotations

import numpy as np

from ll_codegen.core.layout import LinearLayout, layout_of
from ll_codegen.plan.packed import side_bytes
from ll_codegen.verify.emulate.reference import dim_images, regs_of, tensor_flat


def random_nibbles(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """A tensor of random 4-bit values (uint8 0..15): raw i4/u4/e2m1 codes, every code occurring."""
    return rng.integers(0, 16, size=shape, dtype=np.uint8)


def pack_registers(nib: np.ndarray) -> np.ndarray:
    """(..., 2n) nibbles -> (..., n) bytes: register 2i the low nibble of byte i, 2i + 1 the high."""
    nib = np.asarray(nib, dtype=np.uint8)
    if nib.shape[-1] % 2:
        raise ValueError(f"{nib.shape[-1]} 4-bit registers do not fill whole bytes")
    return (nib[..., 0::2] & 0xF) | ((nib[..., 1::2] & 0xF) << 4)


def unpack_registers(b: np.ndarray) -> np.ndarray:
    """(..., n) bytes -> (..., 2n) nibbles (the inverse of ``pack_registers``)."""
    b = np.asarray(b, dtype=np.uint8)
    out = np.empty(b.shape[:-1] + (2 * b.shape[-1],), dtype=np.uint8)
    out[..., 0::2], out[..., 1::2] = b & 0xF, b >> 4
    return out


def packed_tensor(t: np.ndarray, dim: int, bit: int) -> np.ndarray:
    """The byte tensor of a nibble tensor whose pair is bit ``bit`` of ``dim``: the dim halves;
    packed index ``y`` has its bits below ``bit`` as they are and the rest shifted up by one."""
    n = t.shape[dim] // 2
    y = np.arange(n)
    lo = ((y >> bit) << (bit + 1)) | (y & ((1 << bit) - 1))
    return (np.take(t, lo, axis=dim) & 0xF) | ((np.take(t, lo | (1 << bit), axis=dim) & 0xF) << 4)


def unpacked_tensor(b: np.ndarray, dim: int, bit: int) -> np.ndarray:
    """The nibble tensor of a byte tensor (the inverse of ``packed_tensor``)."""
    shape = list(b.shape)
    shape[dim] *= 2
    t = np.empty(shape, dtype=np.uint8)
    y = np.arange(b.shape[dim])
    lo = ((y >> bit) << (bit + 1)) | (y & ((1 << bit) - 1))
    idx = [slice(None)] * len(shape)
    idx[dim] = lo
    t[tuple(idx)] = b & 0xF
    idx[dim] = lo | (1 << bit)
    t[tuple(idx)] = b >> 4
    return t


def tile_image(tile: LinearLayout, t: np.ndarray) -> np.ndarray:
    """The bytes of a 4-bit memory tile holding ``t``: byte ``o`` packs the elements at offsets
    ``2o`` (low nibble) and ``2o + 1`` (high nibble)."""
    return pack_registers(tensor_flat(t)[dim_images(tile, "offset")])


def byte_tile_image(tile: LinearLayout, b: np.ndarray) -> np.ndarray:
    """The bytes of a byte tile holding the byte tensor ``b`` (byte ``o`` is its offset ``o``)."""
    return tensor_flat(b)[dim_images(tile, "offset")]


def swapped_registers(regs: np.ndarray, j: int) -> np.ndarray:
    """A thread's 4-bit registers (last axis) with register bits 0 and ``j`` exchanged: what an
    in-thread repack leaves (``j = 0``: unchanged)."""
    if not j:
        return regs
    r = np.arange(regs.shape[-1])
    return regs[..., r ^ (((r ^ (r >> j)) & 1) * (1 | 1 << j))]


def check_side(four: LinearLayout, byte: LinearLayout, t: np.ndarray, b: np.ndarray, role: str,
               swap: int = 0) -> None:
    """AssertionError unless the byte layout places exactly the bytes the 4-bit layout packs
    (``swap``: after the thread's repack exchanging register bits 0 and ``swap``)."""
    if "offset" in four.in_dims:
        want, got = tile_image(four, t), byte_tile_image(byte, b)
        what = "tile byte"
    else:
        want, got = pack_registers(swapped_registers(regs_of(four, t), swap)), regs_of(byte, b)
        what = "register byte"
    if want.shape != got.shape:
        raise AssertionError(f"packed {role}: {got.shape} bytes where the 4-bit layout packs {want.shape}")
    bad = np.argwhere(want != got)
    if len(bad):
        at = tuple(int(i) for i in bad[0])
        raise AssertionError(f"packed {role}: {what} {at} holds {int(got[at]):#04x}, the 4-bit layout packs "
                             f"{int(want[at]):#04x} there ({len(bad)} of {want.size} bytes differ)")


def check_packing(plan, rng: np.random.Generator | int | None = 0, **_) -> None:
    """Both sides of a packed plan faithful to its 4-bit layouts on a random nibble tensor."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    k = plan.packing
    t = random_nibbles(k.shape, rng)
    b = packed_tensor(t, k.dim, k.bit)
    if not np.array_equal(unpacked_tensor(b, k.dim, k.bit), t):
        raise AssertionError("packed tensor: unpacking does not give the nibbles back")
    for role, four, byte, swap in (("source", k.src_bases, plan.src_bases, k.src_swap),
                                   ("destination", k.dst_bases, plan.dst_bases, k.dst_swap)):
        check_side(layout_of(four), layout_of(byte), t, b, role, swap)
        if swap:        # the bytes the caller holds: packed by the side's own pair vector
            own = layout_of(four).bases["register"][0]
            dim = next(d for d, x in enumerate(own) if x)
            check_side(layout_of(four), side_bytes(k, "src" if role == "source" else "dst"), t,
                       packed_tensor(t, dim, own[dim].bit_length() - 1), f"{role} as held")
