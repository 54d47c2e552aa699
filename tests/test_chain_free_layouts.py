"""Chains whose free tensors' layouts are chosen: free register layouts (between a tile load and
a tile store, after a conversion) and free shared tiles (between a store and a load), each
against its family's reference (Triton's default blocked layout, the unswizzled row-major
tile).  Every found layout's costs are re-measured by the brute-force bank and sector counters
from the addresses the plans execute, every step's plan is run by its emulator, and the whole
chain by the chained emulation against numpy."""
from __future__ import annotations

import os
import random
import subprocess
import sys

import numpy as np
import pytest
import yaml

from ll_codegen.chain.candidates import in_family, named_shared
from ll_codegen.chain.check import check_chain, run_chain
from ll_codegen.chain.description import (
    ChainError,
    chain_from_dict,
    default_blocked,
    load_chain,
)
from ll_codegen.chain.files import chain_file_names, chain_files, spec_file_name
from ll_codegen.chain.report import chain_summary, describe
from ll_codegen.chain.search import plan_chain
from ll_codegen.core.target import get_target
from ll_codegen.operations import check
from ll_codegen.plan.relayout import plan_relayout
from ll_codegen.spec import spec_from_dict
from ll_codegen.testing.corpus import random_layout
from ll_codegen.verify.emulate.banks import measure_memory

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "chains")


def nvmma(shape, bits=16, swizzle=128, transposed=False) -> dict:
    return {"kind": "nvmma_shared", "swizzle_byte_width": swizzle, "element_bitwidth": bits,
            "transposed": transposed, "shape": list(shape)}


def mma_a(shape) -> dict:
    return {"kind": "dot_operand", "operand_index": 0, "k_width": 2, "shape": list(shape),
            "parent": {"kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": [4, 1], "instr_shape": [16, 8]}}


def shared_side(plan):
    """(wavefronts a warp, bank conflicts an instruction) of a shared access, counted from its addresses."""
    m = measure_memory(plan)
    return m.total_wavefronts, m.bank_conflicts


def test_free_registers_between_an_8bit_transpose():
    """The e4m3 V transpose (MN-major TMA tile -> K-major tile) through one free register layout:
    the found layout holds 8x8 blocks, so both the load and the store are 8-byte vectors at the
    wavefront bound (16 KiB over 4 warps: 32 wavefronts a warp, no conflicts, counted from the
    addresses), total cost 72 against 194 with Triton's default blocked layout -- the relayout
    planner's plan for the same tiles, whose block candidates are these layouts."""
    cp = plan_chain(load_chain(os.path.join(EXAMPLES, "v_transpose_registers.yaml")))
    load, store = cp.plans
    assert (load.operation, store.operation) == ("load", "store")
    assert cp.cost == 72 and cp.identity_cost == 194
    for p in cp.plans:
        assert shared_side(p) == (32, 0)
        assert p.memory.vector_bytes == 8
        check(p)
    (name, chosen), = cp.layouts
    assert name == "R" and in_family(chosen.spec.linear, cp.chain.tensor("R").free, 32)
    vm, vk = (cp.chain.tensor(n).spec.linear for n in ("Vm", "Vk"))
    assert plan_relayout(vm, vk, "f8e4m3").cost == cp.cost
    check_chain(cp, rng=1)


def test_free_registers_and_shared_tile_for_an_mma_operand():
    """global -> free registers -> free shared -> the mma.sync A fragment (f16): the shared tile
    found is the 128-byte nvmma swizzle, conflict-free for the store and the fragment load alike
    (counted); the registers load the global tile in 16-byte vectors touching the fewest sectors
(16 a request, 8 requests a warp where the default blocked layout needs 64); the
    chain costs 262 against 546 with the default blocked layout and the unswizzled tile."""
    cp = plan_chain(load_chain(os.path.join(EXAMPLES, "global_to_mma_operand.yaml")))
    g_load, store, a_load = cp.plans
    assert cp.cost == 262 and cp.identity_cost == 546
    layouts = dict(cp.layouts)
    assert yaml.safe_load(layouts["S"].text) == nvmma([128, 64])
    assert g_load.memory.vector_bytes == 16
    got, ref = measure_memory(g_load), measure_memory(cp.identity_plans[0])
    assert got.sectors == got.min_sectors == 16 and got.instructions == 8 < ref.instructions == 64
    for p in (store, a_load):
        assert shared_side(p)[1] == 0
        check(p)
    check(g_load)
    check_chain(cp, rng=2)


def test_free_shared_tile_between_two_register_layouts():
    """A blocked tile stored and read back as the mma.sync A fragment through a free shared tile:
    the reference (unswizzled) tile conflicts on the fragment's loads; the chosen one has no
    conflicts on either side (counted) and costs less; the chain run equals numpy."""
    x = {"kind": "blocked", "size_per_thread": [1, 8], "threads_per_warp": [4, 8], "warps_per_cta": [4, 1],
         "order": [1, 0], "shape": [64, 64]}
    cp = plan_chain(chain_from_dict({"tensors": {"X": {"spec": x}, "S": {"free": "shared", "shape": [64, 64]},
                                                 "Y": {"spec": mma_a([64, 64])}},
                                     "steps": [{"src": "X", "dst": "S"}, {"src": "S", "dst": "Y"}]}))
    assert shared_side(cp.identity_plans[1])[1] > 0
    assert cp.cost < cp.identity_cost
    for p in cp.plans:
        assert shared_side(p)[1] == 0
        check(p)
    check_chain(cp, rng=3)


def test_relabelled_keys_and_free_transpose_registers_together():
    """FA3's fp8 chain with V transposed through a free register layout: the keys relabelled (P by
    register permutes, 0 shuffles) and the registers chosen in one search, 70 against 218; the
    chained emulation (relabelled tiles, the chosen registers) gives P V = S V exactly."""
    data = {"indices": {"keys": 128},
            "tensors": {"S": {"spec": "fa3_s_acc.yaml"}, "P": {"spec": "fa3_p_operand.yaml", "index": {1: "keys"}},
                        "Vm": {"spec": "fa3_v_tma.yaml"}, "R": {"free": "registers", "shape": [128, 128], "warps": 4},
                        "Vk": {"spec": "fa3_v_kmajor.yaml", "index": {0: "keys"}}},
            "steps": [{"src": "S", "dst": "P", "dtype": "f8e4m3"}, {"src": "Vm", "dst": "R", "dtype": "f8e4m3"},
                      {"src": "R", "dst": "Vk", "dtype": "f8e4m3"}]}
    cp = plan_chain(chain_from_dict(data, "fa3_free.yaml", EXAMPLES))
    assert cp.plans[0].in_registers and cp.cost == 70 and cp.identity_cost == 218
    rng = np.random.default_rng(5)
    s, v = (rng.integers(0, 4, size=(n, 128)).astype(np.uint8) for n in (64, 128))
    views = run_chain(cp, {"S": s, "Vm": v})
    got = views["P"].astype(np.int64) @ views["Vk"].astype(np.int64)
    assert np.array_equal(got, s.astype(np.int64) @ v.astype(np.int64))
    check_chain(cp, rng=6)


def test_a_register_neighbour_makes_the_conversion_free():
    """A conversion into a free register tensor chooses the source's own layout: a no-op."""
    acc = {"kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": [2, 2], "instr_shape": [16, 8],
           "shape": [64, 64]}
    cp = plan_chain(chain_from_dict({"tensors": {"C": {"spec": acc}, "T": {"free": "registers", "shape": [64, 64],
                                                                           "warps": 4}},
                                     "steps": [{"src": "C", "dst": "T", "dtype": "f32"}]}))
    assert cp.plans[0].strategy == "noop" and cp.cost == 0 < cp.identity_cost


@pytest.mark.parametrize("shape, warps, tpw, wpc", [
    ((64, 64), 4, [1, 32], [2, 2]), ((128, 16), 4, [2, 16], [4, 1]), ((16, 256), 8, [1, 32], [1, 8]),
    ((32, 8), 1, [4, 8], [1, 1]), ((8, 4, 64), 4, [1, 1, 32], [1, 2, 2])])
def test_default_blocked_layout(shape, warps, tpw, wpc):
    """The reference register layout: Triton's default blocked layout (threads along the last
    dim first, lanes before warps, the slowest dim taking what is left)."""
    d = default_blocked(shape, warps, 32)
    assert d["threads_per_warp"] == tpw and d["warps_per_cta"] == wpc and d["size_per_thread"] == [1] * len(shape)
    spec_from_dict(d)


def test_named_shared_layouts_are_distinct_tiles():
    """The named candidates (nvmma and swizzled_shared) are bijective tiles, none repeated."""
    named = named_shared((64, 64), 2)
    keys = [k for k, _ in named]
    assert len(set(keys)) == len(keys) > 10
    for k, m in named:
        assert tuple(spec_from_dict(m).linear.flat_bases("offset")) == k


def _spec(L) -> dict:
    b = L.bases
    return {"kind": "linear", "register": b["register"], "lane": b["lane"], "warp": b["warp"],
            "shape": list(L.out_dim_sizes.values())}


@pytest.mark.parametrize("seed", range(10))
def test_random_chains_with_free_layouts(seed):
    """Random chains: registers -> a free shared tile read by fixed registers and by free
    registers of their own warp count (-> a swizzled tile):
    the chosen total is never above the reference's, the search is deterministic, every step's
    plan passes its emulator and the chained emulation equals numpy."""
    rng = random.Random(seed)
    warps = 1 << rng.randint(0, 2)
    shape = {"dim0": 1 << rng.randint(3, 5), "dim1": 1 << rng.randint(3, 5)}
    dims = list(shape.values())
    a, b = (random_layout(rng, shape, 32, warps, broadcast=0.0) for _ in range(2))
    dtype = rng.choice(["f16", "f8e4m3", "f32"])
    tensors = {"A": {"spec": _spec(a)}, "S": {"free": "shared", "shape": dims}, "B": {"spec": _spec(b)},
               "R": {"free": "registers", "shape": dims, "warps": rng.choice([1, 2, 4])}}
    steps = [{"src": "A", "dst": "S", "dtype": dtype}, {"src": "S", "dst": "B", "dtype": dtype},
             {"src": "S", "dst": "R", "dtype": dtype}]
    if rng.random() < 0.5:
        tensors["T"] = {"spec": {"kind": "swizzled_shared", "vec": 2, "per_phase": 1, "max_phase": 4,
                                 "order": [0, 1], "shape": dims}}
        steps.append({"src": "R", "dst": "T", "dtype": dtype})
    chain = chain_from_dict({"tensors": tensors, "steps": steps})
    cp = plan_chain(chain)
    assert cp.cost <= cp.identity_cost
    again = plan_chain(chain)
    assert again.layouts == cp.layouts and again.cost == cp.cost and again.evaluated == cp.evaluated
    for p in cp.plans:
        check(p)
    check_chain(cp, rng=seed)


def test_chain_run_moves_the_data():
    """run_chain on a global -> registers -> shared -> fragment chain: the fragment registers read
    through the A layout are the global tensor (the emulators, not the planner, decide)."""
    cp = plan_chain(load_chain(os.path.join(EXAMPLES, "global_to_mma_operand.yaml")))
    g = np.random.default_rng(4).integers(0, 1 << 16, size=(128, 64), dtype=np.uint16)
    views = run_chain(cp, {"G": g})
    assert all(np.array_equal(views[n], g) for n in ("R", "S", "A"))


def test_files_and_pasteable_specs(tmp_path):
    """Every step's header under the chosen layouts, and each free tensor's spec file, which
    loads as exactly the chosen layout; the summary prints the same spec on one line."""
    cp = plan_chain(load_chain(os.path.join(EXAMPLES, "global_to_mma_operand.yaml")))
    files = chain_files(cp, "stage", "g.yaml")
    assert sorted(files) == sorted(chain_file_names(cp.chain, "stage"))
    text = chain_summary(cp)
    for name, p in cp.layouts:
        spec = spec_from_dict(yaml.safe_load(files[spec_file_name("stage", name)]))
        assert spec.linear == p.spec.linear
        assert f"  {name}: {p.text}" in text
    assert "nvmma_shared" in files["stage_1_R_to_S.cuh"]
    d = describe(cp)
    assert d["layouts"]["S"]["spec"] == dict(cp.layouts)["S"].text and d["cost"] < d["identity_cost"]


def test_cli_writes_the_chosen_specs(tmp_path):
    run = [sys.executable, "-m", "ll_codegen", "chain", os.path.join(EXAMPLES, "v_transpose_registers.yaml"),
           "-o", str(tmp_path), "--name", "vt"]
    out = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert "total cost 72.00 (reference 194.00)" in out and "  R: {kind: linear" in out
    chosen = spec_from_dict(yaml.safe_load((tmp_path / "vt_R.yaml").read_text()))
    assert chosen.linear.in_dim_size("warp") == 4 and "vt_0_Vm_to_R.cuh" in os.listdir(tmp_path)


@pytest.mark.parametrize("tensors, message", [
    ({"T": {"free": "local", "shape": [64, 64]}}, "tensors.T.free: 'local' is not a free layout family"),
    ({"T": {"free": "registers", "shape": [64, 64]}}, "tensors.T.warps: free: registers needs warps"),
    ({"T": {"free": "registers", "warps": 4}}, "free: registers needs shape"),
    ({"T": {"free": "registers", "shape": [64, 64], "warps": 3}}, "a power of two from 1 to 32"),
    ({"T": {"free": "registers", "shape": [8, 8], "warps": 4}}, "has 64 elements for 128 threads"),
    ({"T": {"free": "registers", "shape": [64, 64], "warps": 4, "per_thread": 8}}, "is 32 elements a thread, not 8"),
    ({"T": {"free": "shared", "shape": [64, 64], "warps": 4}}, "tensors.T.warps: belongs to free: registers"),
    ({"T": {"free": "shared", "shape": [64, 64], "index": {0: "i"}}}, "a free layout carries no free index"),
    ({"T": {"free": "shared", "shape": [64, 64], "spec": nvmma([64, 64])}}, "tensors.T.shape: the reference spec"),
    ({"T": {"free": "registers", "spec": nvmma([64, 64])}}, "the reference is a shared layout but the tensor is"),
    ({"T": {"spec": nvmma([64, 64]), "warps": 4}}, "tensors.T.warps: belongs to a free layout"),
])
def test_bad_free_tensors_are_one_line(tensors, message):
    data = {"indices": {"i": 64}, "tensors": {**tensors, "A": {"spec": nvmma([64, 64])}},
            "steps": [{"src": "A", "dst": "T"}]}
    with pytest.raises(ChainError) as e:
        chain_from_dict(data, "c.yaml")
    assert message in str(e.value) and "\n" not in str(e.value) and str(e.value).startswith("c.yaml: ")


def test_a_free_tile_holds_one_element_width():
    acc = {"kind": "blocked", "size_per_thread": [1, 4], "threads_per_warp": [8, 4], "warps_per_cta": [4, 1],
           "order": [1, 0], "shape": [64, 64]}
    with pytest.raises(ChainError, match="holds one element width; its steps move 8-bit and 16-bit"):
        chain_from_dict({"tensors": {"A": {"spec": acc}, "S": {"free": "shared", "shape": [64, 64]}},
                         "steps": [{"src": "A", "dst": "S", "dtype": "f16"}, {"src": "S", "dst": "A", "dtype": "i8"}]})
    with pytest.raises(ChainError, match="tensors.F: is free but no step uses the tensor"):
        chain_from_dict({"tensors": {"A": {"spec": acc}, "F": {"free": "shared", "shape": [64, 64]}},
                         "steps": [{"src": "A", "dst": "A"}]})


def test_target_lanes_shape_the_family():
    """A free register family on a wave64 target has 64 lanes; its reference too."""
    c = chain_from_dict({"target": "hip", "arch": "gfx942",
                         "tensors": {"T": {"free": "registers", "shape": [64, 64], "warps": 4},
                                     "A": {"spec": {"kind": "swizzled_shared", "vec": 1, "per_phase": 1,
                                                    "max_phase": 1, "order": [1, 0], "shape": [64, 64]}}},
                         "steps": [{"src": "A", "dst": "T"}]})
    t = c.tensor("T")
    assert t.free.per_thread == 16 and t.spec.linear.in_dim_size("lane") == get_target("hip", "gfx942").warp_size


@pytest.mark.compile
def test_chosen_steps_run_on_the_host_runtime():
    """Every step of the two free-layout examples, planned under the chosen layouts, as its
    generated harness compiled for the host SIMT runtime (races, bounds and results checked)."""
    from ll_codegen.run import host
    if host.compiler() is None:
        pytest.skip("no host C++ compiler")
    items = []
    for f in ("v_transpose_registers.yaml", "global_to_mma_operand.yaml"):
        cp = plan_chain(load_chain(os.path.join(EXAMPLES, f)))
        items += [(f"{f.split('.')[0]}_{k}", p) for k, p in enumerate(cp.plans)]
    results = host.verify_host(items, seed=7, jobs=1)
    assert all(r.ok for r in results), [r for r in results if not r.ok]
