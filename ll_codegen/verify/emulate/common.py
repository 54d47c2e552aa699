"""What the emulators share: the hardware semantics of shuffles and of
shared-memory accesses, executed from plan data alone.

Registers are raw bits: arrays ``(num_warps, warp_size, n_regs)`` of the
unsigned type of the element width (``core.dtypes.NP_RAW``).  ``shfl_source``
and ``shuffle_words`` are the real intrinsics' semantics; ``smem_access``
turns one warp-wide shared-memory instruction into the byte addresses every
thread moves (and checks alignment, width and bounds: ``SmemError``);
``global_addresses`` is the same for a global access.

Shuffle semantics (what ``emulate`` implements; ``width`` is always the warp
size in generated code, but the helpers take any power-of-two width)
-------------------------------------------------------------------------
The payload of a round is ``sent(round)[send_select(lane)]`` packed little-endian
into ``words`` 32-bit words, lowest register first (8-byte elements: lo word
then hi word); unused high bits are zero.  Every word is shuffled with the
same source-lane argument, then unpacked into ``received(round)[recv_select(lane)]``
(``ShufflePlan.sent``/``received`` list the registers of either form: select
trees or swap stages, whose network the host SIMT runtime executes as rendered).
The intrinsic is ``shfl_xor(lane_xor)`` when ``src_lane is None``, else
``shfl(XorForm(src_lane)(lane) ^ lane_xor)``.

* CUDA ``__shfl_sync(m, v, srcLane, width)`` = PTX ``shfl.sync.idx`` with
  ``c = ((32 - width) << 8) | 0x1f``: source ``j = (lane & ~(width-1)) |
  (srcLane & (width-1))`` -- srcLane modulo width inside the lane's segment
  (only ``srcLane[4:0]`` is read, so negative or >= 32 values wrap too).
* CUDA ``__shfl_xor_sync(m, v, laneMask, width)`` = ``shfl.sync.bfly``:
  ``j = lane ^ (laneMask & 31)``; if ``j`` is beyond the lane's segment
  (``j > (lane | (width-1))``) the lane gets its own value (the guide:
  "... attempt to access elements from later groups ... their own value of
  var will be returned"); earlier segments are readable.
* HIP ``__shfl(v, srcLane, width)`` (amd_warp_functions.h):
  ``index = (srcLane & (width-1)) + (lane & ~(width-1))``, then
  ``ds_bpermute(index << 2)``: always in range, same result as CUDA.
* HIP ``__shfl_xor(v, laneMask, width)``: ``index = lane ^ laneMask``; if
  ``index >= ((lane + width) & ~(width-1))`` (beyond the segment) the own
  lane.  Unlike CUDA, mask bits at or above the warp size are NOT dropped:
  wave32 ``laneMask = 33`` gives the own value on HIP but ``lane ^ 1`` on
  CUDA.
* ``ds_bpermute`` reads the source lane from address bits [7:2] (wave64:
  index mod 64); for wave32 this module takes index mod 32.  With the two
  helpers above the index is always within the wave, so the wrap never
  matters for generated code; it is implemented for completeness.
  All lanes are active (full mask), so the inactive-lane rules never apply.

Shared-memory semantics
-----------------------
A byte array of ``plan.smem.bytes`` bytes, initialised with a poison pattern
(0xA5).  Per round: barrier; every thread of every warp with
``warp & store_warp_skip == 0`` executes every store of the round; barrier;
every thread of every warp executes every load.  With ``barrier == "warp"``
the stores -> loads barrier orders only each warp's own accesses, so a load of a byte that
another warp stored -- or a byte two warps store -- is ``SmemError``.  Vector access: byte address
``store_base(lane, warp) ^ offset``, ``regs`` packed lowest address first;
the address must be aligned to the access size (``len(regs) * elem_bytes``, a
power of two <= 16 -- the hardware rule; ``vector_bytes`` is the widest
access of the plan, and every access must be no wider) and in bounds, else
``SmemError``.  Matrix access (``"matrix"``/``"matrix.trans"``:
ldmatrix/stmatrix m8n8.b16 with ``x = len(regs) * elem_bytes // 4``
matrices): lane ``8m + r`` provides (at ``base ^ offset``, 16-byte aligned)
the address of row ``r`` of matrix ``m``; thread ``t`` holds word ``m`` =
``regs[m*4/w : (m+1)*4/w]`` which is bytes ``4(t%4)..4(t%4)+3`` of row
``t//4`` (non-trans), or with ``.trans`` (2-byte elements only) the halves
``(row 2(t%4), col t//4)`` (low) and ``(row 2(t%4)+1, col t//4)`` (high).
Two threads writing different values to the same byte in one round (a race)
and a load of a byte never written raise ``SmemError``.
"""
from __future__ import annotations

import functools

import numpy as np

from ll_codegen.core.dtypes import NP_RAW
from ll_codegen.plan.model import LaneSelect, SmemAccess, XorForm
from ll_codegen.plan.plans import Transfer

POISON = 0xA5


class SmemError(AssertionError):
    """A shared-memory access the hardware would not perform as planned."""


@functools.lru_cache(maxsize=4096)
def _xor_table(coeffs: tuple[int, ...]) -> np.ndarray:
    """The xor of ``coeffs[k]`` over the set bits k of every index below ``2 ** len(coeffs)`` (read-only:
    shared by the calls of one form, which the emulator makes once per access)."""
    t = np.zeros(1, dtype=np.int64)
    for c in coeffs:
        t = np.concatenate([t, t ^ c])
    t.flags.writeable = False
    return t


def xor_form(form: XorForm, lanes: np.ndarray, warps: np.ndarray) -> np.ndarray:
    """The value of ``form`` at every (lane, warp) pair (broadcast); the bits of a lane or warp above
    the form's terms select nothing."""
    lanes, warps = np.asarray(lanes), np.asarray(warps)
    lt, wt = _xor_table(tuple(form.lane)), _xor_table(tuple(form.warp))
    return np.asarray(lt[lanes & (lt.size - 1)] ^ wt[warps & (wt.size - 1)], dtype=np.int64)


def lane_select(sel: LaneSelect, lanes: np.ndarray) -> np.ndarray:
    """The select code of every lane (bit j: parity of ``lane & masks[j]``)."""
    c = np.zeros(lanes.shape, dtype=np.int64)
    for j, m in enumerate(sel.masks):
        c |= (np.bitwise_count(lanes & m).astype(np.int64) & 1) << j
    return c


def as_bytes(regs: np.ndarray) -> np.ndarray:
    """(..., n) uintN -> (..., n, N/8) uint8, little-endian."""
    r = np.ascontiguousarray(regs.astype(regs.dtype.newbyteorder("<"), copy=False))
    return r.view(np.uint8).reshape(regs.shape + (regs.dtype.itemsize,))


def from_bytes(b: np.ndarray, elem_bytes: int) -> np.ndarray:
    """(..., N/8) uint8 -> (...) uintN."""
    dt = np.dtype(NP_RAW[elem_bytes]).newbyteorder("<")
    return np.ascontiguousarray(b).view(dt).reshape(b.shape[:-1]).astype(NP_RAW[elem_bytes])


def shfl_source(family: str, warp_size: int, lane: np.ndarray, arg: np.ndarray | int,
                xor: bool, width: int | None = None) -> np.ndarray:
    """Lane each lane reads for ``shfl`` (``xor=False``, arg = srcLane) or
    ``shfl_xor`` (arg = laneMask), with the real intrinsic semantics of
    ``family`` ("cuda" or "hip"); see the module docstring."""
    width = warp_size if width is None else width
    if width < 1 or width & (width - 1) or width > warp_size:
        raise ValueError(f"width {width} must be a power of two <= {warp_size}")
    lane = np.asarray(lane, dtype=np.int64)
    arg = np.asarray(arg, dtype=np.int64)
    seg = lane & ~(width - 1)
    if family == "cuda":
        if warp_size != 32:
            raise ValueError("CUDA warps have 32 lanes")
        if not xor:
            return seg | (arg & 31 & (width - 1))
        j = lane ^ (arg & 31)
        return np.where(j > (lane | (width - 1)), lane, j)
    if family == "hip":
        if not xor:
            index = (arg & (width - 1)) + seg
        else:
            index = lane ^ arg
            index = np.where(index >= ((lane + width) & ~(width - 1)), lane, index)
        return ((index << 2) >> 2) & (warp_size - 1)       # ds_bpermute: address bits -> lane, mod wave
    raise ValueError(f"unknown shuffle family {family!r}")


def shuffle_words(family: str, values: np.ndarray, arg: np.ndarray | int, xor: bool,
                  width: int | None = None) -> np.ndarray:
    """Shuffle 32-bit words ``values`` of shape (warps, lanes, ...) within each warp; ``arg``
    one value, one per lane, or one per (warp, lane)."""
    ws = values.shape[1]
    lanes = np.arange(ws)
    srcl = shfl_source(family, ws, lanes, arg, xor, width)
    if srcl.ndim == 2:                                  # per (warp, lane): each warp reads its own lanes
        return values[np.arange(values.shape[0])[:, None], srcl]
    return values[:, srcl]


def smem_access(plan: Transfer, acc: SmemAccess, base: XorForm, instr: str, warps: np.ndarray):
    """For one warp-wide instruction on the given warps:
    ``addr (nw, L, nb)``, ``reg (L, nb)``, ``byte (L, nb)`` -- thread l moves
    byte ``byte[l,k]`` of register ``reg[l,k]`` to/from ``addr[:, l, k]`` --
    and ``lane_addr (nw, L)`` (-1 inactive) with ``access_bytes`` for the
    bank counter."""
    L, w = plan.warp_size, plan.elem_bytes
    lanes = np.arange(L)
    a = xor_form(base, lanes[None, :], warps[:, None]) ^ acc.offset       # (nw, L)
    area = plan.memory if plan.operation in ("store", "load") else plan.smem
    smem_bytes, vector_bytes = area.bytes, area.vector_bytes
    nregs = len(acc.regs)
    regs = np.array(acc.regs, dtype=np.int64)
    if instr == "vector":
        v = nregs * w
        if v & (v - 1) or v > 16:
            raise SmemError(f"vector access of {v} bytes (regs {acc.regs}) is not a power of two <= 16")
        if v > vector_bytes:
            raise SmemError(f"access of {v} bytes exceeds the plan's vector_bytes {vector_bytes}")
        if np.any(a % v):
            bad = np.argwhere(a % v)[0]
            raise SmemError(f"misaligned {v}-byte access at {a[tuple(bad)]} (warp {warps[bad[0]]}, lane {bad[1]})")
        k = np.arange(v)
        addr = a[:, :, None] + k
        reg = np.broadcast_to(regs[k // w], (L, v))
        byte = np.broadcast_to(k % w, (L, v))
        lane_addr, access = a, v
    elif instr in ("matrix", "matrix.trans"):
        if L != 32:
            raise SmemError("ldmatrix/stmatrix need 32 lanes")
        if (nregs * w) % 4 or nregs * w // 4 not in (1, 2, 4):
            raise SmemError(f"matrix access of {nregs} x {w} bytes is not 1, 2 or 4 words")
        if instr == "matrix.trans" and w != 2:
            raise SmemError(".trans needs 2-byte elements")
        x = nregs * w // 4
        rows = a[:, :8 * x]                                                 # (nw, 8x) row addresses
        if np.any(rows % 16):
            raise SmemError("matrix row address not 16-byte aligned")
        t = lanes[:, None]
        m = np.arange(x)[None, :, None]                                     # (1, x, 1)
        kk = np.arange(4)[None, None, :]                                    # byte of the word
        tt = t[:, :, None]
        if instr == "matrix":
            row = 8 * m + tt // 4
            col = (tt % 4) * 4 + kk
        else:
            row = 8 * m + 2 * (tt % 4) + kk // 2
            col = 2 * (tt // 4) + kk % 2
        row = np.broadcast_to(row, (L, x, 4)).reshape(L, 4 * x)
        col = np.broadcast_to(col, (L, x, 4)).reshape(L, 4 * x)
        addr = rows[:, row] + col                                           # (nw, L, 4x)
        flatb = np.arange(4 * x)                                            # byte index in the packed words
        reg = np.broadcast_to(regs[flatb // w], (L, 4 * x))
        byte = np.broadcast_to(flatb % w, (L, 4 * x))
        lane_addr = np.where(lanes[None, :] < 8 * x, a, -1)
        access = 16
    else:
        raise SmemError(f"unknown shared-memory instruction {instr!r}")
    if np.any(addr < 0) or np.any(addr >= smem_bytes):
        bad = np.argwhere((addr < 0) | (addr >= smem_bytes))[0]
        raise SmemError(f"{instr} access out of bounds: byte {addr[tuple(bad)]} of {smem_bytes} "
                        f"(warp {warps[bad[0]]}, lane {bad[1]}, offset {acc.offset})")
    return addr, reg, byte, lane_addr, access


def store_warps(plan: Transfer) -> np.ndarray:
    """The warps that store in a shared-memory conversion (``store_warp_skip``)."""
    w = np.arange(plan.num_warps)
    return w[(w & plan.smem.store_warp_skip) == 0]


def global_addresses(plan: Transfer, acc, warps: np.ndarray, strides) -> tuple[np.ndarray, list]:
    """Element index (nw, L, vec) of every element of one global access, and its coordinates."""
    m = plan.memory
    lanes = np.arange(plan.warp_size)
    f = m.layout["order"][0]
    coords = []
    for d, (cb, c) in enumerate(zip(m.coord_base, acc.coords)):
        x = xor_form(cb, lanes[None, :], warps[:, None]) ^ c            # (nw, L)
        x = x[:, :, None] + (np.arange(m.vec)[None, None, :] if d == f else 0)
        coords.append(np.broadcast_to(x, (len(warps), plan.warp_size, m.vec)))
    elem = sum(c * s for c, s in zip(coords, strides))
    return elem, coords
