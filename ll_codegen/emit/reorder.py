"""The offline reorder of a pre-shuffled global tensor (``chain/preshuffle.py``) as generated code.

A pre-shuffled layout is an invertible map ``G`` over F2 from the bits of a packed offset to a
tile's element: packed offset ``o`` holds the element whose coordinates are the XOR of
``offset[i]`` over the set bits ``i`` of ``o``.  A tensor of whole tiles is packed tile by tile,
tiles in row-major order of their indices (the last dim fastest), each tile one dense run of
``tile elements``: tile ``t`` starts at ``t * tile elements`` (the pointer the step's load header
takes).  ``reorder`` packs (``packed[t, o] = w[tile t's origin + G(o)]``), ``restore`` is its
inverse.  Written twice from the same data: a numpy module (offline, or to check) and CUDA
kernels (one thread per 16-byte vector of the packed buffer: 16 bytes of elements gathered from
the source, one vector store; ``restore`` the other way).

4-bit elements (``elem_bits`` 4) sit two per byte, element ``2i`` in the low nibble of byte ``i``:
the packed buffer so, and the source too (element ``e`` of the strided source in byte ``e >> 1``,
nibble ``e & 1``).  ``G``'s first column is the pair (``chain/preshuffle.py``), the source's
contiguous dim bit 0, so ``restore`` writes whole source bytes.  The numpy module takes and gives
one code a ``uint8`` (0 .. 15) for the tensor and the packed bytes for the buffer.
"""
from __future__ import annotations

from collections.abc import Sequence
from math import prod

from ll_codegen.core.dtypes import C_RAW
from ll_codegen.emit.env import environment

#: bytes of the packed buffer one thread of the CUDA kernels moves (one vector store or load)
VECTOR_BYTES = 16


def _values(name: str, tensor: str, offset: Sequence[Sequence[int]], shape: Sequence[int], elem_bits: int,
            command: str, how: str) -> dict:
    if not name.isidentifier():
        raise ValueError(f"reorder name {name!r} is not a C identifier")
    if elem_bits != 4 and elem_bits // 8 not in C_RAW:
        raise ValueError(f"{elem_bits}-bit elements: the reorder moves 4, 8, 16, 32 or 64-bit elements")
    elems = prod(shape)
    if len(offset) != elems.bit_length() - 1 or any(len(c) != len(shape) for c in offset):
        raise ValueError(f"{len(offset)} offset bases for a tile of {elems} elements")
    vector = min(8 * VECTOR_BYTES // elem_bits, elems)
    return {"name": name, "tensor": tensor, "command": command, "how": how, "shape": list(shape), "rank": len(shape),
            "offset": [list(c) for c in offset], "bits": len(offset), "tile_elems": elems, "elem_bits": elem_bits,
            "raw": C_RAW[max(1, elem_bits // 8)], "vector": vector, "vector_bytes": vector * elem_bits // 8}


def reorder_python(name: str, tensor: str, offset: Sequence[Sequence[int]], shape: Sequence[int], elem_bits: int,
                   command: str, how: str) -> str:
    """The numpy module: ``reorder(w)``, ``restore(packed)`` and the layout's data."""
    return environment().get_template("reorder.py.j2").render(**_values(name, tensor, offset, shape, elem_bits,
                                                                         command, how))


def reorder_cuda(name: str, tensor: str, offset: Sequence[Sequence[int]], shape: Sequence[int], elem_bits: int,
                 command: str, how: str, target: str = "cuda") -> str:
    """The CUDA (HIP) header: ``reorder`` and ``restore`` kernels in namespace ``name``."""
    return environment().get_template("reorder.cuh.j2").render(cuda=target == "cuda",
                                                                **_values(name, tensor, offset, shape, elem_bits,
                                                                          command, how))
