"""Chains whose in-between layouts are free: the relabelling search and its end-to-end check.

The FA3 case: the first wgmma's accumulator S (m64nNk32, 8-bit operands) becomes the
e4m3 register operand P of the second wgmma.  With P in S's key order the conversion
crosses lanes; the keys are a contraction index, so relabelling them in P (and in V)
leaves O = P V unchanged, and the right relabelling makes the conversion a register
permutation.  The search must find it without hints.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from ll_codegen.chain.check import check_chain, relabelled, run_chain
from ll_codegen.chain.description import ChainError, chain_from_dict, load_chain
from ll_codegen.chain.files import chain_file_names, chain_files
from ll_codegen.chain.search import identity, plan_chain, relabel
from ll_codegen.core import f2
from ll_codegen.api import plan_reduce
from ll_codegen.core.layout import LinearLayout, layout_of
from ll_codegen.operations import check
from ll_codegen.plan.relayout import wavefront_bound
from ll_codegen.testing.corpus import dot, linear, random_layout

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "chains",
                       "fa3_fp8.yaml")


def wgmma_acc(n: int, k: int = 32) -> dict:
    return {"kind": "nvidia_mma", "version": [3, 0], "warps_per_cta": [4, 1], "instr_shape": [16, n, k],
            "shape": [64, n]}


def fa3_chain(n: int, dtype: str = "f8e4m3") -> dict:
    k_width, k = (4, 32) if dtype.startswith("f8") else (2, 16)
    acc = wgmma_acc(n, k)
    return {"indices": {"keys": n},
            "tensors": {"S": {"spec": acc}, "P": {"spec": dot(acc, 0, k_width, [64, n]), "index": {1: "keys"}}},
            "steps": [{"src": "S", "dst": "P", "dtype": dtype}]}


def hardware_bits(L: LinearLayout) -> list[tuple[int, ...]]:
    return [tuple(b) for d in ("lane", "warp") for b in L.bases[d]]


@pytest.mark.parametrize("n", [64, 128, 256])
def test_fa3_key_relabelling_found_without_hints(n):
    """e4m3 S -> P: the chosen relabelling makes P a register permutation (0 shuffles) where the
    keys as written need shuffles; P's lanes and warps then hold exactly S's elements."""
    cp = plan_chain(chain_from_dict(fa3_chain(n)))
    (plan,), (as_written,) = cp.plans, cp.identity_plans
    assert as_written.by_shuffle and as_written.cost > 0
    assert plan.in_registers and plan.cost == 0
    assert cp.cost < cp.identity_cost
    pi = dict(cp.choice)["keys"]
    assert sorted(pi) == list(identity(len(pi))) and pi != identity(len(pi))       # a bit permutation
    s, p = (t.spec.linear for t in cp.chain.tensors)
    assert hardware_bits(relabel(p, 1, pi)) == hardware_bits(s)
    check(plan)                                    # the step's plan against its (relabelled) layouts
    check_chain(cp, rng=n)


def test_relabelled_contraction_equals_the_reference():
    """O = P V over relabelled keys: P's hardware view (as the second wgmma reads it) times V
    relabelled the same way equals S V exactly (small integers)."""
    cp = plan_chain(chain_from_dict(fa3_chain(128)))
    rng = np.random.default_rng(1)
    s = rng.integers(0, 8, size=(64, 128)).astype(np.uint8)
    v = rng.integers(0, 8, size=(128, 32)).astype(np.int64)
    views = run_chain(cp, {"S": s})
    pi = dict(cp.choice)["keys"]
    v_hw = relabelled(v, ((0, "keys"),), {"keys": pi})
    assert np.array_equal(views["P"].astype(np.int64) @ v_hw, s.astype(np.int64) @ v)
    assert not np.array_equal(views["P"], s)            # P's view is not S's: the keys moved


def test_fa3_chain_with_the_v_transpose():
    """The shipped FA3 chain: with the keys relabelled, P is a register permutation and the e4m3 V
    transpose reaches the wavefront bound on both sides (the relayout planner's block layouts reach
    it with the keys as written too); the chain run through the emulators gives P V = S V exactly."""
    cp = plan_chain(load_chain(EXAMPLE), rounds=0)
    p_plan, v_plan = cp.plans
    assert p_plan.in_registers and v_plan.operation == "relayout"
    for side, m in (("load", v_plan.load.memory), ("store", v_plan.store.memory)):
        assert m.cost.total_wavefronts == wavefront_bound(v_plan, side) and m.cost.bank_conflicts == 0
    as_written = cp.identity_plans[1]
    assert as_written.store.memory.cost.total_wavefronts == wavefront_bound(as_written, "store")
    assert cp.cost < cp.identity_cost
    rng = np.random.default_rng(2)
    s, v = (rng.integers(0, 4, size=(n, 128)).astype(np.uint8) for n in (64, 128))
    views = run_chain(cp, {"S": s, "Vm": v})
    got = views["P"].astype(np.int64) @ views["Vk"].astype(np.int64)
    assert np.array_equal(got, s.astype(np.int64) @ v.astype(np.int64))
    check_chain(cp, rng=3)


@pytest.mark.parametrize("d", [64, 128, 256])
def test_fa3_v_transpose_at_every_head_dim(d):
    """The fp8 V transpose at head dims 64, 128 and 256 (V as TMA lands it, MN-major, into the
    K-major 128-byte swizzled tile wgmma reads) with the keys relabelled as P needs them: both
    sides at the wavefront bound, no bank conflicts, and the chain's views give P V = S V.  At
    head dim 64 (64-byte rows, the 64-byte swizzle) the aligned relabelling leaves the loads 2-way
    conflicted (61 against 45); one round of the transposition search finds the one at the bound
    with P still a register permutation."""
    swizzle = min(d, 128)
    vm = {"kind": "nvmma_shared", "swizzle_byte_width": swizzle, "element_bitwidth": 8, "shape": [128, d]}
    vk = {"kind": "nvmma_shared", "swizzle_byte_width": 128, "element_bitwidth": 8, "transposed": True,
          "shape": [128, d]}
    data = fa3_chain(128)
    data["tensors"].update({"Vm": {"spec": vm}, "Vk": {"spec": vk, "index": {0: "keys"}}})
    data["steps"].append({"src": "Vm", "dst": "Vk", "dtype": "f8e4m3"})
    cp = plan_chain(chain_from_dict(data), rounds=1 if d == 64 else 0)
    p_plan, v_plan = cp.plans
    assert p_plan.in_registers and p_plan.cost == 0 and v_plan.operation == "relayout"
    for side, m in (("load", v_plan.load.memory), ("store", v_plan.store.memory)):
        assert m.cost.total_wavefronts == wavefront_bound(v_plan, side) and m.cost.bank_conflicts == 0
    rng = np.random.default_rng(d)
    s, v = rng.integers(0, 4, size=(64, 128)).astype(np.uint8), rng.integers(0, 4, size=(128, d)).astype(np.uint8)
    views = run_chain(cp, {"S": s, "Vm": v})
    got = views["P"].astype(np.int64) @ views["Vk"].astype(np.int64)
    assert np.array_equal(got, s.astype(np.int64) @ v.astype(np.int64))


def test_sixteen_bit_operands_keep_the_keys():
    """f16: the accumulator already is the A operand's layout; the identity stays (ties keep it)."""
    cp = plan_chain(chain_from_dict(fa3_chain(128, "f16")))
    assert dict(cp.choice)["keys"] == identity(7)
    assert cp.plans[0].cost == 0 and cp.cost == cp.identity_cost


def test_search_is_deterministic():
    a, b = (plan_chain(chain_from_dict(fa3_chain(128)), rounds=1) for _ in range(2))
    assert a.choice == b.choice and a.cost == b.cost and a.evaluated == b.evaluated


def test_relabel_moves_each_element_by_pi():
    """relabel composes the layout with pi on one dim: the element a layout placed at (r, k) is at
    (r, pi(k)) afterwards."""
    rng = random.Random(3)
    L = random_layout(rng, {"dim0": 8, "dim1": 16}, 32, 1)
    pi = (4, 1, 8, 2)
    R = relabel(L, 1, pi)
    for hw, out in zip(L.apply_all(), R.apply_all()):
        assert out[0] == hw[0] and out[1] == f2.apply(pi, int(hw[1]))


def _spec(L: LinearLayout) -> dict:
    b = L.bases
    return linear(b["register"], b["lane"], b["warp"], list(L.out_dim_sizes.values()))


@pytest.mark.parametrize("seed", range(12))
def test_random_chains(seed):
    """Random register chains A -> B -> C with B's dim free (16- and 32-bit ones then reduce C over a
    random dim into R): the chosen cost is never above the layouts as written, every step's plan
    passes the emulator, the chain's hardware views are the relabelled logical tensors (the
    reduction's on small integers, R relabelled where it keeps the free dim)."""
    rng = random.Random(seed)
    warps = 1 << rng.randint(0, 2)
    shape = {"dim0": 1 << rng.randint(2, 4), "dim1": 1 << rng.randint(3, 5)}
    a, b, c = (random_layout(rng, shape, 32, warps, broadcast=0.0) for _ in range(3))
    d, dtype = rng.randint(0, 1), rng.choice(["f16", "f8e4m3", "f32"])
    tensors = {"A": {"spec": _spec(a)}, "B": {"spec": _spec(b), "index": {d: "i"}},
               "C": {"spec": _spec(c), "index": {d: "i"}}}
    steps = [{"src": "A", "dst": "B", "dtype": dtype}, {"src": "B", "dst": "C", "dtype": dtype}]
    if dtype != "f8e4m3":
        r, combine = rng.randint(0, 1), rng.choice(["sum", "max", "min"])
        sliced = layout_of(plan_reduce(_spec(c), r, combine, dtype).dst_bases)
        tensors["R"] = {"spec": _spec(sliced), **({"index": {0: "i"}} if r != d else {})}
        steps.append({"op": "reduce", "src": "C", "dst": "R", "dims": [r], "combine": combine, "dtype": dtype})
    chain = chain_from_dict({"indices": {"i": list(shape.values())[d]}, "tensors": tensors, "steps": steps})
    cp = plan_chain(chain, rounds=2)
    assert cp.cost <= cp.identity_cost and cp.evaluated > 1
    for p in cp.plans:
        check(p)
    check_chain(cp, rng=seed)


def test_files_and_index_header(tmp_path):
    cp = plan_chain(chain_from_dict(fa3_chain(128)))
    files = chain_files(cp, "attn", "fa3.yaml")
    assert sorted(files) == sorted(chain_file_names(cp.chain, "attn"))
    head = files["attn_indices.cuh"]
    assert "constexpr int keys(int k)" in head and "keys_inverse" in head
    assert "llgen chain fa3.yaml --name attn" in files["attn_0_S_to_P.cuh"]


@pytest.mark.parametrize("data, message", [
    ({"steps": []}, "tensors: expected a mapping"),
    ({"tensors": {"A": {"spec": wgmma_acc(64)}}, "steps": []}, "steps: a list of 1 to"),
    ({"tensors": {"A": {"spec": wgmma_acc(64)}}, "steps": [{"src": "A", "dst": "B"}]}, "steps[0].dst: 'B' is not"),
    ({"indices": {"keys": 100}, "tensors": {}, "steps": []}, "indices.keys: a size is a power of two"),
    ({"indices": {"keys": 64}, "tensors": {"A": {"spec": wgmma_acc(64), "index": {1: "rows"}}}, "steps": []},
     "'rows' is not one of the chain's indices"),
    ({"indices": {"keys": 32}, "tensors": {"A": {"spec": wgmma_acc(64), "index": {1: "keys"}}}, "steps": []},
     "dim 1 has size 64 but index keys has size 32"),
    ({"tensors": {"a-b": {"spec": wgmma_acc(64)}}, "steps": []}, "a tensor name is a C identifier"),
    ({"colour": 1}, "unknown field"),
])
def test_bad_chains_are_one_line(data, message):
    with pytest.raises(ChainError) as e:
        chain_from_dict(data, "c.yaml")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_cli(tmp_path):
    import yaml
    path = tmp_path / "fa3.yaml"
    class Plain(yaml.SafeDumper):                   # llgen refuses YAML aliases: write each value out
        def ignore_aliases(self, data):
            return True
    path.write_text(yaml.dump(fa3_chain(128), Dumper=Plain))
    run = [sys.executable, "-m", "ll_codegen", "chain", str(path)]
    out = subprocess.run(run + ["--plan", "--json"], capture_output=True, text=True, check=True).stdout
    d = json.loads(out)
    assert d["steps"][0]["strategy"] == "register" and d["identity_cost"] > d["cost"] == 0
    done = subprocess.run(run + ["-o", str(tmp_path / "out")], capture_output=True, text=True, check=True)
    assert "total cost 0.00" in done.stdout
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        chain_file_names(load_chain(path), "fa3"))
    bad = subprocess.run(run[:-1] + [str(tmp_path / "missing.yaml")], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "cannot read" in bad.stderr
