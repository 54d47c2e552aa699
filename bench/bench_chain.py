"""Time the chain search (``llgen chain``'s planning: candidates, every step planned per choice,
coordinate descent) on chains of up to 6 steps; a CPU benchmark (no GPU).

    python bench/bench_chain.py [--runs 5]

Each run plans the chain from scratch (the named shared layouts' cache cleared), as one
``llgen chain`` invocation does; the median and minimum of ``--runs`` runs after one warm-up
are printed with the chosen and the reference cost, and the run fails if two runs choose
differently (the search is deterministic) or a median exceeds the budget (2 s a chain).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ll_codegen.chain.candidates import named_shared
from ll_codegen.chain.description import chain_from_dict, load_chain
from ll_codegen.chain.search import plan_chain

BUDGET_S = 2.0
EXAMPLES = os.path.join(ROOT, "examples", "chains")


def _mma(index: int, shape: list[int]) -> dict:
    return {"kind": "dot_operand", "operand_index": index, "k_width": 2, "shape": shape,
            "parent": {"kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": [4, 1], "instr_shape": [16, 8]}}


def gemm_operands() -> dict:
    """Both mma.sync operands of a 128x128x64 f16 GEMM tile staged global -> free registers -> free
    shared -> fragment: 6 steps, 4 free layouts."""
    tensors, steps = {}, []
    for op, shape, order in (("A", [128, 64], [1, 0]), ("B", [64, 128], [0, 1])):
        tensors.update({f"G{op}": {"spec": {"kind": "global", "order": order, "shape": shape}},
                        f"R{op}": {"free": "registers", "shape": shape, "warps": 4},
                        f"S{op}": {"free": "shared", "shape": shape},
                        op: {"spec": _mma(0 if op == "A" else 1, shape)}})
        steps += [{"src": f"G{op}", "dst": f"R{op}"}, {"src": f"R{op}", "dst": f"S{op}"},
                  {"src": f"S{op}", "dst": op}]
    return {"tensors": tensors, "steps": steps}


def preshuffled_gemm() -> dict:
    """A weight-only e4m3 mma.sync GEMM tile: the weights B pre-shuffled offline straight into the
    m16n8k32 B fragment, the activations A staged global -> free registers -> free shared ->
    fragment (4 steps, 3 free layouts)."""
    b = {"kind": "dot_operand", "operand_index": 1, "k_width": 4, "shape": [64, 128],
         "parent": {"kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": [1, 4], "instr_shape": [16, 8]}}
    a = {"kind": "dot_operand", "operand_index": 0, "k_width": 4, "shape": [16, 64],
         "parent": {"kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": [1, 4], "instr_shape": [16, 8]}}
    return {"tensors": {"W": {"free": "global", "spec": {"kind": "global", "order": [0, 1], "shape": [64, 128]}},
                        "B": {"spec": b},
                        "GA": {"spec": {"kind": "global", "order": [1, 0], "shape": [16, 64]}},
                        "RA": {"free": "registers", "shape": [16, 64], "warps": 4},
                        "SA": {"free": "shared", "shape": [16, 64]}, "A": {"spec": a}},
            "steps": [{"src": "W", "dst": "B", "dtype": "f8e4m3"}, {"src": "GA", "dst": "RA", "dtype": "f8e4m3"},
                      {"src": "RA", "dst": "SA", "dtype": "f8e4m3"}, {"src": "SA", "dst": "A", "dtype": "f8e4m3"}]}


def fa3_free_transpose() -> dict:
    """FA3's fp8 chain with its V transpose through a free register layout: the keys relabelled
    and the registers chosen together (3 steps)."""
    return {"indices": {"keys": 128},
            "tensors": {"S": {"spec": "fa3_s_acc.yaml"}, "P": {"spec": "fa3_p_operand.yaml", "index": {1: "keys"}},
                        "Vm": {"spec": "fa3_v_tma.yaml"}, "R": {"free": "registers", "shape": [128, 128], "warps": 4},
                        "Vk": {"spec": "fa3_v_kmajor.yaml", "index": {0: "keys"}}},
            "steps": [{"src": "S", "dst": "P", "dtype": "f8e4m3"}, {"src": "Vm", "dst": "R", "dtype": "f8e4m3"},
                      {"src": "R", "dst": "Vk", "dtype": "f8e4m3"}]}


def _inline(data: dict) -> dict:
    """Spec paths of the examples folder read as mappings (the chain is given from Python)."""
    import yaml
    for t in data["tensors"].values():
        if isinstance(t.get("spec"), str):
            with open(os.path.join(EXAMPLES, t["spec"]), encoding="utf-8") as f:
                t["spec"] = yaml.safe_load(f)
    return data


def cases():
    for f in ("fa3_fp8.yaml", "fa3_fp8_pv.yaml", "v_transpose_registers.yaml", "global_to_mma_operand.yaml",
              "preshuffled_mma_b_e4m3.yaml", "preshuffled_wgmma_a_e4m3.yaml", "preshuffled_mma_b_e2m1.yaml"):
        yield f, load_chain(os.path.join(EXAMPLES, f))
    yield "w4a16_preshuffle.yaml (an upcast step)", load_chain(os.path.join(ROOT, "examples", "w4a16",
                                                                            "w4a16_preshuffle.yaml"))
    yield "fa3 fp8 + free V transpose registers (3 steps)", chain_from_dict(_inline(fa3_free_transpose()), "fa3_free")
    yield "gemm A and B operands (6 steps)", chain_from_dict(gemm_operands(), "gemm_operands")
    yield "pre-shuffled e4m3 weights, A staged (4 steps)", chain_from_dict(preshuffled_gemm(), "preshuffled_gemm")


def _run(chain):
    named_shared.cache_clear()
    t0 = time.perf_counter()
    cp = plan_chain(chain)
    return time.perf_counter() - t0, cp


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    print(f"python {platform.python_version()} on {platform.machine()}, nproc {os.cpu_count()}, "
          f"{args.runs} runs each after one warm-up")
    print(f"{'chain':<48} {'steps':>5} {'free':>4} {'planned':>7} {'median s':>9} {'min s':>7} "
          f"{'cost':>8} {'reference':>9}")
    ok = True
    for name, chain in cases():
        _, first = _run(chain)
        times = []
        for _ in range(args.runs):
            t, cp = _run(chain)
            times.append(t)
            if (cp.choice, cp.layouts, cp.cost) != (first.choice, first.layouts, first.cost):
                print(f"{name}: two runs chose differently")
                ok = False
        med = statistics.median(times)
        ok &= med < BUDGET_S
        free = len(chain.indices) + sum(1 for t in chain.tensors if t.free is not None)
        print(f"{name:<48} {len(chain.steps):>5} {free:>4} {first.evaluated:>7} {med:>9.3f} {min(times):>7.3f} "
              f"{first.cost:>8.2f} {first.identity_cost:>9.2f}")
    print("within budget, deterministic" if ok else "OVER BUDGET or not deterministic")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
