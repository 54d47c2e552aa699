"""Shared-memory traffic of relayouts and reductions under Nsight Compute vs the plan's prediction.

    python3 gpu_tests/ncu_relayout_reduce.py [--out DIR] [--timeout S]

Cases (``cases()``):

* relayouts (``RelayoutPlan``, shared tile -> registers -> shared tile): the relayout entries of
  ``generated/manifest.yaml``, the FA3 fp8 V transpose ``examples/chains/fa3_v_tma.yaml ->
  fa3_v_kmajor.yaml`` as given and as ``llgen chain examples/chains/fa3_fp8.yaml`` relabels it
  (``plan_chain(...).plans[1]``), and seeded random pairs of shared tiles
  (``corpus.random_memory_tile``), and an 8 x 8 transpose by 4 warps whose copy warps idle
  (``broadcast_relayouts``).  Each plan's ``<name>_probe`` kernel runs: it fills the source
  tile with 4-byte ``st.shared`` (consecutive words, ``kThreads`` apart per thread), then calls
  ``relayout()``;
* reductions (``ReducePlan``): every CUDA case of ``corpus.REDUCE_NAMED`` whose plan has a warp
  stage through shared memory (both forms, 4- and 2-byte elements) and a few shuffle-only ones
  (predicted shared traffic 0).  Each plan's ``<name>_harness`` runs (bit-exact check included;
  its own traffic is global only).

Prediction per CTA, from the plan alone (``predict``):

* relayout: per side, ``cost.total_wavefronts`` x the side's warps (``warp & warp_skip == 0``: the
  load skips the warps the store skips),
  bank conflicts ``cost.bank_conflicts`` x ``cost.instructions`` x warps, instructions
  ``cost.instructions`` x warps; the probe's fill adds ``ceil(tile bytes / 128)`` store
  instructions of one wavefront each (one warp's 32 consecutive words) and no conflicts;
* reduction: the warp stage's accesses from ``WarpStage`` and the result layout: each access's
  lane byte offsets (``elem_bytes`` x the row-major index of the result layout's lane bases;
  consecutive elements for the spread form's combine loop) at its width (``WarpStage.vectors``:
  ``vec * elem_bytes`` bytes for a thread's own slots, one element in the combine loop) through Lemma 9.4
  (``plan.swizzle.predict_wavefronts``); a guarded store is served in the phases that hold a
  writer lane; the partials' stores by the writer warps, every warp's loads, the combine loop's
  loads and stores by the warps with a lane below ``outputs``; shuffles = ``plan.shuffles`` x
  warps.

Brute force (``brute_force``), independent of the prediction: the emulator's byte addresses of
every warp instruction -- ``verify.emulate.banks.measure_memory`` for the relayout's load and
store, ``verify.emulate.reduce.warp_stage_accesses`` for a reduction, the probe's fill from its
source line -- counted by ``banks.count_wavefronts`` / ``min_wavefronts``.

Measured: the counters of ``ncu_bank_conflicts.py`` (``l1tex__data_pipe_lsu_wavefronts_mem_shared
_op_{ld,st}``, ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}``, the ldsm/stsm ones
where this ncu has them, executed shared instructions) and every shuffle instruction counter
``ncu --query-metrics`` lists (a name with ``shfl``; ncu 2025.3.1 on an H200 lists none: then the
shuffles executed are the kernel's SASS ``SHFL`` instructions, ``cuobjdump``, x warps -- the reduction
is straight-line code).  The table shows each kernel's shared-memory SASS opcodes (``STS.64``: the
compiler merged two planned 4-byte stores).  A row passes when the prediction equals the
brute force and the measurement (wavefronts and conflicts exactly, or within the counter noise
of ``NCU_NOTES.md`` with equal instruction counts, as ``ncu_bank_conflicts.py``; shuffles exactly
where measured).  Writes ``DIR/ncu_relayout_reduce.json`` and ``DIR/ncu_relayout_reduce_table.md``;
exit status 1 on any FAIL.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

from ncu_bank_conflicts import (NOISE, NOISE_ABS, OPTIONAL, REQUIRED, available_metrics,  # noqa: E402
                                measured_totals, ncu_bin, parse_raw_csv, query_metrics, sass_shared_ops)

ARCH = "sm_90"
EX = os.path.join(ROOT, "examples")
#: the counters compared: (store, load) x (wavefronts, bank conflicts), and instructions
KEYS = ("st_wf", "st_conf", "ld_wf", "ld_conf")
#: shuffle counters preferred in this order where ``--query-metrics`` lists several
SHFL_PREFIXES = ("smsp__sass_inst_executed_op_shfl", "smsp__inst_executed_op_shfl", "sm__sass_inst_executed_op_shfl",
                 "sm__inst_executed_op_shfl")


@dataclass(frozen=True)
class Case:
    name: str          # C identifier: the kernel is <name>_probe (relayout) or <name>_harness (reduce)
    label: str
    plan: object

    @property
    def kernel(self) -> str:
        return f"{self.name}_{'probe' if self.plan.operation == 'relayout' else 'harness'}"


# ------------------------------------------------------------------ cases
def manifest_relayouts() -> list[Case]:
    """The relayout entries of ``generated/manifest.yaml``, planned as its arguments say."""
    import yaml
    from ll_codegen.api import plan_conversion
    ap = argparse.ArgumentParser(add_help=False)
    for o in ("--name", "--src", "--dst", "--dtype", "--arch", "--target"):
        ap.add_argument(o)
    ap.add_argument("--warps", type=int)
    with open(os.path.join(ROOT, "generated", "manifest.yaml")) as f:
        entries = yaml.safe_load(f)
    entries = entries.get("entries", entries) if isinstance(entries, dict) else entries
    out = []
    for e in entries:
        if e.get("expect") != "relayout":
            continue
        a, _ = ap.parse_known_args(shlex.split(e["args"]))
        plan = plan_conversion(os.path.join(ROOT, a.src), os.path.join(ROOT, a.dst), a.dtype, target=a.target or "cuda",
                               arch=a.arch or ARCH, warps=a.warps)
        out.append(Case(a.name, f"manifest {a.name}", plan))
    return out


def fa3_relayouts() -> list[Case]:
    """The FA3 fp8 V transpose as given, and as ``llgen chain`` relabels it."""
    from ll_codegen.api import plan_conversion
    from ll_codegen.chain.description import load_chain
    from ll_codegen.chain.search import plan_chain
    c = os.path.join(EX, "chains")
    direct = plan_conversion(os.path.join(c, "fa3_v_tma.yaml"), os.path.join(c, "fa3_v_kmajor.yaml"), "f8e4m3",
                             arch=ARCH)
    chained = plan_chain(load_chain(os.path.join(c, "fa3_fp8.yaml"))).plans[1]
    if chained.operation != "relayout":
        raise AssertionError(f"fa3_fp8.yaml step 1 is a {chained.operation}, not the V relayout")
    return [Case("fa3_v_transpose", "fa3_v_tma -> fa3_v_kmajor (f8e4m3)", direct),
            Case("fa3_v_chain", "fa3_fp8.yaml step 1 (relabelled keys)", chained)]


def random_relayouts(n: int = 6, seed: int = 20261207) -> list[Case]:
    """``n`` seeded random shared tile pairs (``corpus.random_memory_tile``); pairs no register
    layout moves without shared memory are drawn again."""
    from ll_codegen.api import plan_conversion
    from ll_codegen.testing.corpus import random_memory_tile
    rng = random.Random(seed)
    out: list[Case] = []
    for _ in range(20 * n):
        if len(out) == n:
            break
        dtype = rng.choice(["f16", "f8e4m3", "f32", "bf16", "i8"])
        w = {"f16": 2, "bf16": 2, "f32": 4}.get(dtype, 1)
        shape = rng.choice([{"dim0": 32, "dim1": 32}, {"dim0": 64, "dim1": 64}, {"dim0": 16, "dim1": 128}])
        kinds = ("shared_linear", "swizzled_shared", "nvmma_shared")
        ka, a = random_memory_tile(rng, shape, w, rng.choice(kinds))
        kb, b = random_memory_tile(rng, shape, w, rng.choice(kinds))
        warps = rng.choice([1, 2, 4])
        try:
            plan = plan_conversion(a, b, dtype, arch=ARCH, warps=warps)
        except ValueError:
            continue
        i = len(out)
        out.append(Case(f"rl_random{i}_{dtype}", f"random {list(shape.values())} {dtype}, {warps} warp(s)", plan))
    return out


def broadcast_relayouts() -> list[Case]:
    """An 8 x 8 row-major -> column-major transpose by 4 warps (f32, f16): the tile is too small for
    the warps, so some warps hold copies and neither load nor store (``load.memory.warp_skip``)."""
    from ll_codegen.plan.relayout import plan_relayout
    from ll_codegen.spec import spec_from_dict
    rows = [[0, 1], [0, 2], [0, 4], [1, 0], [2, 0], [4, 0]]
    rm = spec_from_dict({"kind": "shared_linear", "offset": rows, "shape": [8, 8]}).linear
    cm = spec_from_dict({"kind": "shared_linear", "offset": rows[3:] + rows[:3], "shape": [8, 8]}).linear
    out = []
    for dtype in ("f32", "f16"):
        plan = plan_relayout(rm, cm, dtype, "cuda", ARCH, num_warps=4)
        if not plan.load.memory.warp_skip:
            raise AssertionError(f"the 8 x 8 {dtype} transpose by 4 warps has no copy warps")
        out.append(Case(f"rl_bcast_{dtype}", f"8 x 8 transpose {dtype}, 4 warps, copy warps "
                        f"{plan.load.memory.warp_skip:#x} idle", plan))
    return out


def reduce_cases(n_shuffle: int = 4) -> list[Case]:
    """Every CUDA ``REDUCE_NAMED`` case with a warp stage: (sum, f32) and (max, f16) in the cheaper
    form, (sum, f32) in the other form; and the first ``n_shuffle`` shuffle-only cases (min i32, sum bf16 in turn)."""
    from ll_codegen.plan.reduce import plan_reduce
    from ll_codegen.spec import spec_from_dict
    from ll_codegen.testing.corpus import REDUCE_NAMED
    out, shuffles = [], 0
    for c in REDUCE_NAMED:
        if c.target != "cuda":
            continue
        L = spec_from_dict(c.src).linear
        first = plan_reduce(L, c.dims, "sum", "f32", "cuda", c.arch or ARCH)
        if first.strategy == "smem":
            other = "direct" if first.warps.spread else "spread"
            for combine, dtype, form in (("sum", "f32", None), ("max", "f16", None), ("sum", "f32", other)):
                p = plan_reduce(L, c.dims, combine, dtype, "cuda", c.arch or ARCH, form=form)
                how = "spread" if p.warps.spread else "direct"
                out.append(Case(f"rd_{c.name}_{combine}_{dtype}_{how}", f"{c.name} {combine} {dtype} ({how})", p))
        elif first.strategy == "shuffle" and shuffles < n_shuffle:
            combine, dtype = (("min", "i32"), ("sum", "bf16"))[shuffles % 2]
            shuffles += 1
            p = plan_reduce(L, c.dims, combine, dtype, "cuda", c.arch or ARCH)
            out.append(Case(f"rd_{c.name}_{combine}_{dtype}", f"{c.name} {combine} {dtype} (shuffles)", p))
    return out


def cases() -> list[Case]:
    return manifest_relayouts() + fa3_relayouts() + random_relayouts() + broadcast_relayouts() + reduce_cases()


# ------------------------------------------------------------------ prediction (the plan)
def fill_instructions(plan) -> int:
    """Warp instructions of the relayout probe's fill: 4-byte stores of the source tile's words,
    word ``o`` by thread ``o % kThreads``: a warp covers 32 consecutive words per iteration."""
    return -(-plan.load.memory.bytes // (4 * plan.warp_size))


def _side(m, num_warps: int) -> dict:
    """A relayout step's totals over the warps that issue it: the load and the store skip the warps
    with ``warp & warp_skip`` (they hold copies)."""
    n = sum(1 for w in range(num_warps) if not w & m.warp_skip)
    c = m.cost
    return {"wf": c.total_wavefronts * n, "conf": c.bank_conflicts * c.instructions * n, "instr": c.instructions * n}


def _rm_offsets(plan, dim: str) -> list[int]:
    """Byte offset in the scratch of each ``dim`` basis of the result layout (row-major index x elem_bytes)."""
    from ll_codegen.core.layout import layout_of
    D = layout_of(plan.dst_bases)
    sizes = list(D.out_dim_sizes.values())
    return [plan.elem_bytes * _row_major(b, sizes) for b in D.bases.get(dim, [])]


def _row_major(coords, sizes) -> int:
    idx = 0
    for c, n in zip(coords, sizes):
        idx = idx * n + c
    return idx


def predict_reduce(plan) -> dict:
    """The warp stage's per-CTA traffic from ``WarpStage`` and the result layout (module docstring)."""
    from ll_codegen.core.target import get_target
    from ll_codegen.plan.swizzle import phase_lanes_log2, predict_wavefronts
    out = dict.fromkeys(KEYS + ("st_instr", "ld_instr"), 0)
    out["shfl"] = plan.shuffles * plan.num_warps
    m = plan.warps
    if m is None:
        return out
    t = get_target(plan.target, plan.arch)
    w, W, nl = plan.elem_bytes, plan.num_warps, plan.warp_size.bit_length() - 1
    lanes = _rm_offsets(plan, "lane")

    def add(side: str, n: int, wf_cf: tuple[int, int]) -> None:
        out[f"{side}_wf"] += n * wf_cf[0]
        out[f"{side}_conf"] += n * wf_cf[1]
        out[f"{side}_instr"] += n

    # a thread's own slots move m.vec adjacent elements an access (m.vectors): len(m.vectors) accesses
    # of vb bytes; partials: the writer lanes' phases (the skipped lane bits have offset 0)
    vb, n = m.vec * w, len(m.vectors)
    p = phase_lanes_log2(vb, t)
    wf, cf = predict_wavefronts(lanes, vb, t, active_lanes=1 << p)
    phases = 1 << sum(1 for b in range(p, nl) if not m.lane_skip >> b & 1)
    writers = sum(1 for v in range(W) if not v & m.warp_skip)
    add("st", writers * n, (phases * wf, phases * cf))
    own = predict_wavefronts(lanes, vb, t, load=True)    # a thread's own result elements, every lane
    if not m.spread:
        add("ld", W * n * m.parts, own)
        return out
    seq = [w << b for b in range(nl)]                    # the combine loop: output o = tid + i * stride
    for i in range(-(-m.outputs // m.stride)):
        for v in range(W):
            active = min(plan.warp_size, m.outputs - i * m.stride - v * plan.warp_size)
            if active > 0:
                add("ld", m.parts, predict_wavefronts(seq, w, t, active_lanes=active, load=True))
                add("st", 1, predict_wavefronts(seq, w, t, active_lanes=active))
    add("ld", W * n, own)
    return out


def predict(plan) -> dict:
    """Per-CTA shared-memory wavefronts, bank conflicts and instructions the plan predicts (and
    shuffles for a reduction); module docstring."""
    if plan.operation == "reduce":
        return predict_reduce(plan)
    ld, st = _side(plan.load.memory, plan.num_warps), _side(plan.store.memory, plan.num_warps)
    fill = fill_instructions(plan)
    working = sum(1 for w in range(plan.num_warps) if w & plan.load.memory.warp_skip == 0)
    shfl = plan.convert.shuffle.shuffles * working if plan.convert.by_shuffle else 0
    return {"st_wf": st["wf"] + fill, "st_conf": st["conf"], "ld_wf": ld["wf"], "ld_conf": ld["conf"],
            "st_instr": st["instr"] + fill, "ld_instr": ld["instr"], "fill": fill, "shfl": shfl}


# ------------------------------------------------------------------ brute force (the emulator's addresses)
def _count(accesses, target) -> dict:
    """Totals over warp instructions ``(direction, byte addresses (warps, lanes) with -1 inactive, bytes)``."""
    import numpy as np
    from ll_codegen.verify.emulate.banks import count_wavefronts, min_wavefronts
    out = dict.fromkeys(KEYS + ("st_instr", "ld_instr"), 0)
    for direction, addr, nbytes in accesses:
        side = "st" if direction == "store" else "ld"
        for a in np.atleast_2d(addr):
            if (a < 0).all():
                continue                  # no active lane: the warp branches around it
            wav = count_wavefronts(a, nbytes, target, side == "ld")
            out[f"{side}_wf"] += wav
            out[f"{side}_conf"] += wav - min_wavefronts(a, nbytes, target, side == "ld")
            out[f"{side}_instr"] += 1
    return out


def brute_force(plan) -> dict:
    """The same totals counted from the emulator's byte addresses of every warp instruction."""
    import numpy as np
    from ll_codegen.core.target import get_target
    t = get_target(plan.target, plan.arch)
    if plan.operation == "reduce":
        from ll_codegen.verify.emulate.reduce import warp_stage_accesses
        out = _count(warp_stage_accesses(plan), t)
        return dict(out, shfl=None)
    from ll_codegen.verify.emulate.banks import measure_memory
    words, T = plan.load.memory.bytes // 4, plan.threads
    fill = []
    for i in range(-(-words // T)):                       # the probe's fill: word o by thread o % kThreads
        o = i * T + np.arange(T).reshape(-1, plan.warp_size)
        fill.append(("store", np.where(o < words, 4 * o, -1), 4))
    out = _count(fill, t)
    out["fill"] = out["st_instr"]
    for side, sub in (("ld", plan.load), ("st", plan.store)):
        mc = measure_memory(sub)
        out[f"{side}_wf"] += sum(q[3] for q in mc.per_instruction)
        out[f"{side}_conf"] += sum(q[4] for q in mc.per_instruction)
        out[f"{side}_instr"] += len(mc.per_instruction)
    return out


def describe(plan) -> str:
    if plan.operation == "reduce":
        m = plan.warps
        stage = "no warp stage" if m is None else (f"{m.parts} partials x {m.outputs} outputs, "
                                                   f"{'spread' if m.spread else 'direct'}")
        return f"reduce dims {list(plan.dims)}, {len(plan.lane_xors)} shfl round(s), {stage}"
    ld, st = plan.load.memory, plan.store.memory
    return f"{ld.instr} {ld.vector_bytes}B -> {plan.convert.strategy} -> {st.instr} {st.vector_bytes}B"


def collect(sel: list[Case]) -> list[dict]:
    """One row per case: the plan's prediction and the brute force (no GPU, no ncu)."""
    return [{"name": c.name, "kernel": c.kernel, "label": c.label, "operation": c.plan.operation,
             "dtype": c.plan.dtype, "warps": c.plan.num_warps, "what": describe(c.plan),
             "pred": predict(c.plan), "brute": brute_force(c.plan)} for c in sel]


# ------------------------------------------------------------------ measurement
def drive(probes: str, harnesses: str) -> int:
    """Launch the relayouts' probes and the reductions' harnesses once each (run under ncu by ``main``)."""
    import _drive
    import ncu_memory
    return ncu_memory.drive(probes) | _drive.drive(harnesses)


def shuffle_metrics(names: set[str]) -> list[str]:
    """The shuffle instruction counters this ncu lists, preferred first."""
    found = [n for n in names if "shfl" in n and n.startswith(SHFL_PREFIXES)]
    return [n + ".sum" for n in sorted(found, key=lambda n: (next(i for i, s in enumerate(SHFL_PREFIXES)
                                                                  if n.startswith(s)), n))][:3]


def measured(meas: dict | None, plan, shfl: list[str], sass_shfl: int | None = None) -> dict:
    """Store/load wavefronts, conflicts and instructions ncu counted (ldmatrix/stmatrix added where
    this ncu reports them apart), and the shuffles: ncu's counter where it lists one, else the
    kernel's SASS ``SHFL`` instructions (``sass_shfl``; the reduction is straight-line code) x warps."""
    t = measured_totals(meas, {})
    if not t:
        return {}
    out = {k: t[k] for k in KEYS}
    out["st_instr"], out["ld_instr"] = t["st_instr"], t["ld_instr"]
    if plan.operation == "relayout":
        for side, op, sub in (("ld", "ldsm", plan.load), ("st", "stsm", plan.store)):
            if sub.memory.instr == "vector":
                continue
            if t.get(f"{side}_wf_{op}"):
                out[f"{side}_wf"] = (out[f"{side}_wf"] or 0) + t[f"{side}_wf_{op}"]
                out[f"{side}_conf"] = (out[f"{side}_conf"] or 0) + (t.get(f"{side}_conf_{op}") or 0)
            if t.get(f"{op}_instr") is not None:      # counted apart from ld/st.shared (the fill is an st.shared)
                out[f"{side}_instr"] = t[f"{op}_instr"] + (fill_instructions(plan) if side == "st" else 0)
    out["shfl"] = next((meas.get(k) for k in shfl if meas.get(k) is not None), None)
    if out["shfl"] is None and sass_shfl is not None:
        out["shfl"] = sass_shfl * plan.num_warps
    return out


def verdict(row: dict) -> tuple[str, bool]:
    """PASS/FAIL of one row (module docstring) and the reason."""
    p, b, m = row["pred"], row["brute"], row.get("meas")
    if any(p[k] != b[k] for k in KEYS + ("st_instr", "ld_instr")):
        return "FAIL: prediction != brute force", False
    if not m:
        return f"FAIL: not measured ({row.get('error') or 'no ncu row'})", False
    if m.get("shfl") is not None and m["shfl"] != p.get("shfl"):
        return "FAIL: shuffles", False
    if all(m[k] == p[k] for k in KEYS):
        return "PASS", True
    same = all(m[k] is None or m[k] == p[k] for k in ("st_instr", "ld_instr"))
    near = all(m[k] is not None and abs(m[k] - p[k]) <= max(NOISE_ABS, NOISE * p[k.split("_")[0] + "_wf"])
               for k in KEYS)
    if same and near:
        return "PASS within counter noise", True
    return ("FAIL: executed instruction counts differ (compiler)" if not same else "FAIL"), False


def _n(x) -> str:
    return "—" if x is None else str(int(x)) if float(x).is_integer() else f"{x:g}"


def render(rows: list[dict]) -> tuple[str, list[str]]:
    """The markdown table (predicted / brute force / measured) and the failures."""
    hdr = ("| case | what | dtype | warps | st wf | st conf | ld wf | ld conf | st/ld instr | shfl | SASS | verdict |")
    lines = [hdr, "|" + " --- |" * (hdr.count("|") - 1)]
    failures = []
    for r in rows:
        p, b, m = r["pred"], r["brute"], r.get("meas") or {}
        v, ok = verdict(r)
        if not ok:
            failures.append(f"{r['name']}: {v}")
        cell = lambda k: f"{_n(p[k])} / {_n(b[k])} / {_n(m.get(k))}"  # noqa: E731
        fill = f" (fill {p['fill']})" if "fill" in p else ""
        lines.append(f"| {r['name']} | {r['what']}{fill} | {r['dtype']} | {r['warps']} | {cell('st_wf')} "
                     f"| {cell('st_conf')} | {cell('ld_wf')} | {cell('ld_conf')} "
                     f"| {p['st_instr']}/{p['ld_instr']} / {_n(m.get('st_instr'))}/{_n(m.get('ld_instr'))} "
                     f"| {_n(p.get('shfl')) if 'shfl' in p else '—'} / {_n(m.get('shfl'))} "
                     f"| {' '.join(f'{k}x{n}' for k, n in sorted((r.get('sass') or {}).items())) or '—'} | {v} |")
    return "\n".join(lines) + "\n", failures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", os.path.join(HERE, "out")))
    ap.add_argument("--timeout", type=int, default=170)
    ap.add_argument("--drive", nargs=2, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.drive:
        return drive(*a.drive)
    os.makedirs(a.out, exist_ok=True)
    import _drive
    from ll_codegen.run import gpu
    t0 = time.time()
    sel = cases()
    rows = collect(sel)
    work = tempfile.mkdtemp(prefix="llgen_ncu_rr_")
    manifests, errors = [], {}
    for op in ("relayout", "reduce"):
        m, e = _drive.prepare([(c.name, c.plan) for c in sel if c.plan.operation == op], os.path.join(work, op))
        manifests.append(m)
        errors.update(e)
    t1 = time.time()
    ncu = ncu_bin()
    names, _ = query_metrics(ncu)
    optional, _ = available_metrics(ncu, OPTIONAL)
    shfl = shuffle_metrics(names)
    metrics = REQUIRED + optional + shfl
    log = os.path.join(work, "ncu.csv")
    cmd = [ncu, "--metrics", ",".join(metrics), "--csv", "--page", "raw", "--clock-control", "none",
           "--kernel-name", "regex:_(probe|harness)$", "--log-file", log,
           sys.executable, os.path.abspath(__file__), "--drive", *manifests]
    path = [ROOT, HERE] + [q for q in os.environ.get("PYTHONPATH", "").split(os.pathsep) if q]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout,
                           env=dict(os.environ, PYTHONPATH=os.pathsep.join(path)))
    except subprocess.TimeoutExpired as e:          # report what was profiled before the limit
        text = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else b or ""  # noqa: E731
        r = subprocess.CompletedProcess(cmd, 124, text(e.stdout), text(e.stderr) + f"\nncu ran past {a.timeout} s")
    t2 = time.time()
    meas = parse_raw_csv(open(log).read() if os.path.exists(log) else "")
    plans = {c.name: c.plan for c in sel}
    cubins = {}
    for m in manifests:
        with open(m, "rb") as f:
            cubins.update({n: path for n, _, path in pickle.load(f)})
    for row in rows:
        p = plans[row["name"]]
        row["sass"] = sass_shared_ops(cubins.get(row["name"], ""), row["kernel"])
        sh = sass_shared_ops(cubins.get(row["name"], ""), row["kernel"], "SHFL") if p.operation == "reduce" else {}
        row["sass_shfl"] = sh
        # an empty SASS listing (no shared opcode and no SHFL) means cuobjdump did not find the kernel:
        # the shuffles are then unmeasured, not zero
        read = "error" not in sh and cubins.get(row["name"]) and (sh or row["sass"])
        row["meas"] = measured(meas.get(row["kernel"]), p, shfl, sum(sh.values()) if read else None)
        row["error"] = errors.get(row["name"])
        row["verdict"] = verdict(row)[0]
    table, failures = render(rows)
    drive_lines = [ln for ln in r.stdout.splitlines() if ln.startswith("DRIVE")]
    with open(os.path.join(a.out, "ncu_relayout_reduce.json"), "w") as f:
        json.dump({"device": gpu.device_info(), "metrics": metrics, "shfl_metrics_listed": sorted(n for n in names
                   if "shfl" in n), "ncu_cmd": " ".join(cmd), "ncu_rc": r.returncode, "stderr": r.stderr[-3000:],
                   "drive": drive_lines, "rows": rows, "prepare_s": t1 - t0, "ncu_s": t2 - t1}, f, indent=1,
                  default=str)
    with open(os.path.join(a.out, "ncu_relayout_reduce_table.md"), "w") as f:
        f.write(table)
    print(table)
    n_ok = sum(row["verdict"].startswith("PASS") for row in rows)
    print(f"ncu relayout/reduce: {len(rows)} kernels, {n_ok} PASS; cells are predicted / brute force / measured; "
          f"shuffle counter: {shfl[0] if shfl else 'none listed'}")
    print(f"ncu rc {r.returncode}; " + "; ".join(ln for ln in drive_lines if "total" in ln))
    failures += [ln for ln in drive_lines if "FAIL" in ln]
    if r.returncode or not drive_lines:
        failures.append(f"ncu exited with {r.returncode}: {r.stderr[-1500:]}")
    for f_ in failures:
        print(f"FAILED {f_}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
