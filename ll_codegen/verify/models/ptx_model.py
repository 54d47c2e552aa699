"""An independent model of the Hopper (sm_90a) data paths, written from the PTX ISA.

This module is a *referee*: the planner (descriptors and TMA boxes derived from
linear layouts) and the host emulator are checked against it, so it is written
from NVIDIA's own definitions and deliberately shares no code with them
(numpy only; nothing from ``ll_codegen`` is imported).

Sources, cited per function:

* PTX ISA 8.x, 9.7.15.5.1.2 "Shared Memory Matrix Layout" (swizzle atoms, K-major /
  MN-major) and 9.7.15.5.1.2.2 "Matrix Descriptor Format" (the 64-bit descriptor);
  the LBO/SBO meanings are the ones of the PTX "Strides" tables (K-major: LBO is the
  K step between the two 16-byte core-matrix columns, unused when swizzled; MN-major:
  LBO is the step between swizzle atoms along M/N, or between 8-row K groups when
  not swizzled), cross-checked with CUTLASS ``make_gmma_desc`` canonical layouts.
* PTX ISA 9.7.15.5.1.1 "Register Fragments" (wgmma .m64nNk8/k16/k32 A and D figures).
* PTX ISA 9.7.14.5.7-9.7.14.5.10 "Matrix Fragments for mma.m16n8k8/k16/k32".
* PTX ISA ``cp.async.bulk.tensor`` (tiled mode) and the CUDA driver API
  ``cuTensorMapEncodeTiled`` (box limits, swizzle modes).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

# Descriptor bits 62-63 -> swizzle span in bytes (Matrix Descriptor Format table:
# 0 no swizzle, 1 128-Byte, 2 64-Byte, 3 32-Byte).
SWIZZLE_MODES = {0: 0, 1: 128, 2: 64, 3: 32}
_MODE_OF_SPAN = {v: k for k, v in SWIZZLE_MODES.items()}

_FIELD_LIMIT = 1 << 18          # matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4


# --------------------------------------------------------------------------------------
# 9.7.15.5.1.2.2 Matrix Descriptor Format
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Descriptor:
    """The 64-bit wgmma matrix descriptor, decoded (PTX "Matrix Descriptor Format").

    Bits 0-13: start address >> 4; 16-29: leading dimension byte offset >> 4;
    32-45: stride dimension byte offset >> 4; 49-51: matrix base offset;
    62-63: swizzle mode (see ``SWIZZLE_MODES``). All byte quantities here are in bytes.
    """
    start: int
    lbo: int
    sbo: int
    base_offset: int
    swizzle_bytes: int


def decode_descriptor(desc: int) -> Descriptor:
    """Split a descriptor into its fields (PTX "Matrix Descriptor Format")."""
    desc = int(desc) & ((1 << 64) - 1)
    return Descriptor(start=(desc & 0x3FFF) << 4,
                      lbo=((desc >> 16) & 0x3FFF) << 4,
                      sbo=((desc >> 32) & 0x3FFF) << 4,
                      base_offset=(desc >> 49) & 0x7,
                      swizzle_bytes=SWIZZLE_MODES[(desc >> 62) & 0x3])


def encode_descriptor(start: int, lbo: int, sbo: int, swizzle_bytes: int, base_offset: int = 0) -> int:
    """Pack the fields (PTX "Matrix Descriptor Format").

    The PTX encoding silently masks ``(x & 0x3FFFF) >> 4``; as a referee we refuse
    instead: every byte field must be a multiple of 16 and below 2**18.
    """
    for name, value in (("start", start), ("lbo", lbo), ("sbo", sbo)):
        if value < 0 or value >= _FIELD_LIMIT:
            raise ValueError(f"{name}={value} does not fit the 14-bit field (bytes >> 4, < 2**18)")
        if value % 16:
            raise ValueError(f"{name}={value} is not a multiple of 16 bytes")
    if swizzle_bytes not in _MODE_OF_SPAN:
        raise ValueError(f"swizzle_bytes={swizzle_bytes} is not one of 0, 32, 64, 128")
    if not 0 <= base_offset <= 7:
        raise ValueError(f"base_offset={base_offset} does not fit 3 bits")
    return ((start >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32)
            | (base_offset << 49) | (_MODE_OF_SPAN[swizzle_bytes] << 62))


# --------------------------------------------------------------------------------------
# The swizzle (PTX "Shared Memory Matrix Layout", tensor-map CU_TENSOR_MAP_SWIZZLE_*)
# --------------------------------------------------------------------------------------
def swizzle_address(addr, swizzle_bytes: int, base_offset: int = 0):
    """The hardware swizzle of a shared byte address.

    The 16-byte chunk index (bits 4..) is XORed with the 128-byte row index (bits 7..):
    128B: bits 4-6 ^= bits 7-9 (repeat 1024 B); 64B: bits 4-5 ^= bits 7-8 (512 B);
    32B: bit 4 ^= bit 7 (256 B); 0: identity. The swizzle is a function of the
    *address*, so the pattern repeats at absolute 1024/512/256-byte boundaries
    ("Starting address of the repeating pattern" table).

    ``base_offset`` (descriptor bits 49-51) models a pattern that starts elsewhere:
    PTX gives ``base offset = (pattern start addr >> 7) & 7``; we read it as "row phase
    of the pattern start", i.e. the row index used is ``(addr >> 7) - base_offset``.
    """
    if swizzle_bytes not in _MODE_OF_SPAN:
        raise ValueError(f"swizzle_bytes={swizzle_bytes} is not one of 0, 32, 64, 128")
    if swizzle_bytes == 0:
        return addr
    mask = swizzle_bytes // 16 - 1                     # 7, 3 or 1
    return addr ^ ((((addr >> 7) - base_offset) & mask) << 4)


# --------------------------------------------------------------------------------------
# 9.7.15.5.1.2 Shared Memory Matrix Layout: the addresses wgmma reads
# --------------------------------------------------------------------------------------
def wgmma_operand_addresses(desc: int, rows: int, k: int, elem_bits: int, k_major: bool) -> np.ndarray:
    """Shared-window byte address of element (row, kk) of a descriptor operand; shape (rows, k).

    A is M=64 x K, B is N x K (rows = M or N). ``k`` is the instruction's K (32 bytes).
    With T = 16 / elem_bytes elements per 16-byte chunk and S the swizzle span
    (PTX "Shared Memory Matrix Layout" / CUTLASS ``make_gmma_desc`` canonical forms):

    K-major (K contiguous):
      no swizzle : core matrix = 8 rows x 16 B (rows 16 B apart); the 2 core matrices
                   along K are LBO apart, 8-row groups are SBO apart.
      swizzled   : rows are S bytes apart inside an 8 x S atom; K is contiguous in
                   the row (LBO unused); 8-row groups are SBO apart.
    MN-major (M/N contiguous; only 16-bit types may be transposed):
      no swizzle : core matrix = 16 B of M/N x 8 K-rows (K-rows 16 B apart); core
                   matrices along M/N are SBO apart, 8-row K groups LBO apart.
      swizzled   : atom = S bytes of M/N x 8 K-rows (K-rows S bytes apart); atoms along
                   M/N are LBO apart, 8-row K groups SBO apart.
    The swizzle (with base_offset) is then applied to the full address.
    """
    d = decode_descriptor(desc)
    if elem_bits not in (8, 16, 32) or k * elem_bits != 256:
        raise ValueError(f"K={k} x {elem_bits} bits is not the 32-byte K of a wgmma instruction")
    if not k_major and elem_bits != 16:
        raise ValueError("wgmma transposes (MN-major) only .f16/.bf16 operands")
    eb = elem_bits // 8
    t = 16 // eb                                        # elements per 16-byte chunk
    r = np.arange(rows)[:, None]
    kk = np.arange(k)[None, :]
    if k_major:
        if rows % 8:
            raise ValueError(f"K-major operand needs a multiple of 8 rows, got {rows}")
        inner = (kk % t) * eb                           # byte within the 16-byte chunk
        if d.swizzle_bytes == 0:
            off = (r % 8) * 16 + (r // 8) * d.sbo + (kk // t) * d.lbo + inner
        else:
            off = (r % 8) * d.swizzle_bytes + (r // 8) * d.sbo + (kk // t) * 16 + inner
    else:
        inner = (r % t) * eb
        if d.swizzle_bytes == 0:
            off = inner + (r // t) * d.sbo + (kk % 8) * 16 + (kk // 8) * d.lbo
        else:
            w = d.swizzle_bytes // 16                   # chunks per atom row
            off = (inner + ((r // t) % w) * 16 + (r // (t * w)) * d.lbo
                   + (kk % 8) * d.swizzle_bytes + (kk // 8) * d.sbo)
    addr = d.start + off
    if d.swizzle_bytes:
        addr = swizzle_address(addr, d.swizzle_bytes, d.base_offset)
    return addr.astype(np.int64)


# --------------------------------------------------------------------------------------
# 9.7.15.5.1.1 Register Fragments (wgmma)
# --------------------------------------------------------------------------------------
def wgmma_d_fragment(n: int, acc_bits: int = 32) -> np.ndarray:
    """(128, n/2, 2): (row, col) of D (64 x n) held by thread t's accumulator element i.

    PTX figure "WGMMA .m64nNk* register fragment layout for accumulator matrix D":
    row = 16*warp + lane/4 + 8*((i/2)%2), col = 8*(i/4) + 2*(lane%4) + (i%2).
    For .f16 accumulators (acc_bits=16) the N/4 registers are .f16x2 holding d(2j),
    d(2j+1) low to high; the table is per *element* d_i, so it is the same table.
    """
    if n % 8 or not 8 <= n <= 256:
        raise ValueError(f"wgmma N={n} is not a multiple of 8 in 8..256")
    if acc_bits not in (16, 32):
        raise ValueError(f"acc_bits={acc_bits} is not 16 or 32")
    t = np.arange(128)[:, None]
    i = np.arange(n // 2)[None, :]
    warp, lane = t // 32, t % 32
    row = 16 * warp + lane // 4 + 8 * ((i // 2) % 2)
    col = 8 * (i // 4) + 2 * (lane % 4) + (i % 2)
    return np.stack(np.broadcast_arrays(row, col), axis=-1)


def accumulator_registers(fragment: np.ndarray, acc_bits: int) -> np.ndarray:
    """(threads, registers, elements per register, 2): (row, col) held by each part of each
    32-bit accumulator register, from an element table (threads, elements, 2) as
    ``wgmma_d_fragment`` or ``mma_sync_fragments(...)["c"]`` give it.

    .f32/.s32: register i holds d_i.  .f16 (PTX "Register Fragments" for wgmma D and "Matrix
    Fragments for mma.m16n8k16" C/D): the registers are .f16x2, register j holding d(2j) in its
    low 16 bits and d(2j+1) in its high 16 bits (wgmma: N/4 registers; mma.m16n8k16: 2).
    """
    if acc_bits not in (16, 32):
        raise ValueError(f"acc_bits={acc_bits} is not 16 or 32")
    per = 32 // acc_bits
    t, n = fragment.shape[:2]
    if n % per:
        raise ValueError(f"{n} elements do not pack {per} to a register")
    return fragment.reshape(t, n // per, per, 2)


def _warp_a_fragment(k: int, elem_bits: int, lane: np.ndarray) -> np.ndarray:
    """(lanes, elements, 2) -> (row, k) of a 16 x K A tile (mma.m16n8k* A figures)."""
    g, q = lane[:, None] // 4, lane[:, None] % 4
    if elem_bits == 16 and k == 16:                     # a0..a7, four .f16x2
        i = np.arange(8)[None, :]
        row = g + 8 * ((i // 2) % 2)
        col = 2 * q + (i & 1) + 8 * (i // 4)
    elif elem_bits == 32 and k == 8:                    # tf32 a0..a3
        i = np.arange(4)[None, :]
        row = g + 8 * (i % 2)
        col = q + 4 * (i // 2)
    elif elem_bits == 8 and k == 32:                    # 8-bit a0..a15, four .b32
        i = np.arange(16)[None, :]
        row = g + 8 * ((i // 4) % 2)
        col = 4 * q + (i & 3) + 16 * (i // 8)
    else:
        raise ValueError(f"no A fragment for K={k} with {elem_bits}-bit elements")
    return np.stack(np.broadcast_arrays(row, col), axis=-1)


def wgmma_a_fragment(k: int, elem_bits: int) -> np.ndarray:
    """(128, elements, 2) -> (row, k) of A (64 x K) for A given in registers.

    PTX figures "WGMMA .m64nNk8/k16/k32 register fragment layout for matrix A": each
    warp w of the warpgroup holds rows 16w..16w+15 exactly as mma.m16n8k8 (tf32),
    m16n8k16 (f16/bf16) and m16n8k32 (8-bit) hold their A.
    """
    t = np.arange(128)
    frag = _warp_a_fragment(k, elem_bits, t % 32)
    frag[..., 0] += 16 * (t // 32)[:, None]
    return frag


# --------------------------------------------------------------------------------------
# Element decoding (PTX "Alternate Floating-Point Data Formats")
# --------------------------------------------------------------------------------------
_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8}


def _decode(raw: np.ndarray, dtype: str) -> np.ndarray:
    """Raw little-endian bit patterns (uint64) -> float64 / int64 values."""
    if dtype == "f16":
        return raw.astype(np.uint16).view(np.float16).astype(np.float64)
    if dtype == "bf16":                                 # upper half of an f32
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype == "tf32":                                 # f32 container, low 13 mantissa bits ignored
        return (raw.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if dtype == "e5m2":                                 # the upper byte of an f16
        return (raw.astype(np.uint16) << 8).view(np.float16).astype(np.float64)
    if dtype == "e4m3":                                 # bias 7, no inf, S.1111.111 = NaN
        b = raw.astype(np.int64)
        sign = np.where(b & 0x80, -1.0, 1.0)
        e, m = (b >> 3) & 0xF, b & 0x7
        val = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7))
        return np.where((e == 15) & (m == 7), np.nan, sign * val)
    if dtype == "s8":
        return raw.astype(np.uint8).view(np.int8).astype(np.int64)
    if dtype == "u8":
        return raw.astype(np.int64)
    raise ValueError(f"unknown dtype {dtype!r}")


def _read(smem: np.ndarray, addr: np.ndarray, nbytes: int) -> np.ndarray:
    """Little-endian read of nbytes at every address."""
    if addr.min() < 0 or addr.max() + nbytes > smem.size:
        raise ValueError(f"operand reads bytes {addr.min()}..{addr.max() + nbytes - 1}, "
                         f"outside the {smem.size}-byte shared window")
    raw = np.zeros(addr.shape, np.uint64)
    for j in range(nbytes):
        raw |= smem[addr + j].astype(np.uint64) << np.uint64(8 * j)
    return raw


def wgmma_reference(smem, desc_a, a_regs_or_none, desc_b: int, n: int, dtype: str,
                    acc: np.ndarray | None, k_major_a: bool, k_major_b: bool, a_dtype: str | None = None) -> np.ndarray:
    """What one ``wgmma.mma_async.m64nNkK`` computes (PTX 9.7.15.5): D = A @ B^T (+ acc), A of PTX type
    ``a_dtype`` (.atype; ``dtype`` when None) and B of ``dtype`` (.btype), each element its exact value.

    A (64 x K) comes from the shared bytes through ``desc_a``, or, when ``desc_a`` is
    None, from registers: ``a_regs_or_none`` is either the (64, K) matrix of values or
    the (128, elements) per-thread values a0, a1, ... placed by ``wgmma_a_fragment``.
    B (N x K) always comes through ``desc_b``. Returns float64 (int64 for s8/u8), (64, n).
    """
    a_dtype = a_dtype or dtype
    if dtype not in _BITS or _BITS.get(a_dtype) != _BITS[dtype]:
        raise ValueError(f"unknown dtype {dtype!r} or A type {a_dtype!r} of another width")
    bits = _BITS[dtype]
    k = 256 // bits
    mem = np.frombuffer(bytes(smem), np.uint8) if isinstance(smem, (bytes, bytearray)) \
        else np.asarray(smem, np.uint8).ravel()
    integer = dtype in ("s8", "u8")

    def load(desc, rows, k_major, t):
        addr = wgmma_operand_addresses(desc, rows, k, bits, k_major)
        return _decode(_read(mem, addr, bits // 8), t)

    if desc_a is not None:
        a = load(desc_a, 64, k_major_a, a_dtype)
    else:
        regs = np.asarray(a_regs_or_none)
        if regs.shape == (64, k):
            a = regs
        else:
            frag = wgmma_a_fragment(k, bits)
            if regs.shape != frag.shape[:2]:
                raise ValueError(f"A registers of shape {regs.shape}, expected (64, {k}) or {frag.shape[:2]}")
            a = np.zeros((64, k), regs.dtype)
            a[frag[..., 0], frag[..., 1]] = regs
        a = a.astype(np.int64 if integer else np.float64)
    b = load(desc_b, n, k_major_b, dtype)
    d = a @ b.T
    if acc is not None:
        d = d + np.asarray(acc).astype(d.dtype)
    return d


# --------------------------------------------------------------------------------------
# 9.7.14.5 Matrix Fragments for mma.m16n8k8 / m16n8k16 / m16n8k32
# --------------------------------------------------------------------------------------
_MMA_SHAPES = {"m16n8k16": ({"f16", "bf16"}, 16), "m16n8k8": ({"tf32"}, 32),
               "m16n8k32": ({"s8", "u8", "e4m3", "e5m2"}, 8)}


def mma_sync_fragments(shape: str, dtype: str) -> dict[str, np.ndarray]:
    """Fragments of ``mma.sync.aligned.<shape>`` (PTX 9.7.14.5 figures and formulas).

    a: (32, elements, 2) -> (row, k) of A (16 x K); b: (32, elements, 2) -> (k, col) of
    B (K x 8); c: (32, 4, 2) -> (row, col) of C/D (16 x 8). groupID = lane>>2,
    threadID_in_group = lane%4.
    """
    if shape not in _MMA_SHAPES or dtype not in _MMA_SHAPES[shape][0]:
        raise ValueError(f"mma.sync {shape} has no {dtype} variant here")
    bits = _MMA_SHAPES[shape][1]
    k = int(shape.split("k")[1])
    lane = np.arange(32)
    g, q = lane[:, None] // 4, lane[:, None] % 4
    if k == 16:                                         # b0..b3: row 2q + (i&1) + 8(i>=2)
        i = np.arange(4)[None, :]
        brow = 2 * q + (i & 1) + 8 * (i // 2)
    elif k == 8:                                        # tf32 b0, b1: row q, q + 4
        i = np.arange(2)[None, :]
        brow = q + 4 * i
    else:                                               # 8-bit b0..b7: row 4q + (i&3) + 16(i>=4)
        i = np.arange(8)[None, :]
        brow = 4 * q + (i & 3) + 16 * (i // 4)
    b = np.stack(np.broadcast_arrays(brow, g), axis=-1)
    i = np.arange(4)[None, :]                           # c0..c3: row g + 8(i>=2), col 2q + (i&1)
    c = np.stack(np.broadcast_arrays(g + 8 * (i // 2), 2 * q + (i & 1)), axis=-1)
    return {"a": _warp_a_fragment(k, bits, lane), "b": b, "c": c}


# --------------------------------------------------------------------------------------
# cp.async.bulk.tensor (tiled mode) and cuTensorMapEncodeTiled
# --------------------------------------------------------------------------------------
def _check_box(box: Sequence[int], elem_bytes: int, swizzle_bytes: int) -> None:
    """The cuTensorMapEncodeTiled requirements that concern the box."""
    if not 1 <= len(box) <= 5:
        raise ValueError(f"tensor rank {len(box)} is not 1..5")
    for i, b in enumerate(box):
        if not 1 <= b <= 256:
            raise ValueError(f"boxDim[{i}]={b} must be non-zero and <= 256")
    inner = box[0] * elem_bytes
    if inner % 16:
        raise ValueError(f"boxDim[0]*elementSize = {inner} bytes is not a multiple of 16")
    if swizzle_bytes not in _MODE_OF_SPAN:
        raise ValueError(f"swizzle_bytes={swizzle_bytes} is not one of 0, 32, 64, 128")
    if swizzle_bytes and inner > swizzle_bytes:
        raise ValueError(f"the box inner dimension ({inner} bytes) exceeds the {swizzle_bytes}B swizzle span")


def tma_box_smem_offsets(box: Sequence[int], elem_bytes: int, swizzle_bytes: int) -> np.ndarray:
    """Byte offset where TMA places each box element; shape tuple(reversed(box)).

    The box lands densely in row-major order (box[0] innermost, rows of
    box[0]*elem_bytes bytes); the swizzle of the tensor map (CU_TENSOR_MAP_SWIZZLE_32B/
    64B/128B, the same XOR as ``swizzle_address``) is then applied to the byte offset,
    relative to a destination aligned to the pattern repeat (8 * swizzle_bytes).
    """
    _check_box(box, elem_bytes, swizzle_bytes)
    lin = np.arange(int(np.prod(box)), dtype=np.int64).reshape(tuple(reversed(box))) * elem_bytes
    return swizzle_address(lin, swizzle_bytes)


def tma_load_reference(tensor: np.ndarray, box: Sequence[int], coords: Sequence[int],
                       swizzle_bytes: int) -> np.ndarray:
    """The shared bytes one tiled ``cp.async.bulk.tensor`` global->shared load writes.

    ``tensor`` is row-major (contiguous dim last); box and coords are innermost-first.
    Out-of-bound elements (negative coordinates or past the extent) are zero-filled
    (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE). The result is np.uint8 of the box's bytes
    (longer only if a partial swizzle row would spill past them).
    """
    tensor = np.asarray(tensor)
    if len(box) != tensor.ndim or len(coords) != tensor.ndim:
        raise ValueError("box and coords need one entry per tensor dimension")
    eb = tensor.dtype.itemsize
    offsets = tma_box_smem_offsets(box, eb, swizzle_bytes)
    tile = np.zeros(tuple(reversed(box)), tensor.dtype)
    src, dst = [], []
    for b, c, extent in zip(reversed(box), reversed(coords), tensor.shape):
        lo, hi = max(c, 0), min(c + b, extent)
        if lo >= hi:
            src = None
            break
        src.append(slice(lo, hi))
        dst.append(slice(lo - c, hi - c))
    if src is not None:
        tile[tuple(dst)] = tensor[tuple(src)]
    data = np.ascontiguousarray(tile).view(np.uint8).reshape(-1, eb)
    out = np.zeros(max(tile.size * eb, int(offsets.max()) + eb), np.uint8)
    for j in range(eb):
        out[offsets.ravel() + j] = data[:, j]
    return out
