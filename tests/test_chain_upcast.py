"""Chain steps with ``dst_dtype``: an upcast (``plan/upcast.py``) from a free source into a fixed
register fragment, the free layout chosen for the register order the upcast itself reads (found
from the fragment, not given).  Checked apart from the planner: the chained emulation runs the
move on the reordered codes and the upcast instruction by instruction (PTX-ISA models of lop3,
prmt, fma, cvt) and compares every destination element with the exact upcast of the logical
tensor; sectors re-counted from the executed addresses; two mutations caught; the step's
generated harness on the host SIMT runtime; one-line errors."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import pytest
import yaml

from ll_codegen.chain import preshuffle
from ll_codegen.chain.check import check_chain
from ll_codegen.chain.description import ChainError, chain_from_dict, load_chain
from ll_codegen.chain.search import plan_chain
from ll_codegen.core.layout import layout_of
from ll_codegen.operations import check
from ll_codegen.plan.upcast import KINDS, sequence
from ll_codegen.run import host
from ll_codegen.verify.emulate.banks import measure_memory

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
W4 = os.path.join(ROOT, "examples", "w4a16")
A_FRAG = os.path.join(W4, "a_frag_64x64.yaml")          # wgmma's A from registers, 64 x 64 bf16, 4 warps
B_FRAG = {"kind": "dot_operand", "operand_index": 1, "k_width": 2, "shape": [128, 128],
          "parent": {"kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": [1, 4], "instr_shape": [16, 8]}}
K_MAJOR = {"kind": "global", "order": [0, 1], "shape": [128, 128]}     # mma.sync B as stored: K contiguous

CASES = {  # name: (source type, destination type, the fragment, the free source's entry)
    "i4_wgmma_a": ("i4", "bf16", A_FRAG, {"free": "global", "shape": [64, 64]}),
    "e2m1_wgmma_a": ("e2m1", "f16", A_FRAG, {"free": "global", "shape": [64, 64]}),
    "e4m3_wgmma_a": ("f8e4m3", "bf16", A_FRAG, {"free": "global", "shape": [64, 64]}),
    "u4_mma_sync_b": ("u4", "f16", B_FRAG, {"free": "global", "spec": K_MAJOR}),
    "i8_mma_sync_b": ("i8", "f16", B_FRAG, {"free": "global", "spec": K_MAJOR}),
}


def upcast_chain(dtype: str, dst_dtype: str, frag, source: dict, name: str = "c.yaml"):
    return chain_from_dict({"tensors": {"W": source, "F": {"spec": frag}},
                            "steps": [{"src": "W", "dst": "F", "dtype": dtype, "dst_dtype": dst_dtype}]}, name)


@pytest.fixture(scope="module", params=sorted(CASES))
def planned(request):
    return request.param, plan_chain(upcast_chain(*CASES[request.param], name=request.param))


def test_preshuffled_source_loads_whole_vectors_of_what_the_upcast_reads(planned):
    """The chosen layout: each thread's loads are 16-byte vectors of exactly the elements its
    upcast reads (no conversion after the loads), every sector whole (counted from the executed
    addresses); the row-major or K-major tensor as written needs a conversion and costs more."""
    _, cp = planned
    (p,), (ref,) = cp.plans, cp.identity_plans
    assert p.operation == "upcast" and p.move.via is None and p.move.memory.vector_bytes == 16
    got = measure_memory(p.move)
    assert got.sectors == got.min_sectors
    assert ref.move.via is not None and cp.cost < cp.identity_cost
    check(p)


def test_chained_emulation_gives_the_exact_upcast(planned):
    """Random codes (every code present) reordered by the chosen layout, loaded, upcast by the
    modelled instructions: every fragment register holds the exact upcast of its element."""
    _, cp = planned
    views = check_chain(cp, rng=7)
    assert views["F"].dtype.itemsize == 2


def test_the_w4a16_chain_finds_the_kernels_weight_tile():
    """examples/w4a16/w4a16_preshuffle.yaml (int4 into wgmma's A as bf16) chooses the tile the W4A16
    kernel's shared memory holds (examples/w4a16/w_smem.yaml)."""
    cp = plan_chain(load_chain(os.path.join(W4, "w4a16_preshuffle.yaml")))
    (_, p), = cp.layouts
    with open(os.path.join(W4, "w_smem.yaml")) as f:
        tile = yaml.safe_load(f)
    assert tile["offset"] == [preshuffle.coordinates(v, (64, 64)) for v in p.offsets]


@pytest.mark.parametrize("how", ["sequence", "layout"])
def test_a_wrong_upcast_or_a_wrong_reorder_is_caught(how):
    """The chained check is not blind: the upcast run with the other nibble pairing its sequence
    allows, or the tensor reordered with two packed bits swapped, fails it."""
    cp = plan_chain(upcast_chain(*CASES["i4_wgmma_a"]))
    (p,) = cp.plans
    if how == "sequence":
        frag = layout_of(p.dst_bases)
        wrong = sequence(KINDS[("i4", "bf16")], p.n_dst, tuple(frag.bases["register"][2]), frag)
        assert wrong.perm != p.sequence.perm
        cp = replace(cp, plans=(replace(p, sequence=wrong),))
    else:
        (name, q), = cp.layouts
        offs = list(q.offsets)
        offs[3], offs[4] = offs[4], offs[3]
        cp = replace(cp, layouts=((name, replace(q, offsets=tuple(offs))),))
    with pytest.raises(AssertionError):
        check_chain(cp, rng=1)


def test_free_shared_and_register_sources_are_chosen_for_the_upcast():
    """A free shared tile: the upcast's loads conflict-free (cheaper than the row-major tile); free
    registers: the upcast's own order, so the move is no operation and only the sequence costs."""
    shared = plan_chain(upcast_chain("i8", "f16", A_FRAG, {"free": "shared", "shape": [64, 64]}))
    assert shared.cost < shared.identity_cost / 2
    check_chain(shared, rng=2)
    regs = plan_chain(upcast_chain("f8e5m2", "f16", A_FRAG, {"free": "registers", "shape": [64, 64], "warps": 4}))
    (p,) = regs.plans
    assert p.move.strategy == "noop" and regs.cost < regs.identity_cost
    check_chain(regs, rng=3)


@pytest.mark.compile
def test_upcast_step_harness_runs_bit_exact_on_the_host():
    """The chosen upcast step's generated harness (the packed buffer loaded and upcast into the
    fragment) runs unchanged on the host SIMT runtime, bit for bit, 4-bit and 8-bit."""
    items = [(f"cu_{c}", plan_chain(upcast_chain(*CASES[c])).plans[0]) for c in ("i4_wgmma_a", "e4m3_wgmma_a")]
    results = host.verify_host(items, seed=5, jobs=1)
    assert all(results), [r.message for r in results if not r]


@pytest.mark.parametrize("step, frag, message", [
    ({"dst_dtype": "bf16", "scales": "128,bf16"}, A_FRAG, "steps[0].scales: per-group scales do not change"),
    ({"dst_dtype": "f32"}, A_FRAG, "steps[0].dst_dtype: no upcast i4 -> f32"),
    ({"dst_dtype": "bf16"}, {"kind": "swizzled_shared", "vec": 1, "per_phase": 1, "max_phase": 1, "order": [1, 0],
                             "shape": [64, 64]}, "steps[0].dst: an upcast (dst_dtype) writes a fixed register layout"),
])
def test_bad_upcast_steps_are_one_line(step, frag, message):
    data = {"tensors": {"W": {"free": "global", "shape": [64, 64]}, "F": {"spec": frag}},
            "steps": [{"src": "W", "dst": "F", "dtype": "i4", **step}]}
    with pytest.raises(ChainError) as e:
        chain_from_dict(data, "c.yaml")
    assert message in str(e.value) and "\n" not in str(e.value) and str(e.value).startswith("c.yaml: ")


def test_cli_states_the_upcast_and_its_vectors(tmp_path):
    """``llgen chain`` on the W4A16 chain: the step reads as an upcast of 16-byte vectors, the
    reference's loads need a shuffle after them; the step's header and harness are written."""
    run = [sys.executable, "-m", "ll_codegen", "chain", os.path.join(W4, "w4a16_preshuffle.yaml"), "-o",
           str(tmp_path), "--name", "w4"]
    out = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert "step 0: W -> A (i4 -> bf16): upcast of 16-byte vectors" in out
    assert "16 at best, then shuffle)" in out
    assert {"w4_0_W_to_A.cuh", "w4_0_W_to_A_harness.cu", "w4_W_reorder.py"} <= set(os.listdir(tmp_path))
