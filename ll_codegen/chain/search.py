"""Choosing a chain's free layouts -- the relabelling of each free index and the layout of
each free tensor -- that make the whole chain cheapest under the planner's cost model.

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

**Free tensors** (``candidates``' module docstring: the layouts an adjacent step
already wants) are chosen by coordinate descent: in chain order, each free tensor's
candidates -- computed from its neighbours' layouts under the current choice -- are
planned with every other choice held, and the cheapest kept.  A pass is the aligned
relabellings, then every free tensor; passes repeat while one improves the chain, at
most ``passes`` times (a chosen layout can make a neighbour's candidates better).

The *reference* is the identity relabelling with every free tensor at its family's
reference layout (``description``); the chosen total is never above it.

Deterministic: candidates are tried in a fixed order and ties keep the earlier one,
so the reference wins any tie with it.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ll_codegen import api
from ll_codegen.chain import preshuffle
from ll_codegen.chain.candidates import (
    Neighbour,
    Placement,
    global_candidates,
    register_candidates,
    shared_candidates,
)
from ll_codegen.chain.description import Chain, Step, Tensor
from ll_codegen.core import f2
from ll_codegen.core.dtypes import dtype_bits
from ll_codegen.core.layout import LinearLayout, layout_of
from ll_codegen.core.target import get_target
from ll_codegen.plan import planner, upcast
from ll_codegen.plan.plans import Transfer
from ll_codegen.spec import Spec

#: rounds of the transposition search by default: none (each round plans every step for up to
#: b(b-1)/2 choices, seconds per round when a step is a large relayout; the aligned candidates
#: find the known cases)
ROUNDS = 0
#: passes of the coordinate descent over the relabellings and the free tensors at most
PASSES = 3

Choice = tuple[tuple[str, tuple[int, ...]], ...]      # (index, pi) per free index, in the chain's order
Layouts = tuple[tuple[str, Placement], ...]           # (tensor, its layout) per free tensor, in the chain's order


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
    """The chosen relabelling of every free index and layout of every free tensor (``layouts``),
    each step's plan under them, the total cost, and the same for the reference choice
    (``identity_plans``: the identity relabelling, every free tensor at its reference layout).
    ``evaluated``: how many distinct choices were planned, ``rounds`` of local search at most."""
    chain: Chain
    choice: Choice
    plans: tuple[Transfer, ...]
    identity_plans: tuple[Transfer, ...]
    evaluated: int
    rounds: int = ROUNDS
    layouts: Layouts = ()

    @property
    def cost(self) -> float:
        return sum(map(step_cost, self.plans))

    @property
    def identity_cost(self) -> float:
        return sum(map(step_cost, self.identity_plans))


def step_cost(plan: Any) -> float:
    """A step's cost in the chain: its plan's score; an mma's is 0 (the same instructions under
    every choice: it constrains the free layouts, a choice its planner refuses is never taken)."""
    return 0.0 if plan.operation == "mma" else plan.cost


def tensor_layout(t: Tensor, choice: dict[str, tuple[int, ...]],
                  layouts: dict[str, Placement] | None = None) -> LinearLayout:
    """A tensor's layout under a choice: a free tensor's chosen layout (its reference when
    ``layouts`` has none), a fixed one's with every free index it carries relabelled."""
    return tensor_spec(t, choice, layouts).linear


def tensor_spec(t: Tensor, choice: dict[str, tuple[int, ...]], layouts: dict[str, Placement] | None = None) -> Spec:
    """The tensor's spec under a choice: a free tensor's chosen spec, or the spec with its layout
    relabelled (the spec's other facts -- where the data lives, alignment, element width -- stay)."""
    if t.free is not None:
        return layouts[t.name].spec if layouts and t.name in layouts else t.spec
    if not t.indices:
        return t.spec
    L = t.spec.linear
    for dim, index in t.indices:
        L = relabel(L, dim, choice[index])
    return replace(t.spec, linear=L)


def hardware_spec(t: Tensor, layouts: dict[str, Placement] | None = None) -> Spec:
    """The layout the kernel holds ``t`` in: as written, or a free tensor's chosen layout (no
    relabelling: that only renames the logical elements the hardware holds)."""
    return tensor_spec(t, {}, layouts) if t.free is not None else t.spec


def preshuffled(t: Tensor, layouts: dict[str, Placement] | None) -> Placement | None:
    """``t``'s pre-shuffled layout under ``layouts`` (a free global tensor off its reference), else None."""
    p = (layouts or {}).get(t.name) if t.free is not None and t.free.space == "global" else None
    return p if p is not None and p.offsets else None


def step_specs(chain: Chain, step: Step, choice: dict[str, tuple[int, ...]],
               layouts: dict[str, Placement] | None = None) -> tuple[Spec, Spec]:
    """The (source, destination) specs a step is planned between under a choice.  A pre-shuffled
    side is planned in the packed frame (``preshuffle``): its packed buffer, and the register
    side as ``G^-1 o R`` over it -- the same registers, read from the packed offsets."""
    src, dst = chain.tensor(step.src), chain.tensor(step.dst)
    a, b = tensor_spec(src, choice, layouts), tensor_spec(dst, choice, layouts)
    if (p := preshuffled(src, layouts)) is not None:
        b = preshuffle.packed_registers(b.linear, p.offsets, f"{chain.source}: {dst.name} (packed frame)")
    if (p := preshuffled(dst, layouts)) is not None:
        a = preshuffle.packed_registers(a.linear, p.offsets, f"{chain.source}: {src.name} (packed frame)")
    return a, b


def plan_step(chain: Chain, step: Step, choice: dict[str, tuple[int, ...]],
              layouts: dict[str, Placement] | None = None) -> Any:
    """One step planned by the registry under a choice, as ``llgen convert`` (``llgen mma``,
    ``llgen reduce``) would; an mma or a reduction on its tensors' hardware layouts (as written,
    or a free tensor's choice: ``description``'s module docstring)."""
    opts = dict(step.options)
    if step.op == "move":
        a, b = step_specs(chain, step, choice, layouts)
        return api.plan_conversion(a, b, dtype=step.dtype, target=chain.target, arch=chain.arch, **opts)
    hw = {n: hardware_spec(chain.tensor(n), layouts) for n in step.names}
    if step.op == "mma":
        return api.plan_mma(hw[step.dst], hw[step.src], hw[step.b], step.dtype, opts["acc_dtype"], chain.target,
                            chain.arch)
    plan = api.plan_reduce(hw[step.src], opts["dims"], opts["combine"], step.dtype, chain.target, chain.arch,
                           opts.get("barrier"))
    if layout_of(plan.dst_bases).bases != hw[step.dst].linear.bases:
        raise ValueError(f"{step.dst} is not the slice layout of {step.src} over dims {list(opts['dims'])} (the "
                         f"reduction's result): give it as a slice spec of {step.src}'s layout")
    return plan


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


def _aligned_candidates(chain: Chain, layouts: dict[str, Placement]) -> list[Choice]:
    """One candidate per step between a fixed and a relabelled distributed layout (and index);
    a free tensor's side is its layout under ``layouts``."""
    sizes = dict(chain.indices)
    out: list[Choice] = []
    for step in (s for s in chain.steps if s.op == "move"):
        src, dst = chain.tensor(step.src), chain.tensor(step.dst)
        for fixed, free in ((src, dst), (dst, src)):
            for dim, index in free.indices:
                if any(i == index for _, i in fixed.indices):
                    continue
                pi = aligned(tensor_layout(fixed, {}, layouts), free.spec.linear, dim, sizes[index].bit_length() - 1)
                if pi is not None:
                    out.append(tuple((i, pi if i == index else identity(s.bit_length() - 1))
                                     for i, s in chain.indices))
    return out


State = tuple[Choice, Layouts]


class _Evaluator:
    """Plans a chain under a choice, each (step, relevant part of the choice) once."""

    def __init__(self, chain: Chain):
        self.chain = chain
        self.cache: dict[tuple, Transfer] = {}
        self.seen: set[State] = set()

    def _key(self, k: int, step: Step, state: State) -> tuple:
        carried = ({i for name in step.names for _, i in self.chain.tensor(name).indices} if step.op == "move"
                   else set())                      # an mma or reduce is planned on hardware layouts
        lay = dict(state[1])
        return (k, tuple((i, p) for i, p in state[0] if i in carried),
                tuple(lay[n].key for n in step.names if n in lay))

    def _plan(self, k: int, step: Step, state: State) -> Transfer:
        key = self._key(k, step, state)
        if key not in self.cache:
            try:
                self.cache[key] = plan_step(self.chain, step, dict(state[0]), dict(state[1]))
            except ValueError as e:
                raise ValueError(f"steps[{k}] ({step.src} -> {step.dst}): {e}") from None
        return self.cache[key]

    def plans(self, state: State) -> tuple[Transfer, ...]:
        self.seen.add(state)
        return tuple(self._plan(k, step, state) for k, step in enumerate(self.chain.steps))

    def cost(self, state: State, bound: float = float("inf")) -> float:
        """The chain's cost under ``state``, or infinity as soon as the steps planned so far plus
        the floors of the others (``floor``) reach ``bound``: such a state cannot be cheaper
        than ``bound``, and its expensive steps (global accesses) are never planned.  Steps
        already planned are summed first, then the unplanned ones, global accesses last."""
        self.seen.add(state)
        lay = dict(state[1])
        known, todo = 0.0, []
        for k, step in enumerate(self.chain.steps):
            if self._key(k, step, state) in self.cache:
                known += step_cost(self._plan(k, step, state))
            else:
                todo.append((floor(self.chain, step, lay), k, step))
        todo.sort(key=lambda x: (x[0] > 0, x[1]))
        rest = sum(f for f, _, _ in todo)
        for f, k, step in todo:
            if known + rest >= bound:
                return float("inf")
            known += step_cost(self._plan(k, step, state))
            rest -= f
        return known


def floor(chain: Chain, step: Step, layouts: dict[str, Placement]) -> float:
    """A lower bound of a step's cost under the planner's weights: for a load or store between
    registers and a global tile, each warp moves at least ``tile bytes / warps``, in 32-byte
    sectors (``SECTOR`` each) by instructions of at most ``warp size x 16`` bytes (``ALU``
    each); 0 for every other step."""
    src, dst = chain.tensor(step.src), chain.tensor(step.dst)
    spaces = [t.spec.layout.space if t.free is None else t.free.space for t in (src, dst)]
    if step.op != "move" or "global" not in spaces or "registers" not in spaces:
        return 0.0
    regs = tensor_layout(src if spaces[0] == "registers" else dst, {}, layouts)
    target = get_target(chain.target, chain.arch)
    share = (dtype_bits(step.dtype) << regs.total_out_size_log2) // 8 // regs.in_dim_size("warp")
    return planner.SECTOR * -(-share // 32) + planner.ALU * -(-share // (target.warp_size * target.max_vector_bytes))


def reference(t: Tensor) -> Placement:
    """A free tensor's reference layout (its spec) as a placement."""
    return Placement("reference", "", t.spec)


def neighbours(chain: Chain, t: Tensor, state: State) -> list[Neighbour]:
    """The tensors one step from ``t``, each with its layout under ``state``, in step order."""
    d, lay = dict(state[0]), dict(state[1])
    out = []
    for step in (s for s in chain.steps if s.op == "move"):
        for me, other in ((step.src, step.dst), (step.dst, step.src)):
            if me == t.name and other != t.name:
                warps = dict(step.options).get("warps") or 4
                layout = tensor_layout(chain.tensor(other), d, lay)
                if step.dst_dtype and me == step.src:       # an upcast reads its own register order
                    layout = upcast.input_layout(layout, step.dtype, step.dst_dtype)
                out.append(Neighbour(other, layout, step.bits(me), other == step.src, warps))
    return out


def free_candidates(chain: Chain, t: Tensor, state: State, memo: dict | None = None) -> list[Placement]:
    """The candidate layouts of free tensor ``t`` given the others' under ``state`` (``memo``:
    a dict keeping them per neighbourhood, for a search that asks again)."""
    near = neighbours(chain, t, state)
    if memo is not None:
        key = (t.name, tuple(near))
        if key not in memo:
            memo[key] = free_candidates(chain, t, state)
        return memo[key]
    target = get_target(chain.target, chain.arch)
    if t.free.space == "registers":
        return register_candidates(t.name, t.free, t.spec.shape, near, target, chain.source)
    if t.free.space == "global":
        return global_candidates(t.name, t.spec.shape, near, chain.source)
    dtype = next(s.dtype for s in chain.steps if t.name in s.names)
    return shared_candidates(t.name, t.spec.shape, dtype, near, target, chain.source)


def _transpositions(choice: Choice) -> list[Choice]:
    out = []
    for n, (index, pi) in enumerate(choice):
        for i in range(len(pi)):
            for j in range(i + 1, len(pi)):
                p = list(pi)
                p[i], p[j] = p[j], p[i]
                out.append(choice[:n] + ((index, tuple(p)),) + choice[n + 1:])
    return out


def _with(layouts: Layouts, name: str, p: Placement) -> Layouts:
    return tuple((n, p if n == name else q) for n, q in layouts)


def plan_chain(chain: Chain, rounds: int = ROUNDS, passes: int = PASSES) -> ChainPlan:
    """Choose every free index's relabelling and every free tensor's layout (module docstring;
    ``passes`` of coordinate descent, then ``rounds`` of transpositions) and plan the chain
    under them.  Raises ValueError with one line when a step cannot be planned under the
    reference choice (naming the step)."""
    for name, v, most in (("rounds", rounds, 16), ("passes", passes, 8)):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= most:
            raise ValueError(f"{name}: an integer from 0 to {most}, got {v!r}")
    ev = _Evaluator(chain)
    free = [t for t in chain.tensors if t.free is not None]
    start: State = (tuple((i, identity(s.bit_length() - 1)) for i, s in chain.indices),
                    tuple((t.name, reference(t)) for t in free))

    def cost(c: State, bound: float = float("inf")) -> float:
        try:
            return ev.cost(c, bound)
        except ValueError:
            if c == start:
                raise
            return float("inf")                     # a choice a step's planner refuses

    try:
        base = cost(start)
    except ValueError as e:
        raise ValueError(f"{chain.source}: {e}") from None
    best, best_cost = start, base

    def consider(c: State) -> None:
        nonlocal best, best_cost
        if c in ev.seen:
            return
        cc = cost(c, best_cost)
        if cc < best_cost:
            best, best_cost = c, cc
    memo: dict = {}
    for _ in range(passes if chain.indices or free else 0):
        before = best
        for c in _aligned_candidates(chain, dict(best[1])):
            consider((c, best[1]))
        for t in free:
            for p in free_candidates(chain, t, best, memo):
                consider((best[0], _with(best[1], t.name, p)))
        if best == before:
            break
    for _ in range(rounds if chain.indices else 0):
        scored = [(cost((c, best[1]), best_cost), k, c) for k, c in enumerate(_transpositions(best[0]))
                  if (c, best[1]) not in ev.seen]
        if not scored:
            break
        cc, _, c = min(scored)
        if cc >= best_cost:
            break
        best, best_cost = (c, best[1]), cc
    return ChainPlan(chain, best[0], ev.plans(best), ev.plans(start), len(ev.seen), rounds, best[1])
