"""A whole chain executed by the emulators, step after step, on the data the kernel holds.

Every tensor has a *hardware view*: the array its layout *as written in its spec*
(a free tensor's: the chosen layout, the one the author adopts) reads out of the
registers (or tile) the kernel holds -- what the next instruction (a wgmma reading
P, a kernel indexing V) sees.  A chain is run from its
fixed tensors' values: each step's plan is executed by its operation's emulator on
the source's registers or bytes, and the destination's hardware view is read back.

What the relabelling promises (``description``'s module docstring) is then checked
directly: every tensor's hardware view is the logical tensor with each free index it
carries relabelled, ``H_t[.., k, ..] = T[.., pi(k), ..]``; so a contraction over a
relabelled index (``sum_k H_P[q, k] H_V[k, d]``) equals the one over the logical
tensors; a free tensor's view is its logical tensor (a pre-shuffled one's too: the kernel
reads it through the registers it is shuffled for).  Conversions, loads and stores
(shared and global tiles), relayouts and copies run, each by its own emulator (a copy as
its load half, then its store half); an upcast runs its move by that move's emulator and
then the upcast sequence instruction by instruction (``verify/emulate/upcast.run_sequence``),
and its destination must hold the exact upcast of the source's logical values; a step of
another operation (a TMA box) is refused by name.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ll_codegen.chain import preshuffle
from ll_codegen.chain.description import Step
from ll_codegen.chain.search import ChainPlan, hardware_spec, preshuffled, step_specs
from ll_codegen.core import f2
from ll_codegen.core.dtypes import DTYPE_BITS, NP_RAW
from ll_codegen.core.layout import LinearLayout, layout_of
from ll_codegen.plan.plans import Transfer, without_via
from ll_codegen.verify.emulate.convert import emulate
from ll_codegen.verify.emulate.memory import copy_halves, emulate_memory
from ll_codegen.verify.emulate.packed import unpack_registers
from ll_codegen.verify.emulate.mma import emulate as emulate_mma
from ll_codegen.verify.emulate.reduce import emulate_reduce
from ll_codegen.verify.emulate.reference import (MMA_RANGES, REDUCE_VALUES, dim_images, encode_small, reduce_raw,
                                                 reduce_values, regs_of, tensor_flat)
from ll_codegen.verify.emulate.relayout import store_registers
from ll_codegen.verify.emulate.upcast import decode, run_sequence, upcast_reference


def scatter_regs(L: LinearLayout, regs: np.ndarray) -> np.ndarray:
    """The tensor whose registers in layout ``L`` are ``regs`` (num_warps, warp_size, n): the
    inverse of ``regs_of`` (a broadcast element is read from any one copy)."""
    shape = tuple(L.out_dim_sizes.values())
    reg, lane, warp = (dim_images(L, d) for d in ("register", "lane", "warp"))
    flat = warp[:, None, None] ^ lane[None, :, None] ^ reg[None, None, :]
    out = np.zeros(int(np.prod(shape)), dtype=regs.dtype)
    out[flat.ravel()] = regs.ravel()
    return out.reshape(shape, order="F")


def relabelled(tensor: np.ndarray, carried: tuple[tuple[int, str], ...], choice: Mapping[str, tuple[int, ...]]):
    """``T`` with every carried dim relabelled: ``out[.., k, ..] = T[.., pi(k), ..]``."""
    out = tensor
    for dim, index in carried:
        pi = choice[index]
        order = np.array([f2.apply(pi, k) for k in range(tensor.shape[dim])])
        out = np.take(out, order, axis=dim)
    return out


def _tile_view(written: LinearLayout, planned: LinearLayout, tensor: np.ndarray) -> np.ndarray:
    """The hardware view through ``written`` of the bytes a tile holds when ``planned`` laid out
    ``tensor`` in it (each offset: the element ``planned`` put there, read at ``written``'s)."""
    flat = np.zeros(tensor.size, dtype=tensor.dtype)
    flat[dim_images(written, "offset")] = tensor_flat(tensor)[dim_images(planned, "offset")]
    return flat.reshape(tensor.shape, order="F")


def _in_registers(L: LinearLayout) -> bool:
    return "lane" in L.in_dims


def _enter(written: LinearLayout, planned: LinearLayout, view: np.ndarray) -> np.ndarray:
    """What a step's plan starts from, given the source's hardware view: the registers the kernel
    holds, or the tensor the plan's (relabelled) tile layout reads out of the tile's bytes."""
    return regs_of(written, view) if _in_registers(written) else _tile_view(planned, written, view)


def _leave(written: LinearLayout, planned: LinearLayout, value: np.ndarray) -> np.ndarray:
    """The destination's hardware view of what the plan left: registers read through the layout
    as written, or the bytes the plan's tile layout placed, read through it."""
    return scatter_regs(written, value) if _in_registers(written) else _tile_view(written, planned, value)


def _store(plan: Transfer, planned_src: LinearLayout, regs: np.ndarray) -> np.ndarray:
    """A store plan run on registers: the tensor its tile holds (in the plan's frame); a ``via``
    store converts first, then stores from the layout it converted to."""
    if plan.via is not None:
        return _store(without_via(plan), layout_of(plan.via.dst_bases), emulate(plan.via, regs))
    if plan.memory.space == "shared":
        return store_registers(plan, regs).reshape(plan.shape, order="F")
    return emulate_memory(plan, scatter_regs(planned_src, regs))


def load_registers(plan: Transfer, tile: np.ndarray) -> np.ndarray:
    """A load plan run on a tile's tensor: every thread's registers; a ``via`` load loads into the
    layout it converts from, then converts."""
    if plan.via is not None:
        return emulate(plan.via, emulate_memory(without_via(plan), tile))
    return emulate_memory(plan, tile)


def _run_plan(plan: Transfer, planned_src: LinearLayout, value: np.ndarray) -> np.ndarray:
    """``plan`` executed by its operation's emulator on ``_enter``'s value."""
    if plan.operation == "convert":
        return emulate(plan, value)
    if plan.operation == "load":
        return load_registers(plan, value)
    if plan.operation == "store":
        return _store(plan, planned_src, value)
    if plan.operation == "relayout":
        regs = emulate(plan.convert, emulate_memory(plan.load, value))
        return store_registers(plan.store, regs).reshape(value.shape, order="F")
    if plan.operation == "copy":
        load, store = copy_halves(plan)
        return store_registers(store, emulate_memory(load, value)).reshape(value.shape, order="F")
    raise ValueError(f"the chain emulation runs conversions, loads, stores, relayouts and copies; this step "
                     f"is a {plan.operation}")


def _run_step(cp: ChainPlan, step: Step, plan: Transfer, view: np.ndarray) -> np.ndarray:
    """The destination's hardware view after ``plan`` ran on the source's hardware view ``view``.
    A pre-shuffled tensor's view is its logical tensor; the step runs in the packed frame
    (``search.step_specs``) on the buffer ``preshuffle.reorder`` makes of it, and a store's buffer
    is read back by ``preshuffle.restore``."""
    choice, layouts = dict(cp.choice), dict(cp.layouts)
    src, dst = cp.chain.tensor(step.src), cp.chain.tensor(step.dst)
    written = {t.name: hardware_spec(t, layouts).linear for t in (src, dst)}
    a, b = step_specs(cp.chain, step, choice, layouts)
    planned = {src.name: a.linear, dst.name: b.linear}
    shuffled_src, shuffled_dst = preshuffled(src, layouts), preshuffled(dst, layouts)
    move = plan.move if plan.operation == "upcast" else plan
    try:
        if move.packing is not None:
            out = _run_packed_load(move, step, shuffled_src, view)
        else:
            value = (preshuffle.reorder(view, shuffled_src.offsets) if shuffled_src is not None
                     else _enter(written[src.name], planned[src.name], view))
            out = _run_plan(move, planned[src.name], value)
    except ValueError as e:
        raise ValueError(f"{src.name} -> {dst.name}: {e}") from None
    if plan.operation == "upcast":
        out = _widen(plan, out)
    if shuffled_dst is not None:
        return preshuffle.restore(out, shuffled_dst.offsets, dst.spec.shape)
    return _leave(written[dst.name], planned[dst.name], out)


def _run_packed_load(plan: Transfer, step: Step, shuffled, view: np.ndarray) -> np.ndarray:
    """A 4-bit load of a pre-shuffled tensor (the chain file allows 4-bit steps only next to one):
    the tensor's codes packed by ``preshuffle.reorder``, two a byte (offset ``2i`` in the low nibble
    of byte ``i``: the packed tile's pair), the byte plan run on those bytes, each thread's byte
    registers unpacked to its 4-bit registers (register ``2i`` the low nibble of byte ``i``)."""
    if shuffled is None or plan.operation != "load":
        raise ValueError("the chain emulation runs 4-bit steps only as loads of a pre-shuffled tensor")
    codes = preshuffle.reorder(view, shuffled.offsets).astype(np.uint8)
    packed = (codes[0::2] & 0xF) | ((codes[1::2] & 0xF) << 4)
    return unpack_registers(load_registers(plan, packed))


def _widen(plan: Transfer, mid: np.ndarray) -> np.ndarray:
    """An upcast's sequence run on the codes its move left in ``I`` (warps, lanes, n): the
    destination registers' element bits (warps, lanes, n), element ``2m`` the low half of word ``m``."""
    words = run_sequence(plan, mid.reshape(-1, mid.shape[-1]))
    bits = np.empty((words.shape[0], 2 * words.shape[1]), dtype=np.uint16)
    bits[:, 0::2], bits[:, 1::2] = words & 0xFFFF, words >> 16
    return bits.reshape(mid.shape[:-1] + (bits.shape[1],))


def _values(bits: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values of raw bits of an MMA or reduction element type."""
    bits = np.asarray(bits)
    if dtype in ("f8e4m3", "f8e5m2", "i8", "u8"):
        return decode(bits.astype(np.uint8), dtype)
    if dtype == "tf32":
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    raw = bits.astype(NP_RAW[DTYPE_BITS[dtype] // 8])
    return (raw.view(np.float16) if dtype == "f16" else reduce_values(raw, dtype)).astype(np.float64)


def _bits(values: np.ndarray, dtype: str) -> np.ndarray:
    """Raw bits of exact values in an accumulator or reduction type (f32, f16, bf16, i32)."""
    return reduce_raw(np.asarray(values).astype(REDUCE_VALUES[dtype]), dtype)


#: the integers a reduction's source draws from, by type: exact in it (bf16 to 256, f16 to 2048)
REDUCE_RANGE = {"f32": 1000, "i32": 1000, "f16": 2048, "bf16": 256}


def _small(step: Step, name: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Raw bits of integers for tensor ``name`` as ``step`` first reads it, so that every product and
    sum of the chain is exact: an mma's accumulator in [-64, 64], an operand in its MMA range, any
    4-bit code; a reduction's source spread wide (a max over part of a row must differ from the
    row's), each of its sums within the type's exact integers."""
    dtype = dict(step.options)["acc_dtype"] if step.op == "mma" and name == step.dst else step.dtype
    if DTYPE_BITS[dtype] == 4:
        return rng.integers(0, 15, size=shape, dtype=np.uint8, endpoint=True)
    if step.op == "reduce":
        opts = dict(step.options)
        h = REDUCE_RANGE[dtype] // (int(np.prod([shape[d] for d in opts["dims"]])) if opts["combine"] == "sum" else 1)
        lo, hi = -max(h, 1), max(h, 1)
    else:
        lo, hi = (-64, 64) if step.op == "mma" else MMA_RANGES.get(dtype, (-4, 4))
    v = rng.integers(lo, hi, size=shape, endpoint=True)
    return _bits(v, dtype) if dtype in REDUCE_VALUES else encode_small(v, dtype)


def _run_compute(cp: ChainPlan, step: Step, plan, views: Mapping[str, np.ndarray]) -> np.ndarray:
    """An mma's accumulator or a reduction's result, computed by its emulator on the hardware views
    (``search.plan_step`` planned it on the hardware layouts), as raw bits."""
    hw = {n: hardware_spec(cp.chain.tensor(n), dict(cp.layouts)).linear for n in step.names}
    if step.op == "mma":
        acc_dtype = dict(step.options)["acc_dtype"]
        regs = emulate_mma(plan, _values(views[step.src], step.dtype), _values(views[step.b], step.dtype),
                           _values(views[step.dst], acc_dtype))
        return _bits(scatter_regs(hw[step.dst], regs), acc_dtype)
    src = regs_of(hw[step.src], reduce_values(views[step.src].astype(NP_RAW[plan.elem_bytes]), step.dtype))
    dst, _ = emulate_reduce(plan, src)
    return reduce_raw(scatter_regs(hw[step.dst], dst), step.dtype)


def _logical_result(step: Step, logical: Mapping[str, np.ndarray]) -> np.ndarray:
    """What a step leaves in its destination, on the logical tensors (raw bits): the same tensor
    (a move), its exact upcast, ``C + A @ B``, or the reduction over ``dims``."""
    if step.op == "mma":
        acc_dtype = dict(step.options)["acc_dtype"]
        a, b = (_values(logical[n], step.dtype) for n in (step.src, step.b))
        return _bits(_values(logical[step.dst], acc_dtype) + a @ b, acc_dtype)
    if step.op == "reduce":
        opts = dict(step.options)
        combine = {"sum": np.sum, "max": np.max, "min": np.min}[opts["combine"]]
        return _bits(combine(_values(logical[step.src], step.dtype), axis=opts["dims"]), step.dtype)
    if step.dst_dtype:                                    # an upcast: the same elements, widened exactly
        return upcast_reference(logical[step.src], step.dtype, step.dst_dtype)
    return logical[step.src]


def run_chain(cp: ChainPlan, inputs: Mapping[str, np.ndarray], only: set[int] | None = None) -> dict[str, np.ndarray]:
    """Every tensor's hardware view after running the chain's plans (steps ``only``, default all) on
    ``inputs`` (the hardware views, as raw bits, of the tensors read before any step writes them;
    an mma's or reduction's as small integers, ``_small``)."""
    views = dict(inputs)
    for k, (step, plan) in enumerate(zip(cp.chain.steps, cp.plans)):
        if only is not None and k not in only:
            continue
        missing = [n for n in step.reads if n not in views]
        if missing:
            raise ValueError(f"{missing[0]} has no value: give it as an input or write it in an earlier step")
        if step.op == "move":
            views[step.dst] = _run_step(cp, step, plan, views[step.src].astype(NP_RAW[plan.elem_bytes]))
        else:
            views[step.dst] = _run_compute(cp, step, plan, views)
    return views


def _moves_alone(steps) -> set[int]:
    """The moves that read nothing an mma or reduction computed (the raw-bits pass runs those)."""
    out, computed = set(), set()
    for k, s in enumerate(steps):
        if s.op == "move" and not computed & set(s.reads):
            out.add(k)
        else:
            computed.add(s.dst)
    return out


def check_chain(cp: ChainPlan, rng: np.random.Generator | int | None = 0) -> dict[str, np.ndarray]:
    """Run the chain's moves on random raw bits and, when it has an mma or a reduction, the whole
    chain on small integers (exact arithmetic); AssertionError unless every tensor's hardware view
    is its logical value relabelled (module docstring).  Returns the hardware views of the last pass."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    steps = cp.chain.steps
    views = _check(cp, rng, _moves_alone(steps), False)
    if any(s.op != "move" for s in steps):
        views = _check(cp, rng, set(range(len(steps))), True)
    return views


def _check(cp: ChainPlan, rng: np.random.Generator, only: set[int], small: bool) -> dict[str, np.ndarray]:
    choice = dict(cp.choice)
    logical: dict[str, np.ndarray] = {}
    inputs = {}
    for k, step in enumerate(cp.chain.steps):
        if k not in only:
            continue
        for name in step.reads:
            if name in logical:
                continue
            shape, bits = cp.chain.tensor(name).spec.shape, step.bits(name)
            if small:
                logical[name] = _small(step, name, shape, rng)
            else:                                         # 4-bit: one code an element
                logical[name] = rng.integers(0, (1 << bits) - 1, size=shape, dtype=NP_RAW[max(1, bits // 8)],
                                             endpoint=True)
            inputs[name] = relabelled(logical[name], cp.chain.tensor(name).indices, choice)
        logical[step.dst] = _logical_result(step, logical)
    views = run_chain(cp, inputs, only)
    for k, step in enumerate(cp.chain.steps):
        if k not in only:
            continue
        want = relabelled(logical[step.dst], cp.chain.tensor(step.dst).indices, choice)
        bad = views[step.dst] != want
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            raise AssertionError(f"{step.src} -> {step.dst}: element {at} is {int(views[step.dst][at]):#x}, the "
                                 f"relabelled logical value is {int(want[at]):#x} ({int(bad.sum())} differ)")
    return views
