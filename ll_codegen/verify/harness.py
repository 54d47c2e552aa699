"""What a harness run is, per operation: the rows (``HarnessOp``) the registry
(``ll_codegen/operations.py``) gives each operation, which both drivers
(``run/host.py`` on the CPU, ``run/gpu.py`` on a GPU) use.

Every generated harness is ``<name>_harness<variant>(args...)``: one CTA of
``plan.threads`` threads and ``plan.smem_bytes`` bytes of dynamic shared
memory.  A row (a ``HarnessOp``) says, for its plans:

* ``variants(plan)``: the kernel name suffixes (``_masked`` too for global tiles);
* ``c_types(plan)``: the C parameter types of the harness, in call order;
* ``data(plan, rng, variant)``: one run's arguments -- fresh random raw bits
  in, outputs poisoned with the bitwise complement of what must arrive (so
  every element or register left unwritten differs) -- and, per output
  argument, what it must hold afterwards (the numpy reference,
  ``emulate/reference.py``);
* ``compare(name, plan, run, got, ok, entropy)``: the outputs against the
  reference, bit for bit: a ``RunResult`` naming the first difference;
* ``tensor_map(plan)`` (TMA only): the argument the driver fills with a
  ``CUtensorMap`` of another argument before each launch (``TensorMapArgs``).

========================= ====================================== ===================================
operation                 arguments                              outputs checked
========================= ====================================== ===================================
convert, store, load,     ``in`` (row-major tensor), ``out``,    ``out`` and every thread's
copy                      ``regs`` (threads x n_dst), scratch    destination registers (the step
                          (a zeroed global tile)                 that writes a wrong one is named)
gather                    ``src``, ``idx`` (index type), ``out``  ``out`` and every thread's output
                          (idx shape), ``regs`` (threads x n)    registers
mma                       ``a``, ``b`` (row-major raw bits),      ``out`` (= C + A @ B) and every
                          ``out`` (in: C), ``regs``               thread's accumulator registers
tma                       ``in`` (row-major tile), ``out``,      ``out`` (the tile read back) and
                          ``tensor`` (global, padded strides),   the whole ``tensor`` (loads: as it
                          ``map`` (its CUtensorMap, 128 bytes)   was; stores: in at the origin)
reduce                    ``in`` (row-major), ``out`` (the        every thread's result registers,
                          result, reduced dims dropped),         the broadcast back, ``out`` (every
                          ``regs`` (threads x n_dst), ``back``   holder writes the same value)
                          (threads x n_src)
========================= ====================================== ===================================
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ll_codegen.core.dtypes import C_RAW, INDEX_DTYPES, NP_RAW
from ll_codegen.core.layout import layout_of
from ll_codegen.plan.packed import side_bytes, side_pair
from ll_codegen.plan.plans import Transfer
from ll_codegen.emit.harness_tiles import harness_cut, harness_extent, harness_fill, harness_strides, harness_variants, variant_masked
from ll_codegen.emit.harness_tiles import harness_origin, scratch_bytes
from ll_codegen.emit.upcast import scale_offsets
from ll_codegen.verify.emulate.packed import packed_tensor, random_nibbles, unpacked_tensor
from ll_codegen.verify.emulate.upcast import (random_codes, random_scales, scaled_reference, upcast_reference,
                                              upcast_registers)
from ll_codegen.verify.emulate.reference import (acc_bits, encode_small, gather_expected, mma_tensors, reduce_reference,
                                         reduce_tensor, reference_registers, row_major_index)


@dataclass
class RunResult:
    ok: bool
    message: str
    thread: int | None = None
    reg: int | None = None
    expected: int | None = None
    actual: int | None = None
    step: str | None = None
    entropy: int | None = None       # np.random.default_rng(entropy) reproduces the failing data

    def __bool__(self) -> bool:
        return self.ok


@dataclass
class RunData:
    """One harness run: every argument in call order (outputs already poisoned)
    and, per output argument position, what it must hold after the run."""
    args: list[np.ndarray]
    wants: dict[int, np.ndarray]


# ------------------------------------------------------------ conversions
def plan_step(plan: Transfer, tid: int, reg: int) -> str:
    """Which step of the plan writes destination register ``reg`` of thread ``tid``
    (``lane + warp_size * warp``, what a shuffle plan's selects read)."""
    for d, f in plan.dst_copies:
        if d == reg:
            return f"copy of dst[{f}] (broadcast register)"
    if plan.operation != "convert":
        return "no step writes it"
    if plan.in_registers:
        return f"register move dst[{reg}] = src[{plan.register.dst_from_src[reg]}]"
    if plan.by_shuffle:
        s = plan.shuffle
        for i, rnd in enumerate(s.rounds):
            if reg in s.received(rnd)[s.recv_select(tid)]:
                return f"shuffle round {i} (lane_xor {rnd.lane_xor:#x})"
    if plan.through_smem:
        m = plan.smem
        for i, rnd in enumerate(m.rounds):
            for j, acc in enumerate(rnd.loads):
                if reg in acc.regs:
                    return (f"smem round {i}, load {j} ({m.load_instr}, offset {acc.offset}; "
                            f"stored by {m.store_instr}, swizzle {m.swizzle})")
    return "no step writes it"


def random_data(plan: Transfer, rng: np.random.Generator,
                variant: str = "") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fresh random raw bits of the row-major tensor ``in``, the output
    tensor and the (threads, registers) array a correct harness run of
    ``variant`` writes).  The output is ``in`` itself except for the masked
    harness of a global tile (``plan.harness_cut``): a masked store leaves
    the poison ``~in`` outside the extent, a masked load gives ``fill``, a
    masked copy zeros."""
    if plan.packing is not None and plan.packing.repacks:
        return repacked_data(plan, rng, variant)
    raw = NP_RAW[plan.elem_bytes]
    flat = rng.integers(0, np.iinfo(raw).max, size=int(np.prod(plan.shape)), dtype=raw, endpoint=True)
    if not plan.n_dst:
        want = np.zeros((plan.threads, 0), dtype=raw)
    else:
        want = reference_registers(layout_of(plan.dst_bases), flat, plan.threads)
    if not variant_masked(variant):
        return flat, flat, want
    coords = np.indices(plan.shape).reshape(len(plan.shape), -1)
    inside = np.all(coords < np.array(harness_cut(plan.shape))[:, None], axis=0)
    fill = raw(harness_fill(plan.elem_bytes))
    if plan.operation == "copy":
        return flat, np.where(inside, flat, raw(0)), want       # zero-filled beyond the extent
    if plan.operation == "store":
        return flat, np.where(inside, flat, ~flat), want
    idx = row_major_index(layout_of(plan.dst_bases)).reshape(plan.threads, -1)
    return flat, np.where(inside, flat, fill), np.where(inside[idx], want, fill)


def repacked_data(plan: Transfer, rng: np.random.Generator,
                  variant: str = "") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``random_data`` of a packed plan whose registers repack nibbles: ``in`` is the byte tensor
    packed as the source's caller holds it (its own pair vector), ``out`` packed as the
    destination's; both through the 4-bit tensor (random nibbles, every code), the masked
    forms cut on the byte plan's tensor as its harness does."""
    k = plan.packing
    src_pair, dst_pair = side_pair(k, "src"), side_pair(k, "dst")
    nib = random_nibbles(k.shape, rng)
    flat = packed_tensor(nib, *src_pair).reshape(-1)
    inner = packed_tensor(nib, k.dim, k.bit).reshape(-1)                 # the byte plan's tensor
    if variant_masked(variant):
        coords = np.indices(plan.shape).reshape(len(plan.shape), -1)
        inside = np.all(coords < np.array(harness_cut(plan.shape))[:, None], axis=0)
        cut = (~flat if plan.operation == "store" else
               np.zeros_like(inner) if plan.operation == "copy" else np.full_like(inner, harness_fill(1)))
        inner = np.where(inside, inner, cut)
    out = packed_tensor(unpacked_tensor(inner.reshape(plan.shape), k.dim, k.bit), *dst_pair).reshape(-1)
    want = (reference_registers(side_bytes(k, "dst"), out, plan.threads) if plan.n_dst else
            np.zeros((plan.threads, 0), dtype=np.uint8))
    return flat, out, want


def byte_plan_input(plan: Transfer, flat: np.ndarray) -> np.ndarray:
    """A harness's ``in`` (row-major, packed as the source's caller holds it) as the byte plan of a
    repacking packed plan reads it: the same nibbles packed by the byte plan's pair (``flat`` itself
    for every other plan) -- what each thread's instructions move, step by step."""
    k = getattr(plan, "packing", None)          # gathers, MMAs and reductions have none
    if k is None or not k.src_swap:
        return flat
    d, b = side_pair(k, "src")
    shape = tuple(s // 2 if i == d else s for i, s in enumerate(k.shape))
    return packed_tensor(unpacked_tensor(np.asarray(flat).reshape(shape), d, b), k.dim, k.bit).reshape(-1)


def compare(name: str, p: Transfer, flat: np.ndarray, want: np.ndarray, out: np.ndarray, regs: np.ndarray,
            ok_message: str, entropy: int | None = None) -> RunResult:
    """A harness run's output tensor (``flat``: what it must be) and
    destination registers (``want``) against numpy:
    the first differing thread and register (poisoned = never written) and
    the plan step that writes it, or ``ok_message``."""
    bad = np.argwhere(regs != want)
    if len(bad):
        t, r = (int(x) for x in bad[0])
        step = plan_step(p, t, r)
        e, a = int(want[t, r]), int(regs[t, r])
        return RunResult(False, f"{name}: thread {t} (warp {t // p.warp_size}, lane {t % p.warp_size}) "
                                f"dst[{r}]: expected {e:#x}, got {a:#x}"
                                f"{' (never written: poison)' if a == (~want[t, r]).item() else ''} "
                                f"({len(bad)} of {regs.size} registers differ; written by {step})"
                                + (f"; data: default_rng({entropy})" if entropy is not None else ""),
                         t, r, e, a, step, entropy)
    if not np.array_equal(out, flat):
        i = int(np.argmax(out != flat))
        return RunResult(False, f"{name}: output tensor element {i}: expected {int(flat[i]):#x}, "
                                f"got {int(out[i]):#x} ({int((out != flat).sum())} of {flat.size} differ)",
                         expected=int(flat[i]), actual=int(out[i]), entropy=entropy)
    return RunResult(True, ok_message, entropy=entropy)


def _conversion_data(plan: Transfer, rng: np.random.Generator, variant: str) -> RunData:
    flat, out_want, want = random_data(plan, rng, variant)
    scratch = np.zeros(max(16, scratch_bytes(plan)), dtype=np.uint8)
    return RunData([flat, ~out_want, np.ascontiguousarray(~want), scratch], {1: out_want, 2: want})


def _conversion_compare(name: str, plan: Transfer, run: RunData, got: dict[int, np.ndarray], ok: str,
                        entropy: int | None) -> RunResult:
    return compare(name, plan, run.wants[1], run.wants[2], got[1], got[2], ok, entropy)


# ------------------------------------------------------------------ gathers
def _gather_data(plan, rng: np.random.Generator, variant: str) -> RunData:
    src_t, idx_t, want_t, regs = gather_expected(plan, rng)
    return RunData([src_t, idx_t, ~want_t, ~regs], {2: want_t, 3: regs})


def _gather_compare(name: str, plan, run: RunData, got: dict[int, np.ndarray], ok: str,
                    entropy: int | None) -> RunResult:
    want_t, regs = run.wants[2], run.wants[3]
    out, regs_got = got[2], got[3]
    if not (out == want_t).all():
        return RunResult(False, f"{name}: output tensor differs at {int((out != want_t).sum())} "
                                f"element(s), first {np.argwhere(out != want_t)[0].tolist()}", entropy=entropy)
    if not (regs_got == regs).all():
        t, r = (int(x) for x in np.argwhere(regs_got != regs)[0])
        return RunResult(False, f"{name}: thread {t} register {r}: got {int(regs_got[t, r]):#x}, "
                                f"want {int(regs[t, r]):#x}", t, r, int(regs[t, r]), int(regs_got[t, r]),
                         entropy=entropy)
    return RunResult(True, ok, entropy=entropy)


# ------------------------------------------------------------------- mma
def _mma_data(plan, rng: np.random.Generator, variant: str) -> RunData:
    a, b, c, want = mma_tensors(plan, rng)
    acc = layout_of(plan.acc_layout)
    want_bits = acc_bits(want, plan.acc_dtype)
    regs = want_bits.reshape(-1)[row_major_index(acc)].reshape(plan.threads, -1)
    if plan.acc_per_reg == 2:                      # f16: register r packs elements 2r (low), 2r + 1 (high)
        regs = regs[:, 0::2] | regs[:, 1::2] << np.uint32(16)
    regs = np.ascontiguousarray(regs)
    return RunData([encode_small(a, plan.a_type).reshape(-1), encode_small(b, plan.dtype).reshape(-1),
                    acc_bits(c, plan.acc_dtype).reshape(-1), ~regs], {2: want_bits.reshape(-1), 3: regs})


def _mma_compare(name: str, plan, run: RunData, got: dict[int, np.ndarray], ok: str,
                 entropy: int | None) -> RunResult:
    regs, out = run.wants[3], run.wants[2]
    bad = np.argwhere(got[3] != regs)
    if len(bad):
        t, r = (int(x) for x in bad[0])
        return RunResult(False, f"{name}: thread {t} acc[{r}]: expected {int(regs[t, r]):#x}, got "
                                f"{int(got[3][t, r]):#x} ({len(bad)} of {regs.size} registers differ)",
                         t, r, int(regs[t, r]), int(got[3][t, r]), entropy=entropy)
    if not np.array_equal(got[2], out):
        i = int(np.argmax(got[2] != out))
        return RunResult(False, f"{name}: accumulator element {i}: expected {int(out[i]):#x}, got {int(got[2][i]):#x}",
                         entropy=entropy)
    return RunResult(True, ok, entropy=entropy)


# -------------------------------------------------------------------- tma
@dataclass(frozen=True)
class TensorMapArgs:
    """A harness argument the driver fills with a CUtensorMap before the launch: argument
    ``map_arg`` (128 bytes) gets the map of the tensor at argument ``base_arg``, ``dims`` and
    ``strides`` (elements) in the tensor's dim order -- on the host through the header's own
    ``make_tensor_map()``, on a GPU through the driver's ``cuTensorMapEncodeTiled``."""
    map_arg: int
    base_arg: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]


def tma_tensor_map(plan: Transfer) -> TensorMapArgs:
    """The TMA harness's tensor: the tile's shape at 16-byte aligned padded strides."""
    return TensorMapArgs(3, 2, tuple(plan.shape),
                         harness_strides(plan.shape, list(plan.tma.order), 16, plan.elem_bytes))


def _tma_data(plan: Transfer, rng: np.random.Generator, variant: str) -> RunData:
    """``in`` (the row-major tile), ``out`` (poisoned), ``tensor`` (the global tensor at the harness
    strides, random bits in its padding) and the 128-byte map.  Loads (``""`` at the origin,
    ``_oob`` at ``harness_origin``): out[c] = the tensor's element origin + c, zero beyond the
    tensor; the tensor stays as it was.  ``_store`` at ``harness_origin``: out = in, the tensor's
    elements origin + c inside it become in[c] (poisoned before), every other byte stays."""
    raw = NP_RAW[plan.elem_bytes]
    shape = np.array(plan.shape)
    tm = tma_tensor_map(plan)
    strides = np.array(tm.strides)
    hi = np.iinfo(raw).max
    flat = rng.integers(0, hi, size=int(np.prod(shape)), dtype=raw, endpoint=True)
    tensor = rng.integers(0, hi, size=harness_extent(plan.shape, tm.strides), dtype=raw, endpoint=True)
    coords = np.indices(plan.shape).reshape(len(shape), -1)              # row-major element i -> coordinates
    origin = np.array(harness_origin(plan.shape, plan.tma.order[0], plan.elem_bytes) if variant
                      else (0,) * len(shape))[:, None]
    at = coords + origin
    inside = np.all(at < shape[:, None], axis=0)
    pos = (np.where(inside, at, 0) * strides[:, None]).sum(axis=0)
    map_bytes = np.zeros(16, dtype=np.uint64)
    if variant == "_store":
        tensor[pos[inside]] = ~flat[inside]
        want = tensor.copy()
        want[pos[inside]] = flat[inside]
        return RunData([flat, ~flat, tensor, map_bytes], {1: flat, 2: want})
    tensor[(coords * strides[:, None]).sum(axis=0)] = flat              # the tensor's elements
    out = np.where(inside, tensor[pos], raw(0))
    return RunData([flat, ~out, tensor, map_bytes], {1: out, 2: tensor.copy()})


def _tma_compare(name: str, plan: Transfer, run: RunData, got: dict[int, np.ndarray], ok: str,
                 entropy: int | None) -> RunResult:
    for k, what in ((1, "output tile element"), (2, "global tensor element")):
        want, have = run.wants[k], got[k]
        if not np.array_equal(want, have):
            i = int(np.argmax(want != have))
            poison = " (never written: poison)" if k == 1 and have[i] == ~want[i] else ""
            return RunResult(False, f"{name}: {what} {i}: expected {int(want[i]):#x}, got {int(have[i]):#x}{poison} "
                                    f"({int((want != have).sum())} of {want.size} differ)",
                             expected=int(want[i]), actual=int(have[i]), entropy=entropy)
    return RunResult(True, ok, entropy=entropy)


# ------------------------------------------------------------------ reduce
def _reduce_data(plan, rng: np.random.Generator, variant: str) -> RunData:
    """``in``: random values of the element type as raw bits (``reduce_tensor``); ``out``, ``regs``,
    ``back`` poisoned with the complement of ``reduce_reference``'s result tensor, result
    registers and broadcast back."""
    flat = reduce_tensor(plan.dtype, plan.combine, int(np.prod(plan.shape)), rng)
    out, regs, back = reduce_reference(layout_of(plan.src_bases), plan.dims, plan.combine, plan.dtype, flat)
    return RunData([flat, ~out, np.ascontiguousarray(~regs), np.ascontiguousarray(~back)], {1: out, 2: regs, 3: back})


def _reduce_compare(name: str, plan, run: RunData, got: dict[int, np.ndarray], ok: str,
                    entropy: int | None) -> RunResult:
    tail = f"; data: default_rng({entropy})" if entropy is not None else ""
    bad = [register_mismatch(name, plan, run.wants[k], got[k], what, what, "#x", tail, entropy)
           for k, what in ((2, "result register"), (3, "broadcast-back register"))]
    bad.append(tensor_mismatch(name, "result tensor", run.wants[1], got[1], "#x", tail, entropy))
    return next((b for b in bad if b is not None), RunResult(True, ok, entropy=entropy))


def register_mismatch(name: str, plan, want: np.ndarray, have: np.ndarray, label: str, what: str, fmt: str,
                      tail: str, entropy: int | None) -> RunResult | None:
    """The failure naming the first (thread, register) where ``have`` differs from ``want`` (threads x
    registers), or None when they are equal."""
    bad = np.argwhere(have != want)
    if not len(bad):
        return None
    t, r = (int(x) for x in bad[0])
    e, a = int(want[t, r]), int(have[t, r])
    return RunResult(False, f"{name}: thread {t} (warp {t // plan.warp_size}, lane {t % plan.warp_size}) "
                            f"{label} {r}: expected {e:{fmt}}, got {a:{fmt}}"
                            f"{' (never written: poison)' if a == (~want[t, r]).item() else ''} "
                            f"({len(bad)} of {want.size} differ){tail}", t, r, e, a, what, entropy)


def tensor_mismatch(name: str, label: str, want: np.ndarray, have: np.ndarray, fmt: str, tail: str,
                    entropy: int | None) -> RunResult | None:
    """The failure naming the first element where the flat tensor ``have`` differs from ``want``, or None."""
    if np.array_equal(want, have):
        return None
    i = int(np.argmax(want != have))
    poison = " (never written: poison)" if have[i] == ~want[i] else ""
    return RunResult(False, f"{name}: {label} element {i}: expected {int(want[i]):{fmt}}, got "
                            f"{int(have[i]):{fmt}}{poison} ({int((want != have).sum())} of {want.size} differ){tail}",
                     expected=int(want[i]), actual=int(have[i]), entropy=entropy)


# ------------------------------------------------------------------ upcast
def upcast_input(plan, codes: np.ndarray) -> np.ndarray:
    """The harness's ``in`` of an upcast: the row-major source codes as elements of the source's width
    (bytes; 16-bit words of a 16-bit float), a 4-bit type packed as the source's caller holds it (its
    own pair vector, ``src_index``'s packed tensor)."""
    k = plan.move.packing
    if k is None:
        return codes.astype(NP_RAW[plan.elem_bytes])
    return packed_tensor(codes.reshape(plan.shape), *side_pair(k, "src")).reshape(-1)


def _upcast_data(plan, rng: np.random.Generator, variant: str) -> RunData:
    """``in`` (every source code present where the tensor has room), ``out`` (the row-major destination
    tensor's bits) and ``regs`` (threads x destination words) poisoned with the complement of
    ``upcast_reference`` at the same coordinates."""
    codes = random_codes(plan, rng)
    scratch = [np.zeros(scale_offsets(plan)[0], dtype=np.uint8)]     # a global source tile's
    if plan.scaling is None:
        out = upcast_reference(codes, plan.dtype, plan.dst_dtype)
    else:                      # with scales: the scale tensor and the zero points row-major after the tile
        scales, zeros = random_scales(plan, rng)
        out = scaled_reference(plan, codes, scales, zeros)
        for a in (scales, zeros):
            scratch.append(np.pad(a.view(np.uint8), (0, -a.nbytes % 16)))
    regs = upcast_registers(plan, reference_registers(layout_of(plan.dst_bases), out, plan.threads))
    return RunData([upcast_input(plan, codes), ~out, np.ascontiguousarray(~regs), np.concatenate(scratch)],
                   {1: out, 2: regs})





def nan_as_wanted(want: np.ndarray, have: np.ndarray, dst: str, half_bits: int = 16) -> np.ndarray:
    """``have`` with every 16-bit half that is a NaN where ``want`` holds the canonical NaN 0x7fff
    replaced by 0x7fff: a NaN code's upcast is a NaN, whose payload the PTX ISA does not fix."""
    exp = 0x7C00 if dst == "f16" else 0x7F80
    out = np.array(have, copy=True)
    for shift in range(0, 8 * want.dtype.itemsize, half_bits):
        w = (want.astype(np.uint64) >> np.uint64(shift)) & np.uint64(0xFFFF)
        h = (have.astype(np.uint64) >> np.uint64(shift)) & np.uint64(0xFFFF)
        nan = (w == 0x7FFF) & ((h & np.uint64(exp)) == exp) & ((h & np.uint64(0x7FFF & ~exp)) != 0)
        out = np.where(nan, (out.astype(np.uint64) & ~np.uint64(0xFFFF << shift)) | np.uint64(0x7FFF << shift),
                       out.astype(np.uint64)).astype(have.dtype)
    return out


def _upcast_compare(name: str, plan, run: RunData, got: dict[int, np.ndarray], ok: str,
                    entropy: int | None) -> RunResult:
    tail = f"; data: default_rng({entropy})" if entropy is not None else ""
    got = {k: nan_as_wanted(run.wants[k], v, plan.dst_dtype) for k, v in got.items()}
    bad = (register_mismatch(name, plan, run.wants[2], got[2], "dst word", "upcast", "#010x", tail, entropy),
           tensor_mismatch(name, "output tensor", run.wants[1], got[1], "#06x", tail, entropy))
    return next((b for b in bad if b is not None), RunResult(True, ok, entropy=entropy))


# ------------------------------------------------------------------ table
@dataclass(frozen=True)
class HarnessOp:
    variants: Callable[..., tuple[str, ...]]
    c_types: Callable[..., list[str]]
    data: Callable[..., RunData]
    compare: Callable[..., RunResult]
    tensor_map: Callable[..., TensorMapArgs] | None = None     # an argument the driver fills with a CUtensorMap


CONVERSION = HarnessOp(
    variants=harness_variants,
    c_types=lambda p: [f"const {C_RAW[p.elem_bytes]}*"] + [f"{C_RAW[p.elem_bytes]}*"] * 3,
    data=_conversion_data,
    compare=_conversion_compare)

GATHER = HarnessOp(
    variants=lambda p: ("",),
    c_types=lambda p: [f"const {C_RAW[p.elem_bytes]}*", f"const {INDEX_DTYPES[p.index_dtype][1]}*",
                       f"{C_RAW[p.elem_bytes]}*", f"{C_RAW[p.elem_bytes]}*"],
    data=_gather_data,
    compare=_gather_compare)

MMA = HarnessOp(
    variants=lambda p: ("",),
    c_types=lambda p: [f"const {C_RAW[p.elem_bytes]}*"] * 2 + ["uint32_t*"] * 2,
    data=_mma_data,
    compare=_mma_compare)

TMA = HarnessOp(
    variants=harness_variants,
    c_types=lambda p: [f"const {C_RAW[p.elem_bytes]}*"] + [f"{C_RAW[p.elem_bytes]}*"] * 2 + ["const uint64_t*"],
    data=_tma_data,
    compare=_tma_compare,
    tensor_map=tma_tensor_map)

UPCAST = HarnessOp(
    variants=lambda p: ("",),
    c_types=lambda p: ["const uint8_t*", "uint16_t*", "uint32_t*", "uint8_t*"],
    data=_upcast_data,
    compare=_upcast_compare)

REDUCE = HarnessOp(
    variants=lambda p: ("",),
    c_types=lambda p: [f"const {C_RAW[p.elem_bytes]}*"] + [f"{C_RAW[p.elem_bytes]}*"] * 3,
    data=_reduce_data,
    compare=_reduce_compare)
