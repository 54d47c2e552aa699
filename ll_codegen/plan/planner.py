"""Choose and build a conversion plan between two distributed layouts.

Classification (paper 000 §5.4, seed 002 "Generic layout conversion"): the
conversion ``C = dst⁻¹ ∘ src`` (``src.invert_and_compose(dst)``, minimal
Hamming weight; a column where src and dst agree -- zeros included -- is the
identity, the paper's rule 1) is reduced like Triton's minimalCvtLayout:
if ``C`` is the identity on ``block`` (else: not supported), then on
``warp`` (else data crosses warps: ``smem``), then on ``lane`` (else
``shuffle``), then on ``register`` (else ``register``; identity: ``noop``).
A strategy is legal when its level is at or above the classified one: smem is
always legal, shuffle when no data crosses warps, register when none crosses
lanes.  ``C`` not the identity on ``warp`` may still move no data between warps: where every
warp already holds what the destination's same warp needs (``shuffle.held_per_warp``: a slice
whose warps hold copies), shuffle is legal too, its selects and source lane depending on the
warp id (``shuffle.per_warp``).  A staged plan (``shuffle+smem``: warp shuffles to a layout in between,
then smem; ``staged.py``) is a candidate whenever data crosses lanes, one per
layout in between, scored as the sum of its two steps; a butterfly (``butterfly``: a
chain of shuffle steps, each exchanging one lane bit with one register bit, so half of
every thread's words cross lanes a step; ``butterfly.py``) whenever data crosses lanes
but not warps and the two layouts hold the same nonzero bases, scored as the sum of
its steps.

Cost model for ``auto`` (units: SM issue slots per warp; seed 001's
three-term model specialised to conversions): every shared-memory wavefront
costs ``WAVEFRONT`` = 1 (128 B/clk/SM; a ``stmatrix`` wavefront ``STMATRIX``),
every shuffle ``SHUFFLE`` = 1 (one warp instruction per clock per SM), every
lane-dependent select of a shuffle plan ``SELECT`` = 0.5 (Hopper's integer pipe
issues two warp instructions per clock per SM; HIP: ``ALU``, as AMD issues a
v_cndmask_b32 like the v_perm_b32 of a fused word), every
pack or shared-memory instruction ``ALU``, and a barrier ``BARRIER``
slots (``WARP_BARRIER`` for the warp-scope stores->loads barrier of a
warp-local plan).  The cheapest legal candidate wins (on ties: fewer shared-memory
loads, then the first: vector before matrix); all candidates are reported with their scores.

Calibration (``bench/RESULTS.md``, H100): every candidate of the benchmark
pairs was timed (``bench/bench_convert.py``) and the weights grid-searched
(``bench/calibrate.py``).  With the generated code of today (8/16-bit data
moved as packed 32-bit words) ``ALU = 0.25`` picks the fastest strategy on
27/29 pairs and the fastest candidate (within 3%) on 24/29 (fair benchmark,
2026-11-25);
``SELECT = 0.5`` (2026-11-25, with the swap-stage shuffles: the warp-local
transposes' 48 selects a warp made a round trip of two shuffle plans SEL-bound,
196 clocks against 133 through shared memory, where ALU = 0.25 had picked the
shuffles); with the pack ops counted as rendered the weights pick the fastest
candidate on 25/33 pairs and the fastest strategy on 30/33 of that run;
a fused lane-dependent word (``shuffle.fuse_form``) is its permutes at ``ALU``: with them auto
was the fastest candidate or within 1% of it on 7 of the 8 8-bit and warp-local pairs, every
candidate timed (H200, 2026-11-26, ``bench/results_candidates_h200.json``);
``STMATRIX = 1.25`` breaks ties between a stmatrix store + vector load and a
vector store + ldmatrix load of equal wavefronts towards the latter, which
measured 3-12% faster on three pairs (and 6% slower on one).
"""
from __future__ import annotations

from typing import Callable

from dataclasses import replace
from functools import lru_cache

from ll_codegen.core import f2
from ll_codegen.core.dtypes import DTYPE_BYTES, dtype_bytes
from ll_codegen.core.layout import LinearLayout, divide_left
from ll_codegen.core.limits import short
from ll_codegen.plan.memory import coalesced_threads, copy_threads, global_order, global_plan, shared_plans, skip_mask
from ll_codegen.plan.model import Barrier, Candidate, RegisterPlan, ShufflePlan, SmemPlan, instruction_name, shuffle_name, word_view
from ll_codegen.plan.plans import AccessPlan, ConvertPlan, CopyPlan, LoadPlan, StorePlan, without_via
from ll_codegen.plan.shuffle import (NotShuffleable, fuse_form, held_per_warp, plan_shuffle, shuffle_plans,
                                    swap_form)
from ll_codegen.plan.staged import mid_layouts
from ll_codegen.plan.butterfly import butterfly_chain
from ll_codegen.plan.swizzle import plan_smem
from ll_codegen.core.target import Target, get_target

DEFAULT_SMEM_BUDGET = 48 * 1024      # bytes of scratch a conversion may use unless told otherwise
STRATEGIES = ("noop", "register", "shuffle", "smem")
STAGED = "shuffle+smem"     # warp shuffles to a layout in between, then smem (plan/staged.py): legal with shuffle/smem
BUTTERFLY = "butterfly"     # a chain of shuffle steps, one lane bit <-> register bit each (plan/butterfly.py)
WAVEFRONT, SHUFFLE, ALU, BARRIER, STMATRIX = 1.0, 1.0, 0.25, 4.0, 1.25
SELECT = 0.5            # a lane-dependent select of a shuffle plan (SEL: Hopper's INT pipe, 2 warp instructions/clk/SM)
WARP_BARRIER = 4.0      # __syncwarp(): waits for no other warp; priced as a block barrier until measured
#: a 32-byte global sector through L2, in SM clocks: an H100's L2 moves about 5.5 TB/s, 21 B per clock
#: per SM at 1.98 GHz over 132 SMs, so a sector is about 1.5 clocks (derived, not yet calibrated)
SECTOR = 1.5


def check_distributed(name: str, L: LinearLayout) -> None:
    """ValueError unless ``L`` is a distributed layout (register and lane dims, no offset)."""
    if not {"register", "lane"} <= set(L.in_dims) or "offset" in L.in_dims:
        raise ValueError(f"the {name} layout is not a distributed layout (needs register/lane dims)")


def check_threads(name: str, L: LinearLayout, target: Target, what: str = "conversions") -> None:
    """ValueError unless ``L``'s warps have ``target``'s size and it stays within one CTA."""
    if L.in_dim_size("lane") != target.warp_size:
        raise ValueError(f"the {name} layout has {L.in_dim_size('lane')} lanes but target {target.name} "
                         f"{target.arch} has warp size {target.warp_size}")
    if L.in_dim_size("block") != 1:
        raise ValueError(f"{what} across CTAs (block size > 1) are not supported")


def _dims_ok(src: LinearLayout, dst: LinearLayout, target: Target) -> None:
    for name, L in (("source", src), ("destination", dst)):
        check_distributed(name, L)
    if src.out_dim_sizes != dst.out_dim_sizes:
        raise ValueError(f"shapes differ: source {src.out_dim_sizes} vs destination {dst.out_dim_sizes}")
    for d in ("lane", "warp", "block"):
        if src.in_dim_size(d) != dst.in_dim_size(d):
            raise ValueError(f"{d} counts differ: source {src.in_dim_size(d)} vs destination {dst.in_dim_size(d)}")
    check_threads("source", src, target)


def normalise(L: LinearLayout) -> LinearLayout:
    return L.with_in_dims({d: L.in_dim_size(d) for d in ("register", "lane", "warp", "block")})


def conversion_layout(src: LinearLayout, dst: LinearLayout) -> LinearLayout:
    """``dst⁻¹ ∘ src`` with the identity wherever src and dst share a column."""
    conv = src.invert_and_compose(dst)
    bases = conv.bases
    for d in src.in_dims:
        for i, (a, b) in enumerate(zip(src.bases[d], dst.bases.get(d, []))):
            if a == b:
                bases[d][i] = [1 << i if e == d else 0 for e in conv.out_dims]
    return LinearLayout(bases, conv.out_dim_sizes, require_surjective=False)


@lru_cache(maxsize=1 << 10)            # pure; a caller that chose the strategy by it plans the pair next
def classify(src: LinearLayout, dst: LinearLayout) -> str:
    """The lowest level at which data must move: noop, register, shuffle or smem."""
    conv = conversion_layout(src, dst)
    rest = conv
    for level, dim in (("smem", "warp"), ("shuffle", "lane"), ("register", "register")):
        rest = divide_left(rest, _identity(conv, dim))
        if rest is None:
            return level
    return "noop"


def _identity(conv: LinearLayout, dim: str) -> LinearLayout:
    n = conv.in_dim_size(dim)
    if n != conv.out_dim_size(dim):
        return LinearLayout.identity_1d(1, dim, dim) * LinearLayout.zeros_1d(2, dim, dim, 2)  # never divides
    return LinearLayout.identity_1d(n, dim, dim)


def register_plan(src: LinearLayout, dst: LinearLayout) -> RegisterPlan:
    """``dst[i] = src[j]`` with ``src_reg(j) = dst_reg(i)``; needs equal lane and warp columns."""
    a = f2.Solver(src.flat_bases("register"))
    held = LinearLayout({"register": src.bases["register"]}, src.out_dim_sizes,
                        require_surjective=False).apply_flat()
    out = []
    for i, x in enumerate(LinearLayout({"register": dst.bases["register"]}, dst.out_dim_sizes,
                                       require_surjective=False).apply_flat()):
        # keep a register in place when it already holds the element (broadcast
        # gives several sources; staying put makes equal layouts a true noop)
        j = i if i < len(held) and held[i] == x else a.solve(int(x))
        if j is None:
            raise ValueError("register plan impossible: data crosses lanes")
        out.append(j)
    return RegisterPlan(tuple(out))


def _canonical_copies(dst: LinearLayout) -> tuple[tuple[int, int], ...]:
    """(dst, from) for registers that duplicate a lower one (zero/dependent bases)."""
    reg = dst.flat_bases("register")
    keep = set(f2.independent_subset(reg))
    free = sum(1 << i for i in range(len(reg)) if i not in keep)
    solver = f2.Solver([reg[i] for i in sorted(keep)])
    kept = sorted(keep)
    out = []
    for r in range(1 << len(reg)):
        if r & free:
            c = solver.solve(f2.apply(reg, r))
            out.append((r, sum(1 << kept[i] for i in range(len(kept)) if c >> i & 1)))
    return tuple(out)


def _score(plan: ConvertPlan | AccessPlan) -> tuple[float, str]:
    if isinstance(plan, AccessPlan):
        return _memory_score(plan)
    if plan.staged:                                                # the two steps' costs add up
        (a, how_a), (b, how_b) = _score(plan.via), _score(without_via(plan))
        return a + b, f"{how_a}; then {how_b}"
    if plan.strategy in ("noop", "register"):
        return 0.0, f"{plan.n_dst} register moves"
    if plan.strategy == "shuffle":
        s = plan.shuffle
        shfl, selects, packs = s.shuffles, s.selects, s.pack_ops(word_view(plan), plan.dst_copies)
        select = ALU if plan.target == "hip" else SELECT   # AMD: v_cndmask_b32 issues as v_perm_b32 does
        score = SHUFFLE * shfl + select * selects + ALU * packs
        what = "shuffles" if plan.target != "hip" else shuffle_name(plan.target)     # HIP: the AMD instruction
        forms = ["swap stages"] * bool(s.send_swaps or s.recv_swaps) + ["fused"] * (s.send_fused or s.recv_fused)
        form = f" ({', '.join(forms)})" if forms else ""
        return score, f"{shfl} {what}, {selects} selects{form}, {packs} pack ops"
    m = plan.smem
    waves = m.store.total_wavefronts + m.load.total_wavefronts
    instrs = m.store.instructions + m.load.instructions
    barriers = m.block_barriers + m.warp_barriers
    st_weight = STMATRIX if m.store_instr != "vector" else 1.0
    score = (WAVEFRONT * (st_weight * m.store.total_wavefronts + m.load.total_wavefronts)
             + ALU * instrs + BARRIER * m.block_barriers + WARP_BARRIER * m.warp_barriers)
    st, ld = (_instr_name(plan, m.store_instr, "st", m.store_vec), _instr_name(plan, m.load_instr, "ld", m.load_vec))
    return score, (f"store {st} x{m.store.instructions}, "
                   f"load {ld} x{m.load.instructions}: {waves} wavefronts "
                   f"({m.store.bank_conflicts}+{m.load.bank_conflicts} conflicts/instr), {barriers} barriers"
                          f"{f' ({m.warp_barriers} warp-scope)' if m.warp_barriers else ''}")


def _load_instructions(plan: ConvertPlan) -> tuple[int, int]:
    """Tie-break between equal scores: fewer (wider) shared-memory loads (a load's result is waited
    for, a store's is not: on the H100 the wide-load side of two equal per-side-width plans measured up
    to 11% faster, T_row_col_128_f8_8w: st4B+ld16B 364 clk, st16B+ld4B 407), then fewer byte permutes
    (blocked -> dot B 64x128 f16: ldmatrix.trans ties ld16B and needs none of its 160 PRMTs a thread)."""
    last = without_via(plan)
    return ((plan.smem.load.instructions, plan.smem.pack_ops(word_view(last), last.n_dst, last.dst_copies))
            if plan.strategy in ("smem", STAGED) else (0, 0))


def _instr_name(plan: ConvertPlan | AccessPlan, instr: str, side: str, vec: int) -> str:
    """The target's name of a shared-memory access (``plan.instruction_name``)."""
    return instruction_name(plan.target, instr, "store" if side == "st" else "load", vec * plan.elem_bytes)


def plan_conversion(src: LinearLayout, dst: LinearLayout, dtype: str = "f16",
                    target: Target | str = "cuda", arch: str | None = None,
                    strategy: str = "auto", swizzle: str = "optimal",
                    smem_budget: int = DEFAULT_SMEM_BUDGET, max_vector_bytes: int | None = None,
                    scratch_buffers: int = 1, scratch_per_warp: bool = False,
                    barrier: int | None = None) -> ConvertPlan:
    """Plan ``src -> dst`` for one element type and target; see the module docstring.
    ``scratch_buffers=2``: a shared-memory plan leaves out the barrier before
    its first stores (``SmemPlan.buffers``); the caller alternates two buffers.
    ``scratch_per_warp``: a warp-local shared-memory plan keeps each warp in its
    own slice of the scratch and issues warp-scope barriers only (``SmemPlan.per_warp``).
    ``barrier``: a named barrier id (``model.parse_barrier``) for the block barriers
    (``with_named_barrier``); None keeps ``__syncthreads()``.

    Raises ValueError with one clear sentence for any bad input or an illegal
    forced strategy."""
    if isinstance(target, str):
        target = get_target(target, arch)
    dtype_bytes(dtype)
    if strategy not in STRATEGIES + (STAGED, BUTTERFLY, "auto"):
        raise ValueError(f"unknown strategy {short(strategy)} "
                         f"(known: auto, {', '.join(STRATEGIES + (STAGED, BUTTERFLY))})")
    if scratch_buffers not in (1, 2) or isinstance(scratch_buffers, bool):
        raise ValueError(f"--scratch-buffers must be 1 or 2, got {short(scratch_buffers)}")
    if scratch_per_warp and scratch_buffers == 2:
        raise ValueError("--scratch-per-warp and --scratch-buffers 2 do not combine (two buffers need the "
                         "block barrier between stores and loads)")
    _dims_ok(src, dst, target)
    src, dst = normalise(src), normalise(dst)
    w = DTYPE_BYTES[dtype]
    level = classify(src, dst)
    base = ConvertPlan(
        strategy=level, dtype=dtype, elem_bytes=w, target=target.name, arch=target.arch,
        warp_size=target.warp_size, num_warps=src.in_dim_size("warp"),
        n_src=src.in_dim_size("register"), n_dst=dst.in_dim_size("register"),
        src_bases={"in_dims": src.bases, "out_dims": src.out_dim_sizes},
        dst_bases={"in_dims": dst.bases, "out_dims": dst.out_dim_sizes},
        shape=tuple(src.out_dim_sizes.values()))
    order = STRATEGIES.index(level)
    legal = [s for s in STRATEGIES[max(order, 1):] if s != "noop"] + ([STAGED] if level in ("shuffle", "smem") else [])
    legal += [BUTTERFLY] if level == "shuffle" else []
    legal += ["shuffle"] if level == "smem" and held_per_warp(src, dst) else []     # each warp holds its part
    if strategy == "noop" and level != "noop":
        raise ValueError(f"strategy noop is illegal: the layouts differ ({level} needed)")
    if strategy not in ("auto", "noop") and strategy not in legal:
        raise ValueError(f"strategy {strategy} is illegal for this pair: " + (
            f"no data crosses lanes (needs {level})" if strategy in (STAGED, BUTTERFLY) and order < 2 else
            f"data crosses {'warps' if level == 'smem' else 'lanes'} (needs {level})"))

    candidates: list[ConvertPlan] = []
    for s in legal if strategy in ("auto", "noop") else [strategy]:
        if s == "register":
            candidates.append(replace(base, strategy="register", register=register_plan(src, dst)))
        elif s == STAGED:
            staged = staged_plans(base, src, dst, target, swizzle, smem_budget, max_vector_bytes, scratch_per_warp)
            if strategy == STAGED and not staged:
                raise ValueError("strategy shuffle+smem found no layout in between: the destination's low "
                                 "register bases are not in the source's registers or lanes")
            candidates += staged
        elif s == BUTTERFLY:
            chain = butterfly_plan(base, src, dst)
            if strategy == BUTTERFLY and chain is None:
                raise ValueError("strategy butterfly found no chain of lane <-> register swaps: the layouts do not "
                                 "hold the same nonzero bases in their registers and lanes, or need one swap only")
            candidates += [chain] if chain is not None else []
        elif s == "shuffle":
            try:
                sps: list[ShufflePlan] = shuffle_plans(src, dst, w)       # per warp where the warps differ
            except NotShuffleable:
                if strategy == "shuffle":
                    raise
                continue
            step = replace(base, strategy="shuffle", dst_copies=_canonical_copies(dst))
            candidates += [p for sp in sps for p in shuffle_forms(step, sp)]
        else:
            try:
                smem_plans: list[SmemPlan] = plan_smem(src, dst, w, target, swizzle, smem_budget, max_vector_bytes,
                                                       per_warp=scratch_per_warp)
            except ValueError:
                if strategy == "smem" or not candidates:
                    raise
                continue
            copies = _canonical_copies(dst)
            candidates += [replace(base, strategy="smem", smem=mp, dst_copies=copies) for mp in smem_plans]
    # cheapest first; on equal scores fewer loads, then the first (a stable sort: vector before matrix)
    scored = sorted(((_score(p), p) for p in candidates), key=lambda t: (t[0][0], _load_instructions(t[1])))
    reports = tuple(Candidate(p.strategy, sc, detail) for (sc, detail), p in scored)
    best = scored[0][1]
    if level == "noop" and best.strategy == "register" and best.register.dst_from_src == tuple(range(best.n_dst)):
        best = replace(best, strategy="noop")
    if best.strategy in ("smem", STAGED) and scratch_buffers == 2:
        # the stores -> loads barrier is then what orders the previous call's reads of the other
        # buffer before the next call's stores into it: it must be block-wide
        best = replace(best, smem=replace(best.smem, buffers=2, barrier="block"))
    return with_named_barrier(replace(best, candidates=reports), barrier)


def with_named_barrier(plan: ConvertPlan | AccessPlan, barrier: int | None) -> ConvertPlan | AccessPlan:
    """``plan`` with every block barrier it issues -- a shared-memory conversion's, a staged one's
    shared-memory step's, a store's or load's ``via`` conversion's, on every run-time path -- as
    the named barrier ``barrier`` over the plan's ``num_warps * warp_size`` threads
    (``model.Barrier``).  ValueError in one line when the plan issues none: a named barrier
    there would be a promise the header does not keep."""
    if barrier is None:
        return plan
    named = _named(plan, Barrier(barrier, plan.threads))
    if named == plan:
        raise ValueError(f"--barrier {barrier}: this {plan.operation} ({plan.strategy}) issues no block barrier; "
                         f"only plans through shared memory synchronise (leave --barrier out)")
    return named


def _named(plan: ConvertPlan | AccessPlan, barrier: Barrier) -> ConvertPlan | AccessPlan:
    if isinstance(plan, ConvertPlan):
        if plan.through_smem and plan.smem.block_barriers:
            return replace(plan, smem=replace(plan.smem, named_barrier=barrier))
        return plan
    return replace(plan, via=_named(plan.via, barrier) if plan.via else None,
                   paths=tuple(_named(p, barrier) for p in plan.paths))


def shuffle_forms(step: ConvertPlan, sp: ShufflePlan) -> list[ConvertPlan]:
    """``step`` with each form of the shuffle plan ``sp``: select trees, swap stages, and
    (8/16-bit words) each of those with its lane-dependent words fused into byte permutes
    (``shuffle.fuse_form``: CUDA ``PRMT``, HIP ``v_perm_b32``, both with a per-lane selector)."""
    forms = [sp, swap_form(sp)]
    forms += [f for f in (fuse_form(f, word_view(step), step.dst_copies) for f in forms) if f is not None]
    return [replace(step, shuffle=f) for k, f in enumerate(forms) if f not in forms[:k]]


def staged_plans(base: ConvertPlan, src: LinearLayout, dst: LinearLayout, target: Target, swizzle: str = "optimal",
                 smem_budget: int = 48 * 1024, max_vector_bytes: int | None = None,
                 per_warp: bool = False) -> list[ConvertPlan]:
    """One staged candidate per layout in between (``staged.mid_layouts``): the
    cheaper form of its shuffle plan, then its cheapest shared-memory plan."""
    out = []
    w = base.elem_bytes
    for mid in mid_layouts(src, dst, w):
        regs = mid.in_dim_size("register")
        if word_view(base) and regs % word_view(base):   # the steps chain on packed words: whole words between
            continue
        mid_bases = {"in_dims": mid.bases, "out_dims": mid.out_dim_sizes}
        try:
            sp = plan_shuffle(src, mid, w)
            smem = plan_smem(mid, dst, w, target, swizzle, smem_budget, max_vector_bytes, per_warp=per_warp)
        except ValueError:                                  # NotShuffleable, or no scratch within the budget
            continue
        step = replace(base, strategy="shuffle", n_dst=regs, dst_bases=mid_bases,
                       dst_copies=_canonical_copies(mid))
        via = min(shuffle_forms(step, sp), key=lambda p: _score(p)[0])
        rest = replace(base, strategy="smem", src_bases=mid_bases, n_src=regs, dst_copies=_canonical_copies(dst))
        best = min((replace(rest, smem=m) for m in smem), key=lambda p: (_score(p)[0], _load_instructions(p)))
        out.append(replace(best, strategy=STAGED, src_bases=base.src_bases, n_src=base.n_src, via=via))
    return out


def butterfly_plan(base: ConvertPlan, src: LinearLayout, dst: LinearLayout) -> ConvertPlan | None:
    """The butterfly candidate (``butterfly.butterfly_chain``): each step the cheapest form of its
    shuffle plan by this module's score, the chain built once with shears and once without (a shear
    saves its step's permutes but may cost the last step selects) and the cheaper kept; None when
    the pair has no chain of two steps or more."""
    chains = [butterfly_chain(base, src, dst, shear, shuffle_forms, lambda p: _score(p)[0]) for shear in (True, False)]
    return min((c for c in chains if c is not None), key=lambda c: _score(c)[0], default=None)


# ------------------------------------------------------------------ memory
MEMORY_STRATEGIES = ("store", "load")


def _via_candidate(base: AccessPlan, dist: LinearLayout, order: list[int], alignment: int, dtype: str,
                   target: Target, direction: str, strides, max_vector_bytes) -> AccessPlan | None:
    """Convert to the coalesced layout, then access (store), or access, then
    convert (load) -- what Triton does in epilogues; None when ``dist`` is
    that layout already."""
    mid = coalesced_threads(dist, order, alignment, DTYPE_BYTES[dtype], target)
    if 0 in mid.flat_bases("register"):
        return None                       # (a tile smaller than the threads: nothing to coalesce)
    pair = (dist, mid) if direction == "store" else (mid, dist)
    cv = plan_conversion(*pair, dtype=dtype, target=target)
    if cv.strategy == "noop":
        return None
    m = global_plan(mid, order, alignment, DTYPE_BYTES[dtype], target, direction, strides, max_vector_bytes)
    return replace(base, memory=m, via=cv, dst_copies=())


def _memory_score(plan: AccessPlan) -> tuple[float, str]:
    if plan.via is not None:
        (cs, cd), (ms, md) = _score(plan.via), _memory_score(replace(plan, via=None))
        return cs + ms, f"via {plan.via.strategy} ({cd}), then {md}"
    m = plan.memory
    side = "st" if m.direction == "store" else "ld"
    if m.space == "global":
        c = m.cost
        what = (f"{m.direction} {m.vector_bytes} B" if plan.target != "hip"     # HIP: the AMD instruction
                else instruction_name(plan.target, "vector", m.direction, m.vector_bytes, "global"))
        return (SECTOR * c.total_sectors + ALU * c.instructions,
                f"{what} x{c.instructions}: {c.sectors} sectors/instr "
                f"({c.min_sectors} at best)")
    c = m.cost
    weight = STMATRIX if m.instr != "vector" and side == "st" else 1.0
    return (WAVEFRONT * weight * c.total_wavefronts + ALU * c.instructions,
            f"{_instr_name(plan, m.instr, side, m.vec)} x{c.instructions}: {c.total_wavefronts} wavefronts "
            f"({c.bank_conflicts} conflicts/instr)")


def plan_memory(dist: LinearLayout, tile: LinearLayout, direction: str, space: str, dtype: str = "f16",
                target: Target | str = "cuda", arch: str | None = None, alignment: int = 16,
                strides: tuple[int, ...] | None = None, instr: str = "auto",
                max_vector_bytes: int | None = None, barrier: int | None = None) -> AccessPlan:
    """Plan ``store`` (registers of ``dist`` -> the memory ``tile``) or
    ``load`` (the tile -> registers); ``space`` is ``shared`` (``tile``: offset
    -> tensor, any bijective layout) or ``global`` (``tile``: the dense
    ``layouts.GlobalLayout``; ``alignment`` in bytes, ``strides`` in elements
    for the cost).  ``instr``: ``auto``, ``vector``, ``matrix`` or
    ``matrix.trans`` (ldmatrix/stmatrix).  See ``memory.py``.

    Run-time alignment (global tiles): ``alignment`` is what the caller
    promises of the tile pointer and strides.  Where the layout allows wider
    vectors than that, the plan is made for every alignment from 16 bytes down
    to the promise and the distinct ones kept: the result is the widest
    (``memory.vector_bytes`` = v), its ``paths`` the narrower, and the header
    takes a path when the pointer and every stride are multiples of its v --
    one header for every leading dimension, the fast path whenever it can."""
    def at(a: int) -> AccessPlan:
        return _plan_memory(dist, tile, direction, space, dtype, target, arch, a, strides, instr, max_vector_bytes)
    if space != "global":
        return with_named_barrier(at(alignment), barrier)
    return with_named_barrier(_with_paths(at, alignment, strides, lambda p: p.memory.vector_bytes), barrier)


def _with_paths(at: Callable[[int], AccessPlan | CopyPlan], alignment: int, strides: tuple[int, ...] | None,
                vector_of: Callable[[AccessPlan | CopyPlan], int]) -> AccessPlan | CopyPlan:
    """The plan at the promised ``alignment`` or, where wider alignments give
    wider vectors, the widest plan with the narrower ones (down to the
    promise) as its run-time ``paths``; alignments the given ``strides`` rule
    out are skipped."""
    promised = at(alignment)
    plans: list[AccessPlan | CopyPlan] = []
    for a in (16, 8, 4, 2):
        if alignment < a and (strides is None or all(s * promised.elem_bytes % a == 0 for s in strides)):
            p = at(a)
            v = vector_of(p)
            if v > vector_of(promised) and all(v != vector_of(q) for q in plans):
                plans.append(p)
    return replace(plans[0], paths=tuple(plans[1:]) + (promised,)) if plans else promised


def _plan_memory(dist: LinearLayout, tile: LinearLayout, direction: str, space: str, dtype: str, target,
                 arch: str | None, alignment: int, strides: tuple[int, ...] | None, instr: str,
                 max_vector_bytes: int | None) -> AccessPlan:
    """``plan_memory`` for one alignment."""
    if isinstance(target, str):
        target = get_target(target, arch)
    dtype_bytes(dtype)
    if direction not in MEMORY_STRATEGIES:
        raise ValueError(f"unknown memory direction {short(direction)} (known: store, load)")
    if instr not in ("auto", "vector", "matrix", "matrix.trans", "via"):
        raise ValueError(f"unknown instruction {short(instr)} (known: auto, vector, matrix, matrix.trans, via)")
    if not {"register", "lane"} <= set(dist.in_dims):
        raise ValueError("the register side is not a distributed layout (needs register/lane dims)")
    if "offset" not in tile.in_dims:
        raise ValueError("the memory side is not a memory layout (needs offset bases)")
    if dist.out_dim_sizes != tile.out_dim_sizes:
        raise ValueError(f"shapes differ: registers {dist.out_dim_sizes} vs memory {tile.out_dim_sizes}")
    if dist.in_dim_size("lane") != target.warp_size:
        raise ValueError(f"the register layout has {dist.in_dim_size('lane')} lanes but target {target.name} "
                         f"{target.arch} has warp size {target.warp_size}")
    if dist.in_dim_size("block") != 1:
        raise ValueError("layouts across CTAs (block size > 1) are not supported")
    dist = normalise(dist)
    w = DTYPE_BYTES[dtype]
    if space == "shared":
        plans = shared_plans(dist, tile, w, target, direction, max_vector_bytes)
    elif space == "global":
        plans = [global_plan(dist, global_order(tile), alignment, w, target, direction, strides, max_vector_bytes)]
    else:
        raise ValueError(f"unknown memory space {short(space)} (known: shared, global)")
    if instr not in ("auto", "via"):
        plans = [m for m in plans if m.instr == instr]
        if not plans:
            raise ValueError(f"{instr} accesses do not fit this pair (the layouts do not divide by the "
                             f"instruction's tile, or the target lacks it)")
    n = dist.in_dim_size("register")
    bases = {"in_dims": dist.bases, "out_dims": dist.out_dim_sizes}
    tile_bases = {"in_dims": tile.bases, "out_dims": tile.out_dim_sizes}
    store = direction == "store"
    base = (StorePlan if store else LoadPlan)(
        strategy=direction, dtype=dtype, elem_bytes=w, target=target.name, arch=target.arch,
        warp_size=target.warp_size, num_warps=dist.in_dim_size("warp"),
        n_src=n if store else 0, n_dst=0 if store else n,
        src_bases=bases if store else tile_bases, dst_bases=tile_bases if store else bases,
        shape=tuple(dist.out_dim_sizes.values()), dst_copies=() if store else _canonical_copies(dist),
        memory=plans[0])
    candidates = [replace(base, memory=m) for m in plans]
    if space == "global" and instr in ("auto", "via"):
        v = _via_candidate(base, dist, global_order(tile), alignment, dtype, target, direction, strides,
                           max_vector_bytes)
        if v is not None:
            candidates = ([] if instr == "via" else candidates) + [v]
        elif instr == "via":
            raise ValueError("a via plan needs a register layout other than the coalesced one")
    scored = [(_score(p), p) for p in candidates]
    reports = tuple(sorted((Candidate("via" if p.via is not None else p.memory.instr, sc, detail) for (sc, detail), p in scored),
                           key=lambda c: c.score))
    best = min(scored, key=lambda t: t[0][0])[1]
    return replace(best, candidates=reports)


def plan_copy(global_tile: LinearLayout, shared_tile: LinearLayout, dtype: str = "f16", target: Target | str = "cuda",
              arch: str | None = None, alignment: int = 16, num_warps: int = 4,
              strides: tuple[int, ...] | None = None, max_vector_bytes: int | None = None) -> CopyPlan:
    """Plan a copy of a global tile into a shared tile (strategy ``copy``)
    by ``num_warps`` warps: for each thread mapping of
    ``memory.copy_threads`` the global load and the shared store with the
    same vector (halved until both sides group the registers alike), scored
    as SECTOR x sectors + wavefronts (both per warp) + ALU x instructions; the
    cheapest wins.  ``cp.async`` on CUDA (sm_80+) when the vector is 4, 8 or
    16 bytes, else through registers.  Run-time alignment paths as in
    ``plan_memory`` when ``alignment`` promises less than the widest vector."""
    def at(a: int) -> CopyPlan:
        return _plan_copy(global_tile, shared_tile, dtype, target, arch, a, num_warps, strides, max_vector_bytes)
    return _with_paths(at, alignment, strides, lambda p: p.load.vector_bytes)


def _plan_copy(global_tile: LinearLayout, shared_tile: LinearLayout, dtype: str, target, arch: str | None,
               alignment: int, num_warps: int, strides: tuple[int, ...] | None,
               max_vector_bytes: int | None) -> CopyPlan:
    """``plan_copy`` for one alignment."""
    if isinstance(target, str):
        target = get_target(target, arch)
    dtype_bytes(dtype)
    if global_tile.out_dim_sizes != shared_tile.out_dim_sizes:
        raise ValueError(f"shapes differ: global {global_tile.out_dim_sizes} vs shared {shared_tile.out_dim_sizes}")
    if num_warps < 1 or num_warps & (num_warps - 1) or num_warps > 32:
        raise ValueError(f"--warps {num_warps}: a power of two from 1 to 32")
    w = DTYPE_BYTES[dtype]
    order = global_order(global_tile)
    candidates = []
    for label, threads in copy_threads(shared_tile, order, alignment, w, target, num_warps, max_vector_bytes):
        cap = min(max_vector_bytes or 16, 16, alignment)
        while True:
            load = global_plan(threads, order, alignment, w, target, "load", strides, cap)
            store = shared_plans(threads, shared_tile, w, target, "store", cap)[0]
            pairs = {a.regs: a for a in store.accesses}
            if load.vec == store.vec and all(a.regs in pairs for a in load.accesses):
                break
            cap //= 2                       # the two sides group registers differently: a narrower vector
        # threads on broadcast lanes/warps of a tile smaller than the block would copy the same bytes
        # again (a write-after-write race to racecheck, and extra wavefronts): they skip
        store = replace(store, accesses=tuple(pairs[a.regs] for a in load.accesses),
                        warp_skip=skip_mask(threads.flat_bases("warp")), lane_skip=skip_mask(threads.flat_bases("lane")))
        vb = load.vec * w
        async_copy = target.is_cuda and vb in (4, 8, 16)
        copy = dict(mapping={"in_dims": threads.bases, "out_dims": threads.out_dim_sizes}, load=load, store=store,
                    async_copy=async_copy)
        score = (SECTOR * load.cost.total_sectors + WAVEFRONT * store.cost.total_wavefronts
                 + ALU * (load.cost.instructions + (0 if async_copy else store.cost.instructions)))
        how = f"{'cp.async' if async_copy else 'ld + st'} {vb} B" if target.is_cuda else \
            (f"{instruction_name('hip', 'vector', 'load', vb, 'global')} + "      # HIP: the AMD instructions
             f"{instruction_name('hip', 'vector', 'store', vb)}")
        detail = (f"threads in {label} order: {how} "
                  f"x{load.cost.instructions}: {load.cost.sectors} sectors/instr ({load.cost.min_sectors} at best), "
                  f"{store.cost.wavefronts} wavefronts/instr ({store.cost.bank_conflicts} conflicts)")
        candidates.append((score, detail, copy))
    candidates.sort(key=lambda c: c[0])
    best = candidates[0][2]
    return CopyPlan(
        strategy="copy", dtype=dtype, elem_bytes=w, target=target.name, arch=target.arch,
        warp_size=target.warp_size, num_warps=num_warps, n_src=0, n_dst=0,
        src_bases={"in_dims": global_tile.bases, "out_dims": global_tile.out_dim_sizes},
        dst_bases={"in_dims": shared_tile.bases, "out_dims": shared_tile.out_dim_sizes},
        shape=tuple(shared_tile.out_dim_sizes.values()), **best,
        candidates=tuple(Candidate("copy", sc, d) for sc, d, _ in candidates))
