"""Emulator of TMA plans (``plan.operation == "tma"``): each box of the plan executed as
``cp.async.bulk.tensor`` executes it, then compared with the shared layout's own offsets.

Hardware semantics (PTX ISA ``cp.async.bulk.tensor``, tiled mode; ``cuTensorMapEncodeTiled``)
-----------------------------------------------------------------------------------------
A tensor map of rank r holds the tensor's dims innermost first; a box ``B_0 x .. x B_{r-1}``
(each 1..256 elements, ``B_0 * w`` a multiple of 16 bytes and, swizzled, at most the span).  A
load at coordinates ``c`` (innermost first) writes box element ``p = x_0 + B_0 (x_1 + B_1 (..))``
-- the element of tensor coordinates ``c + x`` along the map's dims, zero when any coordinate
lies outside the tensor (OOB fill NONE) -- to shared byte ``swizzle(a + p * w)`` of the
destination ``a`` (128-byte aligned), where the swizzle XORs the 16-byte chunk bits with the
128-byte row bits of the address (128 B: 4-6 ^= 7-9; 64 B: 4-5 ^= 7-8; 32 B: 4 ^= 7).  A store
reads the same bytes and writes only the elements inside the tensor.  The mbarrier's phase
completes when the transaction bytes it expects (``tx_bytes``) have all arrived: every box's
bytes, zero-filled ones included.

Nothing here reads the planner: the plan's boxes are executed on a byte image of the tile
(based at a 1024-byte boundary, poisoned, every byte written exactly once) and the result is
compared, element by element, with ``tensor[origin + S(o)]`` at element offset ``o`` of the
shared layout ``S`` (``plan.dst_bases``).
"""
from __future__ import annotations

import numpy as np

from ll_codegen.core.dtypes import NP_RAW
from ll_codegen.core.layout import layout_of
from ll_codegen.plan.plans import Transfer
from ll_codegen.emit.harness_tiles import harness_origin
from ll_codegen.verify.emulate.common import POISON, SmemError


def hw_swizzle(addr: np.ndarray, span: int) -> np.ndarray:
    """The hardware swizzle of shared byte addresses (module comment)."""
    if not span:
        return addr
    return addr ^ (((addr >> 7) & (span // 16 - 1)) << 4)


def _check_hardware(plan: Transfer) -> None:
    """What cuTensorMapEncodeTiled and cp.async.bulk.tensor require of the plan's boxes."""
    t, w = plan.tma, plan.elem_bytes
    rank = len(plan.shape)
    if not 1 <= rank <= 5 or sorted(t.dims) != list(range(rank)) or len(t.box) != rank:
        raise SmemError(f"tma plan: box {t.box} over dims {t.dims} is not one box dim per tensor dim (rank 1..5)")
    if any(not 1 <= b <= 256 for b in t.box):
        raise SmemError(f"tma plan: box {t.box}: every box dim is 1..256 elements")
    inner = t.box[0] * w
    if inner % 16 or (t.swizzle_bytes and inner > t.swizzle_bytes) or t.swizzle_bytes not in (0, 32, 64, 128):
        raise SmemError(f"tma plan: inner box dim of {inner} bytes with swizzle {t.swizzle_bytes}")
    if t.alignment % 128 or (t.swizzle_bytes and t.alignment % (8 * t.swizzle_bytes)):
        raise SmemError(f"tma plan: a {t.alignment}-byte aligned tile does not start a swizzle pattern")
    box_bytes = int(np.prod(t.box)) * w
    if any(off % 128 for off, _ in t.boxes) or t.box_bytes != box_bytes or t.tx_bytes != box_bytes * len(t.boxes):
        raise SmemError(f"tma plan: boxes at {[off for off, _ in t.boxes]} of {box_bytes} bytes, "
                        f"tx_bytes {t.tx_bytes}")
    src = layout_of(plan.src_bases)
    first = next((b for b in src.bases["offset"] if any(b)), None)
    contiguous = next(i for i, v in enumerate(first) if v) if first is not None else 0
    if t.dims[0] != contiguous:
        raise SmemError(f"tma plan: box rows along dim {t.dims[0]}, the global tensor is contiguous along "
                        f"dim {contiguous}")


def _check_start(plan: Transfer, origin, c, store: bool) -> None:
    """A box's start: 16-byte aligned along the innermost dim (else the GPU raises an illegal
    instruction, measured on an H200), and never negative for a store (likewise)."""
    t = plan.tma
    start = [origin[d] + c[d] for d in range(len(origin))]
    if start[t.dims[0]] * plan.elem_bytes % 16:
        raise SmemError(f"tma: a box starting at {start} is not 16-byte aligned along its innermost dim {t.dims[0]}")
    if store and min(start) < 0:
        raise SmemError(f"tma: a store box starting at {start} has a negative coordinate")


def _box_elements(box: tuple[int, ...]) -> np.ndarray:
    """(r, prod(box)) box coordinates of box element p, innermost first."""
    p = np.arange(int(np.prod(box)), dtype=np.int64)
    out, step = [], 1
    for b in box:
        out.append(p // step % b)
        step *= b
    return np.array(out)


def emulate_tma_load(plan: Transfer, tensor: np.ndarray, origin) -> np.ndarray:
    """The tile's bytes after ``load()`` at ``origin`` (tensor dim order) of ``tensor`` (raw bits,
    the tensor's shape, zeros beyond it)."""
    t, w = plan.tma, plan.elem_bytes
    _check_hardware(plan)
    shape = np.array(tensor.shape)
    mem = np.full(t.bytes, POISON, dtype=np.uint8)
    written = np.zeros(t.bytes, dtype=bool)
    x = _box_elements(t.box)
    for off, c in t.boxes:
        _check_start(plan, origin, c, store=False)
        coords = np.zeros((len(shape), x.shape[1]), dtype=np.int64)
        for i, d in enumerate(t.dims):
            coords[d] = origin[d] + c[d] + x[i]
        inside = np.all((coords >= 0) & (coords < shape[:, None]), axis=0)
        vals = np.where(inside, tensor[tuple(np.where(inside, coords, 0))], 0).astype(NP_RAW[w])
        addr = hw_swizzle(off + np.arange(x.shape[1], dtype=np.int64) * w, t.swizzle_bytes)
        if addr.max() + w > t.bytes:
            raise SmemError(f"tma plan: the box at {off} writes beyond the {t.bytes}-byte tile")
        byte = (addr[:, None] + np.arange(w)).ravel()
        if written[byte].any() or len(np.unique(byte)) != len(byte):
            raise SmemError(f"tma plan: the box at {off} writes shared bytes another box (or itself) wrote")
        written[byte] = True
        mem[byte] = vals.view(np.uint8).reshape(-1, w).ravel()
    if not written.all():
        raise SmemError(f"tma plan: {int((~written).sum())} of {t.bytes} tile bytes are never written")
    return mem


def emulate_tma_store(plan: Transfer, image: np.ndarray, tensor: np.ndarray, origin) -> np.ndarray:
    """``tensor`` after ``store()`` of the tile bytes ``image`` at ``origin`` (clipped)."""
    t, w = plan.tma, plan.elem_bytes
    _check_hardware(plan)
    out = tensor.copy()
    shape = np.array(tensor.shape)
    x = _box_elements(t.box)
    for off, c in t.boxes:
        _check_start(plan, origin, c, store=True)
        coords = np.zeros((len(shape), x.shape[1]), dtype=np.int64)
        for i, d in enumerate(t.dims):
            coords[d] = origin[d] + c[d] + x[i]
        inside = np.all((coords >= 0) & (coords < shape[:, None]), axis=0)
        addr = hw_swizzle(off + np.arange(x.shape[1], dtype=np.int64) * w, t.swizzle_bytes)
        vals = image[(addr[:, None] + np.arange(w)).ravel()].view(NP_RAW[w])
        out[tuple(coords[:, inside])] = vals[inside]
    return out


def tile_reference(plan: Transfer, tensor: np.ndarray, origin) -> np.ndarray:
    """The tile's bytes as the shared layout says: element offset o holds ``tensor[origin + S(o)]``
    (zero beyond the tensor)."""
    S = layout_of(plan.dst_bases)
    coords = S.apply_all()[: 1 << S.in_dim_size_log2("offset")].T + np.array(origin)[:, None]
    inside = np.all(coords < np.array(tensor.shape)[:, None], axis=0)
    vals = np.where(inside, tensor[tuple(np.where(inside, coords, 0))], 0).astype(NP_RAW[plan.elem_bytes])
    return vals.view(np.uint8)


def check_tma(plan: Transfer, rng: np.random.Generator | int | None = 0, origins=None, **_) -> None:
    """Loads at each origin (default: the tensor's origin, and one that puts part of the box beyond
    the tensor) against ``tile_reference``, then a store of a random tile at each: the tensor's
    elements inside must be the tile's, the rest untouched.  AssertionError on any difference."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    dt = NP_RAW[plan.elem_bytes]
    shape = tuple(plan.shape)
    if origins is None:
        origins = [(0,) * len(shape), harness_origin(shape, plan.tma.dims[0], plan.elem_bytes)]
    for origin in origins:
        tensor = rng.integers(0, np.iinfo(dt).max, size=shape, dtype=dt, endpoint=True)
        got, want = emulate_tma_load(plan, tensor, origin), tile_reference(plan, tensor, origin)
        if not np.array_equal(got, want):
            i = int(np.argmax(got != want))
            raise AssertionError(f"tma plan: load at {list(origin)}: tile byte {i} (element offset "
                                 f"{i // plan.elem_bytes}) is {got[i]:#x}, the layout says {want[i]:#x}")
        src = rng.integers(0, np.iinfo(dt).max, size=shape, dtype=dt, endpoint=True)
        image = tile_reference(plan, src, (0,) * len(shape))       # the tile holding src as the layout says
        poison = ~src
        got_t = emulate_tma_store(plan, image, poison, origin)
        want_t = poison.copy()
        region = tuple(slice(o, None) for o in origin)
        want_t[region] = src[tuple(slice(0, n - o) for n, o in zip(shape, origin))]
        if not np.array_equal(got_t, want_t):
            bad = tuple(int(v) for v in np.argwhere(got_t != want_t)[0])
            raise AssertionError(f"tma plan: store at {list(origin)}: tensor element {bad} is {int(got_t[bad]):#x}, "
                                 f"expected {int(want_t[bad]):#x}")
