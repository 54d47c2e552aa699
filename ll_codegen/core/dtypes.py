"""The element types: the one table every stage reads.

Plans move raw bits, so an element type matters only by its width: ``f16``
and ``bf16`` plan, render and verify alike.  Index types (gathers) are read as
integers, so their signedness matters too.

The 4-bit types (``i4``, ``u4``, ``e2m1``) are packed two per byte: they have a
width in bits (``DTYPE_BITS``) but no width in bytes -- ``dtype_bytes`` refuses
them, and every stage reaches them only through ``plan/packed.py``, which plans
a 4-bit tensor as the byte tensor of its quotient layouts (element ``2i`` in the
low nibble of byte ``i``, ``2i + 1`` in the high nibble).  An e2m1 value is its
raw 4-bit code (sign, 2 exponent bits, 1 mantissa bit): plans move bits.
"""
from __future__ import annotations

import numpy as np

from ll_codegen.core.limits import short

#: element type -> bytes (the ``--dtype`` choices, in the order the CLI lists them)
DTYPE_BYTES = {"i8": 1, "u8": 1, "f8e4m3": 1, "f8e5m2": 1, "i16": 2, "f16": 2, "bf16": 2,
               "i32": 4, "u32": 4, "f32": 4, "i64": 8, "f64": 8}

#: 4-bit element types, two per byte (low nibble first)
PACKED_BITS = {"i4": 4, "u4": 4, "e2m1": 4}

#: element type -> bits (the ``--dtype`` choices of conversions, stores, loads and copies)
DTYPE_BITS = {**{k: 8 * v for k, v in DTYPE_BYTES.items()}, **PACKED_BITS}

#: gather index type -> (bytes, C type, numpy type)
INDEX_DTYPES = {"i32": (4, "int32_t", np.int32), "u32": (4, "uint32_t", np.uint32),
                "i16": (2, "int16_t", np.int16), "u16": (2, "uint16_t", np.uint16),
                "i8": (1, "int8_t", np.int8), "u8": (1, "uint8_t", np.uint8)}

#: bytes -> the unsigned C type generated code moves elements as
C_RAW = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}

#: bytes -> the unsigned numpy type that holds an element's bits
NP_RAW = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def dtype_bytes(dtype: str) -> int:
    """Bytes of one element of ``dtype``; ValueError naming the known types otherwise."""
    if dtype in PACKED_BITS:
        raise ValueError(f"{dtype} has {PACKED_BITS[dtype]} bits, two elements per byte: plan it through "
                         f"plan.packed (conversions, stores, loads and copies of packed tiles)")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {short(dtype)} (known: {', '.join(DTYPE_BITS)})")
    return DTYPE_BYTES[dtype]


def dtype_bits(dtype: str) -> int:
    """Bits of one element of ``dtype`` (4 for the packed types); ValueError naming the known types otherwise."""
    if dtype not in DTYPE_BITS:
        raise ValueError(f"unknown dtype {short(dtype)} (known: {', '.join(DTYPE_BITS)})")
    return DTYPE_BITS[dtype]


def is_packed(dtype: str) -> bool:
    """Whether ``dtype`` is a sub-byte type stored two per byte."""
    return dtype in PACKED_BITS


#: upcasts inside an operation (``--dst-dtype``): the source element types and the wider types they become
UPCAST_SOURCES = ("i4", "u4", "e2m1", "f8e4m3", "f8e5m2", "i8", "u8")
UPCAST_TARGETS = ("f16", "bf16")
#: the wider destination of an MMA's upcast alone (``llgen mma --a-dtype X --dtype tf32``): exact f32
#: elements, one per 32-bit register, which are tf32 values (no source here has more than 8 significant
#: bits; tf32 keeps 11).  Not a ``--dst-dtype``: ``llgen convert`` writes 16-bit destination pairs only.
#: The 8-bit destinations (an 8-bit MMA's A fragment, four elements a 32-bit word) take the 4-bit
#: sources they hold exactly (``BYTE_UPCASTS``): i4 (-8 .. 7) and u4 (0 .. 15) in s8, u4 in u8, and
#: every e2m1 value (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives) in e4m3 and in e5m2.
BYTE_UPCASTS = {"i8": ("i4", "u4"), "u8": ("u4",), "f8e4m3": ("e2m1",), "f8e5m2": ("e2m1",)}
MMA_UPCAST_TARGETS = UPCAST_TARGETS + ("f32",) + tuple(BYTE_UPCASTS)
#: 16-bit sources of the f32 destination alone: every f16 value (11 significant bits, exponents -24 ..
#: 15) and every bf16 value (8 significant bits, f32's exponents) is an f32 value with at most 11
#: significant bits, so a tf32 value; neither 16-bit type is exact in the other.
F32_ONLY_SOURCES = ("f16", "bf16")


def upcast_sources(dst: str) -> tuple[str, ...]:
    """The source types an upcast to ``dst`` takes: the byte and 4-bit ones, for f32 the 16-bit floats
    too, and for an 8-bit destination the 4-bit types it holds exactly (``BYTE_UPCASTS``)."""
    if dst in BYTE_UPCASTS:
        return BYTE_UPCASTS[dst]
    return UPCAST_SOURCES + F32_ONLY_SOURCES if dst == "f32" else UPCAST_SOURCES


def upcast_problem(src: str, dst: str, targets: tuple[str, ...] = UPCAST_TARGETS) -> str | None:
    """Why ``src -> dst`` is not an upcast llgen plans (one line), or None when it is one; ``targets``:
    the destinations allowed (``--dst-dtype``'s, or ``MMA_UPCAST_TARGETS`` inside a mixed-input MMA)."""
    if dst not in DTYPE_BITS:
        return f"unknown --dst-dtype {short(dst)} (known: {', '.join(UPCAST_TARGETS)})"
    if src not in upcast_sources(dst) or dst not in targets:
        return (f"no upcast {src} -> {dst}: --dst-dtype takes {', '.join(UPCAST_TARGETS)} from a --dtype of "
                f"{', '.join(UPCAST_SOURCES)}")
    return None


def index_bytes(index_dtype: str) -> int:
    """Bytes of one gather index of ``index_dtype``; ValueError otherwise."""
    if index_dtype not in INDEX_DTYPES:
        raise ValueError(f"unknown index dtype {short(index_dtype)} (known: {', '.join(INDEX_DTYPES)})")
    return INDEX_DTYPES[index_dtype][0]
