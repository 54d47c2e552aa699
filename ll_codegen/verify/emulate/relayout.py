"""Emulator of shared tile -> shared tile relayouts: the three steps executed in order.

``check_relayout`` fills the source tile with random raw bits and runs the load
(``memory.emulate_memory``: the tile's bytes, ldmatrix/vector semantics) into R1, the
conversion (``convert.emulate``: register moves or real shuffle semantics) on exactly those
registers, and the store of the conversion's output registers into a poisoned byte image of
the destination tile (races, unwritten bytes and double writes are ``SmemError``); the tile
read back must be the tensor.  Warps the load skips (``load.memory.warp_skip``: they hold copies)
get random registers instead of the tile's: the conversion runs on them, and nothing the storing
warps store may depend on them -- a store from a warp that did not load is an error.  The steps must also fit together: the load's registers are the
conversion's source layout, its destination the store's, both tiles the plan's, one thread
count throughout.
"""
from __future__ import annotations

import numpy as np

from ll_codegen.core.dtypes import NP_RAW
from ll_codegen.core.layout import layout_of
from ll_codegen.plan.plans import Transfer
from ll_codegen.verify.emulate.common import POISON, SmemError, as_bytes, from_bytes, smem_access
from ll_codegen.verify.emulate.convert import emulate
from ll_codegen.verify.emulate.memory import emulate_memory, write_bytes
from ll_codegen.verify.emulate.reference import dim_images, memory_reference, regs_of, tensor_flat


def store_registers(plan: Transfer, regs: np.ndarray) -> np.ndarray:
    """Execute a shared-tile store plan on the given registers ``(warps, lanes, n)``: the tensor its tile
    holds afterwards (column-major flat order as ``emulate_memory``)."""
    m = plan.memory
    w, L = plan.elem_bytes, plan.warp_size
    warps = np.arange(plan.num_warps)
    warps = warps[(warps & m.warp_skip) == 0]
    mem = np.full(m.bytes, POISON, dtype=np.uint8)
    valid = np.zeros(m.bytes, dtype=bool)
    sb = as_bytes(regs.astype(NP_RAW[w], copy=False))
    for acc in m.accesses:
        addr, reg, byte, _, _ = smem_access(plan, acc, m.base, m.instr, warps)
        write_bytes(mem, valid, addr, sb[warps[:, None, None], np.arange(L)[None, :, None], reg[None], byte[None]])
    if not valid.all():
        raise SmemError(f"the store leaves {int((~valid).sum())} bytes of the tile unwritten")
    tile = layout_of(plan.dst_bases)
    out = np.zeros(1 << tile.total_out_size_log2, dtype=NP_RAW[w])
    out[dim_images(tile, "offset")] = from_bytes(mem.reshape(-1, w), w)
    return out


def check_steps_fit(plan: Transfer) -> None:
    """The three steps chain: tiles, register layouts and threads agree (AssertionError otherwise)."""
    ld, cv, st = plan.load, plan.convert, plan.store
    if ld.src_bases != plan.src_bases or st.dst_bases != plan.dst_bases:
        raise AssertionError("relayout plan: the load's or the store's tile is not the plan's")
    if layout_of(ld.dst_bases) != layout_of(cv.src_bases) or layout_of(cv.dst_bases) != layout_of(st.src_bases):
        raise AssertionError("relayout plan: the conversion does not start at the load's registers or end at the "
                             "store's")
    if {q.num_warps for q in (plan, ld, cv, st)} != {plan.num_warps} or cv.through_smem:
        raise AssertionError("relayout plan: the steps differ in warps, or the conversion uses shared memory")
    if ld.memory.lane_skip:
        raise AssertionError("relayout plan: the load skips lanes (a shuffle may read their registers)")


def check_relayout(plan: Transfer, rng: np.random.Generator | int | None = 0, **_) -> None:
    """Random raw bits through the load, the conversion and the store (module docstring);
    AssertionError on any difference, naming the step."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    check_steps_fit(plan)
    dt = NP_RAW[plan.elem_bytes]
    tensor = rng.integers(0, np.iinfo(dt).max, size=tuple(plan.shape), dtype=dt, endpoint=True)
    r1 = emulate_memory(plan.load, tensor)
    want1 = memory_reference(plan.load, tensor)
    run = (np.arange(plan.num_warps) & plan.load.memory.warp_skip) == 0      # the warps that load
    if not np.array_equal(r1[run], want1[run]):
        raise AssertionError(f"relayout plan: the load gives {int((r1[run] != want1[run]).sum())} wrong registers")
    r1 = r1.copy()
    r1[~run] = rng.integers(0, np.iinfo(dt).max, size=r1[~run].shape, dtype=dt, endpoint=True)   # never loaded
    r2 = emulate(plan.convert, r1)
    want2 = regs_of(layout_of(plan.convert.dst_bases), tensor)
    stores = (np.arange(plan.num_warps) & plan.store.memory.warp_skip) == 0
    if np.any(stores & ~run):
        raise AssertionError("relayout plan: a warp stores registers it did not load (load warp_skip "
                             f"{plan.load.memory.warp_skip:#x}, store warp_skip {plan.store.memory.warp_skip:#x})")
    wrong = (r2 != want2) & run[:, None, None]          # the skipped warps' registers are never stored
    if np.any(wrong):
        w, l, r = (int(i) for i in np.argwhere(wrong)[0])
        raise AssertionError(f"relayout plan: the conversion ({plan.convert.strategy}) gives warp {w} lane {l} "
                             f"register {r} {int(r2[w, l, r]):#x}, expected {int(want2[w, l, r]):#x} "
                             f"({int(wrong.sum())} registers differ)")
    got = store_registers(plan.store, r2)
    want = tensor_flat(tensor)
    if not np.array_equal(got, want):
        i = int(np.argmax(got != want))
        raise AssertionError(f"relayout plan: the destination tile holds element {i} = {int(got[i]):#x}, expected "
                             f"{int(want[i]):#x} ({int((got != want).sum())} of {want.size} differ)")
