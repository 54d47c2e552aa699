"""Choosing a chain's free layouts: the relabelling of each free index that makes the
whole chain cheapest under the planner's cost model.

For a choice ``pi`` (one bit map per free index, ``description``'s module docstring
says how it applies), every step is planned by the registry exactly as ``llgen
convert`` plans it, and the chain's cost is the sum of the steps' plan costs
(``Transfer.cost``: the planner's score of the chosen plan -- shuffles, selects,
pack operations, wavefronts, sectors, barriers with the planner's weights).

The space is ``b!`` bit permutations per index (5,040 for 128 keys), too many to plan
each, and nearly all equally bad.  The F2 view gives the good ones directly:

* **Aligned candidates.**  For a step between a fixed distributed layout ``X`` and a
  relabelled one ``Y``, data crosses no lane or warp when ``pi`` maps ``Y``'s image of
  every lane and warp basis onto ``X``'s (``pi(Y(h)_d) = X(h)_d`` for the relabelled dim
  ``d``).  Matching the bases in the order lane, warp, register (each key bit of ``Y``
  to the first free key bit of ``X`` at the same hardware bit) gives one permutation per
  such step; the register order it keeps is the one byte permutes pack cheapest.
* **Local search.**  From the cheapest of identity and the aligned candidates, every
  transposition of two bits is tried; the best improvement is taken until none
  improves, for at most ``rounds`` rounds (0: the aligned candidates only).

Deterministic: candidates are tried in a fixed order and ties keep the earlier one,
so the identity wins any tie with it.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ll_codegen import api
from ll_codegen.chain.description import Chain, Step, Tensor
from ll_codegen.core import f2
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.plans import Transfer
from ll_codegen.spec import Spec

#: rounds of the transposition search by default: none (each round plans every step for up to
#: b(b-1)/2 choices, seconds per round when a step is a large relayout; the aligned candidates
#: find the known cases)
ROUNDS = 0

Choice = tuple[tuple[str, tuple[int, ...]], ...]      # (index, pi) per free index, in the chain's order


def relabel(layout: LinearLayout, dim: int, pi: Sequence[int]) -> LinearLayout:
    """``layout`` with out dim ``dim`` composed with ``pi``: where it placed ``(.., k, ..)`` the
    result places ``(.., pi(k), ..)``."""
    bases = {d: [[f2.apply(pi, v) if j == dim else v for j, v in enumerate(b)] for b in bs]
             for d, bs in layout.bases.items()}
    return LinearLayout(bases, layout.out_dim_sizes)


def identity(bits: int) -> tuple[int, ...]:
    return tuple(1 << i for i in range(bits))


@dataclass(frozen=True)
class ChainPlan:
    """The chosen relabelling of every free index, each step's plan under it, the total cost,
    and the same for the identity choice (what the chain costs with the layouts as written).
    ``evaluated``: how many distinct choices were planned, ``rounds`` of local search at most."""
    chain: Chain
    choice: Choice
    plans: tuple[Transfer, ...]
    identity_plans: tuple[Transfer, ...]
    evaluated: int
    rounds: int = ROUNDS

    @property
    def cost(self) -> float:
        return sum(p.cost for p in self.plans)

    @property
    def identity_cost(self) -> float:
        return sum(p.cost for p in self.identity_plans)

    def to_json(self, indent: int | None = 2) -> str:
        """``describe`` as JSON."""
        return json.dumps(describe(self), indent=indent)


def tensor_layout(t: Tensor, choice: dict[str, tuple[int, ...]]) -> LinearLayout:
    """A tensor's layout with every free index it carries relabelled by ``choice``."""
    L = t.spec.linear
    for dim, index in t.indices:
        L = relabel(L, dim, choice[index])
    return L


def tensor_spec(t: Tensor, choice: dict[str, tuple[int, ...]]) -> Spec:
    """The tensor's spec with its layout relabelled (the spec's other facts -- where the data
    lives, alignment, element width -- stay)."""
    return replace(t.spec, linear=tensor_layout(t, choice))


def plan_step(chain: Chain, step: Step, choice: dict[str, tuple[int, ...]]) -> Transfer:
    """One step planned by the registry under ``choice`` (as ``llgen convert`` would)."""
    return api.plan_conversion(tensor_spec(chain.tensor(step.src), choice),
                               tensor_spec(chain.tensor(step.dst), choice), dtype=step.dtype,
                               target=chain.target, arch=chain.arch, **dict(step.options))


def aligned(fixed: LinearLayout, free: LinearLayout, dim: int, bits: int) -> tuple[int, ...] | None:
    """The bit permutation ``pi`` of dim ``dim`` that maps ``free``'s image of each lane, warp
    and then register basis onto ``fixed``'s, where both are single bits of ``dim`` and
    agree on every other dim; bits left over keep their order.  None when the layouts are
    not both distributed."""
    if "lane" not in fixed.in_dims or "lane" not in free.in_dims:
        return None
    pi: dict[int, int] = {}
    for in_dim in ("lane", "warp", "register"):
        if in_dim not in fixed.in_dims or in_dim not in free.in_dims:
            continue
        for f, g in zip(fixed.bases[in_dim], free.bases[in_dim]):
            a, b = g[dim], f[dim]
            same_rest = all(x == y for j, (x, y) in enumerate(zip(f, g)) if j != dim)
            single = a and b and not a & (a - 1) and not b & (b - 1)
            if same_rest and single and a not in pi and b not in pi.values():
                pi[a] = b
    left = [1 << i for i in range(bits) if 1 << i not in pi.values()]
    free_bits = [1 << i for i in range(bits) if 1 << i not in pi]
    pi.update(zip(free_bits, left))
    return tuple(pi[1 << i] for i in range(bits))


def _aligned_candidates(chain: Chain) -> list[Choice]:
    """One candidate per step between a fixed and a relabelled distributed layout (and index)."""
    sizes = dict(chain.indices)
    out: list[Choice] = []
    for step in chain.steps:
        src, dst = chain.tensor(step.src), chain.tensor(step.dst)
        for fixed, free in ((src, dst), (dst, src)):
            for dim, index in free.indices:
                if any(i == index for _, i in fixed.indices):
                    continue
                pi = aligned(fixed.spec.linear, free.spec.linear, dim, sizes[index].bit_length() - 1)
                if pi is not None:
                    out.append(tuple((i, pi if i == index else identity(s.bit_length() - 1))
                                     for i, s in chain.indices))
    return out


class _Evaluator:
    """Plans a chain under a choice, each (step, relevant part of the choice) once."""

    def __init__(self, chain: Chain):
        self.chain = chain
        self.cache: dict[tuple[int, Choice], Transfer] = {}
        self.seen: set[Choice] = set()

    def plans(self, choice: Choice) -> tuple[Transfer, ...]:
        self.seen.add(choice)
        d = dict(choice)
        out = []
        for k, step in enumerate(self.chain.steps):
            carried = {i for name in (step.src, step.dst) for _, i in self.chain.tensor(name).indices}
            key = (k, tuple((i, p) for i, p in choice if i in carried))
            if key not in self.cache:
                try:
                    self.cache[key] = plan_step(self.chain, step, d)
                except ValueError as e:
                    raise ValueError(f"steps[{k}] ({step.src} -> {step.dst}): {e}") from None
            out.append(self.cache[key])
        return tuple(out)

    def cost(self, choice: Choice) -> float:
        return sum(p.cost for p in self.plans(choice))


def _transpositions(choice: Choice) -> list[Choice]:
    out = []
    for n, (index, pi) in enumerate(choice):
        for i in range(len(pi)):
            for j in range(i + 1, len(pi)):
                p = list(pi)
                p[i], p[j] = p[j], p[i]
                out.append(choice[:n] + ((index, tuple(p)),) + choice[n + 1:])
    return out


def plan_chain(chain: Chain, rounds: int = ROUNDS) -> ChainPlan:
    """Choose every free index's relabelling (module docstring; ``rounds`` of local search)
    and plan the chain under it.  Raises ValueError with one line when a step cannot be
    planned (naming the step)."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 0 <= rounds <= 16:
        raise ValueError(f"rounds: an integer from 0 to 16, got {rounds!r}")
    ev = _Evaluator(chain)
    start: Choice = tuple((i, identity(s.bit_length() - 1)) for i, s in chain.indices)

    def cost(c: Choice) -> float:
        try:
            return ev.cost(c)
        except ValueError:
            if c == start:
                raise
            return float("inf")                     # a relabelling a step's planner refuses

    try:
        base = cost(start)
    except ValueError as e:
        raise ValueError(f"{chain.source}: {e}") from None
    best, best_cost = start, base
    for c in _aligned_candidates(chain):
        cc = cost(c)
        if cc < best_cost:
            best, best_cost = c, cc
    for _ in range(rounds if chain.indices else 0):
        scored = [(cost(c), k, c) for k, c in enumerate(_transpositions(best)) if c not in ev.seen]
        if not scored:
            break
        cc, _, c = min(scored)
        if cc >= best_cost:
            break
        best, best_cost = c, cc
    return ChainPlan(chain, best, ev.plans(best), ev.plans(start), len(ev.seen), rounds)


def describe(cp: ChainPlan) -> dict[str, Any]:
    """Plain data of a chain plan: the choice (each index's bit images), per step the operation,
    strategy and cost under the choice and under the identity, the totals."""
    steps = []
    for step, p, q in zip(cp.chain.steps, cp.plans, cp.identity_plans):
        steps.append({"src": step.src, "dst": step.dst, "dtype": step.dtype, "operation": p.operation,
                      "strategy": p.strategy, "cost": p.cost, "identity_strategy": q.strategy,
                      "identity_cost": q.cost})
    return {"choice": {i: list(pi) for i, pi in cp.choice}, "steps": steps, "cost": cp.cost,
            "identity_cost": cp.identity_cost, "evaluated": cp.evaluated}


def _how(plan: Transfer) -> str:
    return plan.operation if plan.strategy == plan.operation else f"{plan.operation} {plan.strategy}"


def chain_summary(cp: ChainPlan) -> str:
    """The readable chain plan: each free index's choice, each step's operation, strategy and
    cost against the layouts as written (the identity choice), the totals."""
    c = cp.chain
    lines = [f"chain {c.source}: {len(c.steps)} step{'s' * (len(c.steps) != 1)}, {len(c.indices)} free "
             f"ind{'ex' if len(c.indices) == 1 else 'ices'}, {cp.evaluated} choices planned"]
    for (index, pi), (_, size) in zip(cp.choice, c.indices):
        moved = "identity" if pi == identity(len(pi)) else "relabelled"
        lines.append(f"{index} ({size}, {moved}): bits {' '.join(str(1 << i) for i in range(len(pi)))} -> "
                     f"{' '.join(map(str, pi))}")
    for k, (step, p, q) in enumerate(zip(c.steps, cp.plans, cp.identity_plans)):
        lines.append(f"step {k}: {step.src} -> {step.dst} ({step.dtype}): {_how(p)}, cost {p.cost:.2f} "
                     f"(as written: {_how(q)}, {q.cost:.2f})")
    lines.append(f"total cost {cp.cost:.2f} (as written {cp.identity_cost:.2f})")
    return "\n".join(lines)
