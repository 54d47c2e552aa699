"""Encode a TMA plan's ``CUtensorMap`` on the GPU driver (``libcuda.so.1``) with ctypes: what
the generated header's ``make_tensor_map()`` does on the host, for the CuPy driver (``gpu.py``),
whose NVRTC-compiled harnesses cannot call the driver API themselves.

The parameters are the header's: the tensor's dims and strides permuted innermost first
(``plan.tma.dims``), strides in bytes for map dims 1.., the box, element strides 1, no
interleave, the plan's swizzle, L2 promotion 128 B, OOB fill NONE (zeros).
"""
from __future__ import annotations

import ctypes
from typing import Sequence

L2_PROMOTION_128B = 2      # CU_TENSOR_MAP_L2_PROMOTION_L2_128B
INTERLEAVE_NONE = 0        # CU_TENSOR_MAP_INTERLEAVE_NONE
OOB_FILL_NONE = 0          # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: elements beyond the tensor are zeros
MAP_BYTES = 128            # sizeof(CUtensorMap), 64-byte aligned

_LIB = None


def _libcuda():
    global _LIB
    if _LIB is None:
        _LIB = ctypes.CDLL("libcuda.so.1")
        f = _LIB.cuTensorMapEncodeTiled
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                      ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                      ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                      ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    return _LIB


def encode_tiled(plan, base: int, dims: Sequence[int], strides: Sequence[int]) -> bytes:
    """The 128 bytes of the tensor map of the global tensor at device address ``base``: ``dims``
    and ``strides`` (elements) in the tensor's dim order, ``strides[order[0]] == 1``.  RuntimeError
    with the CUresult when the driver refuses."""
    t = plan.tma
    rank = len(t.dims)
    if strides[t.order[0]] != 1:
        raise ValueError(f"strides {list(strides)}: dim {t.order[0]} must have stride 1")
    size = (ctypes.c_uint64 * rank)(*[dims[d] for d in t.dims])
    stride = (ctypes.c_uint64 * max(1, rank - 1))(*([strides[d] * plan.elem_bytes for d in t.dims[1:]] or [0]))
    box = (ctypes.c_uint32 * rank)(*t.box)
    elem = (ctypes.c_uint32 * rank)(*([1] * rank))
    buf = (ctypes.c_uint8 * (MAP_BYTES + 64))()
    addr = (ctypes.addressof(buf) + 63) // 64 * 64
    r = _libcuda().cuTensorMapEncodeTiled(ctypes.c_void_p(addr), t.data_type, rank, ctypes.c_void_p(base), size,
                                          stride, box, elem, INTERLEAVE_NONE, t.swizzle_enum, L2_PROMOTION_128B,
                                          OOB_FILL_NONE)
    if r:
        raise RuntimeError(f"cuTensorMapEncodeTiled returned CUresult {r} (box {list(t.box)}, dims {list(dims)}, "
                           f"strides {list(strides)})")
    return ctypes.string_at(addr, MAP_BYTES)
