"""A planned chain as data and as text: the chosen relabellings and free layouts (as specs a
user pastes), every step's plan and cost, the totals against the reference choice."""
from __future__ import annotations

import json
from typing import Any

from ll_codegen.chain import preshuffle
from ll_codegen.spec import flow_yaml
from ll_codegen.chain.candidates import Placement
from ll_codegen.chain.description import Step, Tensor
from ll_codegen.chain.search import ChainPlan, identity, step_cost
from ll_codegen.layouts.show import layout_params
from ll_codegen.plan.plans import Transfer


def reference_text(t: Tensor) -> str:
    """A free tensor's reference as it reads in a summary: its kind and parameters."""
    params = {k: v for k, v in layout_params(t.spec.layout).items() if k not in ("kind", "rank")}
    return f"{t.spec.kind} {' '.join(f'{k}={list(v) if isinstance(v, tuple) else v}' for k, v in params.items())}"


def chosen_text(p: Placement) -> str:
    """A chosen layout's spec: the pasteable YAML line, or ``reference`` when the reference stayed."""
    return p.text or "reference"


def _access(plan: Transfer) -> Transfer:
    """The plan that touches memory: an upcast's move, else the plan itself."""
    return getattr(plan, "move", plan)


def _global_vector(plan: Transfer) -> int | None:
    """The vector width (bytes) of a global access step (an upcast's: its move's); None for other steps."""
    m = getattr(_access(plan), "memory", None)
    return m.vector_bytes if m is not None and m.space == "global" else None


def describe(cp: ChainPlan) -> dict[str, Any]:
    """Plain data of a chain plan: the choice (each index's bit images, each free tensor's spec
    and how it was found), per step the operation, strategy, cost (and a global access's vector
    bytes) under the choice and under the reference, the totals."""
    steps = []
    for step, p, q in zip(cp.chain.steps, cp.plans, cp.identity_plans):
        steps.append({"op": step.op, "src": step.src, "b": step.b, "dst": step.dst, "dtype": step.dtype,
                      "dst_dtype": step.dst_dtype, "operation": p.operation,
                      "strategy": p.strategy, "cost": step_cost(p), "identity_strategy": q.strategy,
                      "identity_cost": step_cost(q), "vector_bytes": _global_vector(p),
                      "identity_vector_bytes": _global_vector(q)})
    layouts = {name: {"space": cp.chain.tensor(name).free.space, "found": p.label, "spec": p.text or None,
                      "reference": reference_text(cp.chain.tensor(name))} for name, p in cp.layouts}
    return {"choice": {i: list(pi) for i, pi in cp.choice}, "layouts": layouts, "steps": steps, "cost": cp.cost,
            "identity_cost": cp.identity_cost, "evaluated": cp.evaluated}


def chain_json(cp: ChainPlan, indent: int | None = 2) -> str:
    """``describe`` as JSON."""
    return json.dumps(describe(cp), indent=indent)


def _how(plan: Transfer) -> str:
    return plan.operation if plan.strategy == plan.operation else f"{plan.operation} {plan.strategy}"


def _vectors(plan: Transfer) -> str:
    """A global access's vector width and sectors, as the chain reads them (empty for other steps)."""
    if _global_vector(plan) is None:
        return ""
    plan = _access(plan)
    m = plan.memory
    conv = f", then {plan.via.strategy}" if plan.via is not None else ""
    return (f" of {m.vector_bytes}-byte vectors ({m.cost.instructions} a warp, {m.cost.sectors} sectors each, "
            f"{m.cost.min_sectors} at best{conv})")


def _step_text(step: Step) -> str:
    """A step as the summary names it: ``S -> P (f8e4m3)``, ``O += P @ Vk (f8e4m3 -> f32)``,
    ``m = max(S, dims [1]) (f32)``."""
    opts = dict(step.options)
    if step.op == "mma":
        return f"{step.dst} += {step.src} @ {step.b} ({step.dtype} -> {opts['acc_dtype']})"
    if step.op == "reduce":
        return f"{step.dst} = {opts['combine']}({step.src}, dims {list(opts['dims'])}) ({step.dtype})"
    return f"{step.src} -> {step.dst} ({step.dtype}{f' -> {step.dst_dtype}' if step.dst_dtype else ''})"


def chain_summary(cp: ChainPlan) -> str:
    """The readable chain plan: each free index's choice, each free tensor's chosen layout (the
    spec to paste) against its reference, each step's operation, strategy and cost against the
    reference choice, the totals."""
    c = cp.chain
    parts = [f"{len(c.indices)} free ind{'ex' if len(c.indices) == 1 else 'ices'}"] if c.indices else []
    parts += [f"{len(cp.layouts)} free layout{'s' * (len(cp.layouts) != 1)}"] if cp.layouts else []
    head = f"chain {c.source}: {len(c.steps)} step{'s' * (len(c.steps) != 1)}"
    lines = [f"{head}, {', '.join(parts) or 'nothing free'}, {cp.evaluated} choices planned"]
    for (index, pi), (_, size) in zip(cp.choice, c.indices):
        moved = "identity" if pi == identity(len(pi)) else "relabelled"
        lines.append(f"{index} ({size}, {moved}): bits {' '.join(str(1 << i) for i in range(len(pi)))} -> "
                     f"{' '.join(map(str, pi))}")
    for name, p in cp.layouts:
        t = c.tensor(name)
        fam = {"registers": f"{t.free.warps} warps, {t.free.per_thread} a thread", "shared": "shared",
               "global": "pre-shuffled offline"}[t.free.space]
        if p.text:
            lines.append(f"{name} (free {t.free.space}: {fam}): found as {p.label}; reference {reference_text(t)}")
            lines.append(f"  {name}: {p.text}")
            if p.offsets:
                lines.append(f"  (packed offset bit i holds the element at offset[i]; the buffer is "
                             f"{flow_yaml(preshuffle.packed_mapping(t.spec.shape))})")
        else:
            lines.append(f"{name} (free {t.free.space}: {fam}): the reference {reference_text(t)} stays")
    for k, (step, p, q) in enumerate(zip(c.steps, cp.plans, cp.identity_plans)):
        lines.append(f"step {k}: {_step_text(step)}: {_how(p)}{_vectors(p)}, cost {step_cost(p):.2f} "
                     f"(reference: {_how(q)}{_vectors(q)}, {step_cost(q):.2f})")
    lines.append(f"total cost {cp.cost:.2f} (reference {cp.identity_cost:.2f})")
    return "\n".join(lines)
