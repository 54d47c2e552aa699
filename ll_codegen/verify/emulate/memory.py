"""Emulator of memory plans (``store``/``load`` of a shared or global tile) and
of copies (global tile -> registers -> shared tile).

A memory plan (``plan.memory``) stores registers into, or loads them from, a
tile laid out as given.  ``emulate_memory`` executes it on a byte image of
the tile (shared: poisoned bytes, races and unwritten bytes are
``SmemError``) or of a strided global buffer, with ``extent`` the masked
forms' bounds (element valid iff every coordinate < extent; loads of invalid
elements give ``fill``, stores skip them), and returns what the harness
checks: the tile's tensor as read back (store) or every thread's registers
(load).  ``check_memory_plan`` compares it with ``reference.memory_reference``
on random bits (a ``via`` plan: its conversion with ``check_plan``, then its
access).  A copy is its two halves (``copy_halves``), each checked the same
way, then their pairing (``check_copy_plan``).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ll_codegen.core.dtypes import NP_RAW
from ll_codegen.core.layout import layout_of
from ll_codegen.plan.plans import CopyPlan, LoadPlan, StorePlan, Transfer, without_via
from ll_codegen.verify.emulate.common import POISON, SmemError, as_bytes, from_bytes, global_addresses, smem_access
from ll_codegen.verify.emulate.convert import check_plan
from ll_codegen.verify.emulate.reference import (coords_of, dim_images, distributed_layout, inside, memory_reference, regs_of,
                                         tensor_flat, tile_layout)


def write_bytes(mem: np.ndarray, valid: np.ndarray, addr: np.ndarray, val: np.ndarray) -> None:
    """One warp-wide shared store: byte ``val`` at each ``addr`` into ``mem``, marking ``valid``.
    Two threads writing different values to one byte (a race), or an instruction overwriting a byte
    an earlier one wrote with another value, is a ``SmemError``."""
    a, v = addr.ravel(), val.ravel()
    order = np.argsort(a, kind="stable")
    a, v = a[order], v[order]
    clash = (a[1:] == a[:-1]) & (v[1:] != v[:-1])
    if np.any(clash):
        raise SmemError(f"race: two threads write different values to byte {a[int(np.argmax(clash))]}")
    if np.any(valid[a] & (mem[a] != v)):
        raise SmemError("two instructions write different values to one byte")
    mem[a], valid[a] = v, True


def emulate_memory(plan: Transfer, tensor: np.ndarray, extent=None, fill: int = 0,
                   strides=None) -> np.ndarray:
    """Execute a memory plan (module comment above); ``strides`` (elements)
    lay out a global tile (default: the plan's)."""
    m = plan.memory
    w, W, L = plan.elem_bytes, plan.num_warps, plan.warp_size
    dt = NP_RAW[w]
    dist, tile = distributed_layout(plan), tile_layout(plan)
    warps = np.arange(W)
    if m.direction == "store":
        warps = warps[(warps & m.warp_skip) == 0]
    lanes_on = (np.arange(L) & m.lane_skip) == 0
    src = regs_of(dist, tensor).astype(dt) if m.direction == "store" else None
    n = dist.in_dim_size("register")
    dst = np.full((W, L, n), fill, dtype=dt)
    written = np.zeros(dst.shape, dtype=bool)
    if m.space == "shared":
        if extent is not None:
            raise ValueError("shared tiles have no masked forms")
        mem = np.full(m.bytes, POISON, dtype=np.uint8)
        valid = np.zeros(m.bytes, dtype=bool)
        offs = dim_images(tile, "offset")                  # tensor element at each offset
        if m.direction == "load":
            mem[...] = as_bytes(tensor_flat(tensor)[offs].astype(dt)).ravel()
            valid[...] = True
        sb = as_bytes(src) if src is not None else None
        db = as_bytes(dst).copy()
        for acc in m.accesses:
            addr, reg, byte, _, _ = smem_access(plan, acc, m.base, m.instr, warps)
            if m.direction == "store":
                write_bytes(mem, valid, addr, sb[warps[:, None, None], np.arange(L)[None, :, None], reg[None],
                                                 byte[None]])
            else:
                db[warps[:, None, None], np.arange(L)[None, :, None], reg[None], byte[None]] = mem[addr]
                written[:, np.arange(L)[:, None], reg] = True
        if m.direction == "store":
            if not valid.all():
                raise SmemError(f"the store leaves {int((~valid).sum())} bytes of the tile unwritten")
            out = np.zeros(tensor.size, dtype=dt)
            out[offs] = from_bytes(mem.reshape(-1, w), w)
            return out.reshape(tensor.shape, order="F")
        dst = from_bytes(db, w)
    else:
        strides = tuple(strides) if strides is not None else m.strides
        sizes = list(plan.shape)
        span = 1 + sum((s - 1) * st for s, st in zip(sizes, strides))
        mem = np.full(span, ~np.asarray(fill, dtype=dt) if m.direction == "store" else 0, dtype=dt)
        touched = np.zeros(span, dtype=bool)
        flat = np.arange(tensor.size)
        coords_all = coords_of(flat, sizes)
        elem_all = sum(c * s for c, s in zip(coords_all, strides))
        if m.direction == "load":
            mem[elem_all] = tensor_flat(tensor)
        for acc in m.accesses:
            elem, coords = global_addresses(plan, acc, warps, strides)
            if np.any((elem[:, :, 0] * w) % (m.vec * w)):
                raise SmemError(f"misaligned {m.vec * w}-byte global access")
            ok = inside(coords, extent)
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
            ok_all = inside(coords_all, extent)
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


def check_memory_plan(plan: Transfer, rng: np.random.Generator | int | None = 0, extent=None,
                      strides=None) -> None:
    """Random raw bits through ``emulate_memory`` and ``memory_reference``; AssertionError on any difference.
    A ``via`` plan is its conversion (``check_plan``) and its access over the layout converted to/from;
    a plan with run-time alignment paths, each path."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    for path in plan.paths:       # run-time alignment: every path is a whole plan of its own
        check_memory_plan(path, rng, extent, strides)
    if plan.paths:
        plan = replace(plan, paths=())
    if plan.via is not None:
        v = plan.via
        check_plan(v, layout_of(v.src_bases), layout_of(v.dst_bases), rng)
        check_memory_plan(without_via(plan), rng, extent, strides)
        return
    dt = NP_RAW[plan.elem_bytes]
    tensor = rng.integers(0, np.iinfo(dt).max, size=tuple(plan.shape), dtype=dt, endpoint=True)
    fill = int(rng.integers(0, np.iinfo(dt).max, dtype=dt, endpoint=True))
    got = emulate_memory(plan, tensor, extent, fill, strides)
    want = memory_reference(plan, tensor, extent, fill)
    if got.shape != want.shape or not np.array_equal(got, want):
        bad = np.argwhere(got != want)
        raise AssertionError(f"{plan.strategy} plan ({plan.memory.space}, {plan.memory.instr}, {plan.dtype}): "
                             f"{len(bad)} of {want.size} values differ, first at {tuple(int(i) for i in bad[0])}: "
                             f"expected {int(want[tuple(bad[0])]):#x}, got {int(got[tuple(bad[0])]):#x}")


def copy_halves(plan: CopyPlan) -> tuple[LoadPlan, StorePlan]:
    """A copy plan as its two memory plans over the thread mapping it built:
    (load of the global tile, store into the shared tile)."""
    return plan.halves()


def check_copy_plan(plan: Transfer, rng: np.random.Generator | int | None = 0, extent=None,
                    strides=None) -> None:
    """A copy is its load (global tile -> registers of the thread mapping,
    zeros beyond ``extent``) followed by its store (registers -> shared tile),
    access k of both moving the same registers with one vector width: each
    half is executed against numpy, then the pairing is checked; with
    run-time alignment paths, each path."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    for path in plan.paths:
        check_copy_plan(path, rng, extent, strides)
    plan = c = replace(plan, paths=())
    load, store = copy_halves(plan)
    dt = NP_RAW[plan.elem_bytes]
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
