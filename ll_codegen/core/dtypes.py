"""The element types: the one table every stage reads.

Plans move raw bits, so an element type matters only by its width: ``f16``
and ``bf16`` plan, render and verify alike.  Index types (gathers) are read as
integers, so their signedness matters too.
"""
from __future__ import annotations

import numpy as np

from ll_codegen.core.limits import short

#: element type -> bytes (the ``--dtype`` choices, in the order the CLI lists them)
DTYPE_BYTES = {"i8": 1, "u8": 1, "f8e4m3": 1, "f8e5m2": 1, "i16": 2, "f16": 2, "bf16": 2,
               "i32": 4, "u32": 4, "f32": 4, "i64": 8, "f64": 8}

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
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {short(dtype)} (known: {', '.join(DTYPE_BYTES)})")
    return DTYPE_BYTES[dtype]


def index_bytes(index_dtype: str) -> int:
    """Bytes of one gather index of ``index_dtype``; ValueError otherwise."""
    if index_dtype not in INDEX_DTYPES:
        raise ValueError(f"unknown index dtype {short(index_dtype)} (known: {', '.join(INDEX_DTYPES)})")
    return INDEX_DTYPES[index_dtype][0]
