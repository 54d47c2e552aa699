"""Every plan the planner makes, executed by the independent emulator.

Random distributed layout pairs (2-D tensors of 2^6..2^12 elements; tensor
bits assigned at random to register, lane and warp columns, with broadcast
(zero) columns; 1-8 warps; warp size 32 (CUDA, HIP wave32) and 64 (HIP
wave64); elements of 1, 2, 4 and 8 bytes).  For every strategy the planner
accepts for a pair (noop/register/shuffle/smem/shuffle+smem, swizzle
optimal/none; an illegal one raises ValueError), for every staged candidate
(one per layout in between) and for every shared-memory candidate
(vector and ldmatrix/stmatrix pairings), the emulator's destination
registers equal the numpy reference for every thread and register, and the
brute-force bank counter equals the plan's predicted store/load costs.
"""
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from ll_codegen.verify.emulate.banks import measure_smem
from ll_codegen.verify.emulate.convert import check_plan
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.planner import DTYPE_BYTES, normalise, plan_conversion, shuffle_forms, staged_plans
from ll_codegen.plan.shuffle import NotShuffleable, plan_shuffle, swap_form
from ll_codegen.core.target import get_target

def SETTINGS(n):
    return settings(derandomize=True, max_examples=n, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
DTYPES = {1: "u8", 2: "f16", 4: "f32", 8: "f64"}
TARGETS = (("cuda", "sm_90"), ("cuda", "sm_80"), ("hip", "gfx90a"), ("hip", "gfx1030"))


@st.composite
def pairs(draw):
    target, arch = draw(st.sampled_from(TARGETS))
    t = get_target(target, arch)
    nl = t.warp_size.bit_length() - 1
    nw = draw(st.integers(0, 3))
    total = draw(st.integers(6, 12))
    d0 = draw(st.integers(0, total))
    shape = {"dim0": 1 << d0, "dim1": 1 << (total - d0)}

    def layout(lane=None, warp=None):
        bits = draw(st.permutations([1 << i for i in range(total)]))
        bits = [b for b in bits if b not in (lane or []) + (warp or [])]

        def take(n):
            out = []
            for _ in range(n):
                zero = not bits or draw(st.integers(0, 9)) == 0       # ~10% broadcast columns
                out.append(0 if zero else bits.pop())
            return out
        warp = list(warp) if warp is not None else take(nw)
        lane = list(lane) if lane is not None else take(nl)
        reg = bits + [0] * draw(st.integers(0, 1))
        reg = draw(st.permutations(reg)) if reg else []
        return LinearLayout.from_flat({"register": reg, "lane": lane, "warp": warp}, shape,
                                      require_surjective=True)

    src = layout()
    mode = draw(st.sampled_from(["any", "same_warps", "same_threads"]))
    if mode == "any":
        dst = layout()
    elif mode == "same_warps":
        dst = layout(warp=src.flat_bases("warp"))
    else:
        dst = layout(lane=src.flat_bases("lane"), warp=src.flat_bases("warp"))
    w = draw(st.sampled_from([1, 2, 4, 8]))
    return src, dst, w, target, arch


def _check_smem_costs(plan, where):
    st_m, ld_m = measure_smem(plan)
    m = plan.smem
    assert st_m.uniform and ld_m.uniform, f"{where}: instructions of one kind differ in cost"
    assert st_m.as_access_cost() == m.store, f"{where}: store measured {st_m.as_access_cost()} vs plan {m.store}"
    assert ld_m.as_access_cost() == m.load, f"{where}: load measured {ld_m.as_access_cost()} vs plan {m.load}"


def _plans(src, dst, w, target, arch):
    """(label, plan) for every strategy/swizzle the planner accepts."""
    dtype = DTYPES[w]
    out = []
    for strategy in ("auto", "noop", "register", "shuffle", "smem", "shuffle+smem"):
        for swz in (("optimal", "none") if strategy == "smem" else ("optimal",)):
            try:
                plan = plan_conversion(src, dst, dtype, target, arch, strategy=strategy, swizzle=swz)
            except ValueError as e:
                # auto and smem always plan within a CTA; a forced strategy may
                # only be refused as illegal for the pair, or (shuffle) not shuffleable
                if strategy in ("auto", "smem") or not (isinstance(e, NotShuffleable) or "is illegal" in str(e)
                                                         or "no layout in between" in str(e)):
                    raise
                continue
            out.append((f"{strategy}/{swz}", plan))
    # both forms of lane-dependent shuffle registers (auto keeps the cheaper): select trees, swap stages
    shuffles = [p for _, p in out if p.shuffle is not None]
    if shuffles:
        norm = [normalise(L) for L in (src, dst)]
        trees = plan_shuffle(*norm, w)
        out += [(f"shuffle/{form}", replace(shuffles[0], shuffle=sp))
                for form, sp in (("select-trees", trees), ("swap-stages", swap_form(trees)))]
    # every staged candidate (one per layout in between), not only the cheapest
    smem = next(p for label, p in out if label == "smem/optimal")
    out += [(f"shuffle+smem/{i}", p) for i, p in enumerate(staged_plans(
        replace(smem, smem=None, dst_copies=(), candidates=()), normalise(src), normalise(dst),
        get_target(target, arch)))]
    # per-warp scratch slices (a no-op unless the pair is warp-local): the emulator checks the slices
    out.append(("smem/per-warp", plan_conversion(src, dst, dtype, target, arch, strategy="smem",
                                                  scratch_per_warp=True)))
    return out


@SETTINGS(300)
@given(pairs(), st.integers(0, 2**32 - 1))
def test_every_plan_reproduces_the_reference(pair, seed):
    src, dst, w, target, arch = pair
    rng = np.random.default_rng(seed)
    for label, plan in _plans(src, dst, w, target, arch):
        where = f"{label} {plan.dtype} {target}/{arch} src={src.bases} dst={dst.bases}"
        try:
            check_plan(plan, src, dst, rng)
        except AssertionError as e:
            raise AssertionError(f"{where}: {e}") from None
        if plan.smem is not None:
            _check_smem_costs(plan, where)


@SETTINGS(200)
@given(pairs(), st.integers(0, 2**32 - 1))
def test_every_smem_candidate(pair, seed):
    """All shared-memory candidates the planner scores (vector, ldmatrix/stmatrix pairings), not just the winner."""
    from ll_codegen.plan import swizzle as sw
    src, dst, w, target, arch = pair
    t = get_target(target, arch)
    base = plan_conversion(src, dst, DTYPES[w], target, arch, strategy="smem")
    norm = [L.with_in_dims({d: L.in_dim_size(d) for d in ("register", "lane", "warp", "block")}) for L in (src, dst)]
    rng = np.random.default_rng(seed)
    for mp in sw.plan_smem(norm[0], norm[1], w, t, "optimal"):
        plan = replace(base, smem=mp)
        where = f"smem {mp.store_instr}/{mp.load_instr} {plan.dtype} {target}/{arch} src={src.bases} dst={dst.bases}"
        try:
            check_plan(plan, src, dst, rng)
        except AssertionError as e:
            raise AssertionError(f"{where}: {e}") from None
        _check_smem_costs(plan, where)


@SETTINGS(200)
@given(pairs())
def test_optimal_swizzle_is_conflict_free_when_lemma_9_5_allows(pair):
    """Lemma 9.5 (paper 000, App. 9.2): for subspaces U, V of F_2^d the largest
    subspace meeting U ∪ V only in 0 has dimension d - max(dim U, dim V).

    Apply it with U = span(S_vec ∪ A_bank), V = span(S_vec ∪ B_bank), where
    S_vec is the plan's 2^v-element vector (v bits) and A_bank / B_bank the
    lane columns of src / dst that one wavefront phase serves
    (p = log2(wavefront_bytes / (2^v w)) lane bits, fewer when broadcast).
    When each access covers at least one bank (2^v w >= 4) and there are no
    rounds, dim U, dim V <= v + p and the memory index part has
    ell = d - v - b bits with b = log2(wavefront_bytes / (2^v w)) = p, so
    ell <= d - max(dim U, dim V): a conflict-free S_idx exists, and the
    optimal swizzle (Lemma 9.6) must have zero bank conflicts on both the
    store and the load.  (Sub-word accesses are only bounded by Lemma 9.4,
    and matrix instructions are not the lemma's setting: both are skipped.)"""
    src, dst, w, target, arch = pair
    plan = plan_conversion(src, dst, DTYPES[w], target, arch, strategy="smem", swizzle="optimal")
    m = plan.smem
    assume(m.store_instr == m.load_instr == "vector")
    assume(m.store_vec * w >= 4 and m.load_vec * w >= 4 and len(m.rounds) == 1)
    st_m, ld_m = measure_smem(plan)
    assert (st_m.bank_conflicts, ld_m.bank_conflicts) == (0, 0), \
        f"{plan.dtype} {target}/{arch}: conflicts {st_m.bank_conflicts}/{ld_m.bank_conflicts} src={src.bases} dst={dst.bases}"


def _corpus_cases():
    from ll_codegen.testing import corpus
    return [(p, dt) for p in corpus.NAMED for dt in p.dtypes]


@pytest.mark.parametrize("pair,dtype", _corpus_cases(), ids=lambda x: getattr(x, "name", x))
def test_corpus_pairs_all_strategies_and_candidates(pair, dtype):
    """The named corpus (MMA, wgmma, MFMA, dot operands, slices, transposes):
    every legal strategy and every shared-memory candidate (this is where
    ldmatrix/stmatrix[.trans] pairings occur)."""
    from ll_codegen.layouts.kinds import from_dict
    from ll_codegen.plan import swizzle as sw
    src = from_dict(pair.src).to_linear(pair.src["shape"])
    dst = from_dict(pair.dst).to_linear(pair.dst["shape"])
    t = get_target(pair.target)
    w = DTYPE_BYTES[dtype]
    rng = np.random.default_rng(7)
    for label, plan in _plans(src, dst, w, pair.target, t.arch):
        check_plan(plan, src, dst, rng)
        if plan.smem is not None:
            _check_smem_costs(plan, f"{pair.name} {label}")
    base = plan_conversion(src, dst, dtype, pair.target, strategy="smem")
    norm = [L.with_in_dims({d: L.in_dim_size(d) for d in ("register", "lane", "warp", "block")}) for L in (src, dst)]
    for mp in sw.plan_smem(norm[0], norm[1], w, t, "optimal"):
        plan = replace(base, smem=mp)
        check_plan(plan, src, dst, rng)
        _check_smem_costs(plan, f"{pair.name} {mp.store_instr}/{mp.load_instr}")


def _lane_broadcast_pair(rng, lanes: int, k: int, mixed: bool):
    """A random warp-local pair whose destination broadcasts lane bit ``k`` (its lane column k is
    zero: lanes l and l ^ 2^k hold the same elements) and keeps every other lane column of the
    source -- ``mixed``: some of them xor a random source register column or two (lane-dependent
    registers).  Unmixed, a destination lane reads the source lane of its own id in every lane
    bit but k, and in bit k the one the round picks: the shuffle's source lane is ``lane ^ c``
    in every bit but k."""
    nl, nw = lanes.bit_length() - 1, rng.randint(0, 2)
    total = nl + nw + rng.randint(1, 3)
    d0 = rng.randint(0, total)
    shape = {"dim0": 1 << d0, "dim1": 1 << (total - d0)}
    bits = [1 << i for i in range(total)]
    rng.shuffle(bits)
    warp, src_lane, src_reg = bits[:nw], bits[nw:nw + nl], bits[nw + nl:]
    mix = [0 if not mixed or rng.random() < 0.6 else rng.choice(src_reg) ^ (rng.choice(src_reg) if rng.random() < 0.3 else 0)
           for _ in range(nl)]
    dst_lane = [0 if j == k else v ^ m for j, (v, m) in enumerate(zip(src_lane, mix))]
    dst_reg = src_reg + [src_lane[k]] + [0] * (rng.random() < 0.15)
    rng.shuffle(dst_reg)
    return tuple(LinearLayout.from_flat({"register": r, "lane": l, "warp": warp}, shape, require_surjective=True)
                 for r, l in ((src_reg, src_lane), (dst_reg, dst_lane)))


@pytest.mark.parametrize("target,arch", [("cuda", "sm_90"), ("hip", "gfx90a")])
def test_every_plan_with_a_destination_broadcast_on_each_lane_bit(target, arch):
    """Every legal strategy and every shuffle form (select trees, swap stages, fused words),
    emulated on pairs drawn with a destination broadcast on lane bit k, for every lane bit k of
    the warp (the top one included): the shuffle plan's source lane is then not ``lane ^ c``
    in bit k, and a plan that takes it for one reads the wrong lane."""
    import random
    t = get_target(target, arch)
    nl = t.warp_size.bit_length() - 1
    rng, data = random.Random(11), np.random.default_rng(11)
    for k in range(nl):
        met = 0
        for _ in range(40):                              # pairs the shuffle planner refuses are redrawn
            src, dst = _lane_broadcast_pair(rng, t.warp_size, k, mixed=met > 0)
            w = rng.choice([1, 2, 4])
            plans = _plans(src, dst, w, target, arch)
            shuffle = next((p for label, p in plans if label == "shuffle/optimal"), None)
            if shuffle is None:
                continue
            norm = [normalise(L) for L in (src, dst)]
            plans += [(f"shuffle/form{i}", p) for i, p in
                      enumerate(shuffle_forms(replace(shuffle, candidates=()), plan_shuffle(*norm, w)))]
            for label, plan in plans:
                try:
                    check_plan(plan, src, dst, data)
                except AssertionError as e:
                    raise AssertionError(f"{label} {plan.dtype} {target}/{arch} lane bit {k} "
                                         f"src={src.bases} dst={dst.bases}: {e}") from None
            # the pair is the case drawn for: the source lane is not an xor of the lane id in bit k
            src_lane = shuffle.shuffle.src_lane
            assert src_lane is not None and src_lane[k] != 1 << k, src_lane
            if not met:                                  # unmixed: bit k alone
                assert [j for j in range(nl) if src_lane[j] != 1 << j] == [k], src_lane
            met += 1
            if met == 2:
                break
        assert met == 2, f"lane bit {k}: fewer than 2 shuffle-able pairs drawn"


#: (source, destination) over (dim0, dim1): a destination lane column that is a source lane column
#: xor a register column both layouts hold -- (0,33) = (0,1) ^ (0,32); (0,65) = (0,64) ^ (0,1), (0,1)
#: the row-major lowest bit, the tile of swizzle none
MIXED_LANE_PAIRS = (
    ({"dim0": 2, "dim1": 256},
     {"register": [[0, 128], [0, 32]], "lane": [[0, 16], [0, 8], [0, 2], [1, 0], [0, 1]], "warp": [[0, 64], [0, 4]]},
     {"register": [[0, 32], [0, 2], [0, 128]], "lane": [[0, 16], [0, 8], [0, 0], [1, 0], [0, 33]],
      "warp": [[0, 64], [0, 4]]}),
    ({"dim0": 1, "dim1": 256},
     {"register": [[0, 1], [0, 2]], "lane": [[0, 4], [0, 8], [0, 16], [0, 32], [0, 64]], "warp": [[0, 128]]},
     {"register": [[0, 1], [0, 2]], "lane": [[0, 4], [0, 8], [0, 16], [0, 32], [0, 65]], "warp": [[0, 128]]}))


@pytest.mark.parametrize("shape,src,dst", MIXED_LANE_PAIRS)
def test_smem_accesses_stay_aligned_when_a_lane_column_mixes_in_a_register(shape, src, dst):
    """An access tile holding the register column a lane column mixes in would start that lane's
    vector inside one (the emulator reports the misaligned access), so no candidate may widen over
    it: every shared-memory candidate, both swizzles, and every other plan run exactly."""
    from ll_codegen.plan import swizzle as sw
    src, dst = LinearLayout(src, shape), LinearLayout(dst, shape)
    rng = np.random.default_rng(5)
    t = get_target("cuda", "sm_90")
    for w in (1, 2):
        base = plan_conversion(src, dst, DTYPES[w], "cuda", "sm_90", strategy="smem")
        mps = [mp for swz in ("optimal", "none") for mp in sw.plan_smem(normalise(src), normalise(dst), w, t, swz)]
        assert mps and all(sw.aligned(mp, w) for mp in mps)
        for mp in mps:
            check_plan(replace(base, smem=mp), src, dst, rng)
        for label, plan in _plans(src, dst, w, "cuda", "sm_90"):
            check_plan(plan, src, dst, rng)
