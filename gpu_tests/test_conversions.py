"""Bit-exact GPU checks of generated harnesses at scale.

Every case of ``cases.pair_cases()`` and ``cases.memory_cases()`` (stores
and loads against every memory kind, masked global forms included) -- the named corpus, extra pairs of every
layout kind a 32-lane warp can hold, seeded random pairs (1-8 warps, 1/2/4/8
byte elements) and pairs that stay inside warps or threads -- with its
variants (auto, forced register/shuffle/smem, swizzle none, narrow vectors,
several rounds, >48 KiB of shared memory, every ldmatrix/stmatrix candidate),
plus the CUDA conversions of ``generated/`` compiled from the files in that
folder.  All harnesses compile in NVRTC batches (``gpu.Batch``), then each runs
twice on fresh random raw bits with poisoned outputs; the output tensor and
every thread's destination registers must equal the numpy reference.

Set ``LLGEN_GPU_REPORT=path.json`` to write per-case results (used by
``run_all.sh``).
"""
import collections
import json
import os
import shutil
import tempfile
import time

import pytest

from ll_codegen.plan.plans import steps
from ll_codegen.run import gpu
from ll_codegen.verify.harness import RunResult

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

import cases  # noqa: E402  (gpu_tests/ is on sys.path via conftest)

CASES = cases.pair_cases() + cases.memory_cases()
RUNS = int(os.environ.get("LLGEN_GPU_RUNS", "2"))


def _id(c):
    return f"{c.pair}-{c.variant}-{c.name}"


@pytest.fixture(scope="session")
def results():
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="llgen_gpu_tests_") as d:
        b = gpu.Batch([(c.name, c.plan) for c in CASES], d).compile()
        t1 = time.time()
        res = {c.name: b.run(c.name, RUNS) for c in CASES}
        t2 = time.time()
    out = os.environ.get("LLGEN_GPU_REPORT")
    if out:
        rows = [{"name": c.name, "source": c.source, "pair": c.pair, "variant": c.variant, "tag": c.tag,
                 "kinds": list(c.kinds), "strategy": c.plan.strategy, "ok": res[c.name].ok,
                 "message": res[c.name].message,
                 "plan": None} for c in CASES]
        for r in [r for r in rows if not r["ok"]][:40]:          # plans of the first failures, for the emulator
            r["plan"] = next(c.plan.to_dict() for c in CASES if c.name == r["name"])
        with open(out, "w") as f:
            json.dump({"compile_s": t1 - t0, "run_s": t2 - t1, "cases": rows}, f)
    print(f"\n[gpu_tests] {len(CASES)} harnesses: compile {t1 - t0:.1f} s, run {t2 - t1:.1f} s")
    return res


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_bit_exact(case, results):
    r = results[case.name]
    assert r.ok, f"{case.pair} [{case.variant}, {case.tag}]: {r.message}"


def test_coverage():
    """The suite covers every layout kind, strategy and shared-memory instruction pairing."""
    kinds = {k for c in CASES for k in c.kinds}
    base = {k.split("(")[0] for k in kinds}
    assert {"blocked", "slice", "nvidia_mma_v2", "nvidia_mma_v3", "dot_operand", "linear", "amd_wmma_v1",
            "amd_wmma_v2"} <= base, kinds
    assert {"dot_operand(nvidia_mma_v2)", "dot_operand(nvidia_mma_v3)", "dot_operand(blocked)"} <= kinds, kinds
    for k in base:                     # every kind is a source and a destination
        assert any(c.kinds[0].startswith(k) for c in CASES) and any(c.kinds[1].startswith(k) for c in CASES), k
    strategies = collections.Counter(c.plan.strategy for c in CASES)
    assert set(strategies) == {"noop", "register", "shuffle", "smem", "shuffle+smem", "butterfly", "store", "load",
                               "copy"}, strategies
    # lane-dependent shuffle words in every form: select trees, swap stages, fused byte permutes (both steps' shuffles)
    shuffles = [p.shuffle for c in CASES for p in steps(c.plan) if p.operation == "convert" and p.shuffle is not None
                and (p.shuffle.send_select.size > 1 or p.shuffle.recv_select.size > 1)]
    forms = collections.Counter("fused" if s.send_fused or s.recv_fused else "swaps" if s.send_swaps or s.recv_swaps
                                else "trees" for s in shuffles)
    assert min(forms[f] for f in ("fused", "swaps", "trees")) >= 5, forms
    mem = [c for c in CASES if c.plan.operation in ("store", "load", "copy")]
    mem_kinds = {k for c in mem for k in c.kinds}
    assert len(mem) >= 200 and mem_kinds >= {"shared_linear", "swizzled_shared", "nvmma_shared", "global",
                                             "cute"}, mem_kinds
    assert any(c.plan.operation == "copy" and c.plan.async_copy for c in mem)
    assert {(c.plan.strategy, c.plan.memory.instr) for c in mem if c.plan.operation in ("store", "load")} >= {
        (d, i) for d in ("store", "load") for i in ("vector", "matrix", "matrix.trans")}
    smem = [c.plan.smem for c in CASES if c.plan.operation == "convert" and c.plan.smem is not None]
    pairs = {(m.store_instr, m.load_instr) for m in smem}
    for st in ("vector", "matrix", "matrix.trans"):
        assert any(p[0] == st for p in pairs) and any(p[1] == st for p in pairs), pairs
    assert {m.swizzle for m in smem} == {"optimal", "none"}
    assert any(len(m.rounds) > 1 for m in smem)
    assert any(m.bytes > 48 * 1024 for m in smem)
    assert {c.plan.elem_bytes for c in CASES} == {1, 2, 4, 8}
    assert {c.plan.num_warps for c in CASES} == {1, 2, 4, 8}
    assert len({c.pair for c in CASES}) >= 300


# ------------------------------------------------------------------ generated/
def _generated():
    if cases.generated_manifest() is None:
        return [], None
    try:
        return cases.generated_cases(), None
    except Exception as e:          # the manifest no longer regenerates: one failing test says why
        return [], f"{type(e).__name__}: {e}"


GENERATED, GENERATED_ERROR = _generated()


def test_generated_manifest_regenerates():
    if cases.generated_manifest() is None:
        pytest.skip("generated/manifest.yaml is not present")
    assert GENERATED_ERROR is None, GENERATED_ERROR


@pytest.fixture(scope="session")
def generated_results():
    """Compile the header and harness files of generated/ as they are on disk."""
    src = os.path.join(cases.REPO, "generated")
    with tempfile.TemporaryDirectory(prefix="llgen_generated_") as d:
        stale = {}
        for c in GENERATED:
            for fname, text in c.files.items():
                with open(os.path.join(src, fname)) as f:
                    if f.read() != text:
                        stale[c.name] = f"generated/{fname} differs from what the manifest regenerates"
                shutil.copy(os.path.join(src, fname), d)
        b = gpu.Batch([(c.name, c.plan) for c in GENERATED], d, render=False).compile()
        res = {c.name: b.run(c.name, RUNS) for c in GENERATED}
    for n, msg in stale.items():
        res[n] = RunResult(False, msg)
    return res


@pytest.mark.skipif(not GENERATED, reason="generated/manifest.yaml is not present (or lists no CUDA conversion)")
@pytest.mark.parametrize("case", GENERATED or [None], ids=lambda c: getattr(c, "name", "none"))
def test_generated(case, generated_results):
    r = generated_results[case.name]
    assert r.ok, f"generated/{case.name} [{case.tag}]: {r.message}"
