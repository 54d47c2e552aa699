"""Stratified samples for the host-run, emulator and PTX tests: coverage by construction.

A random sample leaves rare forms to luck (stmatrix appeared in 1 of ~860 sampled host runs).
Here every plan gets *labels* -- its strategy and access forms, read off the plan itself
(``labels``) -- and the sampler keeps drawing seeded random plans from recipes aimed at each form
(random pairs, every shared-memory candidate, register <-> lane swaps for xor shuffles, permuted
registers, small budgets for rounds, per-warp scratch, two buffers, memory tiles of every kind,
copies, gathers), keeping a plan only when it adds to a label still below its quota, until every
``required`` label has ``QUOTA`` plans.  ``test_host_run.py`` asserts the minimums, so a change to
the sampler or the planner cannot silently thin them.
"""
from __future__ import annotations

import functools
import os
import random
from collections import Counter
from dataclasses import replace
from typing import Iterator

#: plans per required label in the host-run sample by default, sized for the README's test command on
#: 2 cores (CI's 15 minutes); ``LLGEN_HOST_QUOTA=20`` (or more) for a deeper run
QUOTA = 5
#: the environment variables that set a whole-sample test's quota (``quota_from_env``)
#: (host run and PTX text: plans per required label; compile: random conversions per target and arch)
QUOTA_ENV = {"host": "LLGEN_HOST_QUOTA", "ptx": "LLGEN_PTX_QUOTA", "compile": "LLGEN_COMPILE_QUOTA"}
#: (target, arch, lanes) the sample cycles through
CONFIGS = (("cuda", "sm_80", 32), ("cuda", "sm_90", 32), ("hip", "gfx90a", 64), ("hip", "gfx940", 64),
           ("hip", "gfx1030", 32))
DTYPES = ("i8", "f16", "f32", "f64")
WIDTH = {"i8": 8, "f16": 16, "f32": 32, "f64": 64}
MEMORY_KINDS = ("shared_linear", "swizzled_shared", "nvmma_shared", "global")


def quota_from_env(sample: str, default: int) -> int:
    """The quota of a whole-sample test (``sample``: a key of ``QUOTA_ENV``): ``default``, or the
    positive integer its environment variable names (lower for a quick run, higher for a deeper one;
    whatever it is, every required label must reach it: ``shortfall``)."""
    var = QUOTA_ENV[sample]
    text = os.environ.get(var, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{var}={text!r}: expected a positive integer (plans per strategy x access form)")
    return int(text)


def required(target: str) -> set[str]:
    """The labels that must reach the quota for ``target``."""
    out = {f"{target}:register:{b}bit" for b in (8, 16, 32, 64)}
    out |= {f"{target}:shuffle:{f}" for f in ("xor", "idx", "select-tree", "swap-stages")}
    out |= {f"{target}:smem:{side}{n}B" for side in ("st", "ld") for n in (1, 2, 4, 8, 16)}
    out |= {f"{target}:smem:{f}" for f in ("multi-round", "per-warp", "two-buffers")}
    out |= {f"{target}:{d}:{k}" for d in ("store", "load") for k in MEMORY_KINDS}
    out |= {f"{target}:gather:shuffle", f"{target}:gather:smem", f"{target}:copy:sync"}
    if target == "cuda":
        out |= {f"cuda:smem:{m}" for m in ("stmatrix", "stmatrix.trans", "ldmatrix", "ldmatrix.trans")}
        out.add("cuda:shuffle:fused")
        out.add("cuda:copy:async")
    return out


def labels(plan, kind: str | None = None) -> set[str]:
    """The strategy and access forms of a plan (``kind``: a memory plan's tile kind, which the
    plan does not record)."""
    t, op = plan.target, plan.operation
    out: set[str] = set()
    if op == "gather":
        return {f"{t}:gather:{plan.strategy}"}
    if op == "copy":
        return {f"{t}:copy:{'async' if plan.async_copy else 'sync'}"}
    if op in ("store", "load"):
        out.add(f"{t}:{op}:{kind or plan.memory.space}")
        plan = plan.via or plan
        if plan.operation in ("store", "load"):
            return out
    if plan.strategy == "register":
        out.add(f"{t}:register:{8 * plan.elem_bytes}bit")
    s = plan.shuffle
    if s is not None:
        out.add(f"{t}:shuffle:{'xor' if s.src_lane is None else 'idx'}")
        if (s.send_select.size > 1 and not s.send_fused) or (s.recv_select.size > 1 and not s.recv_fused):
            out.add(f"{t}:shuffle:{'swap-stages' if s.send_swaps or s.recv_swaps else 'select-tree'}")
        if s.send_fused or s.recv_fused:
            out.add(f"{t}:shuffle:fused")
    m = plan.smem
    if m is not None:
        for side, instr, vec in (("st", m.store_instr, m.store_vec), ("ld", m.load_instr, m.load_vec)):
            if instr.startswith("matrix"):
                out.add(f"{t}:smem:{side}matrix{'.trans' if instr.endswith('trans') else ''}")
            else:
                out.add(f"{t}:smem:{side}{vec * plan.elem_bytes}B")
        if len(m.rounds) > 1:
            out.add(f"{t}:smem:multi-round")
        if m.per_warp:
            out.add(f"{t}:smem:per-warp")
        if m.buffers == 2:
            out.add(f"{t}:smem:two-buffers")
    return out


# ------------------------------------------------------------------ recipes
def _pair(rng: random.Random, lanes: int, same_warps=None):
    from ll_codegen.testing.corpus import random_pair
    return random_pair(rng, lanes=lanes, same_warps=same_warps)


def _swapped(rng: random.Random, lanes: int):
    """A pair whose destination swaps one or two register bases with lane bases of the source:
    data moves between lanes by a fixed xor (xor-form shuffles)."""
    from ll_codegen.testing.corpus import random_layout
    from ll_codegen.core.layout import LinearLayout
    warps = 1 << rng.randint(0, 3)
    total = lanes.bit_length() - 1 + warps.bit_length() - 1 + rng.randint(1, 5)
    d0 = rng.randint(0, total)
    shape = {"dim0": 1 << d0, "dim1": 1 << (total - d0)}
    src = random_layout(rng, shape, lanes, warps)
    reg, lane, warp = (list(src.flat_bases(d)) for d in ("register", "lane", "warp"))
    for _ in range(rng.randint(1, 2)):
        i, j = rng.randrange(len(reg)), rng.randrange(len(lane))
        reg[i], lane[j] = lane[j], reg[i]
    return src, LinearLayout.from_flat({"register": reg, "lane": lane, "warp": warp, "block": []}, shape,
                                       require_surjective=True)


def _permuted(rng: random.Random, lanes: int):
    """A pair with the same lanes and warps whose registers are permuted (a register plan)."""
    from ll_codegen.core.layout import LinearLayout
    src, _ = _pair(rng, lanes)
    reg = list(src.flat_bases("register"))
    while len(reg) > 1 and reg == list(src.flat_bases("register")):
        rng.shuffle(reg)
    dst = LinearLayout.from_flat({"register": reg, "lane": list(src.flat_bases("lane")),
                                  "warp": list(src.flat_bases("warp")), "block": []}, src.out_dim_sizes,
                                 require_surjective=True)
    return src, dst


def conversions(rng: random.Random, target: str, arch: str, lanes: int, dtype: str, recipe: int) -> list:
    """The plans of one draw of conversion recipe ``recipe``."""
    from ll_codegen.api import plan_conversion
    from ll_codegen.core.target import get_target
    from ll_codegen.plan import swizzle as sw
    from ll_codegen.plan.planner import DTYPE_BYTES, normalise
    from ll_codegen.plan.shuffle import plan_shuffle, swap_form

    def plan(src, dst, **kw):
        try:
            return [plan_conversion(src, dst, dtype, target, arch, **kw)]
        except ValueError:                     # an illegal forced strategy, a budget below one round
            return []
    if recipe == 0:
        src, dst = _pair(rng, lanes)
        return plan(src, dst) + plan(src, dst, strategy="smem", swizzle="none")
    if recipe == 1:                            # every shared-memory candidate (ldmatrix/stmatrix pairings)
        src, dst = _pair(rng, lanes)
        base = plan(src, dst, strategy="smem")
        if not base:
            return []
        norm = [normalise(L) for L in (src, dst)]
        return [replace(base[0], smem=mp)
                for mp in sw.plan_smem(norm[0], norm[1], DTYPE_BYTES[dtype], get_target(target, arch), "optimal")]
    if recipe in (2, 3):                       # shuffles in both forms: select trees and swap stages
        src, dst = _pair(rng, lanes, same_warps=True) if recipe == 2 else _swapped(rng, lanes)
        base = plan(src, dst, strategy="shuffle")
        if not base:
            return []
        trees = plan_shuffle(normalise(src), normalise(dst), DTYPE_BYTES[dtype])
        return [replace(base[0], shuffle=trees), replace(base[0], shuffle=swap_form(trees))]
    if recipe == 4:
        return plan(*_permuted(rng, lanes), strategy="register")
    src, dst = _pair(rng, lanes, same_warps=True)
    if recipe == 5:                            # rounds: a budget below the whole exchange
        full = plan(src, dst, strategy="smem")
        return plan(src, dst, strategy="smem", smem_budget=max(16, full[0].smem.bytes // 4)) if full else []
    return plan(src, dst, strategy="smem", scratch_per_warp=True) + plan(src, dst, strategy="smem", scratch_buffers=2)


def memory(rng: random.Random, target: str, arch: str, lanes: int, dtype: str, kind: str, direction: str):
    """A random distributed layout stored to / loaded from a random ``kind`` tile."""
    from ll_codegen.testing.corpus import random_layout, random_memory_tile
    from ll_codegen.plan.planner import DTYPE_BYTES, plan_memory
    warps = 1 << rng.randint(0, 3)
    total = lanes.bit_length() - 1 + warps.bit_length() - 1 + rng.randint(0, 5)
    d0 = rng.randint(0, total)
    shape = {"dim0": 1 << d0, "dim1": 1 << (total - d0)}
    dist = random_layout(rng, shape, lanes, warps)
    spec, tile = random_memory_tile(rng, shape, DTYPE_BYTES[dtype], kind)
    space = "global" if kind == "global" else "shared"
    return plan_memory(dist, tile, direction, space, dtype, target, arch,
                       alignment=spec["alignment"] if space == "global" else 16)


def copy(rng: random.Random, target: str, arch: str, lanes: int, dtype: str):
    from ll_codegen.testing.corpus import random_memory_tile
    from ll_codegen.plan.planner import DTYPE_BYTES, plan_copy
    total = rng.randint(3, 12)
    d0 = rng.randint(0, total)
    shape = {"dim0": 1 << d0, "dim1": 1 << (total - d0)}
    gspec, gtile = random_memory_tile(rng, shape, DTYPE_BYTES[dtype], "global")
    _, stile = random_memory_tile(rng, shape, DTYPE_BYTES[dtype], rng.choice(MEMORY_KINDS[:3]))
    return plan_copy(gtile, stile, dtype, target, arch, alignment=gspec["alignment"], num_warps=1 << rng.randint(0, 3))


def gathers(rng: random.Random, target: str, arch: str, lanes: int, dtype: str) -> list:
    from ll_codegen.testing.corpus import random_gather_pair
    from ll_codegen.plan.gather import plan_gather
    src, idx, axis = random_gather_pair(rng, lanes, local=rng.random() < 0.5)
    out = []
    for st in ("shuffle", "smem"):
        try:
            p = plan_gather(src, idx, axis, dtype, rng.choice(("i32", "u8", "i16")), target, arch, strategy=st)
        except ValueError:                     # not warp-local: no shuffle plan
            continue
        # a forced shuffle over hundreds of candidate registers renders megabytes of selects (auto
        # would take shared memory): not a form of its own, only compile time
        if p.shuffle is None or sum(len(o.cands) for o in p.shuffle.outs) <= 256:
            out.append(p)
    return out


#: the labels (prefixes after "<target>:") each conversion recipe aims at
RECIPES = (("smem:", "shuffle:"), ("smem:",), ("shuffle:",), ("shuffle:",), ("register:",), ("smem:multi-round",),
           ("smem:per-warp", "smem:two-buffers"))


def draws(rng: random.Random, wanted) -> Iterator[tuple[object, str | None]]:
    """(plan, memory kind or None), endlessly: the recipes, configs and dtypes cycle; a recipe
    none of whose labels ``wanted(target, prefixes)`` still wants is skipped."""
    k = 0
    while True:
        target, arch, lanes = CONFIGS[k % len(CONFIGS)]
        dtype = DTYPES[k // len(CONFIGS) % len(DTYPES)]
        step = k % 11
        k += 1
        if step < 7:
            if wanted(target, RECIPES[step]):
                for p in conversions(rng, target, arch, lanes, dtype, step):
                    yield p, None
        elif step == 7:
            kind, direction = MEMORY_KINDS[k // 11 % len(MEMORY_KINDS)], ("store", "load")[k // 44 % 2]
            if wanted(target, (f"{direction}:{kind}",)):
                yield memory(rng, target, arch, lanes, dtype, kind, direction), kind
        elif step == 8:
            if wanted(target, ("copy:",)):
                yield copy(rng, target, arch, lanes, dtype if target == "cuda" or k % 2 else "i8"), None
        elif wanted(target, ("gather:",)):
            for p in gathers(rng, target, arch, lanes, dtype):
                yield p, None
        yield None, None                       # lets the caller count draws (and stop) between recipes


@functools.lru_cache(maxsize=None)
def sample(seed: int, quota: int = QUOTA, targets: tuple[str, ...] = ("cuda", "hip"),
           max_draws: int = 20000) -> tuple[tuple[str, object, frozenset[str]], ...]:
    """(name, plan, labels) until every required label of ``targets`` has ``quota`` plans (or
    ``max_draws`` plans were drawn: the minimum test then names what is missing).  A plan is kept
    only if one of its labels is still short."""
    rng = random.Random(seed)
    need = {x for t in targets for x in required(t)}
    have: Counter = Counter()
    out = []

    def wanted(target: str, prefixes: tuple[str, ...]) -> bool:
        return any(x.startswith(f"{target}:{p}") and have[x] < quota for x in need for p in prefixes)
    for n, (plan, kind) in enumerate(draws(rng, wanted)):
        if n >= max_draws or all(have[x] >= quota for x in need):
            break
        if plan is None or plan.target not in targets:
            continue
        mine = labels(plan, kind)
        if not any(have[x] < quota for x in mine if x in need):
            continue
        have.update(mine)
        out.append((f"s{len(out):03d}_{plan.arch}_{plan.operation}_{plan.dtype}", plan, frozenset(mine)))
    return tuple(out)


def counts(items) -> Counter:
    """Plans per label of a sample."""
    c: Counter = Counter()
    for _, _, mine in items:
        c.update(mine)
    return c


def shortfall(items, quota: int = QUOTA, targets: tuple[str, ...] = ("cuda", "hip")) -> dict[str, int]:
    """Required labels below the quota, with their counts."""
    c = counts(items)
    return {x: c[x] for t in targets for x in sorted(required(t)) if c[x] < quota}
