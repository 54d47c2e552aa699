"""Memory as an endpoint: registers <-> a given shared tile or a global tile.

1. Property: random distributed layouts x every memory kind (random bijective
   ``shared_linear`` tiles, ``swizzled_shared``, ``nvmma_shared``, ``global``
   with random order and alignment) x 1/2/4/8-byte elements x warp 32 and
   64, stores and loads.  The emulator executes each plan and must match numpy
   for every thread (global tiles also at padded strides and masked by an
   extent that cuts every dim); the brute-force counters (bank conflicts from
   the executed addresses; 32-byte sectors) must equal the predictions.
2. Named pairs: what the planner must choose for the layouts kernels use
   (ldmatrix for mma operands out of a swizzled tile, 16-byte vectors, the
   conflicts a given layout forces, the CuTe descriptor as a tile).
3. The host SIMT runtime runs a sample of generated store()/load() headers
   bit-exact, masked forms included (CUDA wave32, HIP wave64 and wave32).
4. The CLI and the JSON plan state the memory side.
(Compile checks and PTX counts for memory plans are in ``test_compile.py``.)
"""
from __future__ import annotations

import json
import random

import pytest

from ll_codegen.api import plan_conversion
from ll_codegen.verify.emulate.banks import measure_memory
from ll_codegen.verify.emulate.memory import check_memory_plan
from ll_codegen.emit.harness_tiles import harness_cut, harness_strides
from toolchain import random_memory_plans

SEED = 1212
CONFIGS = (("cuda", "sm_90", 32), ("cuda", "sm_80", 32), ("hip", "gfx90a", 64), ("hip", "gfx1100", 32))
DTYPES = ("i8", "f16", "f32", "f64")


def _sample(n_per_config: int, seed: int = SEED):
    rng = random.Random(seed)
    out = []
    for target, arch, lanes in CONFIGS:
        out += [(target, arch) + x for x in random_memory_plans(rng, target, arch, lanes, n_per_config, DTYPES)]
    return out


SAMPLE = _sample(64)


def test_sample_covers_kinds_directions_sizes_and_warps():
    kinds = {(k, d) for _, _, k, d, *_ in SAMPLE}
    assert kinds == {(k, d) for k in ("shared_linear", "swizzled_shared", "nvmma_shared", "global")
                     for d in ("store", "load")}
    plans = [x[-1] for x in SAMPLE]
    assert {p.elem_bytes for p in plans} == {1, 2, 4, 8}
    assert {p.warp_size for p in plans} == {32, 64}
    assert any(p.memory.vec > 1 for p in plans) and any(p.memory.warp_skip or p.memory.lane_skip for p in plans)


@pytest.mark.parametrize("i", range(len(SAMPLE)))
def test_memory_plan_executes_and_costs_as_predicted(i):
    target, arch, kind, direction, dtype, dist, tile, spec, plan = SAMPLE[i]
    where = f"{kind} {direction} {dtype} {target} {arch}: dist={dist.bases} tile={tile.bases}"
    try:
        check_memory_plan(plan, rng=i)
        m = plan.memory
        if m.space == "global":
            strides = harness_strides(plan.shape, m.layout["order"], m.alignment, plan.elem_bytes)
            check_memory_plan(plan, rng=i + 1, strides=strides)
            check_memory_plan(plan, rng=i + 2, strides=strides, extent=harness_cut(plan.shape))
            check_memory_plan(plan, rng=i + 3, extent=tuple(max(0, n - 1) for n in plan.shape))
            assert measure_memory(plan) == m.cost
        else:
            assert measure_memory(plan).as_access_cost() == m.cost
    except AssertionError as e:
        raise AssertionError(f"{where}: {e}") from None


def test_predictions_are_not_vacuous():
    """The sample has conflicted and conflict-free shared plans, and global
    plans that waste sectors as well as ones that use every byte."""
    shared = [x[-1].memory.cost for x in SAMPLE if x[-1].memory.space == "shared"]
    glob = [x[-1].memory.cost for x in SAMPLE if x[-1].memory.space == "global"]
    assert any(c.bank_conflicts for c in shared) and any(not c.bank_conflicts for c in shared)
    assert any(c.sectors > c.min_sectors for c in glob) and any(c.sectors == c.min_sectors for c in glob)


def test_emulator_catches_a_wrong_plan():
    """A plan whose accesses are shuffled (one access takes another's
    registers) fails the emulated check: the check can fail."""
    from dataclasses import replace
    p = plan_conversion("examples/mma_v2_64x64.yaml", "examples/global_64x64.yaml", dtype="f32")
    acc = list(p.memory.accesses)
    acc[0], acc[1] = replace(acc[0], regs=acc[1].regs), replace(acc[1], regs=acc[0].regs)
    bad = replace(p, memory=replace(p.memory, accesses=tuple(acc)))
    with pytest.raises(AssertionError):
        check_memory_plan(bad, rng=0)
    q = plan_conversion("examples/blocked_64x64.yaml", "examples/swizzled_shared_64x64.yaml", dtype="f16")
    acc = list(q.memory.accesses)
    acc[0] = replace(acc[0], offset=acc[0].offset ^ 16)
    with pytest.raises(AssertionError):
        check_memory_plan(replace(q, memory=replace(q.memory, accesses=tuple(acc))), rng=0)


# ------------------------------------------------------------------ named pairs
NAMED = [
    # (src, dst, dtype, arch, strategy, instr, vector bytes, conflicts per instruction)
    ("examples/swizzled_shared_64x64.yaml", "examples/dot_a_64x64.yaml", "f16", "sm_90", "load", "matrix", 16, 0),
    ("examples/nvmma_shared_64x64.yaml", "examples/dot_a_64x64.yaml", "f16", "sm_90", "load", "matrix", 16, 0),
    ("examples/specs/blocked_row_64x64.yaml", "examples/nvmma_shared_64x64.yaml", "f16", "sm_90", "store", "vector",
     16, 0),
    ("examples/specs/blocked_row_64x64.yaml", "examples/swizzled_shared_64x64.yaml", "f16", "sm_80", "store",
     "vector", 16, 0),
    ("examples/swizzled_shared_64x64.yaml", "examples/dot_a_64x64.yaml", "f16", "sm_80", "load", "matrix", 16, 0),
    ("examples/swizzled_shared_64x64.yaml", "examples/dot_a_64x64.yaml", "f16", "sm_90", "load", "matrix", 16, 0),
    # the given vec-4 swizzle does not fit the accumulator's 2-element rows: 2 conflicts per store, forced
    ("examples/specs/mma_v2_2x2_64x64.yaml", "examples/specs/swizzled_v4_64x64.yaml", "f32", "sm_80", "store",
     "vector", 8, 2),
    ("examples/specs/mma_v2_2x2_64x64.yaml", "examples/global_64x64.yaml", "f32", "sm_80", "store", "vector", 8,
     None),
    ("examples/global_64x64.yaml", "examples/specs/blocked_row_64x64.yaml", "f16", "sm_80", "load", "vector", 16,
     None),
    ("examples/specs/mma_v2_2x2_64x64.yaml", "examples/global_64x64.yaml", "f16", "sm_80", "store", "vector", 16,
     None),                                                     # via a conversion (namespace via)
]


@pytest.mark.parametrize("src,dst,dtype,arch,strategy,instr,vbytes,conflicts", NAMED)
def test_named_memory_pairs(src, dst, dtype, arch, strategy, instr, vbytes, conflicts):
    p = plan_conversion(src, dst, dtype=dtype, arch=arch)
    m = p.memory
    assert (p.strategy, m.instr, m.vector_bytes) == (strategy, instr, vbytes), p.summary()
    if conflicts is not None:
        assert m.cost.bank_conflicts == conflicts, p.summary()
        assert measure_memory(p).as_access_cost() == m.cost
    else:
        assert m.cost.sectors == m.cost.min_sectors, p.summary()      # every byte of each sector used
        assert measure_memory(p) == m.cost
    check_memory_plan(p, rng=3)


def test_via_when_the_registers_are_poor_for_global_memory():
    """An f16 accumulator stored to (or an mma operand loaded from) a row-major tile: the planner
    compares the direct access with convert-then-access and says which it took; the f32
    accumulator, whose 8-byte stores fill every sector, stays direct."""
    h = plan_conversion("examples/mma_v2_64x64.yaml", "examples/global_64x64.yaml", dtype="f16")
    assert h.via is not None and h.memory.vector_bytes == 16 and h.memory.cost.sectors == h.memory.cost.min_sectors
    assert [c.strategy for c in h.candidates] == ["via", "vector"] and "via:" in h.summary()
    direct = plan_conversion("examples/mma_v2_64x64.yaml", "examples/global_64x64.yaml", dtype="f16", instr="vector")
    assert direct.via is None and direct.memory.cost.sectors > direct.memory.cost.min_sectors
    f = plan_conversion("examples/mma_v2_64x64.yaml", "examples/global_64x64.yaml", dtype="f32")
    assert f.via is None and [c.strategy for c in f.candidates] == ["vector", "via"]
    ld = plan_conversion("examples/global_64x64.yaml", "examples/dot_a_64x64.yaml", dtype="f16")
    assert ld.via is not None and ld.via.strategy in ("smem", "shuffle")
    for p in (h, ld):
        check_memory_plan(p, rng=4)
        check_memory_plan(p, rng=5, extent=harness_cut(p.shape),
                          strides=harness_strides(p.shape, p.memory.layout["order"], 16, p.elem_bytes))
        assert measure_memory(p) == p.memory.cost
        header = p.render("header", name="v")
        assert "namespace via {" in header and "namespace coalesced {" in header and "void* smem" in header


def test_cute_descriptor_tile():
    """A CuTe descriptor is a shared tile like any other."""
    from ll_codegen.testing.corpus import blocked
    dist = blocked([1, 8], [8, 4], [4, 1], [1, 0], [128, 64])
    for direction in ("store", "load"):
        src, dst = (dist, "examples/cute_128x64.yaml") if direction == "store" else ("examples/cute_128x64.yaml", dist)
        p = plan_conversion(src, dst, dtype="f16")
        assert p.strategy == direction and p.memory.space == "shared" and p.memory.vec == 8
        check_memory_plan(p, rng=5)


def test_forced_instruction_and_refusals():
    a = plan_conversion("examples/swizzled_shared_64x64.yaml", "examples/dot_a_64x64.yaml", instr="vector")
    assert a.memory.instr == "vector"
    with pytest.raises(ValueError, match="do not fit"):
        plan_conversion("examples/blocked_64x64.yaml", "examples/swizzled_shared_64x64.yaml", instr="matrix.trans")
    with pytest.raises(ValueError, match="alignment"):
        plan_conversion("examples/blocked_64x64.yaml", {"kind": "global", "order": [1, 0], "alignment": 4,
                                                         "shape": [64, 64]}, dtype="f64")


# ------------------------------------------------------------------ host SIMT runs
@pytest.mark.compile
def test_generated_memory_headers_run_bit_exact_on_host():
    from ll_codegen.run import host
    if host.compiler() is None:
        pytest.skip("the host SIMT runtime needs clang++ (apt-get install -y hipcc brings it)")
    items = [(f"m{i:03d}", x[-1]) for i, x in enumerate(SAMPLE) if i % 4 == 0]
    items += [(f"n{i}", plan_conversion(s, d, dtype=dt, arch=a)) for i, (s, d, dt, a, *_) in enumerate(NAMED)]
    results = host.verify_host(items, runs=1, seed=7)
    bad = [r.message for r in results if not r.ok]
    assert not bad, f"{len(bad)} of {len(items)} failed; first: {bad[0]}"
    assert len(items) >= 60


# ------------------------------------------------------------------ CLI and JSON
def test_plan_json_states_the_memory_side():
    from click.testing import CliRunner
    from ll_codegen.cli import main
    r = CliRunner().invoke(main, ["plan", "--src", "examples/swizzled_shared_64x64.yaml", "--dst",
                                  "examples/dot_a_64x64.yaml", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["strategy"] == "load"
    mem = d["memory"]
    assert {k: mem[k] for k in ("space", "instr", "vector_bytes", "instructions", "wavefronts", "bank_conflicts")} == \
        {"space": "shared", "instr": "ldmatrix", "vector_bytes": 16, "instructions": 8, "wavefronts": 4,
         "bank_conflicts": 0}
    r = CliRunner().invoke(main, ["plan", "--src", "examples/mma_v2_64x64.yaml", "--dst", "examples/global_64x64.yaml",
                                  "--dtype", "f32", "--stride", "72,1", "--json"])
    assert r.exit_code == 0, r.output
    mem = json.loads(r.output)["memory"]
    assert {k: mem[k] for k in ("space", "vector_bytes", "instructions", "sectors", "requests")} == \
        {"space": "global", "vector_bytes": 8, "instructions": 16, "sectors": 8, "requests": 16}
    r = CliRunner().invoke(main, ["plan", "--src", "examples/mma_v2_64x64.yaml", "--dst", "examples/global_64x64.yaml",
                                  "--dtype", "f32", "--stride", "72,1"])
    assert "at strides [72, 1]" in r.output and "8 sectors/instr" in r.output


def test_convert_writes_store_and_load_headers(tmp_path):
    from click.testing import CliRunner
    from ll_codegen.cli import main
    r = CliRunner().invoke(main, ["convert", "--src", "examples/mma_v2_64x64.yaml", "--dst",
                                  "examples/global_64x64.yaml", "--dtype", "f32", "-o", str(tmp_path), "--name", "st_tile"])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "st_tile.cuh").read_text()
    for needle in ("void store(const T (&src)[kRegs], T* tile, const long long (&strides)[kRank]",
                   "void store_masked(", "constexpr int kAlignment = 16;", "st.global.v2.b32"):
        assert needle in text, needle
    r = CliRunner().invoke(main, ["convert", "--src", "examples/nvmma_shared_64x64.yaml", "--dst",
                                  "examples/dot_a_64x64.yaml", "-o", str(tmp_path), "--name", "ld_tile", "--emit", "bench"])
    assert r.exit_code == 2 and "bench" in r.output
    assert not (tmp_path / "ld_tile.cuh").exists()


# ------------------------------------------------------------------ copies
def _copies(n_per_config: int = 24, seed: int = 77):
    from toolchain import random_copy_plans
    rng = random.Random(seed)
    out = []
    for target, arch, lanes in CONFIGS:
        out += [(target, arch) + x for x in random_copy_plans(rng, target, arch, lanes, n_per_config, DTYPES)]
    return out


COPIES = _copies()


@pytest.mark.parametrize("i", range(len(COPIES)))
def test_copy_plan_executes_as_its_two_halves(i):
    from ll_codegen.verify.emulate.memory import check_copy_plan, copy_halves
    target, arch, kind, dtype, warps, gspec, tile, plan = COPIES[i]
    c = plan
    strides = harness_strides(plan.shape, c.load.layout["order"], c.load.alignment, plan.elem_bytes)
    try:
        check_copy_plan(plan, rng=i)
        check_copy_plan(plan, rng=i + 1, strides=strides, extent=harness_cut(plan.shape))
        load, store = copy_halves(plan)
        assert measure_memory(load) == c.load.cost
        assert measure_memory(store).as_access_cost() == c.store.cost
    except AssertionError as e:
        raise AssertionError(f"copy {kind} {dtype} {target} {arch} warps={warps} global={gspec} "
                             f"tile={tile.bases}: {e}") from None
    assert c.async_copy == (target == "cuda" and c.load.vector_bytes in (4, 8, 16))


def test_copy_picks_coalesced_conflict_free_threads():
    """Into the 128-byte swizzle (the tile TMA and wgmma use) a 64x64 f16 copy
    takes 16-byte cp.async, every sector used, no bank conflict."""
    p = plan_conversion("examples/global_64x64.yaml", "examples/nvmma_shared_64x64.yaml", dtype="f16")
    c = p
    assert p.strategy == "copy" and c.async_copy and c.load.vector_bytes == 16
    assert c.load.cost.sectors == c.load.cost.min_sectors and c.store.cost.bank_conflicts == 0
    # a column-major global tile into a row-major swizzled tile cannot be both: the planner says what it costs
    q = plan_conversion({"kind": "global", "order": [0, 1], "alignment": 4, "shape": [64, 64]},
                        "examples/swizzled_shared_64x64.yaml", dtype="f16")
    assert not q.async_copy and len(q.candidates) == 2


@pytest.mark.compile
def test_copies_run_bit_exact_on_host():
    from ll_codegen.run import host
    if host.compiler() is None:
        pytest.skip("the host SIMT runtime needs clang++ (apt-get install -y hipcc brings it)")
    items = [(f"k{i:03d}", x[-1]) for i, x in enumerate(COPIES) if i % 3 == 0]
    results = host.verify_host(items, runs=1, seed=9)
    bad = [r.message for r in results if not r.ok]
    assert not bad, f"{len(bad)} of {len(items)} failed; first: {bad[0]}"
