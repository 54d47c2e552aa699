"""Butterfly conversions (strategy ``butterfly``, ``plan/butterfly.py``): chains of warp shuffle
steps, each exchanging one lane bit with one register bit.

Checked independently of the planner: the chain's layouts by their bases (each step a single
transposition of a lane and a register column, the fewest by a brute-force search over column
permutations), every plan by the numpy emulator against the reference, the rendered code on the
host SIMT runtime, and the cost of a step by counting, per thread, the words that arrive from
another lane."""
from __future__ import annotations

import itertools
import random
from collections import deque

import numpy as np
import pytest

from ll_codegen.api import plan_conversion
from ll_codegen.core.layout import LinearLayout, layout_of
from ll_codegen.operations import check, write_files
from ll_codegen.plan.butterfly import swap_sequence, swapped
from ll_codegen.plan.planner import normalise
from ll_codegen.plan.plans import steps
from ll_codegen.run import host, ptx_check
from ll_codegen.spec import spec_from_dict
from ll_codegen.testing.corpus import blocked, random_layout, random_pair

# bench/bench_convert.py's warp-local transpose: each warp's 8x32 block, registers along columns -> rows
WARP_T_SRC = blocked([1, 8], [8, 4], [8, 1], [1, 0], [64, 32])
WARP_T_DST = blocked([8, 1], [1, 32], [8, 1], [1, 0], [64, 32])


def _layouts(src: dict, dst: dict) -> tuple[LinearLayout, LinearLayout]:
    return normalise(spec_from_dict(dict(src)).linear), normalise(spec_from_dict(dict(dst)).linear)


def _columns(L: LinearLayout) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    return tuple(map(tuple, L.bases["register"])), tuple(map(tuple, L.bases["lane"]))


def _fewest_swaps(src: LinearLayout, dst: LinearLayout) -> int:
    """Breadth-first search over (register set, lane columns): a move exchanges one lane column
    with one register column (registers unordered: an in-thread move is free)."""
    reg, lane = _columns(src)
    goal = (frozenset(_columns(dst)[0]), _columns(dst)[1])
    start = (frozenset(reg), lane)
    seen, todo = {start: 0}, deque([start])
    while todo:
        state = todo.popleft()
        if state == goal:
            return seen[state]
        regs, lanes = state
        for j in range(len(lanes)):
            for r in regs:
                nxt = (regs - {r} | {lanes[j]}, lanes[:j] + (r,) + lanes[j + 1:])
                if nxt not in seen:
                    seen[nxt] = seen[state] + 1
                    todo.append(nxt)
    raise AssertionError("unreachable")


def _random_warp_local(rng: random.Random) -> tuple[LinearLayout, LinearLayout]:
    """Two random layouts of one shape with the same warp columns and no broadcast: a
    permutation of the register and lane columns within each warp."""
    warps = 1 << rng.randint(0, 2)
    total = 5 + warps.bit_length() - 1 + rng.randint(1, 4)
    d0 = rng.randint(0, total)
    shape = {"dim0": 1 << d0, "dim1": 1 << (total - d0)}
    src = random_layout(rng, shape, 32, warps, broadcast=0.0)
    dst = random_layout(rng, shape, 32, warps, broadcast=0.0, warp_bits=src.flat_bases("warp"))
    return normalise(src), normalise(dst)


def _random_pairs(n: int, seed: int = 7) -> list[tuple[LinearLayout, LinearLayout]]:
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        src, dst = _random_warp_local(rng)
        seq = swap_sequence(src, dst)
        if seq is not None and len(seq) >= 2:
            out.append((src, dst))
    return out


def test_warp_transpose_swaps_are_the_docstring_example():
    src, dst = _layouts(WARP_T_SRC, WARP_T_DST)
    seq = swap_sequence(src, dst)
    # lanes 0-2 take (0,1) (0,2) (0,4) from registers; lanes 3 and 4 take (0,8) and (0,16) back from
    # the registers lanes 0 and 1 left them in
    assert [(j, tuple(v)) for j, v in seq] == [(0, (0, 1)), (1, (0, 2)), (2, (0, 4)), (3, (0, 8)), (4, (0, 16))]
    assert len(seq) == _fewest_swaps(src, dst) == 5


@pytest.mark.parametrize("k", range(12))
def test_swap_sequence_is_the_fewest_and_lands_on_the_destination(k):
    src, dst = _random_pairs(12)[k]
    seq = swap_sequence(src, dst)
    assert len(seq) == _fewest_swaps(src, dst)
    cur = src
    for j, v in seq:
        cur = swapped(cur, j, v, 0)
    assert cur.bases["lane"] == dst.bases["lane"]
    assert sorted(cur.bases["register"]) == sorted(dst.bases["register"])


def test_no_chain_with_broadcast_or_other_vectors():
    src, dst = _layouts(WARP_T_SRC, WARP_T_DST)
    lanes = [list(b) for b in dst.bases["lane"]]
    lanes[0] = [0, 0]                                           # a broadcast lane
    assert swap_sequence(src, LinearLayout(dict(dst.bases, lane=lanes), dst.out_dim_sizes,
                                           require_surjective=False)) is None
    lanes[0] = [1, 1]                                           # a vector no source column holds
    regs = [list(b) for b in dst.bases["register"]]
    regs[0] = [0, 1]
    assert swap_sequence(src, LinearLayout(dict(dst.bases, lane=lanes, register=regs), dst.out_dim_sizes)) is None


def _element(L: LinearLayout, register: int, lane: int) -> int:
    """The flat tensor index warp 0's ``lane`` holds in ``register`` (XOR of the set bits' columns)."""
    x = 0
    for dim, value in (("register", register), ("lane", lane)):
        for k, v in enumerate(L.flat_bases(dim)):
            x ^= v if value >> k & 1 else 0
    return x


def _exchange(step, elem_bytes: int) -> tuple[set[int], set[int], int]:
    """Brute force over warp 0's lanes and registers, from the step's two layouts: (the xors
    ``u ^ t`` of every lane u with each other lane t it receives an element from, the numbers of
    elements each lane receives, the most words a lane receives, 4 bytes a word)."""
    a, b = layout_of(step.src_bases), layout_of(step.dst_bases)
    n = a.in_dim_size("register")
    lane_of = {_element(a, r, lane): lane for lane in range(32) for r in range(n)}
    sources = [[lane_of[_element(b, r, lane)] for r in range(n)] for lane in range(32)]
    xors = {u ^ t for u, row in enumerate(sources) for t in row if t != u}
    moved = {sum(t != u for t in row) for u, row in enumerate(sources)}
    return xors, moved, -(-max(moved) * elem_bytes // 4)


@pytest.mark.parametrize("dtype", ["i8", "f16", "f32"])
def test_each_step_is_one_transposition_and_costs_one_shuffle_per_moved_word(dtype):
    src, dst = _layouts(WARP_T_SRC, WARP_T_DST)
    plan = plan_conversion(src, dst, dtype, strategy="butterfly")
    chain = steps(plan)
    assert [s.strategy for s in chain] == ["shuffle"] * 5
    assert layout_of(chain[0].src_bases) == src and layout_of(chain[-1].dst_bases) == dst
    for s, t in itertools.pairwise(chain):
        assert s.dst_bases == t.src_bases
    for s in chain:
        a, b = layout_of(s.src_bases), layout_of(s.dst_bases)
        assert a.bases["warp"] == b.bases["warp"]
        xors, moved, words = _exchange(s, plan.elem_bytes)
        assert len(xors) == 1 and moved == {4}               # one partner lane, half of the 8 elements
        assert s.shuffle.shuffles == words == plan.elem_bytes   # 4 elements, 4 bytes a word
    check(plan, 3)


def test_auto_takes_the_butterfly_for_the_8bit_warp_transpose_only_when_cheaper():
    src, dst = _layouts(WARP_T_SRC, WARP_T_DST)
    for dtype in ("i8", "f16", "f32"):
        plan = plan_conversion(src, dst, dtype)
        scores = {c.strategy: min(d.score for d in plan.candidates if d.strategy == c.strategy)
                  for c in plan.candidates}
        assert "butterfly" in scores
        assert plan.strategy == min(scores, key=scores.get)
    assert plan_conversion(src, dst, "i8").strategy == "butterfly"


def test_forced_butterfly_errors_in_one_line():
    src, _ = _layouts(WARP_T_SRC, WARP_T_DST)
    with pytest.raises(ValueError, match="no data crosses lanes"):
        plan_conversion(src, src, "f16", strategy="butterfly")
    one = swapped(src, 2, [0, 1], 0)                            # a single swap: the shuffle plan itself
    with pytest.raises(ValueError, match="found no chain"):
        plan_conversion(src, one, "f16", strategy="butterfly")


@pytest.mark.parametrize("dtype", ["i8", "f16", "f32", "f64"])
def test_random_warp_local_butterflies_match_the_reference(dtype):
    for src, dst in _random_pairs(10, seed=11):
        plan = plan_conversion(src, dst, dtype, strategy="butterfly")
        chain = steps(plan)
        assert len(chain) == len(swap_sequence(src, dst)) and all(s.strategy == "shuffle" for s in chain)
        check(plan, np.random.default_rng(5))


@pytest.mark.compile
@pytest.mark.skipif(host.compiler() is None, reason="no clang++ for the host SIMT runtime")
def test_butterflies_run_bit_exact_on_the_host_runtime():
    src, dst = _layouts(WARP_T_SRC, WARP_T_DST)
    items = [(f"bfly_warp_t_{d}", plan_conversion(src, dst, d, strategy="butterfly")) for d in ("i8", "f16", "f32")]
    items += [(f"bfly_rand{k}_{d}", plan_conversion(s, t, d, strategy="butterfly"))
              for k, (s, t) in enumerate(_random_pairs(3, seed=3)) for d in ("i8", "f32")]
    items += [("bfly_hip_f16", plan_conversion(src, dst, "f16", "hip", "gfx1030", strategy="butterfly"))]
    results = host.verify_host(items, runs=2, jobs=1)
    bad = [r.message for r in results if not r.ok]
    assert not bad, bad[0]


@pytest.mark.compile
@pytest.mark.parametrize("dtype", ["i8", "f16"])
def test_butterfly_ptx_is_what_the_plan_says(dtype, tmp_path):
    """nvcc -ptx of the harness (sm_90a), run by the PTX interpreter and compared thread by thread
    with the plan: one shfl.sync.bfly per word of each step, partner lane ^ 2^j, nothing else."""
    from toolchain import need
    nvcc = need("nvcc")
    src, dst = _layouts(WARP_T_SRC, WARP_T_DST)
    plan = plan_conversion(src, dst, dtype, arch="sm_90a", strategy="butterfly")
    write_files(plan, str(tmp_path), "m", emit=("header", "harness"))
    ptx, log = ptx_check.compile_ptx(nvcc, str(tmp_path / "m_harness.cu"), "sm_90a", str(tmp_path / "m.ptx"))
    assert ptx, log
    assert ptx_check.check(plan, ptx, "m") == []
    assert ptx.count("shfl.sync.bfly.b32") == sum(s.shuffle.shuffles for s in steps(plan)) == 5 * plan.elem_bytes


def test_auto_plans_random_pairs_with_and_without_a_chain():
    """Random warp-local pairs of the corpus (broadcast bases, one register a thread, any mix): auto
    plans each, a butterfly candidate exactly when ``swap_sequence`` finds two swaps or more, and a
    chosen butterfly matches the reference."""
    rng = random.Random(20261128)
    seen = {True: 0, False: 0}
    while sum(seen.values()) < 40:
        src, dst = (normalise(L) for L in random_pair(rng, same_warps=True, min_bits=0, max_bits=3))
        if src.bases["warp"] != dst.bases["warp"] or src == dst:
            continue
        plan = plan_conversion(src, dst, "i8")
        seq = swap_sequence(src, dst)
        chain = seq is not None and len(seq) >= 2 and plan.strategy != "register"
        assert any(c.strategy == "butterfly" for c in plan.candidates) == chain
        seen[chain] += 1
        if plan.strategy == "butterfly":
            check(plan, 2)
    assert min(seen.values()) >= 3, seen
    one = LinearLayout({"register": [], "lane": [[1 << k] for k in range(5)], "warp": []}, {"dim0": 32})
    assert swap_sequence(one, LinearLayout({"register": [], "lane": [[1 << k] for k in (1, 0, 2, 3, 4)], "warp": []},
                                           {"dim0": 32})) is None


def test_no_chain_of_fewer_half_steps_exists_for_the_warp_transpose():
    """In a step where each lane keeps half of its elements and swaps the other half with lane
    u ^ b, lane u's elements afterwards come from lanes u ^ span(b's so far).  Brute force over the
    two layouts: the xors between each destination lane and the source lanes of its elements span
    all 5 lane bits, so no chain of fewer than 5 such steps converts the pair -- the 5 steps of
    the plan (one shuffle each in 8-bit data) are the fewest."""
    src, dst = _layouts(WARP_T_SRC, WARP_T_DST)
    lane_of = {_element(src, r, lane): lane for lane in range(32) for r in range(8)}
    xors = sorted({c ^ lane_of[_element(dst, r, c)] for c in range(32) for r in range(8)} - {0})
    rank, basis = 0, []
    for x in xors:                                  # rank over F2 by elimination
        for b in basis:
            x = min(x, x ^ b)
        if x:
            basis.append(x)
            rank += 1
    assert rank == 5
    assert len(steps(plan_conversion(src, dst, "i8", strategy="butterfly"))) == 5
