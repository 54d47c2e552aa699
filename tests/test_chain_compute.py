"""Chains with compute steps (``op: mma``, ``op: reduce``): FA3's fp8 pass from S to O as one
chain (examples/chains/fa3_fp8_pv.yaml).  Checked apart from the planner: the whole chain run by
the emulators on small integers (the MMA through the PTX-ISA model of wgmma, the reduction round
by round) against numpy on the chain's inputs -- O = P V exactly although P and V hold the keys
relabelled; mutations of the mma and the reduction caught; a relabelling the mma does not contract
refused; the step harnesses on the host SIMT runtime; one-line errors."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from ll_codegen.chain.check import check_chain, run_chain
from ll_codegen.chain.description import ChainError, chain_from_dict, load_chain
from ll_codegen.chain.search import identity, plan_chain
from ll_codegen.run import host
from ll_codegen.verify.emulate.reference import encode_small
from ll_codegen.verify.emulate.upcast import decode

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHAINS = os.path.join(ROOT, "examples", "chains")
EXAMPLE = os.path.join(CHAINS, "fa3_fp8_pv.yaml")


@pytest.fixture(scope="module")
def planned():
    return plan_chain(load_chain(EXAMPLE))


def test_keys_relabelled_and_every_step_planned(planned):
    """The relabelling makes S8 -> P a register permutation; the reduction and the wgmma plan
    on the hardware layouts and cost the same under every choice."""
    cp = planned
    red, p, _, mma = cp.plans
    assert dict(cp.choice)["keys"] != identity(7) and p.in_registers and p.cost == 0
    assert red.operation == "reduce" and red.combine == "max" and mma.operation == "mma" and mma.kind == "wgmma"
    assert red.cost == cp.identity_plans[0].cost and cp.cost < cp.identity_cost


def test_whole_chain_gives_o_equal_p_v_and_the_row_max(planned):
    """Small integers in, every step run by its emulator: O = C + S8 V and m = max over each row of S
    exactly, computed here by numpy from the inputs alone (P and V hold the keys relabelled)."""
    cp = planned
    rng = np.random.default_rng(4)
    s = rng.integers(-1000, 1000, size=(64, 128)).astype(np.float32)
    s8, v = rng.integers(-4, 4, size=(64, 128), endpoint=True), rng.integers(-4, 4, size=(128, 128), endpoint=True)
    c = rng.integers(-64, 64, size=(64, 128), endpoint=True).astype(np.float32)
    views = run_chain(cp, {"S": s.view(np.uint32), "S8": encode_small(s8, "f8e4m3"), "Vm": encode_small(v, "f8e4m3"),
                           "O": c.view(np.uint32)})
    assert np.array_equal(views["O"].view(np.float32), c + (s8 @ v).astype(np.float32))
    assert np.array_equal(views["m"].view(np.float32), s.max(axis=1))
    assert np.array_equal(decode(views["P"], "f8e4m3"), s8[:, [int(x) for x in _keys(cp)]])
    check_chain(cp, rng=5)


def _keys(cp) -> list[int]:
    """The logical key each hardware key position holds: pi(k)."""
    pi = dict(cp.choice)["keys"]
    return [sum(pi[i] for i in range(7) if k >> i & 1) for k in range(128)]


@pytest.mark.parametrize("which", ["mma", "reduce"])
def test_a_wrong_mma_or_reduction_is_caught(planned, which):
    """The check is not blind to compute steps: the wgmma without its last k-step, the row max
    without its last butterfly round, each fails it."""
    red, p, v, mma = planned.plans
    plans = ((red, p, v, replace(mma, steps=mma.steps[:-1])) if which == "mma"
             else (replace(red, lane_xors=red.lane_xors[:-1]), p, v, mma))
    with pytest.raises(AssertionError):
        check_chain(replace(planned, plans=plans), rng=1)


def pv_chain(**changes) -> dict:
    tensors = {"S8": {"spec": "fa3_s_acc.yaml"}, "P": {"spec": "fa3_p_operand.yaml", "index": {1: "keys"}},
               "Vk": {"spec": "fa3_v_kmajor.yaml", "index": {0: "keys"}}, "O": {"spec": "fa3_o_acc.yaml"},
               "S": {"spec": "fa3_s_acc.yaml"}, "m": {"spec": "fa3_row_max.yaml"}}
    steps = [{"src": "S8", "dst": "P", "dtype": "f8e4m3"},
             {"op": "mma", "acc": "O", "a": "P", "b": "Vk", "dtype": "f8e4m3", "acc_dtype": "f32"},
             {"op": "reduce", "src": "S", "dst": "m", "dims": [1], "combine": "max", "dtype": "f32"}]
    for name, entry in changes.items():
        tensors[name] = entry
    return {"indices": {"keys": 128, "rows": 64}, "tensors": tensors, "steps": steps}


@pytest.mark.parametrize("changes, message", [
    ({"Vk": {"spec": "fa3_v_kmajor.yaml"}}, "steps[1]: mma: P dim 1 carries keys but Vk dim 0 carries none; the "
                                            "tensors sharing the K dim must carry the same relabelling"),
    ({"O": {"spec": "fa3_o_acc.yaml", "index": {0: "rows"}}}, "mma: P dim 0 carries no free index but O dim 0 "
                                                              "carries rows"),
    ({"S": {"spec": "fa3_s_acc.yaml", "index": {0: "rows"}}}, "reduce: m must carry S's free indices on the dims "
                                                              "it keeps ({0: 'rows'}), not none"),
    ({"O": {"spec": "fa3_v_tma.yaml"}}, "steps[1].acc: an mma writes a fixed register layout; O is a shared layout"),
])
def test_inconsistent_compute_steps_are_one_line(changes, message):
    with pytest.raises(ChainError) as e:
        chain_from_dict(pv_chain(**changes), "c.yaml", CHAINS)
    assert message in str(e.value) and "\n" not in str(e.value) and str(e.value).startswith("c.yaml: ")


def test_a_reduction_into_a_layout_that_is_not_its_slice_is_refused():
    """m given as the slice over the other dim: planning names the step and says what m must be."""
    bad = {"kind": "slice", "dim": 0, "parent": {"kind": "nvidia_mma", "version": [3, 0], "warps_per_cta": [4, 1],
                                                 "instr_shape": [16, 128, 32]}, "shape": [64]}
    data = pv_chain(m={"spec": bad})
    data["indices"].pop("rows")
    with pytest.raises(ValueError) as e:
        plan_chain(chain_from_dict(data, "c.yaml", CHAINS))
    assert "steps[2] (S -> m): m is not the slice layout of S over dims [1]" in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.compile
def test_compute_step_harnesses_run_on_the_host(planned):
    """The reduction's and the wgmma's generated harnesses (and the moves') run unchanged on the
    host SIMT runtime, bit for bit."""
    items = [(f"fpv_{k}", p) for k, p in enumerate(planned.plans)]
    results = host.verify_host(items, seed=3, jobs=1)
    assert all(results), [r.message for r in results if not r]


def test_cli_names_the_compute_steps(tmp_path):
    run = [sys.executable, "-m", "ll_codegen", "chain", EXAMPLE, "-o", str(tmp_path), "--name", "pv"]
    out = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert "step 0: m = max(S, dims [1]) (f32): reduce shuffle" in out
    assert "step 3: O += P @ Vk (f8e4m3 -> f32): mma wgmma, cost 0.00" in out
    assert {"pv_0_S_to_m.cuh", "pv_3_P_Vk_to_O.cuh", "pv_indices.cuh"} <= set(os.listdir(tmp_path))
