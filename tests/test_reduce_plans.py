"""``reduce`` plans (``plan/reduce.py``): planner properties, emulator against the numpy
reference, mutations the checks must catch, and the generated harness on the host SIMT runtime.

Corpus: ``corpus.REDUCE_NAMED`` (wgmma and mma.sync accumulators, dot operands, blocked tiles in
2-D and 3-D -- smaller than the CTA too, with broadcast lanes and warps --, a slice, MFMA and
blocked wave64, RDNA wave32) and seeded random layouts with broadcast bases (``random_reduce``:
rank 2 and 3, 1-8 warps, one or two reduced dims; warp 32 on CUDA, wave64 on gfx90a), every
combine and element type.

* the emulator (``emulate/reduce.py``: the plan's groups, xor-shuffle rounds with the real
  intrinsic semantics, the warp stage through a modelled scratch) equals the reference
  (``reference.reduce_reference``: from the source layout alone, in the order the plan promises)
  bit for bit -- f16/bf16/f32 sums included;
* the result layout is Triton's slice layout (the ``slice`` spec kind, nested for several dims),
  and for random layouts the map ``(j, lane, warp) -> P(L(kept j, lane, warp))``;
* counts: the rounds are exactly the reduced lane bits, lowest first (never a broadcast lane
  bit), shuffles = rounds x n_dst, the warp stage exactly when a warp basis is reduced, the
  in-thread groups take every source register with broadcast bits 0 once;
* both forms of the warp stage (direct; spread: the threads share the outputs' combines) equal
  the reference on every named case with a warp stage and on the random ones; both are scored
  candidates, the plan's form the cheaper;
* mutations caught: a wrong shuffle mask, a dropped lane round, a swapped warp-partial order on
  a float sum, a broadcast register combined twice, a warp stage that races or reads an
  unwritten slot, a spread stage whose results land one output along or whose outputs are
  shared among too few or too many threads.
"""
import itertools
import random
import re
from dataclasses import replace

import numpy as np
import pytest

from ll_codegen.core.layout import layout_of
from ll_codegen.emit.instructions import PTX_SHARED_TYPES
from ll_codegen.plan.reduce import COMBINES, REDUCE_DTYPES, RegisterGroup, plan_reduce
from ll_codegen.spec import spec_from_dict
from ll_codegen.testing.corpus import REDUCE_NAMED, random_reduce, sliced
from ll_codegen.verify.emulate.common import SmemError
from ll_codegen.verify.emulate.reduce import check_reduce, emulate_reduce
from ll_codegen.verify.emulate.reference import (bf16_round, reduce_op, reduce_raw, reduce_reference,
                                                 reduce_tensor, reduce_values, regs_of)
from ll_codegen.verify.harness import REDUCE

SEED = 20261201
N_RANDOM = 24                         # random layouts per warp size


def named_cases():
    out = []
    for c in REDUCE_NAMED:
        out.append((c.name, spec_from_dict(c.src).linear, c.dims, c.target, c.arch, c))
    return out


def random_cases():
    rng = random.Random(SEED)
    out = []
    for target, arch, lanes in (("cuda", "sm_90", 32), ("hip", "gfx90a", 64)):
        for i in range(N_RANDOM):
            L, dims = random_reduce(rng, lanes)
            out.append((f"random_{arch}_{i:02d}", L, dims, target, arch, None))
    return out


NAMED = named_cases()
RANDOM = random_cases()
ALL = NAMED + RANDOM


def plan(case, combine="sum", dtype="f32"):
    _, L, dims, target, arch, _ = case
    return plan_reduce(L, dims, combine, dtype, target, arch)


def flat_kinds(L, dims, dim):
    """(kept, reduced, broadcast) bits of input dim ``dim``, from the coordinates (not the planner)."""
    kept, red, bc = [], [], []
    for i, b in enumerate(L.bases.get(dim, [])):
        if not any(b):
            bc.append(i)
        elif all(c == 0 for d, c in enumerate(b) if d not in dims):
            red.append(i)
        else:
            kept.append(i)
    return kept, red, bc


# ------------------------------------------------------------------ emulator == reference
@pytest.mark.parametrize("case", NAMED, ids=[c[0] for c in NAMED])
def test_named_every_combine_and_dtype(case):
    for combine, dtype in itertools.product(COMBINES, REDUCE_DTYPES):
        check_reduce(plan(case, combine, dtype), rng=SEED)


@pytest.mark.parametrize("case", [c for c in NAMED if plan(c).warps is not None],
                         ids=[c[0] for c in NAMED if plan(c).warps is not None])
def test_named_both_warp_stage_forms(case):
    """Either form of the warp stage (direct: every thread combines the partials of each of its
    outputs; spread: the threads share the outputs' combines, then load their results) gives the
    reference's bits: the same tree over k per output."""
    _, L, dims, target, arch, _ = case
    for form in ("direct", "spread"):
        for combine, dtype in itertools.product(COMBINES, REDUCE_DTYPES):
            p = plan_reduce(L, dims, combine, dtype, target, arch, form=form)
            assert p.warps.spread == (form == "spread") and p.strategy == "smem"
            check_reduce(p, rng=SEED)


def test_random_layouts_both_warp_stage_forms():
    rng = random.Random(SEED + 2)
    n = 0
    for case in RANDOM:
        _, L, dims, target, arch, _ = case
        for form in ("direct", "spread"):
            combine, dtype = rng.choice(list(itertools.product(COMBINES, REDUCE_DTYPES)))
            p = plan_reduce(L, dims, combine, dtype, target, arch, form=form)
            if p.warps is None:
                break
            check_reduce(p, rng=rng.randrange(1 << 30))
            n += 1
    assert n >= 10, n


def test_random_layouts_emulator_equals_reference():
    rng = random.Random(SEED + 1)
    kinds = set()
    for case in RANDOM:
        for combine, dtype in rng.sample(list(itertools.product(COMBINES, REDUCE_DTYPES)), 3) + [("sum", "f32")]:
            p = plan(case, combine, dtype)
            check_reduce(p, rng=rng.randrange(1 << 30))
            kinds.add(p.strategy)
    assert kinds == {"registers", "shuffle", "smem"}, kinds


def test_corpus_covers_every_level_and_broadcast():
    strategies = {plan(c).strategy for c in ALL}
    assert strategies == {"registers", "shuffle", "smem"}
    bc = {d: 0 for d in ("register", "lane", "warp")}
    for c in ALL:
        for d in bc:
            bc[d] += bool(flat_kinds(c[1], c[2], d)[2])
    assert all(n >= 3 for n in bc.values()), bc
    assert {plan(c).warp_size for c in ALL} == {32, 64}
    assert any(len(c[2]) == 2 for c in ALL)


def test_reference_sum_order_is_the_plans_not_numpys():
    """The reference's f32 sum of the wgmma rows differs from numpy's own (pairwise) sum somewhere:
    bit-exactness means something."""
    case = next(c for c in NAMED if c[0] == "wgmma_rows")
    p = plan(case, "sum", "f32")
    flat = reduce_tensor("f32", "sum", int(np.prod(p.shape)), np.random.default_rng(1))
    out, _, _ = reduce_reference(case[1], (1,), "sum", "f32", flat)
    x = flat.view(np.float32).reshape(p.shape)
    assert not np.array_equal(out.view(np.float32), x.sum(axis=1, dtype=np.float32))
    assert np.allclose(out.view(np.float32), x.astype(np.float64).sum(axis=1), atol=1e-4)


def test_element_arithmetic():
    a = np.float32([1.0, 3.0, 1.0078125, -2.5, 1.0])
    b = np.float32([2.0 ** -8, 2.0 ** -7, 2.0 ** -8, 2.0 ** -7, 2.0 ** -8 + 2.0 ** -12])
    got = reduce_op("sum", "bf16")(a, b)
    # halfway cases at bf16's 8-bit significand go to the even neighbour; above halfway up
    assert got.tolist() == [1.0, 3.0, 1.015625, -2.5, 1.0078125]
    assert bf16_round(np.float32([1.0 + 2 ** -8 + 2 ** -20])).item() == 1.0078125
    i = reduce_op("sum", "i32")(np.int32([2 ** 31 - 1]), np.int32([1]))
    assert i.tolist() == [-2 ** 31]
    h = reduce_op("sum", "f16")(np.float16([2048.0]), np.float16([1.0]))
    assert h.tolist() == [2048.0]                 # 2049 rounds to even in f16
    raw = reduce_tensor("bf16", "sum", 64, np.random.default_rng(0))
    assert np.array_equal(reduce_raw(reduce_values(raw, "bf16"), "bf16"), raw)


# ------------------------------------------------------------------ the result layout
@pytest.mark.parametrize("case", NAMED, ids=[c[0] for c in NAMED])
def test_result_is_tritons_slice_layout(case):
    name, L, dims, target, arch, c = case
    p = plan(case)
    spec, shape = c.src, list(c.src["shape"])
    for d in sorted(dims, reverse=True):
        del shape[d]
        spec = sliced(spec, d, list(shape))
    want = spec_from_dict(spec).linear
    assert layout_of(p.dst_bases) == want, name
    assert p.result_shape == tuple(shape)


@pytest.mark.parametrize("case", ALL, ids=[c[0] for c in ALL])
def test_result_layout_is_the_projection(case):
    """Result register j of (lane, warp) holds the kept coordinates of source register
    expand(j) of (lane, warp); the broadcast back names that register."""
    _, L, dims, *_ = case
    p = plan(case)
    D = layout_of(p.dst_bases)
    kept, _, _ = flat_kinds(L, dims, "register")
    keep = [d for d in range(len(L.out_dims)) if d not in dims]
    src_pts, dst_pts = L.apply_all(), D.apply_all()
    n_src = L.in_dim_size("register")
    assert p.n_dst == 1 << len(kept) == D.in_dim_size("register")
    for w in range(p.num_warps):
        for lane in range(p.warp_size):
            t = (w * p.warp_size + lane)
            for j in range(p.n_dst):
                r = sum(((j >> i) & 1) << b for i, b in enumerate(kept))
                assert list(dst_pts[t * p.n_dst + j]) == [src_pts[t * n_src + r][d] for d in keep]
    for r in range(n_src):
        j = p.dst_of_src[r]
        assert sum(((r >> b) & 1) << i for i, b in enumerate(kept)) == j


# ------------------------------------------------------------------ counts
@pytest.mark.parametrize("case", ALL, ids=[c[0] for c in ALL])
def test_counts(case):
    _, L, dims, *_ = case
    p = plan(case)
    _, l_red, l_bc = flat_kinds(L, dims, "lane")
    _, w_red, w_bc = flat_kinds(L, dims, "warp")
    r_kept, r_red, r_bc = flat_kinds(L, dims, "register")
    assert p.lane_xors == tuple(1 << b for b in l_red)                  # lowest first, reduced bits only
    assert not any(x & (1 << b) for x in p.lane_xors for b in l_bc)     # never over a broadcast lane bit
    assert p.shuffles == len(p.lane_xors) * p.n_dst
    assert (p.warps is not None) == bool(w_red)
    assert p.smem_bytes == (p.n_dst and p.warps.bytes if p.warps else 0)
    assert p.strategy == ("smem" if w_red else "shuffle" if l_red else "registers")
    if p.warps:
        assert p.warps.warp_bits == tuple(w_red) and p.warps.parts == 1 << len(w_red)
        assert p.warps.warp_skip == sum(1 << b for b in w_bc)
        assert p.warps.bytes >= p.warps.outputs * p.warps.parts * p.elem_bytes
    taken = sorted(r for g in p.groups for r in g.srcs)
    assert taken == [r for r in range(p.n_src) if not any(r >> b & 1 for b in r_bc)]
    assert sorted(g.dst for g in p.groups) == list(range(p.n_dst))
    assert all(list(g.srcs) == sorted(g.srcs) and len(g.srcs) == 1 << len(r_red) for g in p.groups)


@pytest.mark.parametrize("case", ALL, ids=[c[0] for c in ALL])
def test_warp_stage_forms_scored(case):
    """With a warp stage both forms are candidates, cheapest first, the plan's form the cheapest's
    (the direct form on a tie); the spread form shares the outputs among all the block's threads,
    reuses partial 0's slots for the results (no more scratch) and takes a third barrier."""
    from ll_codegen.plan.report import reduce_summary
    for dtype in ("f32", "f16"):
        p = plan(case, "sum", dtype)
        names = [c.strategy for c in p.candidates]
        scores = [c.score for c in p.candidates]
        assert scores == sorted(scores)
        if p.warps is None:
            assert names == [p.strategy]
            continue
        assert sorted(names) == ["smem", "smem-spread"]
        assert names[0] == ("smem-spread" if p.warps.spread else "smem")
        if scores[0] == scores[1]:
            assert not p.warps.spread
        d, sp = (plan_reduce(case[1], case[2], "sum", dtype, case[3], case[4], form=f).warps
                 for f in ("direct", "spread"))
        assert (d.spread, d.stride, d.results, d.barriers) == (False, 0, 0, 2)
        assert (sp.spread, sp.stride, sp.results, sp.barriers) == (True, p.threads, 0, 3)
        assert sp.bytes == d.bytes == d.outputs * d.parts * p.elem_bytes
        assert sp.share == -(-sp.outputs // p.threads)
        text = reduce_summary(p)
        assert f"form: {'spread' if p.warps.spread else 'direct'}" in text and f"{p.warps.barriers} barriers" in text
        assert f"*{names[0]}" in text


def _brute_stage(p):
    """(store, load, combine) wavefronts of the busiest warp, counted by ``banks.count_wavefronts``
    on the emulator's byte addresses of every warp-stage instruction (``warp_stage_accesses``):
    the partials' stores, the thread's own loads (direct: every partial; spread: the results), the
    spread form's combine loop."""
    from ll_codegen.core.target import get_target
    from ll_codegen.verify.emulate.banks import count_wavefronts
    from ll_codegen.verify.emulate.reduce import warp_stage_accesses
    t = get_target(p.target, p.arch)
    acc = warp_stage_accesses(p)
    n, m = len(p.warps.vectors), p.warps
    if m.spread:
        groups = (acc[:n], acc[-n:], acc[n:-n])
    else:
        groups = (acc[:n], acc[n:], [])

    def busiest(entries):
        return max(sum(count_wavefronts(a[w], nb, t, d == "load") for d, a, nb in entries if (a[w] >= 0).any())
                   for w in range(p.num_warps)) if entries else 0
    return tuple(busiest(g) for g in groups)


@pytest.mark.parametrize("case", ALL, ids=[c[0] for c in ALL])
def test_warp_stage_wavefronts_equal_brute_force(case):
    """The plan's wavefronts of the warp stage (``stage_wavefronts``: Lemma 9.4 on the result
    layout's lane offsets at the vector width; what the form's score weighs) equal the brute-force
    count on the emulator's addresses, in both forms and for 4- and 2-byte elements, vectorised
    accesses included."""
    from ll_codegen.core.target import get_target
    from ll_codegen.plan.reduce import row_major_images, stage_wavefronts
    for dtype in ("f32", "f16"):
        for form in ("direct", "spread"):
            p = plan_reduce(case[1], case[2], "sum", dtype, case[3], case[4], form=form)
            if p.warps is None:
                return
            lanes = [p.elem_bytes * i for i in row_major_images(layout_of(p.dst_bases), "lane")]
            want = stage_wavefronts(p.warps, lanes, p.elem_bytes, get_target(p.target, p.arch))
            assert want == _brute_stage(p), (case[0], dtype, form, p.warps.vectors)


def test_vector_accesses_where_the_registers_are_adjacent():
    """A thread's adjacent result elements move as one access: blocked_cols (8 consecutive
    columns a thread) in 16-byte accesses of 4 f32 / 8 f16, the wgmma and mma_v2 accumulators
    (column pairs) in pairs, the row reductions (one column a register) one element at a time;
    random layouts reach every width; every plan's groups pass the emulator's adjacency and
    alignment check (``vector_slots``)."""
    from ll_codegen.verify.emulate.reduce import vector_slots
    by = {c[0]: c for c in NAMED}
    assert plan(by["blocked_cols"], "sum", "f32").warps.vectors == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert plan(by["blocked_cols"], "sum", "f16").warps.vectors == (tuple(range(8)),)
    for name in ("wgmma_cols", "mma_v2_cols"):
        for dtype in ("f32", "f16"):
            v = plan(by[name], "sum", dtype).warps.vectors
            assert v == tuple((j, j + 1) for j in range(0, 2 * len(v), 2)), (name, dtype)
    assert plan(by["mma_v2_rows"], "sum", "f32").warps.vec == 1
    widths = set()
    for case in ALL:
        for dtype in ("f32", "f16"):
            p = plan(case, "sum", dtype)
            if p.warps is not None:
                vector_slots(p)
                widths.add(p.warps.vec * p.elem_bytes)
    assert {4, 8, 16} <= widths, widths


def test_mutation_vector_group_out_of_order_or_misaligned():
    """A vector group whose registers are listed out of element order, one that merges registers
    two elements apart, and a wider group than the layout keeps adjacent are each refused by the
    emulator; the one-element-an-access variant of the same plan is accepted (same values)."""
    from ll_codegen.verify.emulate.reduce import warp_stage_accesses
    case = next(c for c in NAMED if c[0] == "blocked_cols")
    for form in ("direct", "spread"):
        p = plan_reduce(case[1], case[2], "sum", "f32", case[3], case[4], form=form)
        m = p.warps
        for bad in (((1, 0, 2, 3), (4, 5, 6, 7)), ((0, 2), (1, 3), (4, 5), (6, 7)), (tuple(range(8)),)):
            with pytest.raises(SmemError, match="adjacent|16-byte|misaligned"):
                check_reduce(_with(p, warps=replace(m, vectors=bad)))
            with pytest.raises(SmemError):
                warp_stage_accesses(_with(p, warps=replace(m, vectors=bad)))
        check_reduce(_with(p, warps=replace(m, vectors=tuple((j,) for j in range(p.n_dst)))))


def test_wgmma_cols_spreads_the_cross_warp_combine():
    """The wgmma accumulator summed over dim 0 (32 result registers x 4 warp partials): the spread
    form (each of the 128 threads combines one output's 4 partials) beats 128 loads a thread."""
    case = next(c for c in NAMED if c[0] == "wgmma_cols")
    p = plan(case, "sum", "f32")
    assert p.n_dst == 32 and p.warps.parts == 4 and p.warps.outputs == 128 and p.threads == 128
    assert p.warps.spread and p.warps.share == 1 and p.candidates[0].score < p.candidates[1].score


def test_wgmma_rows_is_two_rounds_no_smem():
    """The softmax row reduction of a wgmma accumulator: lanes 0x1, 0x2, no shared memory."""
    case = next(c for c in NAMED if c[0] == "wgmma_rows")
    p = plan(case, "max", "f32")
    assert p.lane_xors == (1, 2) and p.warps is None and p.smem_bytes == 0
    assert p.n_dst == 4 and p.shuffles == 8


# ------------------------------------------------------------------ mutations
def _with(p, **kw):
    return replace(p, **kw)


def _raises(p, tries=8):
    """The check fails on some of ``tries`` seeded inputs (a max over half the elements of a lone
    output is the max over all of them with probability 1/2)."""
    for k in range(tries):
        try:
            check_reduce(p, rng=SEED + k)
        except AssertionError:
            return
    pytest.fail(f"{tries} checks of the mutated plan passed: {p}")


def _plans(cond, combine="sum", dtype="f32"):
    out = [plan(c, combine, dtype) for c in ALL]
    out = [p for p in out if cond(p)]
    assert len(out) >= 3, "too few plans for this mutation"
    return out


def test_mutation_wrong_shuffle_mask():
    """A round's mask xored with a kept lane bit combines two different outputs."""
    n = 0
    for combine in ("sum", "max"):
        for p in _plans(lambda p: p.lane_xors, combine):
            L = layout_of(p.src_bases)
            kept, _, _ = flat_kinds(L, p.dims, "lane")
            if not kept:
                continue
            for i in range(len(p.lane_xors)):
                xors = list(p.lane_xors)
                xors[i] ^= 1 << kept[0]
                _raises(_with(p, lane_xors=tuple(xors)))
                n += 1
    assert n >= 10


def test_mutation_dropped_lane_round():
    n = 0
    for combine in ("sum", "max", "min"):
        for p in _plans(lambda p: p.lane_xors, combine):
            for i in range(len(p.lane_xors)):
                _raises(_with(p, lane_xors=p.lane_xors[:i] + p.lane_xors[i + 1:]))
                n += 1
    assert n >= 10


def test_mutation_swapped_warp_partial_order():
    """Summing the warp partials in another order (the reduced warp bits reversed) differs in the
    last bits of some float sum: bit-exactness catches it."""
    n = 0
    for dtype in ("f32", "f16", "bf16"):
        for p in _plans(lambda p: p.warps is not None and len(p.warps.warp_bits) >= 2, "sum", dtype):
            _raises(_with(p, warps=replace(p.warps, warp_bits=p.warps.warp_bits[::-1])))
            n += 1
    assert n >= 6


def test_mutation_broadcast_register_combined_twice():
    n = 0
    for dtype in ("f32", "i32"):
        for p in _plans(lambda p: flat_kinds(layout_of(p.src_bases), p.dims, "register")[2], "sum", dtype):
            bit = flat_kinds(layout_of(p.src_bases), p.dims, "register")[2][0]
            g = p.groups[0]
            groups = (RegisterGroup(g.dst, g.srcs + (g.srcs[0] | 1 << bit,)),) + p.groups[1:]
            _raises(_with(p, groups=groups))
            n += 1
    assert n >= 6


def test_mutation_register_group_dropped_or_doubled():
    p = plan(next(c for c in NAMED if c[0] == "wgmma_rows"))
    _raises(_with(p, groups=p.groups[1:]))
    _raises(_with(p, groups=p.groups + p.groups[:1]))
    _raises(_with(p, dst_of_src=tuple(reversed(p.dst_of_src))))


def test_mutation_warp_stage_race_and_unwritten_slot():
    """Dropping a reduced warp bit from the stage makes two warps store different partials to one
    slot (a race); skipping a kept lane bit's lanes leaves slots unwritten."""
    races = unwritten = 0
    for p in _plans(lambda p: p.warps is not None):
        m = p.warps
        if len(m.warp_bits) >= 1:
            bad = replace(m, warp_bits=m.warp_bits[1:], parts=m.parts // 2)
            with pytest.raises(SmemError, match="race"):
                check_reduce(_with(p, warps=bad))
            races += 1
        kept, _, _ = flat_kinds(layout_of(p.src_bases), p.dims, "lane")
        if kept:
            with pytest.raises(SmemError, match="never stored"):
                check_reduce(_with(p, warps=replace(m, lane_skip=m.lane_skip | 1 << kept[0])))
            unwritten += 1
    assert races >= 3 and unwritten >= 3


def test_mutation_spread_share_shifted():
    """The spread form with a thread's result stored one output along (at its neighbour's partial 0,
    which the neighbour loads between the same barriers: a race), with the outputs shared among
    half the threads (two threads combine one output while the other stores it: a race), and with
    the stride doubled where a thread has several outputs (results never stored) -- all caught."""
    shifted = overlap = missing = 0
    for dtype in ("f32", "i32"):
        for p in _plans(lambda p: p.warps is not None, "sum", dtype):
            sp = plan_reduce(layout_of(p.src_bases), p.dims, "sum", dtype, p.target, p.arch, form="spread")
            m = sp.warps
            if m.outputs > 1:                  # one output: slot 1 is its own partial 1, a correct variant
                scalar = replace(m, vectors=tuple((j,) for j in range(sp.n_dst)))   # one element an access
                with pytest.raises(SmemError, match="race"):
                    check_reduce(_with(sp, warps=replace(scalar, results=1)))
                if m.vec > 1:                  # the vector loads of the results would be misaligned first
                    with pytest.raises(SmemError, match="misaligned"):
                        check_reduce(_with(sp, warps=replace(m, results=1)))
                shifted += 1
            if m.outputs > m.stride // 2:
                with pytest.raises(SmemError, match="race"):
                    check_reduce(_with(sp, warps=replace(m, stride=m.stride // 2)))
                overlap += 1
            if m.outputs > m.stride:
                with pytest.raises(SmemError, match="never stored"):
                    check_reduce(_with(sp, warps=replace(m, stride=2 * m.stride)))
                missing += 1
            # a correct variant the emulator must accept: the results at partial 1's slots (only the
            # combining thread reads them, before it stores)
            check_reduce(_with(sp, warps=replace(m, results=m.outputs)))
    assert shifted >= 6 and overlap >= 2 and missing >= 2, (shifted, overlap, missing)


def test_mutation_spread_result_read_before_it_is_stored():
    """Without the third barrier's effect -- a result slot outside every thread's share -- the
    loads read a slot no result was stored to."""
    case = next(c for c in NAMED if c[0] == "blocked_cols")
    p = plan_reduce(case[1], case[2], "max", "f32", case[3], case[4], form="spread")
    m = replace(p.warps, vectors=tuple((j,) for j in range(p.n_dst)))     # one element an access: any slot aligned
    with pytest.raises(SmemError, match="never stored|race|beyond"):
        check_reduce(_with(p, warps=replace(m, results=(m.parts - 1) * m.outputs + 1)))
    with pytest.raises(SmemError, match="beyond"):
        check_reduce(_with(p, warps=replace(m, results=m.parts * m.outputs)))


def test_emulator_uses_the_targets_shuffle_semantics():
    """A lane mask beyond the warp is refused; a wave64 plan's round over lane bit 5 reaches the
    other half of the wave."""
    p = next(q for q in (plan(c, "max", "f32") for c in NAMED) if 32 in q.lane_xors)
    assert p.warp_size == 64
    check_reduce(p)
    _raises(_with(p, lane_xors=p.lane_xors + (64,)))


# ------------------------------------------------------------------ harness data
def test_harness_data_and_compare():
    p = plan(next(c for c in NAMED if c[0] == "blocked_cols"), "sum", "bf16")
    run = REDUCE.data(p, np.random.default_rng(3), "")
    assert [a.dtype for a in run.args] == [np.uint16] * 4
    assert REDUCE.c_types(p) == ["const uint16_t*", "uint16_t*", "uint16_t*", "uint16_t*"]
    assert run.args[1].shape == (64,) and run.args[2].shape == (p.threads, p.n_dst)
    assert run.args[3].shape == (p.threads, p.n_src)
    good = {k: v.copy() for k, v in run.wants.items()}
    assert REDUCE.compare("h", p, run, good, "ok", None).ok
    # the emulator's registers are what the harness must write
    L = layout_of(p.src_bases)
    regs, back = emulate_reduce(p, regs_of(L, reduce_values(run.args[0].reshape(p.shape), p.dtype)))
    assert np.array_equal(reduce_raw(regs, p.dtype).reshape(p.threads, -1), run.wants[2])
    assert np.array_equal(reduce_raw(back, p.dtype).reshape(p.threads, -1), run.wants[3])
    for k in (1, 2, 3):
        bad = dict(good)
        bad[k] = good[k].copy()
        bad[k].reshape(-1)[5] ^= 1
        r = REDUCE.compare("h", p, run, bad, "ok", None)
        assert not r.ok and ("element 5" in r.message or "thread" in r.message)
    bad = dict(good)
    bad[2] = run.args[2].copy()                       # never written
    assert "poison" in REDUCE.compare("h", p, run, bad, "ok", None).message


# ------------------------------------------------------------------ generated code (compile marker)
def _registered():
    from ll_codegen.operations import OPERATIONS
    if "reduce" not in OPERATIONS:
        pytest.skip("the reduce operation is not in the registry yet (operations.py)")


def compiled_sample(targets=("cuda", "hip")):
    """Named cases, each with two (combine, dtype) pairs in rotation so that every pair occurs,
    plus a few random layouts: (name, plan)."""
    pairs = list(itertools.product(COMBINES, REDUCE_DTYPES))
    out = []
    for i, case in enumerate(NAMED + RANDOM[::8]):
        if case[3] not in targets:
            continue
        for combine, dtype in (pairs[(2 * i) % len(pairs)], pairs[(2 * i + 5) % len(pairs)]):
            out.append((f"rd_{case[0]}_{combine}_{dtype}", plan(case, combine, dtype)))
    return out


@pytest.mark.compile
def test_host_simt_runs_generated_harnesses():
    """Every sampled harness, rendered and compiled for the host SIMT runtime unchanged, writes the
    reference's result tensor, result registers and broadcast back bit for bit (CUDA warp 32, HIP
    wave64 and RDNA wave32), with the runtime's race / uninitialised-read checks on the scratch."""
    _registered()
    from ll_codegen.run import host
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    items = compiled_sample()
    assert {p.warp_size for _, p in items} == {32, 64}
    assert {p.strategy for _, p in items} == {"registers", "shuffle", "smem"}
    assert {(p.combine, p.dtype) for _, p in items} == set(itertools.product(COMBINES, REDUCE_DTYPES))
    bad = [r.message for r in host.verify_host(items, runs=2, seed=SEED) if not r.ok]
    assert not bad, f"{len(bad)} of {len(items)} failed; first: " + "\n".join(bad[:4])


@pytest.mark.compile
def test_host_simt_catches_a_wrong_shuffle_mask(tmp_path):
    """A generated header whose first butterfly mask is xored with a kept lane bit fails the host
    run (the registers differ from the reference)."""
    _registered()
    from ll_codegen.operations import write_files
    from ll_codegen.run import host
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    case = next(c for c in NAMED if c[0] == "wgmma_rows")
    p = plan(case, "max", "f32")
    write_files(p, str(tmp_path), "rdm", emit=("header", "harness"))
    path = tmp_path / "rdm.cuh"
    text = path.read_text()
    assert text.count("detail::shfl_xor(dst[0], 0x1)") == 1
    path.write_text(text.replace("detail::shfl_xor(dst[0], 0x1)", "detail::shfl_xor(dst[0], 0x5)"))
    (tmp_path / "build").mkdir()
    [r] = host.verify_host([("rdm", p)], sources=str(tmp_path), keep=str(tmp_path / "build"))
    assert not r.ok and "result register" in r.message


def _ptx_items():
    return [(n, p) for n, p in compiled_sample(("cuda",))][::2]


@pytest.mark.compile
def test_ptx_is_what_the_plans_say(tmp_path):
    """nvcc's PTX of sampled harnesses, run by the PTX interpreter: outputs bit for bit (float sums,
    max, min on f32 / f16 / bf16 included) and per thread the shuffles (mask, clamp, member mask,
    payload) and the warp stage's barriers, stores and loads element by element."""
    _registered()
    from ll_codegen.operations import write_files
    from ll_codegen.run import ptx_check
    from ll_codegen.verify.ptx.sim import parse
    from toolchain import owner, ptx_units, split_ptx
    items = _ptx_items()
    assert {p.strategy for _, p in items} >= {"shuffle", "smem"}
    forms = {(p.warps.spread, p.warps.outputs > p.warps.stride) for _, p in items if p.warps is not None}
    assert forms >= {(False, True), (True, False), (True, True)}, forms     # direct; spread, 1 and 2 outputs a thread
    for name, p in items:
        write_files(p, str(tmp_path), name, emit=("header", "harness"))
    units: dict[str, str] = {}                  # name -> the PTX of its translation unit
    for arch in sorted({p.arch for _, p in items}):
        units.update(ptx_units([n for n, p in items if p.arch == arch], str(tmp_path), arch))
    parsed = {t: parse(t) for t in set(units.values())}
    mine = {}                                   # name -> the PTX of its harness's kernels and functions
    for t in set(units.values()):
        for sym, body in split_ptx(t).items():
            n = owner(sym, [n for n in units if units[n] == t])
            if n is not None:
                mine[n] = mine.get(n, "") + body
    bad = []
    plans = dict(items)
    vectorised = 0
    for name in plans:
        text = mine[name]
        bad += ptx_check.check_kernels(plans[name], parsed[units[name]], name)
        m = plans[name].warps
        if m is not None and m.vec > 1:
            # the thread's own slots: exactly the plan's vector accesses, at its width (PTX ISA st/ld.shared)
            t = PTX_SHARED_TYPES[m.vec * plans[name].elem_bytes].replace(".", r"\.")
            n = len(m.vectors)
            got = [len(re.findall(rf"\b{k}\.shared{t}\b", text)) for k in ("st", "ld")]
            assert got == [n, n if m.spread else n * m.parts], (name, got, m.vectors)
            vectorised += 1
    assert not bad, "\n".join(bad[:6])
    assert vectorised >= 2, vectorised


PTX_MUTATIONS = (
    # (case, combine, dtype, header text, its replacement, what the structural check names)
    ("wgmma_rows", "max", "f32", "detail::shfl_xor(dst[1], 0x2)", "detail::shfl_xor(dst[1], 0x6)", "shuffle"),
    ("wgmma_rows", "sum", "f16", "__shfl_xor_sync(0xffffffffu, w, mask)", "__shfl_xor_sync(0xffffffffu, w, mask, 16)",
     "shuffle"),
    ("blocked_cols", "sum", "f32", "detail::smem_u32(scratch + k * kOutputs + e), detail::word(dst[0])",
     "detail::smem_u32(scratch + k * kOutputs + (e ^ 4)), detail::word(dst[0])", "instruction"),
    ("blocked_cols", "max", "bf16", "__syncthreads();  // every partial stored", "", "instruction"),
    # the spread form (blocked_cols f32: the planner's choice): a result stored one output along, the
    # results' barrier dropped
    ("blocked_cols", "sum", "f32", "detail::st(scratch + o, r);", "detail::st(scratch + (o ^ 1), r);", "instruction"),
    ("blocked_cols", "max", "f32", "__syncthreads();  // every result stored", "", "instruction"),
)


@pytest.mark.compile
@pytest.mark.parametrize("mutation", PTX_MUTATIONS, ids=[f"{m[0]}_{m[2]}_{i}" for i, m in enumerate(PTX_MUTATIONS)])
def test_ptx_structure_catches_mutations(tmp_path, mutation):
    """Each edit of the rendered header fails the structural check on its own (outputs not
    compared), while the unedited text passes."""
    _registered()
    from ll_codegen.operations import write_files
    from ll_codegen.run import ptx_check
    from toolchain import need
    nvcc = need("nvcc")
    case_name, combine, dtype, old, new, what = mutation
    p = plan(next(c for c in NAMED if c[0] == case_name), combine, dtype)
    write_files(p, str(tmp_path), "rdx", emit=("header", "harness"))
    header = tmp_path / "rdx.cuh"
    text = header.read_text()
    for edited in (False, True):
        if edited:
            assert text.count(old) == 1, old
            header.write_text(text.replace(old, new))
        ptx, log = ptx_check.compile_ptx(nvcc, str(tmp_path / "rdx_harness.cu"), p.arch, str(tmp_path / "rdx.ptx"))
        assert ptx, log
        problems = ptx_check.check(p, ptx, "rdx", behaviour=False)
        if not edited:
            assert not problems, problems
        else:
            assert problems and what in problems[0], problems


# ------------------------------------------------------------------ the PTX interpreter's floats
def test_ptx_float_arithmetic_rounds_once():
    """``verify/ptx/floats.py`` (what the PTX check runs the reductions' add / max / min / cvt with)
    against numpy's IEEE arithmetic: f32 and f16 add, sub, mul, max, min; bf16 add and bf16 fma by
    1.0 (sm_80's __hadd) against float32 rounded to bf16; f32 fma against float64 (exact product);
    conversions both ways; NaN and signed-zero rules."""
    from ll_codegen.verify.ptx import floats
    rng = np.random.default_rng(7)
    n = 600
    a = (rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n)).astype(np.float32)
    b = (rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n)).astype(np.float32)
    with np.errstate(over="ignore"):                   # beyond f16's range: infinities, converted too
        h, hb = a.astype(np.float16), b.astype(np.float16)
    for t, x, y in (("f32", a, b), ("f16", h, hb)):
        raw = {"f32": np.uint32, "f16": np.uint16}[t]
        for base, f in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("max", np.maximum),
                        ("min", np.minimum)):
            g = floats.arith(base, [], t)
            got = np.array([g(int(u), int(v)) for u, v in zip(x.view(raw), y.view(raw))], dtype=raw)
            with np.errstate(all="ignore"):
                want = f(x, y)
            sel = np.isfinite(want) & ~((x == 0) & (y == 0))
            assert np.array_equal(got[sel], want.view(raw)[sel]), (t, base)
    ba, bb = reduce_raw(bf16_round(a), "bf16"), reduce_raw(bf16_round(b), "bf16")
    want = reduce_raw(reduce_op("sum", "bf16")(reduce_values(ba, "bf16"), reduce_values(bb, "bf16")), "bf16")
    add, fma = floats.arith("add", ["rn"], "bf16"), floats.arith("fma", ["rn"], "bf16")
    assert [add(int(u), int(v)) for u, v in zip(ba, bb)] == want.tolist()
    assert [fma(int(u), 0x3f80, int(v)) for u, v in zip(ba, bb)] == want.tolist()
    c = rng.standard_normal(n).astype(np.float32)
    f32fma = floats.arith("fma", ["rn"], "f32")
    got = [f32fma(int(u), int(v), int(w)) for u, v, w in zip(a.view(np.uint32), b.view(np.uint32), c.view(np.uint32))]
    exact = a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)
    assert np.array_equal(np.array(got, dtype=np.uint32), exact.astype(np.float32).view(np.uint32))
    assert [floats.convert("f16", "f32", ["rn"])(int(u)) for u in a.view(np.uint32)] == h.view(np.uint16).tolist()
    assert [floats.convert("f32", "f16", [])(int(u)) for u in h.view(np.uint16)] == \
        h.astype(np.float32).view(np.uint32).tolist()
    assert [floats.convert("bf16", "f32", ["rn"])(int(u)) for u in a.view(np.uint32)] == ba.tolist()
    mx = floats.arith("max", [], "f32")
    nan, one = 0x7fc00001, 0x3f800000
    assert mx(nan, one) == one and mx(one, nan) == one and mx(nan, nan) == floats.canonical_nan("f32")
    assert mx(0x80000000, 0) == 0 and floats.arith("min", [], "f32")(0, 0x80000000) == 0x80000000
    assert floats.arith("add", [], "f32")(0x7f800000, 0xff800000) == floats.canonical_nan("f32")
    with pytest.raises(Exception, match="not modelled"):
        floats.arith("add", ["sat"], "f32")
