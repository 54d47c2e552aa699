"""Measured shared-memory wavefronts and bank conflicts (Nsight Compute) vs the plan's prediction.

    python3 gpu_tests/ncu_bank_conflicts.py [--out DIR] [--limit N]

For the shared-memory plans of ``cases.smem_showcase()`` (sm_90: every named
pair's plan, every ldmatrix/stmatrix pairing, swizzle ``none`` plans that
conflict, several rounds, narrow vectors, 8/16/32/64-bit elements) the
harnesses are compiled here (NVRTC), then ONE process (``_drive.py``) launches
each harness once under ``ncu`` and the per-kernel counters are read back by
kernel name.

Prediction, per kernel (one CTA), from the plan alone:

* store wavefronts = ``smem.store.total_wavefronts`` (per storing warp, over all
  rounds) x storing warps (warps with ``warp & store_warp_skip == 0``);
* store bank conflicts = ``smem.store.bank_conflicts`` (per instruction) x
  ``smem.store.instructions`` (per warp, over all rounds) x storing warps;
* loads likewise over all warps;
* instructions = ``instructions`` x warps.

The harness's own traffic is global (``ld.global`` of ``in``, ``st.global``
of ``out`` and the register dump): it adds nothing to the shared-memory
counters.  The emulator's brute-force count (``measure_smem``, from the actual
addresses) is printed beside the plan's prediction.

Measured: ``l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum`` and
``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum``, plus, where
this ncu has them, the ``ldsm``/``stsm`` (ldmatrix/stmatrix) variants and the
executed instruction counts; which ones exist is read from
``ncu --query-metrics`` and recorded.  Results go to ``DIR/ncu.json`` and a
markdown table (``DIR/ncu_table.md``) that ``report.py`` puts into RESULTS.md.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

REQUIRED = [
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
]
OPTIONAL = [
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_stsm.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_stsm.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "smsp__sass_inst_executed_op_shared_st.sum",
    "smsp__sass_inst_executed_op_ldsm.sum",
    "smsp__sass_inst_executed_op_stsm.sum",
    "smsp__inst_executed_op_ldsm.sum",
    "smsp__inst_executed_op_stsm.sum",
]


def ncu_bin() -> str:
    for c in ("ncu", "/usr/local/cuda/bin/ncu"):
        try:
            subprocess.run([c, "--version"], capture_output=True, check=True, timeout=60)
            return c
        except Exception:
            continue
    raise SystemExit("ncu not found")


def query_metrics(ncu: str) -> tuple[set[str], str]:
    """(the base metric names, the full text) of ``ncu --query-metrics`` on this GPU."""
    r = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120)
    return set(re.findall(r"^\s*([a-z0-9_]+__[a-z0-9_]+)", r.stdout, re.M)), r.stdout


def available_metrics(ncu: str, wanted: list[str] | None = None) -> tuple[list[str], str]:
    """The ``wanted`` metrics (default OPTIONAL) this ncu knows on this GPU, and the shared-memory
    lines of --query-metrics."""
    names, text = query_metrics(ncu)
    shared = "\n".join(ln for ln in text.splitlines()
                       if re.search(r"shared|ldsm|stsm", ln.split(" ")[0] if ln.strip() else ""))
    return [m for m in (OPTIONAL if wanted is None else wanted) if m.rsplit(".", 1)[0] in names], shared


def predict(plan) -> dict:
    """Per-CTA totals from the plan, and the emulator's brute-force totals."""
    from ll_codegen.verify.emulate.banks import measure_smem
    m = plan.smem
    st_warps = sum(1 for w in range(plan.num_warps) if w & m.store_warp_skip == 0)
    ld_warps = plan.num_warps
    st, ld = measure_smem(plan)
    return {
        "st_wf": m.store.total_wavefronts * st_warps, "st_conf": m.store.bank_conflicts * m.store.instructions * st_warps,
        "ld_wf": m.load.total_wavefronts * ld_warps, "ld_conf": m.load.bank_conflicts * m.load.instructions * ld_warps,
        "st_instr": m.store.instructions * st_warps, "ld_instr": m.load.instructions * ld_warps,
        "emu_st_wf": sum(p[3] for p in st.per_instruction), "emu_ld_wf": sum(p[3] for p in ld.per_instruction),
        "st_warps": st_warps, "ld_warps": ld_warps,
        "st_per_instr": (m.store.wavefronts, m.store.bank_conflicts),
        "ld_per_instr": (m.load.wavefronts, m.load.bank_conflicts),
    }


def sass_shared_ops(cubin: str, kernel: str, opcodes: str = "STS|LDS|LDSM|STSM") -> dict[str, int]:
    """Shared-memory SASS opcodes (STS.64, LDS.U8, LDSM.16.M88.4, STSM..., with their widths) of one
    kernel -- or those of the ``opcodes`` alternatives (``SHFL``: SHFL.BFLY, ...) -- and how often each
    occurs in its code."""
    try:
        r = subprocess.run(["cuobjdump", "-sass", "-fun", kernel, cubin], capture_output=True, text=True, timeout=60)
    except Exception as e:
        return {"error": str(e)}
    ops: dict[str, int] = {}
    for m in re.finditer(rf"\b((?:{opcodes})(?:\.[A-Z0-9_]+)*)\b", r.stdout):
        ops[m.group(1)] = ops.get(m.group(1), 0) + 1
    return ops


def _num(s: str) -> float | None:
    s = s.strip().replace(",", "")
    try:
        return float(s)
    except ValueError:
        return None


def parse_raw_csv(text: str) -> dict[str, dict[str, float]]:
    """kernel name -> metric -> value from ``ncu --csv --page raw`` output."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return {}
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        if _num(r.get("ID", "")) is None:          # the units row
            continue
        name = r.get("Kernel Name", "").split("(")[0].strip()
        vals = {k: _num(v) for k, v in r.items() if k and "__" in k}
        if name in out:                             # launched twice: should not happen
            name = f"{name}#{r['ID']}"
        out[name] = {k: v for k, v in vals.items() if v is not None}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", os.path.join(HERE, "out")))
    ap.add_argument("--limit", type=int, default=64)
    ap.add_argument("--timeout", type=int, default=140)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    import cases
    import _drive
    from ll_codegen.run import gpu
    t0 = time.time()
    sel = cases.smem_showcase(limit=a.limit)
    work = tempfile.mkdtemp(prefix="llgen_ncu_")
    manifest, errors = _drive.prepare([(c.name, c.plan) for c in sel], work)
    t1 = time.time()
    ncu = ncu_bin()
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    optional, shared_metrics = available_metrics(ncu)
    metrics = REQUIRED + optional
    log = os.path.join(work, "ncu.csv")
    cmd = [ncu, "--metrics", ",".join(metrics), "--csv", "--page", "raw", "--clock-control", "none",
           "--kernel-name", "regex:_harness$", "--log-file", log,
           sys.executable, os.path.join(HERE, "_drive.py"), manifest]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])))
    t2 = time.time()
    drive_lines = [ln for ln in r.stdout.splitlines() if ln.startswith("DRIVE")]
    csv_text = open(log).read() if os.path.exists(log) else ""
    measured = parse_raw_csv(csv_text)
    import pickle
    with open(manifest, "rb") as f:
        cubins = {n: path for n, _, path in pickle.load(f)}
    rows = []
    for c in sel:
        p = c.plan
        m = p.smem
        row = {"name": c.name, "pair": c.pair, "variant": c.variant, "bits": p.elem_bytes * 8,
               "store_instr": m.store_instr, "load_instr": m.load_instr, "swizzle": m.swizzle,
               "rounds": len(m.rounds), "warps": p.num_warps, "smem_bytes": m.bytes,
               "store_bytes": m.store_vec * p.elem_bytes, "load_bytes": m.load_vec * p.elem_bytes,
               "pred": predict(p), "meas": measured.get(f"{c.name}_harness"),
               "sass": sass_shared_ops(cubins.get(c.name, ""), f"{c.name}_harness"),
               "compile_error": errors.get(c.name)}
        rows.append(row)
    info = gpu.device_info()
    result = {"device": info, "ncu": version, "metrics": metrics, "optional_found": optional,
              "shared_metric_catalogue": shared_metrics, "ncu_cmd": " ".join(cmd), "ncu_rc": r.returncode,
              "ncu_stderr_tail": r.stderr[-3000:], "drive": drive_lines[-1:] + [ln for ln in drive_lines if "FAIL" in ln],
              "rows": rows, "compile_s": t1 - t0, "ncu_s": t2 - t1, "raw_csv": csv_text[-200000:]}
    with open(os.path.join(a.out, "ncu.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    table, summary, failures = render_table(result)
    with open(os.path.join(a.out, "ncu_table.md"), "w") as f:
        f.write(table)
    print(table)
    print(summary)
    print(f"ncu rc {r.returncode}; {drive_lines[-1] if drive_lines else 'no DRIVE output: ' + r.stdout[-2000:] + r.stderr[-2000:]}")
    # failure: a wrong kernel, ncu failing, or a plan whose measured conflicts or
    # wavefronts (beyond counter noise) differ from the prediction
    failures += [ln for ln in drive_lines if "FAIL" in ln]
    if r.returncode or not drive_lines:
        failures.append(f"ncu exited with {r.returncode}")
    for f in failures:
        print(f"FAILED {f}")
    return 1 if failures else 0


def _g(d: dict | None, k: str) -> float | None:
    return None if d is None else d.get(k)


def measured_totals(meas: dict | None, row: dict) -> dict:
    """Store/load wavefronts and conflicts, adding the ldsm/stsm counters when the ncu reports them apart."""
    if meas is None:
        return {}
    out = {"st_wf": _g(meas, REQUIRED[3]), "ld_wf": _g(meas, REQUIRED[2]),
           "st_conf": _g(meas, REQUIRED[1]), "ld_conf": _g(meas, REQUIRED[0])}
    for side, op in (("ld", "ldsm"), ("st", "stsm")):
        wf = _g(meas, f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum")
        cf = _g(meas, f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum")
        out[f"{side}_wf_{op}"] = wf
        out[f"{side}_conf_{op}"] = cf
    out["st_instr"] = _g(meas, "smsp__sass_inst_executed_op_shared_st.sum")
    out["ld_instr"] = _g(meas, "smsp__sass_inst_executed_op_shared_ld.sum")
    out["ldsm_instr"] = _g(meas, "smsp__sass_inst_executed_op_ldsm.sum") or _g(meas, "smsp__inst_executed_op_ldsm.sum")
    out["stsm_instr"] = _g(meas, "smsp__sass_inst_executed_op_stsm.sum") or _g(meas, "smsp__inst_executed_op_stsm.sum")
    return out


def _fmt(x) -> str:
    if x is None:
        return "—"
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


NOISE, NOISE_ABS = 0.005, 3   # counter noise tolerated: max(3, 0.5% of the predicted wavefronts) (NCU_NOTES.md)


def render_table(result: dict) -> tuple[str, str, list[str]]:
    hdr = ("| case | pair | bits | st -> ld instr | swz | rounds | warps | st wf pred/meas | st conf pred/meas "
           "| ld wf pred/meas | ld conf pred/meas | ldsm/stsm wf (conf) | instr st/ld pred/meas | match |")
    lines = [hdr, "|" + " --- |" * (hdr.count("|") - 1)]
    n_ok_wf = n_ok_conf = n = n_same = n_same_ok = 0
    failures = []
    for row in result["rows"]:
        p = row["pred"]
        t = measured_totals(row["meas"], row)
        n += 1
        if not t:
            failures.append(f"{row['name']}: not measured")
            lines.append(f"| {row['name']} | {row['pair']} | {row['bits']} | {row['store_instr']} -> {row['load_instr']} "
                         f"| {row['swizzle']} | {row['rounds']} | {row['warps']} | not measured "
                         f"({row['compile_error'] or 'no ncu row'}) | | | | | | no |")
            continue
        # ldmatrix/stmatrix: if ncu reports them under op_ldsm/op_stsm, they are not in op_ld/op_st
        st_wf, ld_wf = t["st_wf"], t["ld_wf"]
        st_cf, ld_cf = t["st_conf"], t["ld_conf"]
        extra = []
        for side, op in (("ld", "ldsm"), ("st", "stsm")):
            if t.get(f"{side}_wf_{op}"):
                extra.append(f"{op} {_fmt(t[f'{side}_wf_{op}'])} ({_fmt(t.get(f'{side}_conf_{op}'))})")
        mat_st = row["store_instr"] != "vector"
        mat_ld = row["load_instr"] != "vector"
        if mat_ld and t.get("ld_wf_ldsm"):
            ld_wf = (ld_wf or 0) + t["ld_wf_ldsm"]
            ld_cf = (ld_cf or 0) + (t.get("ld_conf_ldsm") or 0)
        if mat_st and t.get("st_wf_stsm"):
            st_wf = (st_wf or 0) + t["st_wf_stsm"]
            st_cf = (st_cf or 0) + (t.get("st_conf_stsm") or 0)
        wf_ok = st_wf == p["st_wf"] and ld_wf == p["ld_wf"]
        # counter noise: in each run ncu reports 3 load wavefronts (and 3 conflicts) more
        # than issued on one kernel, a different one from run to run (g330: 1024 -> 1027
        # in one run, g10: 128 -> 131 in the next, the other exact)
        near = lambda m, q, ref: m is not None and abs(m - q) <= max(NOISE_ABS, NOISE * ref)  # noqa: E731
        wf_near = all(near(m, q, q) for m, q in ((st_wf, p["st_wf"]), (ld_wf, p["ld_wf"])))
        cf_near = all(near(m, q, w) for m, q, w in ((st_cf, p["st_conf"], p["st_wf"]), (ld_cf, p["ld_conf"], p["ld_wf"])))
        cf_ok = st_cf == p["st_conf"] and ld_cf == p["ld_conf"]
        n_ok_wf += wf_ok
        n_ok_conf += cf_ok
        mi_st = t["stsm_instr"] if mat_st else t["st_instr"]
        mi_ld = t["ldsm_instr"] if mat_ld else t["ld_instr"]
        # the instruction counts the hardware executed (stmatrix has no counter: ncu counts it in op_st)
        same_instr = ((mi_st is None or mi_st == p["st_instr"]) and (mi_ld is None or mi_ld == p["ld_instr"]))
        n_same += same_instr
        n_same_ok += same_instr and wf_ok and cf_ok
        verdict = ("yes" if wf_ok and cf_ok else
                   "yes within counter noise" if wf_near and cf_near and same_instr else
                   "no: compiler merged accesses" if not same_instr else "no")
        if not verdict.startswith("yes"):
            failures.append(f"{row['name']}: {verdict}")
        lines.append(
            f"| {row['name']} | {row['pair']} ({row['variant']}) | {row['bits']} | {row['store_instr']} {row['store_bytes']}B"
            f" -> {row['load_instr']} {row['load_bytes']}B | {row['swizzle']} | {row['rounds']} | {row['warps']} "
            f"| {p['st_wf']} / {_fmt(st_wf)} | {p['st_conf']} / {_fmt(st_cf)} | {p['ld_wf']} / {_fmt(ld_wf)} "
            f"| {p['ld_conf']} / {_fmt(ld_cf)} | {', '.join(extra) or '—'} "
            f"| {p['st_instr']}/{p['ld_instr']} / {_fmt(mi_st)}/{_fmt(mi_ld)} "
            f"| {verdict} |")
    summary = (f"ncu: {n} shared-memory plans; wavefronts match {n_ok_wf}/{n}, bank conflicts match {n_ok_conf}/{n}; "
               f"where the executed shared-memory instruction counts equal the plan's ({n_same} plans) both match in "
               f"{n_same_ok}")
    return "\n".join(lines) + "\n", summary, failures


if __name__ == "__main__":
    sys.exit(main())
