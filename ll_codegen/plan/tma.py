"""A shared tile as TMA (the Tensor Memory Accelerator, ``cp.async.bulk.tensor``, sm_90a) and
the hardware swizzle see it: the one home of that question (``tma_box``, ``tile_alignment``)
and the plan of a TMA copy (``TmaPlan`` with its ``TmaBoxes``, ``plan_tma``).

The hardware swizzle
--------------------
TMA (and wgmma's descriptors) place bytes at ``swizzle(a, span)`` of the *absolute* shared
address ``a``: the 16-byte chunk bits are XOR-ed with the 128-byte row bits,

* 128 B: bits 4-6 ^= bits 7-9 (the pattern repeats every 1024 bytes),
* 64 B:  bits 4-5 ^= bits 7-8 (every 512 bytes),
* 32 B:  bit 4 ^= bit 7 (every 256 bytes),

a linear map over F2 of the address bits and an involution (bits 7-9 are not changed).

A tile as a box
---------------
The shared tile is a bijective linear layout ``S``: element offset ``o`` -> tensor coordinates.
TMA writes one box densely row-major (box dim 0 innermost), element ``p`` of the box at byte
``swizzle(base + p * w)``.  So for a swizzle span the *unswizzled* layout

    U(o) = S(swizzle(o * w, span) / w)          (w = element bytes; linear, as swizzle is)

must be that dense box: reading U's offset bases from bit 0 up, consecutive powers
``1, 2, 4, ..`` of one tensor dim (the box's inner dim), then ``1, 2, ..`` of another dim, and
so on; each box dim at most 256 elements; the inner dim exactly ``span`` bytes when swizzled
(a multiple of 16 bytes without a swizzle).  The offset bits above the box must each be a
single power of two along one dim at or beyond the box's extent there: they enumerate several
boxes, box ``k`` at shared byte ``k * box_bytes`` and tensor offset ``XOR of those bases for
the bits of k``.  Several boxes must each start where the swizzle pattern starts (box bytes a
multiple of ``8 * span``; 128 bytes, TMA's shared alignment, unswizzled), so TMA's swizzle of
each box equals the tile's.  No swizzle is taken when the layout is a dense box as given (a span
whose pattern is the identity on a small tile would only raise the alignment); else spans 128,
64, 32 are tried in turn.

Everything is derived from the layout's bases: an ``nvmma_shared``, a ``swizzled_shared`` with
16-byte vectors and 128-byte rows, a CuTe ``Swizzle<3,4,3>`` or an explicit ``shared_linear``
tile of the same bases give the same box.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

from ll_codegen.core import f2
from ll_codegen.core.dtypes import dtype_bytes
from ll_codegen.core.layout import LinearLayout
from ll_codegen.core.target import Target, get_target
from ll_codegen.plan.model import Candidate
from ll_codegen.plan.plans import Transfer

SPANS = (128, 64, 32, 0)
MAX_BOX = 256           # cuTensorMapEncodeTiled: every boxDim <= 256
MAX_RANK = 5            # tensor maps have rank 1..5
SMEM_ALIGN = 128        # cp.async.bulk.tensor: the shared destination is 128-byte aligned

#: CUtensorMapSwizzle of a span (CU_TENSOR_MAP_SWIZZLE_NONE/32B/64B/128B)
SWIZZLE_ENUM = {0: 0, 32: 1, 64: 2, 128: 3}

#: CUtensorMapDataType of each dtype (plans move raw bits: the 8-bit types as UINT8; a tf32
#: tensor is stored as f32, TFLOAT32 would round on the way)
TMA_DATA_TYPE = {"i8": 0, "u8": 0, "f8e4m3": 0, "f8e5m2": 0, "i16": 1, "f16": 6, "bf16": 9,
                 "u32": 2, "i32": 3, "f32": 7, "i64": 5, "f64": 8}
DATA_TYPE_NAMES = {0: "UINT8", 1: "UINT16", 2: "UINT32", 3: "INT32", 4: "UINT64", 5: "INT64", 6: "FLOAT16",
                   7: "FLOAT32", 8: "FLOAT64", 9: "BFLOAT16"}

#: why a shared tile needs its alignment (the headers' kTileAlign comment)
ALIGN_REASONS = {
    1024: "the 128-byte swizzle acts on address bits 4-9: the tile must start on a 1024-byte boundary",
    512: "the 64-byte swizzle acts on address bits 4-8: the tile must start on a 512-byte boundary",
    256: "the 32-byte swizzle acts on address bits 4 and 7: the tile must start on a 256-byte boundary",
    128: "TMA writes and reads shared boxes at 128-byte aligned addresses",
    16: "16-byte vector accesses; no hardware swizzle reads this tile",
}


def swizzle(addr: int, span: int) -> int:
    """The hardware swizzle of byte offset ``addr`` (module comment): 128: bits 4-6 ^= bits
    7-9; 64: bits 4-5 ^= bits 7-8; 32: bit 4 ^= bit 7; 0: ``addr``."""
    if not span:
        return addr
    return addr ^ (((addr >> 7) & (span // 16 - 1)) << 4)


@dataclass(frozen=True)
class TmaBox:
    """A shared tile as TMA writes it: ``box`` extents innermost first, ``dims`` the tensor dim
    of each (every tensor dim once; dims the box does not span have extent 1), the swizzle
    span ``swizzle_bytes`` (0: none), ``boxes`` as (shared byte offset, coordinate offset per
    tensor dim), and ``bytes`` of one box."""
    box: tuple[int, ...]
    dims: tuple[int, ...]
    swizzle_bytes: int
    boxes: tuple[tuple[int, tuple[int, ...]], ...]
    bytes: int

    @property
    def alignment(self) -> int:
        """Shared alignment the tile needs: the swizzle pattern's repeat, or TMA's 128 bytes."""
        return max(8 * self.swizzle_bytes, SMEM_ALIGN)


def _single(v: Sequence[int]) -> tuple[int, int] | None:
    """(dim, value) when ``v`` is a power of two along one dim, else None."""
    nz = [(d, x) for d, x in enumerate(v) if x]
    if len(nz) != 1 or nz[0][1] & (nz[0][1] - 1):
        return None
    return nz[0]


def _box_for_span(S: list[list[int]], sizes: list[int], w: int, span: int) -> tuple[TmaBox | None, int, str]:
    """The box of ``S`` (offset bases) under one swizzle span: (box, -, -) or (None, offset bits
    explained, why not)."""
    rank, n = len(sizes), len(S)
    U = []
    for i in range(n):
        e = swizzle((1 << i) * w, span) // w                 # the element offset the box's element 2^i lands on
        v = [0] * rank
        for j in range(n):
            if e >> j & 1:
                v = [a ^ b for a, b in zip(v, S[j])]
        U.append(v)
    ext = [1] * rank
    seq: list[int] = []                                      # box dims in order, innermost first
    i = 0
    while i < n:
        s = _single(U[i])
        if s is None:
            break
        d, x = s
        inner_full = span and seq and ext[seq[0]] * w >= span
        if seq and d == seq[-1] and x == ext[d] and 2 * x <= MAX_BOX and not (len(seq) == 1 and inner_full):
            ext[d] *= 2
        elif x == 1 and d not in seq and (not seq or not span or inner_full):
            seq.append(d)
            ext[d] = 2
        else:
            break
        i += 1
    if not seq:
        return None, 0, f"offset 1 is at {tuple(U[0]) if U else ()}, not the next element of one dim"
    inner = ext[seq[0]] * w
    if span and inner != span:
        return None, i, f"the inner box dim (dim {seq[0]}) holds {inner} bytes, not the swizzle's {span}"
    if inner % 16:
        return None, i, f"the inner box dim (dim {seq[0]}) holds {inner} bytes, not a multiple of 16"
    above = []
    for j in range(i, n):
        s = _single(U[j])
        if s is None or s[1] < ext[s[0]]:
            return None, j, (f"offset {1 << j} is at {tuple(U[j])}: neither the next element of the box "
                             f"{[ext[d] for d in seq]} (dims {seq}) nor a whole box beyond it")
        above.append(U[j])
    box_bytes = w << i
    if above and box_bytes % max(8 * span, SMEM_ALIGN):
        return None, i, (f"{1 << len(above)} boxes of {box_bytes} bytes do not each start a "
                         f"{max(8 * span, SMEM_ALIGN)}-byte {'swizzle pattern' if span else 'TMA block'}")
    dims = tuple(seq) + tuple(d for d in range(rank) if d not in seq)
    boxes = []
    for k in range(1 << len(above)):
        c = [0] * rank
        for j, v in enumerate(above):
            if k >> j & 1:
                c = [a ^ b for a, b in zip(c, v)]
        boxes.append((k * box_bytes, tuple(c)))
    return TmaBox(tuple(ext[d] for d in dims), dims, span, tuple(boxes), box_bytes), n, ""


def tma_box(tile: LinearLayout, elem_bytes: int) -> TmaBox:
    """The TMA box of a shared tile (module comment): none if the layout is a dense box as
    given, else spans 128, 64, 32;
    ValueError in one line saying why TMA cannot produce the layout."""
    if "offset" not in tile.in_dims:
        raise ValueError("TMA writes shared tiles: the layout has no offset dim")
    if tile.in_dim_size("block") != 1:
        raise ValueError("TMA boxes of a tile split over several CTAs are not supported")
    S = tile.bases["offset"]
    sizes = list(tile.out_dim_sizes.values())
    if not 1 <= len(sizes) <= MAX_RANK:
        raise ValueError(f"TMA tensors have rank 1 to {MAX_RANK}; the tile has rank {len(sizes)}")
    flat = tile.flat_bases("offset")
    if len(flat) != tile.total_out_size_log2 or f2.rank(flat) != len(flat):
        raise ValueError("TMA cannot produce this layout: it is not a bijection between offsets and elements")
    if elem_bytes not in (1, 2, 4, 8):
        raise ValueError(f"TMA moves 1, 2, 4 or 8-byte elements, not {elem_bytes}")
    best = (-1, "")
    # a layout that is a dense box as given takes no swizzle (a span whose pattern is the
    # identity on the tile -- one 128-byte row, say -- would only demand a larger alignment)
    plain, _, _ = _box_for_span(S, sizes, elem_bytes, 0)
    if plain is not None:
        return plain
    for span in SPANS:
        box, reached, why = _box_for_span(S, sizes, elem_bytes, span)
        if box is not None:
            return box
        if reached >= best[0]:                   # ties: the later span (no swizzle last: the layout as given)
            best = (reached, f"with {f'the {span}-byte swizzle' if span else 'no swizzle'}: {why}")
    raise ValueError(f"TMA cannot produce this shared layout (no swizzle mode makes it a dense box); {best[1]}")


def tile_alignment(tile: LinearLayout, elem_bytes: int) -> int:
    """The shared alignment a tile needs: ``8 * span`` (1024/512/256) when it is a swizzled TMA
    box -- the hardware swizzle acts on absolute address bits -- else 16."""
    try:
        box = tma_box(tile, elem_bytes)
    except ValueError:
        return 16
    return 8 * box.swizzle_bytes if box.swizzle_bytes else 16


def align_reason(alignment: int) -> str:
    """The headers' comment on ``kTileAlign``: why the tile needs ``alignment`` bytes."""
    return ALIGN_REASONS.get(alignment, "byte alignment the tile's address needs")


# ------------------------------------------------------------------ the plan
def dense_order(tile: LinearLayout) -> list[int]:
    """The dims of a dense global tile fastest first: the dim of each offset basis as it
    first appears (then dims of size 1).  (``memory.global_order`` is the same; memory.py
    imports this module, so this one cannot import it.)"""
    order: list[int] = []
    for b in tile.bases.get("offset", []):
        d = next(i for i, c in enumerate(b) if c)
        if d not in order:
            order.append(d)
    return order + [i for i in range(len(tile.out_dims)) if i not in order]


@dataclass(frozen=True)
class TmaBoxes:
    """The boxes of a TMA copy: one ``cp.async.bulk.tensor`` per box from one thread.  ``box`` extents innermost first over the tensor ``dims``; ``boxes``: per box
    (shared byte offset, coordinate offset per tensor dim) from the tile's origin; ``tx_bytes``
    the bytes a load of the tile brings (the mbarrier's expected transaction count);
    ``bytes``/``alignment`` the shared tile's; ``order`` the global tensor's dims fastest first;
    ``data_type`` the ``CUtensorMapDataType``."""
    box: tuple[int, ...]
    dims: tuple[int, ...]
    swizzle_bytes: int
    boxes: tuple[tuple[int, tuple[int, ...]], ...]
    box_bytes: int
    tx_bytes: int
    bytes: int
    alignment: int
    order: tuple[int, ...]
    data_type: int

    @property
    def swizzle_enum(self) -> int:
        """The ``CUtensorMapSwizzle`` value."""
        return SWIZZLE_ENUM[self.swizzle_bytes]


@dataclass(frozen=True, kw_only=True)
class TmaPlan(Transfer):
    """A global tile <-> a shared tile by TMA (strategy ``tma``, sm_90a): ``tma`` holds the boxes;
    no registers on either side.  Its harness uses the tile and an 8-byte mbarrier after it."""
    operation: ClassVar[str] = "tma"
    tma: TmaBoxes

    @property
    def smem_bytes(self) -> int:
        return self.tma.bytes + 8

    def to_dict(self) -> dict[str, Any]:
        """Plain data; the boxes readable: shared byte offset and coordinate offsets."""
        d = super().to_dict()
        d["tma"]["boxes"] = [{"smem_offset": off, "coords": list(c)} for off, c in self.tma.boxes]
        return d


def tma_summary_lines(t: TmaBoxes) -> list[str]:
    """The TMA part of a plan's summary."""
    sw = f"{t.swizzle_bytes}-byte swizzle" if t.swizzle_bytes else "no swizzle"
    lines = [f"tma: {len(t.boxes)} box(es) of {list(t.box)} (dims {list(t.dims)}, innermost first), {t.box_bytes} B "
             f"each, {sw}; shared tile of {t.bytes} bytes, {t.alignment}-byte aligned; "
             f"{t.tx_bytes} tx bytes per load; data type {DATA_TYPE_NAMES[t.data_type]}",
             f"  global tensor: order {list(t.order)} (dim {t.order[0]} contiguous), 16-byte aligned base and strides"]
    lines += [f"  box {k}: shared byte {off}, coordinates origin + {list(c)}" for k, (off, c) in enumerate(t.boxes)]
    return lines


def plan_tma(global_tile: LinearLayout, shared_tile: LinearLayout, dtype: str = "f16",
             target: Target | str = "cuda", arch: str | None = None, alignment: int = 16,
             num_warps: int = 4) -> TmaPlan:
    """Plan a TMA copy between a global tile and a shared tile (strategy ``tma``, sm_90a):
    the shared tile must be a TMA box (``tma_box``) whose inner dim is the global tensor's
    contiguous dim; the global tensor 16-byte aligned.  ``num_warps``: the harness's block (one
    thread issues the copies).  ValueError in one line otherwise."""
    if isinstance(target, str):
        target = get_target(target, arch)
    if not target.has_hopper_async:
        raise ValueError("TMA needs --arch sm_90a (the tensor copies and mbarrier transaction counts are sm_90a)")
    w = dtype_bytes(dtype)
    if global_tile.out_dim_sizes != shared_tile.out_dim_sizes:
        raise ValueError(f"shapes differ: global {global_tile.out_dim_sizes} vs shared {shared_tile.out_dim_sizes}")
    if num_warps < 1 or num_warps & (num_warps - 1) or num_warps > 32:
        raise ValueError(f"--warps {num_warps}: a power of two from 1 to 32")
    if alignment < 16:
        raise ValueError(f"TMA needs a 16-byte aligned global tensor and strides; the global layout says {alignment}")
    box = tma_box(shared_tile, w)
    order = dense_order(global_tile)
    if box.dims[0] != order[0]:
        raise ValueError(f"TMA writes box rows along the global tensor's contiguous dim {order[0]}; "
                         f"the shared layout's rows run along dim {box.dims[0]}")
    nbytes = w << shared_tile.in_dim_size_log2("offset")
    tma = TmaBoxes(box=box.box, dims=box.dims, swizzle_bytes=box.swizzle_bytes, boxes=box.boxes,
                  box_bytes=box.bytes, tx_bytes=box.bytes * len(box.boxes), bytes=nbytes,
                  alignment=box.alignment, order=tuple(order), data_type=TMA_DATA_TYPE[dtype])
    sw = f"swizzle {box.swizzle_bytes} B" if box.swizzle_bytes else "no swizzle"
    detail = (f"one thread: {len(box.boxes)} x cp.async.bulk.tensor.{len(box.box)}d of {box.bytes} B "
              f"(box {list(box.box)}, {sw})")
    return TmaPlan(
        strategy="tma", dtype=dtype, elem_bytes=w, target=target.name, arch=target.arch,
        warp_size=target.warp_size, num_warps=num_warps, n_src=0, n_dst=0,
        src_bases={"in_dims": global_tile.bases, "out_dims": global_tile.out_dim_sizes},
        dst_bases={"in_dims": shared_tile.bases, "out_dims": shared_tile.out_dim_sizes},
        shape=tuple(shared_tile.out_dim_sizes.values()), tma=tma,
        candidates=(Candidate("tma", float(len(box.boxes)), detail),))
