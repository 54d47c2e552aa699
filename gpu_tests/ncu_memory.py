"""Memory plans under Nsight Compute: shared wavefronts and bank conflicts, global sectors and requests, vs the plan.

    python3 gpu_tests/ncu_memory.py [--out DIR]

For ``cases.memory_showcase()`` (every named store/load of ``cases.MEMORY_NAMED``
-- vector, ldmatrix/stmatrix[.trans] --, every named copy, and a random plan per
memory kind, direction and element size, copies included) the harness files are compiled (NVRTC), then ONE
process (this script with ``--drive``) launches each plan's ``<name>_probe``
kernel once under ``ncu``.  The probe's only accesses to the measured space
are the planned ones: a store takes its registers from the thread index, a
load's values leave through the other space; global probes use the strides
the plan predicts for (``MemoryPlan.strides``).

Prediction per CTA, from the plan:

* shared: wavefronts = ``cost.total_wavefronts`` x active warps (storing warps:
  ``warp & warp_skip == 0``); bank conflicts = ``cost.bank_conflicts`` x
  ``cost.instructions`` x active warps;
* global: sectors = the 32-byte sectors of every warp instruction, summed over
  the active warps (``MemoryPlan.cost.sectors`` per instruction); requests =
  ``cost.instructions`` x active warps.

Measured: ``l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{st,ld}``,
``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{st,ld}`` (+ the
``ldsm``/``stsm`` variants where this ncu splits them out),
``l1tex__t_sectors_pipe_lsu_mem_global_op_{st,ld}`` and
``l1tex__t_requests_pipe_lsu_mem_global_op_{st,ld}``.  Writes
``DIR/ncu_memory.json`` and ``DIR/ncu_memory_table.md``; exit status 1 when a
measured number differs from the prediction beyond counter noise
(max(3, 0.5%), as in ``ncu_bank_conflicts.py``).
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

from ncu_bank_conflicts import NOISE, NOISE_ABS, _fmt, available_metrics, ncu_bin, parse_raw_csv  # noqa: E402

SHARED = {side: (f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{side}.sum",
                 f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{side}.sum") for side in ("st", "ld")}
MATRIX = {"st": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_stsm.sum",
                 "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_stsm.sum"),
          "ld": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum",
                 "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum")}
GLOBAL = {side: (f"l1tex__t_sectors_pipe_lsu_mem_global_op_{side}.sum",
                 f"l1tex__t_requests_pipe_lsu_mem_global_op_{side}.sum") for side in ("st", "ld")}
# cp.async (LDGSTS): global sectors and requests, shared wavefronts and bank conflicts
LDGSTS = ("sm__sass_l1tex_t_sectors_pipe_lsu_mem_global_op_ldgsts.sum",
          "sm__sass_l1tex_t_requests_pipe_lsu_mem_global_op_ldgsts.sum",
          "sm__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum",
          "sm__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum")


def predict(plan) -> dict:
    """Per-CTA totals the plan predicts for its probe (a copy: its load's sectors and requests, its
    store's bank conflicts -- and wavefronts where it goes through registers; the wavefronts ncu
    counts for a cp.async are reported, not predicted)."""
    import numpy as np
    from ll_codegen.verify.emulate.common import global_addresses
    from ll_codegen.verify.emulate.memory import copy_halves
    if plan.operation == "copy":
        load, store = (predict(h) for h in copy_halves(plan))
        out = dict(load, conflicts=store["conflicts"])
        return out if plan.async_copy else dict(out, wavefronts=store["wavefronts"])
    m = plan.memory
    warps = [w for w in range(plan.num_warps) if not w & m.warp_skip]
    if m.space == "shared":
        c = m.cost
        return {"wavefronts": c.total_wavefronts * len(warps), "conflicts": c.bank_conflicts * c.instructions * len(warps)}
    # sectors summed over the active warps (the plan's cost is per warp instruction)
    lanes_on = (np.arange(plan.warp_size) & m.lane_skip) == 0
    nbytes = m.vec * plan.elem_bytes
    sectors = 0
    for acc in m.accesses:
        elem, _ = global_addresses(plan, acc, np.array(warps), m.strides)
        start = elem[:, :, 0] * plan.elem_bytes
        for wi in range(len(warps)):
            b = (start[wi][lanes_on][:, None] + np.arange(nbytes)[None, :]).ravel()
            sectors += np.unique(b // 32).size
    return {"sectors": sectors, "requests": m.cost.instructions * len(warps)}


def drive(manifest: str) -> int:
    """Launch every plan's probe once (run under ncu by ``main``)."""
    import cupy
    import numpy as np
    from ll_codegen.emit.harness_tiles import scratch_bytes
    with open(manifest, "rb") as f:
        entries = pickle.load(f)
    mods: dict = {}
    bad = 0
    for name, plan, path in entries:
        try:
            if path not in mods:
                mods[path] = cupy.RawModule(path=path)
            fn = mods[path].get_function(f"{name}_probe")
            smem = max(plan.smem_bytes, plan.threads * 8)
            if smem > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = smem
            sink = cupy.zeros(plan.threads * 8, dtype=np.uint8)
            scratch = cupy.zeros(max(16, scratch_bytes(plan)), dtype=np.uint8)
            fn((1,), (plan.threads,), (sink, scratch), shared_mem=smem)
            cupy.cuda.runtime.deviceSynchronize()
            print(f"DRIVE {name} ok", flush=True)
        except Exception as e:  # noqa: BLE001
            bad += 1
            print(f"DRIVE {name} FAIL {type(e).__name__}: {e}", flush=True)
    print(f"DRIVE total {len(entries)} launched, {bad} failed", flush=True)
    return 1 if bad else 0


def measured(meas: dict | None, plan) -> dict:
    if meas is None:
        return {}
    if plan.operation == "copy":
        from ll_codegen.verify.emulate.memory import copy_halves
        load, store = copy_halves(plan)
        if plan.async_copy:
            return dict(zip(("sectors", "requests", "cp.async wavefronts", "conflicts"), (meas.get(k) for k in LDGSTS)))
        return dict(measured(meas, load), **measured(meas, store))
    m = plan.memory
    side = "st" if m.direction == "store" else "ld"
    if m.space == "global":
        s, r = GLOBAL[side]
        return {"sectors": meas.get(s), "requests": meas.get(r)}
    wf, cf = (meas.get(k) for k in SHARED[side])
    if m.instr != "vector":           # ldmatrix/stmatrix: counted apart where this ncu has op_ldsm/op_stsm
        mwf, mcf = (meas.get(k) for k in MATRIX[side])
        if mwf:
            wf, cf = (wf or 0) + mwf, (cf or 0) + (mcf or 0)
    return {"wavefronts": wf, "conflicts": cf}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", os.path.join(HERE, "out")))
    ap.add_argument("--timeout", type=int, default=140)
    ap.add_argument("--drive", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.drive:
        return drive(a.drive)
    os.makedirs(a.out, exist_ok=True)
    import cases
    import _drive
    t0 = time.time()
    sel = cases.memory_showcase()
    work = tempfile.mkdtemp(prefix="llgen_ncu_mem_")
    manifest, errors = _drive.prepare([(c.name, c.plan) for c in sel], work)
    ncu = ncu_bin()
    optional, _ = available_metrics(ncu)
    metrics = [k for v in (SHARED, GLOBAL) for pair in v.values() for k in pair]
    metrics += [k for pair in MATRIX.values() for k in pair if k in optional] + list(LDGSTS)
    log = os.path.join(work, "ncu.csv")
    cmd = [ncu, "--metrics", ",".join(metrics), "--csv", "--page", "raw", "--clock-control", "none",
           "--kernel-name", "regex:_probe$", "--log-file", log, sys.executable, os.path.abspath(__file__),
           "--drive", manifest]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE])))
    t1 = time.time()
    meas = parse_raw_csv(open(log).read() if os.path.exists(log) else "")
    lines = ["| case | pair | space | instr | bytes | warps | predicted | measured | match |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    rows, failures = [], []
    near = lambda x, q: x is not None and abs(x - q) <= max(NOISE_ABS, NOISE * q)  # noqa: E731
    for c in sel:
        p = c.plan
        pred, got = predict(p), measured(meas.get(f"{c.name}_probe"), p)
        copy = p.operation == "copy"
        m = p.store if copy else p.memory
        exact = bool(got) and all(got.get(k) == v for k, v in pred.items())
        ok = exact or (bool(got) and all(near(got.get(k), v) for k, v in pred.items()))
        verdict = "yes" if exact else "yes within counter noise" if ok else "no" if got else \
            f"not measured ({errors.get(c.name) or 'no ncu row'})"
        if not ok:
            failures.append(f"{c.name} ({c.pair}): {verdict}: predicted {pred}, measured {got}")
        rows.append({"name": c.name, "pair": c.pair, "space": "global -> shared" if copy else m.space,
                     "direction": "copy" if copy else m.direction, "instr": m.instr,
                     "vector_bytes": m.vector_bytes, "pred": pred, "meas": got, "ok": ok})
        fmt = lambda d: ", ".join(f"{k} {_fmt(v)}" for k, v in d.items())  # noqa: E731
        lines.append(f"| {c.name} | {c.pair} | {m.space} | {m.instr} | {m.vector_bytes} | {p.num_warps} "
                     f"| {fmt(pred)} | {fmt(got) or '—'} | {verdict} |")
    n_ok = sum(r_["ok"] for r_ in rows)
    summary = (f"ncu memory: {len(rows)} plans ({sum(r_['space'] == 'shared' for r_ in rows)} shared, "
               f"{sum(r_['space'] == 'global' for r_ in rows)} global); predicted = measured on {n_ok}")
    with open(os.path.join(a.out, "ncu_memory.json"), "w") as f:
        json.dump({"rows": rows, "ncu_rc": r.returncode, "stderr": r.stderr[-3000:], "metrics": metrics,
                   "seconds": t1 - t0}, f, indent=1, default=str)
    table = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "ncu_memory_table.md"), "w") as f:
        f.write(table)
    print(table)
    print(summary)
    drive_lines = [ln for ln in r.stdout.splitlines() if ln.startswith("DRIVE")]
    print(f"ncu rc {r.returncode}; {drive_lines[-1] if drive_lines else 'no DRIVE output: ' + r.stderr[-2000:]}")
    failures += [ln for ln in drive_lines if "FAIL" in ln]
    if r.returncode or not drive_lines:
        failures.append(f"ncu exited with {r.returncode}")
    for f_ in failures:
        print(f"FAILED {f_}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
