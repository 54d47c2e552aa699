"""A whole chain executed by the emulators, step after step, on the data the kernel holds.

Every tensor has a *hardware view*: the array its layout *as written in its spec*
reads out of the registers (or shared tile) the kernel holds -- what the next
instruction (a wgmma reading P, a kernel indexing V) sees.  A chain is run from its
fixed tensors' values: each step's plan is executed by its operation's emulator on
the source's registers or bytes, and the destination's hardware view is read back.

What the relabelling promises (``description``'s module docstring) is then checked
directly: every tensor's hardware view is the logical tensor with each free index it
carries relabelled, ``H_t[.., k, ..] = T[.., pi(k), ..]``; so a contraction over a
relabelled index (``sum_k H_P[q, k] H_V[k, d]``) equals the one over the logical
tensors.  Register -> register and shared -> shared steps run; a step of another
operation is refused by name.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ll_codegen.chain.description import Tensor
from ll_codegen.chain.search import ChainPlan, tensor_layout
from ll_codegen.core import f2
from ll_codegen.core.dtypes import NP_RAW
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.plans import Transfer
from ll_codegen.verify.emulate.convert import emulate
from ll_codegen.verify.emulate.memory import emulate_memory
from ll_codegen.verify.emulate.reference import dim_images, regs_of, tensor_flat
from ll_codegen.verify.emulate.relayout import store_registers


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


def _run_step(cp: ChainPlan, plan: Transfer, src: Tensor, dst: Tensor, view: np.ndarray) -> np.ndarray:
    """The destination's hardware view after ``plan`` ran on the source's hardware view ``view``."""
    choice = dict(cp.choice)
    if plan.operation == "convert":
        return scatter_regs(dst.spec.linear, emulate(plan, regs_of(src.spec.linear, view)))
    if plan.operation == "relayout":          # the tiles' bytes, as the plan's (relabelled) layouts place them
        planned_src, planned_dst = tensor_layout(src, choice), tensor_layout(dst, choice)
        tensor = _tile_view(planned_src, src.spec.linear, view)       # the tensor the plan's source tile holds
        regs = emulate(plan.convert, emulate_memory(plan.load, tensor))
        held = store_registers(plan.store, regs).reshape(tensor.shape, order="F")
        return _tile_view(dst.spec.linear, planned_dst, held)
    raise ValueError(f"the chain emulation runs register -> register and shared -> shared steps; "
                     f"{src.name} -> {dst.name} is a {plan.operation}")


def run_chain(cp: ChainPlan, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every tensor's hardware view after running the chain's plans on ``inputs`` (the hardware
    views of the tensors no step writes: raw bits of the step's element width)."""
    views = dict(inputs)
    for step, plan in zip(cp.chain.steps, cp.plans):
        if step.src not in views:
            raise ValueError(f"{step.src} has no value: give it as an input or write it in an earlier step")
        views[step.dst] = _run_step(cp, plan, cp.chain.tensor(step.src), cp.chain.tensor(step.dst),
                                    views[step.src].astype(NP_RAW[plan.elem_bytes]))
    return views


def check_chain(cp: ChainPlan, rng: np.random.Generator | int | None = 0) -> dict[str, np.ndarray]:
    """Run the chain on random raw bits; AssertionError unless every tensor's hardware view is
    its logical value relabelled (module docstring).  Returns the hardware views."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    choice = dict(cp.choice)
    written = {s.dst for s in cp.chain.steps}
    logical: dict[str, np.ndarray] = {}
    inputs = {}
    for step, plan in zip(cp.chain.steps, cp.plans):
        if step.src in written or step.src in inputs:
            continue
        t, dt = cp.chain.tensor(step.src), NP_RAW[plan.elem_bytes]
        logical[step.src] = rng.integers(0, np.iinfo(dt).max, size=t.spec.shape, dtype=dt, endpoint=True)
        inputs[step.src] = relabelled(logical[step.src], t.indices, choice)
    views = run_chain(cp, inputs)
    for step in cp.chain.steps:
        logical.setdefault(step.dst, logical[step.src])       # a step moves the same logical tensor
        want = relabelled(logical[step.dst], cp.chain.tensor(step.dst).indices, choice)
        bad = views[step.dst] != want
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            raise AssertionError(f"{step.src} -> {step.dst}: element {at} is {int(views[step.dst][at]):#x}, the "
                                 f"relabelled logical value is {int(want[at]):#x} ({int(bad.sum())} differ)")
    return views

