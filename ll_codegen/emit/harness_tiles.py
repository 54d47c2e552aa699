"""What the test harness of a memory operation runs on (plain functions of a plan's data): the
padded strides of its global tile, the edge cut and fill of the masked forms, its kernel variants,
and for a store/load with run-time alignment paths the strides and pointer offset that steer each
variant into one path, the global scratch it needs, and the TMA harness's tile origin.  Shared
by the emitters (the harness templates' values) and the verifiers (expected data and instruction
counts); plans know nothing of harnesses."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ll_codegen.core.layout import layout_of
from ll_codegen.emit.cexpr import row_major_bases


def harness_strides(shape: tuple[int, ...], order: list[int], alignment: int, elem_bytes: int) -> tuple[int, ...]:
    """Strides (elements) the test harness uses for a global tile: dense in
    ``order`` plus ``alignment`` bytes of padding per dim (rounded up to the
    alignment), so that code assuming a dense tile fails."""
    strides = [0] * len(shape)
    s, a = 1, max(1, alignment // elem_bytes)
    for d in order:
        strides[d] = s
        s = -(-(s * shape[d] + a) // a) * a           # one alignment unit of padding, rounded up to it
    return tuple(strides)


def harness_extent(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """Elements a tile with these strides spans."""
    return 1 + sum((n - 1) * st for n, st in zip(shape, strides))


def harness_cut(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The extent the masked harness uses: every dim longer than 1 cut
    inside (64 -> 47, 4 -> 2, 2 -> 1), never at a vector boundary."""
    return tuple(max(1, n - n // 4 - 1) for n in shape)


def harness_fill(elem_bytes: int) -> int:
    """The ``fill`` value of the masked load harness (raw bits)."""
    return 0x5A5A5A5A5A5A5A5A & ((1 << (8 * elem_bytes)) - 1)


def global_access(plan):
    """The access of a plan's global tile (a store's or load's ``memory``, a copy's ``load``), else None."""
    if plan.operation == "copy":
        return plan.load
    if plan.operation in ("store", "load") and plan.memory.space == "global":
        return plan.memory
    return None


def harness_variants(plan) -> tuple[str, ...]:
    """Kernel name suffixes of a plan's harness: ``_masked`` too for global tiles, and for a plan
    with run-time alignment paths ``_a<bytes>`` (+ ``_masked``) for each slower path."""
    if plan.operation == "tma":     # a TMA load in bounds, one partly out of bounds (zero fill), a TMA store
        return ("", "_oob", "_store")
    if global_access(plan) is None:
        return ("",)
    return ("", "_masked") + tuple(f"_a{global_access(p).vector_bytes}{k}"
                                   for p in plan.paths for k in ("", "_masked"))


def variant_masked(variant: str) -> bool:
    """Whether a harness variant runs the masked form (``store_masked`` ...)."""
    return variant.endswith("_masked")


def runtime_alignment_strides(shape: tuple[int, ...], order: list[int], align: int, elem_bytes: int) -> tuple[int, ...]:
    """Padded strides (elements) whose byte values all have exactly ``align`` as their largest
    power-of-two divisor up to 16 (``align`` = 16: multiples of 16), so that a run-time alignment
    dispatch picks the path of ``align`` bytes."""
    strides, s = [0] * len(shape), 1
    for d in order:
        strides[d] = s
        s = s * shape[d] + 1
        while (s * elem_bytes) % 16 if align >= 16 else (s * elem_bytes) % (2 * align) != align:
            s += 1
    return tuple(strides)


def harness_tile(plan, variant: str) -> tuple[tuple[int, ...], int]:
    """(strides, element offset of the tile in the scratch buffer) a harness variant uses for its
    global tile: padded strides at the plan's alignment; for a run-time alignment path ``_a<b>``,
    strides and a pointer offset of exactly ``b`` bytes' alignment (the buffer is 64-byte aligned)."""
    if plan.operation == "tma":
        return harness_strides(plan.shape, list(plan.tma.order), 16, plan.elem_bytes), 0
    m = global_access(plan)
    order = m.layout["order"]
    if not variant.startswith("_a"):
        return harness_strides(plan.shape, order, m.alignment, plan.elem_bytes), 0
    align = int(variant[2:].split("_")[0])
    return runtime_alignment_strides(plan.shape, order, align, plan.elem_bytes), align // plan.elem_bytes


#: the unsigned type of each access width (bytes) of a harness's chunked tile copies
CHUNK_TYPES = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint2", 16: "uint4"}


def tile_chunk(row_major: Sequence[int], elem_bytes: int) -> int:
    """Elements a harness moves at once between a shared tile and its row-major tensor, given the
    row-major index of each offset basis: the largest ``c = 2**m <= 16 / elem_bytes`` such that offset
    bit ``k < m`` is index bit ``k`` and no other offset bit touches index bits below ``m``.  Then for
    ``o`` a multiple of ``c`` and ``j < c``, ``index(o + j) = index(o) ^ j = index(o) + j``: ``c``
    consecutive shared elements are ``c`` consecutive tensor elements, one access of ``c * elem_bytes``
    bytes on either side (the index of ``o`` a multiple of ``c``, so the access is aligned)."""
    m = 0
    while (1 << (m + 1)) * elem_bytes <= 16 and m < len(row_major) and row_major[m] == 1 << m \
            and all(b & ((1 << (m + 1)) - 1) == 0 for b in row_major[m + 1:]):
        m += 1
    return 1 << m


def harness_chunk(tile: Mapping[str, Any], elem_bytes: int) -> tuple[int, str]:
    """(``tile_chunk`` of a shared tile as a plan records it (``layout_of``), the C type of one chunk)."""
    c = tile_chunk(row_major_bases(layout_of(tile), "offset"), elem_bytes)
    return c, CHUNK_TYPES[c * elem_bytes]


def harness_origin(shape: Sequence[int], inner: int, elem_bytes: int) -> tuple[int, ...]:
    """The tile origin of the TMA harness's ``_oob`` and ``_store`` kernels: ``n - cut`` along each
    dim (``harness_cut``: 64 -> 17), so only the first ``cut`` elements of each dim lie inside
    the tensor and the rest of the box is zero-filled (load) or clipped (store).  Along the
    ``inner`` (contiguous) dim rounded up to 16 bytes -- TMA's rule: a box whose innermost start
    is not 16-byte aligned is an illegal instruction (measured on an H200) -- or 0 when that
    leaves nothing inside."""
    out = []
    for d, (n, c) in enumerate(zip(shape, harness_cut(tuple(shape)))):
        o = n - c
        if d == inner:
            q = max(1, 16 // elem_bytes)
            o = -(-o // q) * q
            o = o if o < n else 0
        out.append(o)
    return tuple(out)


def scratch_bytes(plan) -> int:
    """Global bytes the test harness needs for a plan's global tile (padded strides), else 0; a
    TMA harness's tensor has 16-byte aligned strides."""
    if plan.operation == "tma":
        return plan.elem_bytes * harness_extent(plan.shape, harness_strides(plan.shape, list(plan.tma.order),
                                                                            16, plan.elem_bytes))
    if global_access(plan) is None:
        return 0
    return plan.elem_bytes * max(off + harness_extent(plan.shape, st)
                                 for st, off in (harness_tile(plan, v) for v in harness_variants(plan)))
