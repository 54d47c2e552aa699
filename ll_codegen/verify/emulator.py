"""CPU emulator of conversion plans -- the independent checker of the planner
(DESIGN.md, "Verification chain", step 3).

Nothing here imports the planner or reuses its formulas: the emulator reads
only the plan data (``plan.py``) and executes it thread by thread (vectorised
over all warps and lanes with numpy), and the bank counter looks only at the
actual byte addresses of each warp-wide shared-memory instruction.

Data
----
Registers are raw bits: arrays of shape ``(num_warps, warp_size, n_regs)`` of
the unsigned integer type of the element width (uint8/16/32/64).

``reference(src, dst, tensor)``
    every thread's registers under both layouts:
    ``regs[w, l, r] = tensor[L(register=r, lane=l, warp=w)]``.
``emulate(plan, src_regs)``
    the destination registers the plan produces.
``check_plan(plan, src, dst, rng)``
    random raw bits (full range: NaN payloads, signed zeros, ... occur
    naturally), reference, emulate, compare every thread and register.
``count_wavefronts(addresses, access_bytes, target)`` / ``measure_smem(plan)``
    brute-force shared-memory bank model (below).

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

Bank model and the numbers the planner must match
-------------------------------------------------
For ONE warp-wide instruction with byte address ``a[l]`` per lane (``-1`` =
inactive), access size ``v`` bytes (16 for ldmatrix/stmatrix rows, whose
active lanes are the ``8x`` row providers):

* lanes are served in phases of ``P = wavefront_bytes // max(v, bank_bytes)``
  consecutive lanes (one phase if ``P >= warp size``); an 8/16-byte vector
  LOAD on NVIDIA whose every quad of lanes reads at most two distinct
  addresses is served in phases of ``2P`` lanes (``Target.load_quad_merge``,
  measured: ``gpu_tests/ncu_phases.py``);
* in a phase, the touched words are ``a // bank_bytes + k`` for
  ``k < max(1, v // bank_bytes)`` over the active lanes, deduplicated
  (sub-word accesses touch the one word that holds them; equal words are a
  broadcast, not a conflict);
* wavefronts(phase) = max over banks ``b`` of the number of distinct words
  ``word % banks == b`` (0 for a phase with no active lane);
* ``wavefronts`` = sum over phases;
* ``minimal`` = sum over phases with an active lane of
  ``max(1, ceil(distinct bytes touched in the phase / wavefront_bytes))``
  -- a phase of ``P`` lanes touches at most ``wavefront_bytes`` distinct
  bytes, so this is the number of phases that contain an active lane (a
  double phase may touch twice that: 2 with a conflict-free layout);
* ``bank_conflicts`` = ``wavefronts - minimal``.

``measure_smem(plan)`` replays every instruction of every (storing) warp and
round and reports, per kind (store, load), ``wavefronts`` and
``bank_conflicts`` per instruction (they must agree over all instructions;
otherwise the maximum is reported and ``uniform`` is False),
``instructions`` per warp over all rounds (a storing warp for stores) and
``total_wavefronts`` per warp (sum over its instructions; the maximum over
warps).  The planner's ``SmemPlan.store``/``load`` (``AccessCost``) must
equal ``MeasuredCost.as_access_cost()`` field by field.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.model import AccessCost, ConversionPlan, GlobalCost, LaneSelect, SmemAccess, XorForm, access_plan
from ll_codegen.core.target import Target, get_target

UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
POISON = 0xA5


class SmemError(AssertionError):
    """A shared-memory access the hardware would not perform as planned."""


# ----------------------------------------------------------------- reference
def _dim_images(L: LinearLayout, dim: str) -> np.ndarray:
    """Flattened image of every index of ``dim`` (others 0)."""
    vals = np.zeros(1, dtype=np.int64)
    for v in L.flat_bases(dim):
        vals = np.concatenate([vals, vals ^ v])
    return vals


def _regs_of(L: LinearLayout, tensor: np.ndarray) -> np.ndarray:
    if L.in_dim_size("block") != 1:
        raise ValueError("block dim must have size 1")
    shape = tuple(L.out_dim_sizes.values())
    if tensor.shape != shape:
        raise ValueError(f"tensor shape {tensor.shape} does not match the layout's {shape}")
    reg, lane, warp = (_dim_images(L, d) for d in ("register", "lane", "warp"))
    flat = warp[:, None, None] ^ lane[None, :, None] ^ reg[None, None, :]
    # flattened index: first out dim in the low bits == C order of the reversed shape
    return tensor.reshape(-1, order="F")[flat]


def reference(src: LinearLayout, dst: LinearLayout, tensor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(src_regs, dst_regs), each (num_warps, warp_size, n_regs)."""
    return _regs_of(src, tensor), _regs_of(dst, tensor)


# -------------------------------------------------------------- small helpers
def _xor_form(form: XorForm, lanes: np.ndarray, warps: np.ndarray) -> np.ndarray:
    v = np.zeros(np.broadcast(lanes, warps).shape, dtype=np.int64)
    for k, c in enumerate(form.lane):
        v ^= np.where((lanes >> k) & 1, c, 0)
    for k, c in enumerate(form.warp):
        v ^= np.where((warps >> k) & 1, c, 0)
    return v


def _lane_select(sel: LaneSelect, lanes: np.ndarray) -> np.ndarray:
    c = np.zeros(lanes.shape, dtype=np.int64)
    for j, m in enumerate(sel.masks):
        c |= (np.bitwise_count(lanes & m).astype(np.int64) & 1) << j
    return c


def _as_bytes(regs: np.ndarray) -> np.ndarray:
    """(..., n) uintN -> (..., n, N/8) uint8, little-endian."""
    r = np.ascontiguousarray(regs.astype(regs.dtype.newbyteorder("<"), copy=False))
    return r.view(np.uint8).reshape(regs.shape + (regs.dtype.itemsize,))


def _from_bytes(b: np.ndarray, elem_bytes: int) -> np.ndarray:
    """(..., N/8) uint8 -> (...) uintN."""
    dt = np.dtype(UINT[elem_bytes]).newbyteorder("<")
    return np.ascontiguousarray(b).view(dt).reshape(b.shape[:-1]).astype(UINT[elem_bytes])


# ------------------------------------------------------------------ shuffles
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
    """Shuffle 32-bit words ``values`` of shape (warps, lanes, ...) within each warp."""
    ws = values.shape[1]
    lanes = np.arange(ws)
    srcl = shfl_source(family, ws, lanes, arg, xor, width)
    return values[:, srcl]


def _emulate_shuffle(plan: ConversionPlan, src: np.ndarray, dst: np.ndarray, written: np.ndarray) -> None:
    s = plan.shuffle
    W, L, _ = src.shape
    w = plan.elem_bytes
    nbytes = s.vec * w
    if nbytes > 4 * s.words:
        raise AssertionError(f"payload of {s.vec} x {w} bytes does not fit {s.words} words")
    lanes = np.arange(L)
    sb = _as_bytes(src)                                          # (W, L, n_src, w)
    send_c, recv_c = _lane_select(s.send_select, lanes), _lane_select(s.recv_select, lanes)
    for rnd in s.rounds:
        sent, received = s.sent(rnd), s.received(rnd)
        send = np.array(sent, dtype=np.int64).reshape(len(sent), -1)
        recv = np.array(received, dtype=np.int64).reshape(len(received), -1)
        if send.shape[1] != s.vec or recv.shape[1] != s.vec:
            raise AssertionError(f"round {rnd} does not move {s.vec} registers per lane")
        regs = send[send_c]                                      # (L, vec)
        payload = np.zeros((W, L, 4 * s.words), dtype=np.uint8)
        payload[:, :, :nbytes] = sb[:, lanes[:, None], regs].reshape(W, L, nbytes)
        words = payload.view("<u4")                              # (W, L, words)
        if s.src_lane is None:
            got = shuffle_words(plan.target, words, rnd.lane_xor, xor=True)
        else:
            arg = _xor_form(XorForm(tuple(s.src_lane)), lanes, np.zeros_like(lanes)) ^ rnd.lane_xor
            got = shuffle_words(plan.target, words, arg, xor=False)
        gb = np.ascontiguousarray(got).view(np.uint8)[:, :, :nbytes].reshape(W, L, s.vec, w)
        rregs = recv[recv_c]                                     # (L, vec)
        dst[:, lanes[:, None], rregs] = _from_bytes(gb, w)
        written[:, lanes[:, None], rregs] = True


# ------------------------------------------------------------- shared memory
def _instr(plan: ConversionPlan, acc: SmemAccess, base: XorForm, instr: str, warps: np.ndarray):
    """For one warp-wide instruction on the given warps:
    ``addr (nw, L, nb)``, ``reg (L, nb)``, ``byte (L, nb)`` -- thread l moves
    byte ``byte[l,k]`` of register ``reg[l,k]`` to/from ``addr[:, l, k]`` --
    and ``lane_addr (nw, L)`` (-1 inactive) with ``access_bytes`` for the
    bank counter."""
    L, w = plan.warp_size, plan.elem_bytes
    lanes = np.arange(L)
    a = _xor_form(base, lanes[None, :], warps[:, None]) ^ acc.offset       # (nw, L)
    area = plan.smem if plan.smem is not None else plan.memory
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


def _store_warps(plan: ConversionPlan) -> np.ndarray:
    w = np.arange(plan.num_warps)
    return w[(w & plan.smem.store_warp_skip) == 0]


def _emulate_smem(plan: ConversionPlan, src: np.ndarray, dst: np.ndarray, written: np.ndarray) -> None:
    m = plan.smem
    mem = np.full(m.bytes, POISON, dtype=np.uint8)
    valid = np.zeros(m.bytes, dtype=bool)
    writer = np.full(m.bytes, -1, dtype=np.int64)       # the storing warp (barrier "warp" only)
    sb = _as_bytes(src)
    dbytes = _as_bytes(dst).copy()
    st_warps, all_warps = _store_warps(plan), np.arange(plan.num_warps)
    slice_bytes = m.bytes // plan.num_warps

    def own_slice(addr: np.ndarray, warps: np.ndarray, what: str, ri: int) -> None:
        """Per-warp scratch (``SmemPlan.per_warp``): warp w touches only its slice."""
        bad = addr // slice_bytes != warps[:, None, None]
        if m.per_warp and np.any(bad):
            w, lane = np.argwhere(bad)[0][:2]
            raise SmemError(f"round {ri}: per-warp scratch, but warp {warps[w]} lane {lane} {what} byte "
                            f"{addr[tuple(np.argwhere(bad)[0])]} outside its slice of {slice_bytes}")
    for ri, rnd in enumerate(m.rounds):
        # barrier; stores
        addrs, vals = [], []
        for acc in rnd.stores:
            addr, reg, byte, _, _ = _instr(plan, acc, m.store_base, m.store_instr, st_warps)
            own_slice(addr, st_warps, "stores", ri)
            L = addr.shape[1]
            val = sb[st_warps[:, None, None], np.arange(L)[None, :, None], reg[None], byte[None]]
            if m.barrier == "warp":
                who = np.broadcast_to(st_warps[:, None, None], addr.shape).ravel()
                other = (writer[addr.ravel()] >= 0) & (writer[addr.ravel()] != who)
                if np.any(other):
                    raise SmemError(f"round {ri}: warp barrier, but two warps store byte {addr.ravel()[np.argmax(other)]}")
                writer[addr.ravel()] = who
            addrs.append(addr.ravel())
            vals.append(val.ravel())
        if addrs:
            a, v = np.concatenate(addrs), np.concatenate(vals)
            order = np.argsort(a, kind="stable")
            a, v = a[order], v[order]
            same = a[1:] == a[:-1]
            clash = same & (v[1:] != v[:-1])
            if np.any(clash):
                i = int(np.argmax(clash))
                raise SmemError(f"round {ri}: race -- two threads write different values to byte {a[i]}")
            mem[a] = v
            valid[a] = True
        # barrier; loads
        for acc in rnd.loads:
            addr, reg, byte, _, _ = _instr(plan, acc, m.load_base, m.load_instr, all_warps)
            own_slice(addr, all_warps, "loads", ri)
            if not np.all(valid[addr]):
                bad = np.argwhere(~valid[addr])[0]
                raise SmemError(f"round {ri}: warp {bad[0]} lane {bad[1]} loads byte {addr[tuple(bad)]} "
                                f"that no store wrote (poison)")
            if m.barrier == "warp" and np.any(writer[addr] != all_warps[:, None, None]):
                bad = np.argwhere(writer[addr] != all_warps[:, None, None])[0]
                raise SmemError(f"round {ri}: warp barrier, but warp {all_warps[bad[0]]} loads byte "
                                f"{addr[tuple(bad)]} that warp {writer[addr][tuple(bad)]} stored")
            L = addr.shape[1]
            dbytes[all_warps[:, None, None], np.arange(L)[None, :, None], reg[None], byte[None]] = mem[addr]
            written[:, np.arange(L)[:, None], reg] = True
    dst[...] = _from_bytes(dbytes, plan.elem_bytes)


# ------------------------------------------------------------------ emulate
def emulate(plan: ConversionPlan, src_regs: np.ndarray) -> np.ndarray:
    """Execute ``plan`` on every warp; returns dst regs (num_warps, warp_size, n_dst)."""
    W, L = plan.num_warps, plan.warp_size
    if src_regs.shape != (W, L, plan.n_src):
        raise ValueError(f"src_regs has shape {src_regs.shape}, plan wants {(W, L, plan.n_src)}")
    dt = UINT[plan.elem_bytes]
    src = src_regs.astype(dt, copy=False)
    dst = np.zeros((W, L, plan.n_dst), dtype=dt)
    written = np.zeros(dst.shape, dtype=bool)
    kinds = [k for k in ("register", "shuffle", "smem") if getattr(plan, k) is not None]
    if len(kinds) != 1:
        raise AssertionError(f"plan sets {kinds or 'none'} of register/shuffle/smem (exactly one expected)")
    if plan.register is not None:
        idx = np.array(plan.register.dst_from_src, dtype=np.int64)
        if idx.size != plan.n_dst:
            raise AssertionError(f"register plan fills {idx.size} of {plan.n_dst} registers")
        dst[...] = src[:, :, idx]
        written[...] = True
    elif plan.shuffle is not None:
        _emulate_shuffle(plan, src, dst, written)
    else:
        _emulate_smem(plan, src, dst, written)
    for d, f in plan.dst_copies:
        if not written[:, :, f].all():
            raise AssertionError(f"dst_copies ({d}, {f}): register {f} was never written")
        dst[:, :, d] = dst[:, :, f]
        written[:, :, d] = True
    if not written.all():
        w, l, r = np.argwhere(~written)[0]
        raise AssertionError(f"{plan.strategy} plan never writes dst register {r} (warp {w}, lane {l})")
    return dst


def check_plan(plan: ConversionPlan, src: LinearLayout, dst: LinearLayout,
               rng: np.random.Generator | int | None = 0) -> None:
    """Random raw bits through reference and emulator; AssertionError on any difference."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    dt = UINT[plan.elem_bytes]
    shape = tuple(src.out_dim_sizes.values())
    tensor = rng.integers(0, np.iinfo(dt).max, size=shape, dtype=dt, endpoint=True)
    src_regs, want = reference(src, dst, tensor)
    got = emulate(plan, src_regs)
    if got.shape != want.shape:
        raise AssertionError(f"{plan.strategy} plan: dst shape {got.shape}, expected {want.shape}")
    bad = got != want
    if bad.any():
        w, l, r = (int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{plan.strategy} plan ({plan.dtype}, {plan.target}): warp {w} lane {l} register {r}: "
            f"expected {int(want[w, l, r]):#x}, got {int(got[w, l, r]):#x} "
            f"({int(bad.sum())} of {bad.size} registers differ)")


# ------------------------------------------------------------- bank counting
def _phases(addresses: np.ndarray, access_bytes: int, target: Target, load: bool = False):
    a = np.asarray(addresses, dtype=np.int64).ravel()
    P = max(1, target.wavefront_bytes // max(access_bytes, target.bank_bytes))
    if target.merges_quads(access_bytes, load) and all(
            np.unique(q[q >= 0]).size <= 2 for q in a[:a.size - a.size % 4].reshape(-1, 4)):
        P = min(2 * P, a.size)            # every quad reads at most two places: double phases
    nw = max(1, access_bytes // target.bank_bytes)
    for s in range(0, a.size, P):
        ph = a[s:s + P]
        ph = ph[ph >= 0]
        if ph.size == 0:
            continue
        words = np.unique((ph[:, None] // target.bank_bytes + np.arange(nw)).ravel())
        wave = int(np.bincount(words % target.banks, minlength=target.banks).max())
        nbytes = np.unique((ph[:, None] + np.arange(access_bytes)).ravel()).size
        yield wave, max(1, -(-nbytes // target.wavefront_bytes))


def count_wavefronts(addresses: np.ndarray, access_bytes: int, target: Target, load: bool = False) -> int:
    """Wavefronts of one warp-wide access (addresses per lane, -1 inactive); module docstring."""
    return sum(w for w, _ in _phases(addresses, access_bytes, target, load))


def min_wavefronts(addresses: np.ndarray, access_bytes: int, target: Target, load: bool = False) -> int:
    """The minimum any layout could reach for this access's active lanes; module docstring."""
    return sum(m for _, m in _phases(addresses, access_bytes, target, load))


@dataclass(frozen=True)
class MeasuredCost:
    wavefronts: int          # per instruction (max if not uniform)
    bank_conflicts: int      # per instruction (max if not uniform)
    instructions: int        # per warp, over all rounds
    total_wavefronts: int    # per warp (max over warps)
    uniform: bool            # all instructions of this kind had the same wavefronts and conflicts
    per_instruction: tuple[tuple[int, int, int, int], ...] = ()   # (round, index, warp, wavefronts)

    def as_access_cost(self) -> AccessCost:
        return AccessCost(self.wavefronts, self.bank_conflicts, self.instructions, self.total_wavefronts)


def _measure(plan: ConversionPlan, target: Target, which: str) -> MeasuredCost:
    m = plan.smem
    base, instr = (m.store_base, m.store_instr) if which == "store" else (m.load_base, m.load_instr)
    warps = _store_warps(plan) if which == "store" else np.arange(plan.num_warps)
    seen, per, totals = set(), [], {int(w): 0 for w in warps}
    n = 0
    for ri, rnd in enumerate(m.rounds):
        accs = rnd.stores if which == "store" else rnd.loads
        n += len(accs)
        for ai, acc in enumerate(accs):
            _, _, _, lane_addr, access = _instr(plan, acc, base, instr, warps)
            load = which == "load" and instr == "vector"
            for wi, w in enumerate(warps):
                wav = count_wavefronts(lane_addr[wi], access, target, load)
                mn = min_wavefronts(lane_addr[wi], access, target, load)
                seen.add((wav, wav - mn))
                per.append((ri, ai, int(w), wav))
                totals[int(w)] += wav
    if not seen:
        return MeasuredCost(0, 0, 0, 0, True, ())
    return MeasuredCost(max(s[0] for s in seen), max(s[1] for s in seen), n, max(totals.values()),
                        len(seen) == 1, tuple(per))


def measure_smem(plan: ConversionPlan, target: Target | None = None) -> tuple[MeasuredCost, MeasuredCost]:
    """(store, load) costs measured from the actual addresses of every instruction."""
    if plan.smem is None:
        raise ValueError("not a shared-memory plan")
    target = target or get_target(plan.target, plan.arch)
    return _measure(plan, target, "store"), _measure(plan, target, "load")


# ---------------------------------------------------------- memory plans
# A memory plan (``plan.memory``) stores registers into, or loads them from, a
# tile laid out as given.  ``emulate_memory`` executes it on a byte image of
# the tile (shared) or of a strided global buffer, with ``extent`` the masked
# forms' bounds (element valid iff every coordinate < extent; loads of invalid
# elements give ``fill``, stores skip them), and returns what the harness
# checks: the tile's tensor as read back (store) or every thread's registers
# (load).  ``memory_reference`` is the same from numpy alone.

def _tensor_flat(tensor: np.ndarray) -> np.ndarray:
    return tensor.reshape(-1, order="F")           # first out dim in the low bits, as flat_bases


def _tile(plan: ConversionPlan) -> LinearLayout:
    b = plan.dst_bases if plan.memory.direction == "store" else plan.src_bases
    return LinearLayout(b["in_dims"], b["out_dims"], require_surjective=False)


def _dist(plan: ConversionPlan) -> LinearLayout:
    b = plan.src_bases if plan.memory.direction == "store" else plan.dst_bases
    return LinearLayout(b["in_dims"], b["out_dims"], require_surjective=False)


def _coords_of(flat: np.ndarray, sizes: list[int]) -> list[np.ndarray]:
    out, shift = [], 0
    for s in sizes:
        k = s.bit_length() - 1
        out.append((flat >> shift) & ((1 << k) - 1))
        shift += k
    return out


def _valid(coords: list[np.ndarray], extent) -> np.ndarray:
    ok = np.ones(np.broadcast(*coords).shape, dtype=bool)
    if extent is not None:
        for c, e in zip(coords, extent):
            ok &= c < e
    return ok


def memory_reference(plan: ConversionPlan, tensor: np.ndarray, extent=None, fill: int = 0) -> np.ndarray:
    """What a correct memory plan yields: for a store, the tensor (elements
    outside ``extent`` keep ``fill``, standing for memory the store must not
    touch); for a load, every thread's registers (num_warps, warp_size, n)
    with ``fill`` outside ``extent``."""
    sizes = list(plan.shape)
    if plan.memory.direction == "store":
        flat = np.arange(tensor.size)
        ok = _valid(_coords_of(flat, sizes), extent)
        out = _tensor_flat(tensor).copy()
        out[~ok] = fill
        return out.reshape(tensor.shape, order="F")
    L = _dist(plan)
    regs = _regs_of(L, tensor)
    reg, lane, warp = (_dim_images(L, d) for d in ("register", "lane", "warp"))
    flat = warp[:, None, None] ^ lane[None, :, None] ^ reg[None, None, :]
    return np.where(_valid(_coords_of(flat, sizes), extent), regs, np.asarray(fill, dtype=regs.dtype))


def _global_addresses(plan: ConversionPlan, acc, warps: np.ndarray, strides) -> tuple[np.ndarray, list]:
    """Element index (nw, L, vec) of every element of one global access, and its coordinates."""
    m = plan.memory
    lanes = np.arange(plan.warp_size)
    f = m.layout["order"][0]
    coords = []
    for d, (cb, c) in enumerate(zip(m.coord_base, acc.coords)):
        x = _xor_form(cb, lanes[None, :], warps[:, None]) ^ c            # (nw, L)
        x = x[:, :, None] + (np.arange(m.vec)[None, None, :] if d == f else 0)
        coords.append(np.broadcast_to(x, (len(warps), plan.warp_size, m.vec)))
    elem = sum(c * s for c, s in zip(coords, strides))
    return elem, coords


def emulate_memory(plan: ConversionPlan, tensor: np.ndarray, extent=None, fill: int = 0,
                   strides=None) -> np.ndarray:
    """Execute a memory plan (module comment above); ``strides`` (elements)
    lay out a global tile (default: the plan's)."""
    m = plan.memory
    w, W, L = plan.elem_bytes, plan.num_warps, plan.warp_size
    dt = UINT[w]
    dist, tile = _dist(plan), _tile(plan)
    warps = np.arange(W)
    if m.direction == "store":
        warps = warps[(warps & m.warp_skip) == 0]
    lanes_on = (np.arange(L) & m.lane_skip) == 0
    src = _regs_of(dist, tensor).astype(dt) if m.direction == "store" else None
    n = dist.in_dim_size("register")
    dst = np.full((W, L, n), fill, dtype=dt)
    written = np.zeros(dst.shape, dtype=bool)
    if m.space == "shared":
        if extent is not None:
            raise ValueError("shared tiles have no masked forms")
        mem = np.full(m.bytes, POISON, dtype=np.uint8)
        valid = np.zeros(m.bytes, dtype=bool)
        offs = _dim_images(tile, "offset")                  # tensor element at each offset
        if m.direction == "load":
            mem[...] = _as_bytes(_tensor_flat(tensor)[offs].astype(dt)).ravel()
            valid[...] = True
        sb = _as_bytes(src) if src is not None else None
        db = _as_bytes(dst).copy()
        for acc in m.accesses:
            addr, reg, byte, _, _ = _instr(plan, acc, m.base, m.instr, warps)
            if m.direction == "store":
                val = sb[warps[:, None, None], np.arange(L)[None, :, None], reg[None], byte[None]]
                a, v = addr.ravel(), val.ravel()
                order = np.argsort(a, kind="stable")
                a, v = a[order], v[order]
                clash = (a[1:] == a[:-1]) & (v[1:] != v[:-1])
                if np.any(clash):
                    raise SmemError(f"race: two threads write different values to byte {a[int(np.argmax(clash))]}")
                if np.any(valid[a] & (mem[a] != v)):
                    raise SmemError("two instructions write different values to one byte")
                mem[a], valid[a] = v, True
            else:
                db[warps[:, None, None], np.arange(L)[None, :, None], reg[None], byte[None]] = mem[addr]
                written[:, np.arange(L)[:, None], reg] = True
        if m.direction == "store":
            if not valid.all():
                raise SmemError(f"the store leaves {int((~valid).sum())} bytes of the tile unwritten")
            out = np.zeros(tensor.size, dtype=dt)
            out[offs] = _from_bytes(mem.reshape(-1, w), w)
            return out.reshape(tensor.shape, order="F")
        dst = _from_bytes(db, w)
    else:
        strides = tuple(strides) if strides is not None else m.strides
        sizes = list(plan.shape)
        span = 1 + sum((s - 1) * st for s, st in zip(sizes, strides))
        mem = np.full(span, ~np.asarray(fill, dtype=dt) if m.direction == "store" else 0, dtype=dt)
        touched = np.zeros(span, dtype=bool)
        flat = np.arange(tensor.size)
        coords_all = _coords_of(flat, sizes)
        elem_all = sum(c * s for c, s in zip(coords_all, strides))
        if m.direction == "load":
            mem[elem_all] = _tensor_flat(tensor)
        for acc in m.accesses:
            elem, coords = _global_addresses(plan, acc, warps, strides)
            if np.any((elem[:, :, 0] * w) % (m.vec * w)):
                raise SmemError(f"misaligned {m.vec * w}-byte global access")
            ok = _valid(coords, extent)
            regs = np.array(acc.regs)
            if m.direction == "store":
                ok &= lanes_on[None, :, None]
                vals = src[warps[:, None, None], np.arange(L)[None, :, None], regs[None, None, :]]
                e, v = elem[ok], vals[ok]
                if np.any(touched[e] & (mem[e] != v)):
                    raise SmemError("two threads write different values to one global element")
                mem[e], touched[e] = v, True
            else:
                vals = np.where(ok, mem[np.where(ok, elem, 0)], np.asarray(fill, dtype=dt))
                dst[warps[:, None, None], np.arange(L)[None, :, None], regs[None, None, :]] = vals
                written[:, :, regs] = True
        if m.direction == "store":
            ok_all = _valid(coords_all, extent)
            if not touched[elem_all[ok_all]].all():
                raise SmemError("the store leaves valid elements of the tile unwritten")
            if touched[elem_all[~ok_all]].any():
                raise SmemError("the masked store writes outside the extent")
            out = np.where(ok_all, mem[elem_all], np.asarray(fill, dtype=dt))
            return out.reshape(tensor.shape, order="F")
    for d, f in plan.dst_copies:
        dst[:, :, d] = dst[:, :, f]
        written[:, :, d] = written[:, :, f]
    if not written.all():
        w_, l_, r_ = np.argwhere(~written)[0]
        raise AssertionError(f"load plan never writes register {r_} (warp {w_}, lane {l_})")
    return dst


def check_memory_plan(plan: ConversionPlan, rng: np.random.Generator | int | None = 0, extent=None,
                      strides=None) -> None:
    """Random raw bits through ``emulate_memory`` and ``memory_reference``; AssertionError on any difference.
    A ``via`` plan is its conversion (``check_plan``) and its access over the layout converted to/from."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    if plan.via is not None:
        v = plan.via
        lay = lambda b: LinearLayout(b["in_dims"], b["out_dims"], require_surjective=False)  # noqa: E731
        check_plan(v, lay(v.src_bases), lay(v.dst_bases), rng)
        check_memory_plan(access_plan(plan), rng, extent, strides)
        return
    dt = UINT[plan.elem_bytes]
    tensor = rng.integers(0, np.iinfo(dt).max, size=tuple(plan.shape), dtype=dt, endpoint=True)
    fill = int(rng.integers(0, np.iinfo(dt).max, dtype=dt, endpoint=True))
    got = emulate_memory(plan, tensor, extent, fill, strides)
    want = memory_reference(plan, tensor, extent, fill)
    if got.shape != want.shape or not np.array_equal(got, want):
        bad = np.argwhere(got != want)
        raise AssertionError(f"{plan.strategy} plan ({plan.memory.space}, {plan.memory.instr}, {plan.dtype}): "
                             f"{len(bad)} of {want.size} values differ, first at {tuple(int(i) for i in bad[0])}: "
                             f"expected {int(want[tuple(bad[0])]):#x}, got {int(got[tuple(bad[0])]):#x}")


def measure_memory(plan: ConversionPlan, target: Target | None = None, strides=None):
    """Brute-force cost of a memory plan's access (for a ``via`` plan, the access after or before its
    conversion) from the addresses it executes:
    shared -> ``MeasuredCost`` (bank model above); global -> ``GlobalCost``
    (distinct 32-byte sectors per warp instruction)."""
    m = plan.memory
    plan = access_plan(plan)
    target = target or get_target(plan.target, plan.arch)
    warps = np.arange(plan.num_warps)
    if m.direction == "store":
        warps = warps[(warps & m.warp_skip) == 0]
    if m.space == "shared":
        seen, per, totals = set(), [], {int(w): 0 for w in warps}
        for ai, acc in enumerate(m.accesses):
            _, _, _, lane_addr, access = _instr(plan, acc, m.base, m.instr, warps)
            load = m.direction == "load" and m.instr == "vector"
            for wi, w in enumerate(warps):
                wav = count_wavefronts(lane_addr[wi], access, target, load)
                mn = min_wavefronts(lane_addr[wi], access, target, load)
                seen.add((wav, wav - mn))
                per.append((0, ai, int(w), wav))
                totals[int(w)] += wav
        if not seen:
            return MeasuredCost(0, 0, 0, 0, True, ())
        return MeasuredCost(max(s[0] for s in seen), max(s[1] for s in seen), len(m.accesses),
                            max(totals.values()), len(seen) == 1, tuple(per))
    strides = tuple(strides) if strides is not None else m.strides
    nbytes = m.vec * plan.elem_bytes
    lanes_on = (np.arange(plan.warp_size) & m.lane_skip) == 0
    worst = best = 0
    totals = np.zeros(len(warps), dtype=np.int64)
    for acc in m.accesses:
        elem, _ = _global_addresses(plan, acc, warps, strides)
        start = elem[:, :, 0] * plan.elem_bytes                              # (nw, L) byte address
        for wi in range(len(warps)):
            b = (start[wi][lanes_on][:, None] + np.arange(nbytes)[None, :]).ravel()
            sec = np.unique(b // 32).size
            worst = max(worst, sec)
            best = max(best, -(-np.unique(b).size // 32))
            totals[wi] += sec
    return GlobalCost(worst, best, len(m.accesses), int(totals.max()) if len(totals) else 0)


# ------------------------------------------------------------------ copies
def copy_halves(plan: ConversionPlan) -> tuple[ConversionPlan, ConversionPlan]:
    """A copy plan as its two memory plans over the thread mapping it built:
    (load of the global tile, store into the shared tile)."""
    from dataclasses import replace
    c = plan.copy
    n = len(c.threads["in_dims"]["register"])
    n = 1 << n
    base = replace(plan, copy=None, candidates=())
    load = replace(base, strategy="load", memory=c.load, n_src=0, n_dst=n, dst_bases=c.threads)
    store = replace(base, strategy="store", memory=c.store, n_src=n, n_dst=0, src_bases=c.threads)
    return load, store


def check_copy_plan(plan: ConversionPlan, rng: np.random.Generator | int | None = 0, extent=None,
                    strides=None) -> None:
    """A copy is its load (global tile -> registers of the thread mapping,
    zeros beyond ``extent``) followed by its store (registers -> shared tile),
    access k of both moving the same registers with one vector width: each
    half is executed against numpy, then the pairing is checked."""
    c = plan.copy
    load, store = copy_halves(plan)
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    dt = UINT[plan.elem_bytes]
    tensor = rng.integers(0, np.iinfo(dt).max, size=tuple(plan.shape), dtype=dt, endpoint=True)
    got = emulate_memory(load, tensor, extent, 0, strides)
    want = memory_reference(load, tensor, extent, 0)
    if not np.array_equal(got, want):
        raise AssertionError(f"copy plan: the global half loads wrong registers ({int((got != want).sum())} differ)")
    masked = memory_reference(store, tensor, extent, 0)        # the tensor with zeros beyond the extent
    image = emulate_memory(store, masked)
    if not np.array_equal(image, masked):
        raise AssertionError(f"copy plan: the shared half stores a wrong tile ({int((image != masked).sum())} differ)")
    if c.load.vec != c.store.vec or len(c.load.accesses) != len(c.store.accesses):
        raise AssertionError("copy plan: the halves differ in vector width or access count")
    for k, (a, b) in enumerate(zip(c.load.accesses, c.store.accesses)):
        if a.regs != b.regs:
            raise AssertionError(f"copy plan: access {k} loads registers {a.regs} but stores {b.regs}")


# ------------------------------------------------------------------ gather
# Gather plans (``gather.py``) executed from their data alone: shuffles with the
# target's real ``shfl`` semantics, shared memory as a poisoned byte array
# with race, uninitialised-read, alignment and bounds checks.
def gather_reference(src: LinearLayout, idx: LinearLayout, axis: int, src_tensor: np.ndarray,
                     idx_tensor: np.ndarray) -> np.ndarray:
    """Every thread's output registers ``(num_warps, warp_size, n_idx)`` by
    numpy: ``out = take_along_axis(src, index mod n, axis)`` read through the
    index layout (indices are any integers; mod is Python's, -1 -> n - 1)."""
    n = src_tensor.shape[axis]
    out = np.take_along_axis(src_tensor, np.mod(idx_tensor.astype(np.int64), n), axis=axis)
    return _regs_of(idx, out)


def emulate_gather(plan, src_regs: np.ndarray, idx_regs: np.ndarray) -> np.ndarray:
    """Output registers a ``GatherPlan`` produces from source registers (raw
    bits) and index registers (integers, any sign)."""
    W, L = plan.num_warps, plan.warp_size
    lanes = np.arange(L)[None, :]
    warps = np.arange(W)[:, None]
    v_all = idx_regs.astype(np.int64) & (plan.axis_size - 1)      # two's complement mask: Python's mod
    w = plan.elem_bytes
    out = np.zeros((W, L, plan.n_idx), dtype=UINT[w])

    def terms(coefs, v):
        t = np.zeros(v.shape, dtype=np.int64)
        for j, c in enumerate(coefs):
            t ^= ((v >> j) & 1) * c
        return t

    if plan.shuffle is not None:
        s = plan.shuffle
        src64 = src_regs.astype(np.uint64)
        for r, o in enumerate(s.outs):
            v = v_all[:, :, r]
            R = o.reg ^ _xor_form(s.reg, lanes, warps) ^ terms(s.v_reg, v)
            Ls = o.lane ^ _xor_form(s.lane, lanes, warps) ^ terms(s.v_lane, v)
            c = np.zeros_like(R)
            for j, p in enumerate(s.select_bits):
                c |= ((R ^ o.cands[0]) >> p & 1) << j
            cands = np.array(o.cands, dtype=np.int64)
            if (cands[c] != R).any():
                raise AssertionError(f"output register {r}: the selected candidate is not the needed register")
            per = s.per
            nk = -(-len(cands) // per)
            word_of, slot = c // per, c % per
            srcl = shfl_source(plan.target, L, np.arange(L)[None, :], Ls, xor=False)      # (W, L)
            got = np.zeros((W, L), dtype=np.uint64)
            padded = np.resize(cands, nk * per).reshape(nk, per)                         # (nk, per)
            live = (np.arange(nk * per) < len(cands)).reshape(nk, per)
            for h in range(s.words):                     # 8-byte elements: lo word, then hi word
                elems = (src64[:, :, padded] >> np.uint64(32 * h)) & np.uint64(0xFFFFFFFF)   # (W, L, nk, per)
                elems = np.where(live, elems, np.uint64(0))
                shifts = np.uint64(8 * w) * np.arange(per, dtype=np.uint64) if w < 4 else np.zeros(1, np.uint64)
                payload = np.bitwise_or.reduce(elems << shifts, axis=3)                  # (W, L, nk): the words sent
                recv = payload[np.arange(W)[:, None], srcl]                              # (W, L, nk): from lane Ls
                word = np.take_along_axis(recv, word_of[..., None], axis=2)[..., 0]
                part = (word >> (np.uint64(8 * w) * slot.astype(np.uint64))) if w < 4 else word
                part &= np.uint64((1 << min(32, 8 * w)) - 1)
                got |= part << np.uint64(32 * h)
            out[:, :, r] = got.astype(UINT[w])
        return out
    m = plan.smem
    mem = np.full(m.bytes, POISON, dtype=np.uint8)
    sb = _as_bytes(src_regs)                                     # (W, L, n_src, w)
    ws = np.array([x for x in range(W) if not x & m.warp_skip])[:, None]
    ls = np.array([x for x in range(L) if not x & m.lane_skip])[None, :]
    addrs, vals = [], []
    for acc in m.stores:
        nb = len(acc.regs) * w
        a = _xor_form(m.store_base, ls, ws) ^ acc.offset          # (W', L')
        if (a % nb).any() or (a < 0).any() or (a + nb > m.bytes).any():
            raise SmemError(f"a store of {nb} bytes is misaligned or out of bounds")
        addrs.append((a[..., None] + np.arange(nb)).reshape(-1))
        vals.append(sb[ws, ls][:, :, list(acc.regs)].reshape(-1))
    addr, val = np.concatenate(addrs), np.concatenate(vals)
    order = np.lexsort((val, addr))
    addr, val = addr[order], val[order]
    same = addr[1:] == addr[:-1]
    if (same & (val[1:] != val[:-1])).any():
        raise SmemError("race: two threads write different values to one byte")
    mem[addr] = val
    if len(np.unique(addr)) != m.bytes:
        raise SmemError(f"{m.bytes - len(np.unique(addr))} tile bytes never written")
    for r in range(plan.n_idx):
        v = v_all[:, :, r]
        a = _xor_form(m.load_base, lanes, warps) ^ m.load_offsets[r] ^ terms(m.v_offset, v)
        if (a % w).any() or (a < 0).any() or (a + w > m.bytes).any():
            raise SmemError("load misaligned or out of bounds")
        b = mem[a[..., None] + np.arange(w)]
        out[:, :, r] = _from_bytes(b, w)
    return out


def gather_tensors(plan, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random source bits (full range) and indices: uniform in range, plus
    repeated values, 0, n - 1 and out-of-range ones (negative, n, the index
    type's extremes) -- all taken mod n."""
    w, n = plan.elem_bytes, plan.axis_size
    src = rng.integers(0, 1 << (8 * w), size=plan.src_shape, dtype=np.uint64).astype(UINT[w])
    signed = plan.index_dtype.startswith("i")
    bits = 8 * plan.index_bytes
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    idx = rng.integers(0, n, size=plan.idx_shape).astype(np.int64)
    special = np.array([0, n - 1, n, lo, hi, -1 if signed else hi, 2 * n + 1, n // 2])
    special = np.clip(special, lo, hi)
    mask = rng.random(plan.idx_shape)
    idx = np.where(mask < 0.15, special[rng.integers(0, len(special), plan.idx_shape)], idx)
    idx = np.where((mask > 0.15) & (mask < 0.3), idx.reshape(-1)[0], idx)        # a repeated value
    return src, (idx - lo) % (1 << bits) + lo                  # what the index type holds (i8: 200 -> -56)


def check_gather(plan, rng: np.random.Generator | int | None = 0, runs: int = 2) -> None:
    """Emulate on random data (``gather_tensors``) and compare every thread's
    output registers with ``gather_reference``; raises AssertionError."""
    rng = np.random.default_rng(rng)
    src_l = LinearLayout(plan.src_bases["in_dims"], plan.src_bases["out_dims"], require_surjective=False)
    idx_l = LinearLayout(plan.idx_bases["in_dims"], plan.idx_bases["out_dims"], require_surjective=False)
    for _ in range(runs):
        src_t, idx_t = gather_tensors(plan, rng)
        want = gather_reference(src_l, idx_l, plan.axis, src_t, idx_t)
        got = emulate_gather(plan, _regs_of(src_l, src_t), _regs_of(idx_l, idx_t))
        bad = np.argwhere(got != want)
        if len(bad):
            wi, li, r = bad[0]
            raise AssertionError(f"{plan.strategy} gather: {len(bad)} wrong registers; first warp {wi} lane {li} "
                                 f"register {r}: got {got[wi, li, r]:#x}, want {want[wi, li, r]:#x}")
