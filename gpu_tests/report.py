"""Collect the outputs of run_all.sh into gpu_tests/RESULTS.md and print a summary table.

    python3 gpu_tests/report.py --out DIR [--command "bash gpu_tests/run_all.sh"]
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(path):
    try:
        with open(path) as f:
            return json.load(f) if path.endswith(".json") else f.read()
    except OSError:
        return None


def _sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception:
        return ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--command", default="bash gpu_tests/run_all.sh")
    ap.add_argument("--results", default=os.path.join(HERE, "RESULTS.md"))
    a = ap.parse_args(argv)
    out = a.out
    cases = _load(os.path.join(out, "pytest_cases.json"))
    log = _load(os.path.join(out, "pytest.log")) or ""
    ncu = _load(os.path.join(out, "ncu.json"))
    table = _load(os.path.join(out, "ncu_table.md")) or ""
    san = _load(os.path.join(out, "sanitize.json"))
    smi = _sh("nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader")
    nvcc = _sh("nvcc --version | tail -2 | head -1")
    dev = (ncu or {}).get("device") or {}
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    final = [m.group(0) for m in re.finditer(r"^=* ?\d+ (passed|failed|skipped|error).* in [\d.]+s.*$", log, re.M)]
    lines = ["# GPU verification results", "",
             f"- date: {when}",
             f"- device: {smi or dev.get('name', '?')} (compute capability {dev.get('cc', '?')})",
             f"- CUDA driver API {dev.get('driver', '?')}, runtime {dev.get('runtime', '?')}, {nvcc}, "
             f"CuPy {dev.get('cupy', '?')}; {(ncu or {}).get('ncu', 'ncu ?')}; "
             f"{((san or {}).get('version') or 'compute-sanitizer ?').splitlines()[-1]}",
             f"- command (repository root, on the GPU machine): `{a.command}`", ""]
    rows = [("part", "result")]
    # ---- bit-exact suite
    lines += ["## Bit-exact suite (`python3 -m pytest gpu_tests`)", ""]
    if final:
        lines += [f"pytest: `{final[-1].strip('= ')}`", ""]
    if cases:
        cs = cases["cases"]
        ok = sum(c["ok"] for c in cs)
        lines += [f"{len(cs)} harnesses ({len({c['pair'] for c in cs})} pair x dtype combinations), "
                  f"{ok} bit-exact, {len(cs) - ok} failed; NVRTC compile {cases['compile_s']:.0f} s, "
                  f"runs {cases['run_s']:.0f} s (2 launches each on fresh random bits, poisoned outputs).", ""]
        lines += ["| source | harnesses | bit-exact |", "| --- | --- | --- |"]
        by = collections.defaultdict(lambda: [0, 0])
        for c in cs:
            by[c["source"]][0] += 1
            by[c["source"]][1] += c["ok"]
        lines += [f"| {k} | {v[0]} | {v[1]} |" for k, v in sorted(by.items())]
        lines += ["", "| strategy / shared-memory instructions | harnesses | bit-exact |", "| --- | --- | --- |"]
        by = collections.defaultdict(lambda: [0, 0])
        for c in cs:
            t = c["tag"].split("/")
            k = t[0] if t[0] != "smem" else f"smem {t[1]} swizzle {t[2]}"
            by[k][0] += 1
            by[k][1] += c["ok"]
        lines += [f"| {k} | {v[0]} | {v[1]} |" for k, v in sorted(by.items())]
        kinds = collections.Counter(k for c in cs for k in c["kinds"])
        lines += ["", "Layout kinds (source or destination): " +
                  ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())), ""]
        bad = [c for c in cs if not c["ok"]]
        if bad:
            lines += ["Failures:", ""] + [f"- `{c['name']}` {c['pair']} [{c['variant']}]: {c['message']}" for c in bad[:30]]
            lines.append("")
        rows.append(("bit-exact (pytest)", f"{ok}/{len(cs)} harnesses" + (f"; {final[-1].strip('= ')}" if final else "")))
    else:
        rows.append(("bit-exact (pytest)", final[-1] if final else "no results"))
    # ---- ncu
    lines += ["## Shared-memory bank conflicts: Nsight Compute vs prediction", ""]
    if ncu:
        sys.path.insert(0, HERE)
        from ncu_bank_conflicts import render_table
        table, summ, _ = render_table(ncu)
        lines += [summ + ".", "",
                  "Per kernel (one CTA), totals over all warps and rounds. Prediction: per-instruction wavefronts "
                  "and conflicts of the plan x instructions per warp x (storing) warps. Measured: "
                  + ", ".join(f"`{m}`" for m in ncu["metrics"]) + ". "
                  "`match`: yes = wavefronts and conflicts both equal.", "",
                  f"ncu command: `{ncu['ncu_cmd'].split(' /')[0]} ... _drive.py manifest` ({ncu['ncu_s']:.0f} s)", "",
                  table]
        notes = _load(os.path.join(HERE, "NCU_NOTES.md"))
        if notes:
            lines += [notes]
        rows.append(("ncu bank conflicts", summ.replace("ncu: ", "")))
    else:
        rows.append(("ncu bank conflicts", "not run"))
    # ---- ncu, memory plans
    lines += ["## Memory plans (store/load): Nsight Compute vs prediction", ""]
    mem = _load(os.path.join(out, "ncu_memory.json"))
    mem_table = _load(os.path.join(out, "ncu_memory_table.md")) or ""
    if mem:
        n, ok = len(mem["rows"]), sum(r["ok"] for r in mem["rows"])
        summ = f"{n} plans, predicted = measured on {ok}"
        lines += [summ + ".", "",
                  "Per probe kernel (one CTA; its only accesses to the measured space are the planned ones). "
                  "Shared: wavefronts and bank conflicts over all (storing) warps. Global: 32-byte sectors and "
                  "requests over all warps, at the strides the plan predicts for. Measured: "
                  + ", ".join(f"`{m}`" for m in mem["metrics"]) + ".", "", mem_table]
        rows.append(("ncu memory plans", summ))
    else:
        rows.append(("ncu memory plans", "not run"))
    # ---- sanitizer
    lines += ["## compute-sanitizer", ""]
    if san:
        lines += [f"{len(san['cases'])} harnesses (every strategy, every shared-memory instruction pairing, swizzle "
                  f"none, multi-round, >48 KiB, 8/16/32/64-bit; memory stores/loads, the masked global forms with "
                  f"an extent that cuts every dim), one process per tool.", "",
                  "| tool | result | summary | harnesses |", "| --- | --- | --- | --- |"]
        for r in san["results"]:
            lines.append(f"| {r['tool']} | {'clean' if r['clean'] else 'NOT clean'} | {r['summary']} | {r['drive']} |")
            rows.append((f"sanitizer {r['tool']}", f"{'clean' if r['clean'] else 'NOT clean'} ({r['summary']})"))
        lines.append("")
        for r in san["results"]:
            if r["issues"]:
                lines += [f"{r['tool']} issues:", "```"] + r["issues"] + ["```", ""]
    else:
        rows.append(("sanitizer", "not run"))
    text = "\n".join(lines).rstrip() + "\n"
    for path in (a.results, os.path.join(out, "RESULTS.md")):
        with open(path, "w") as f:
            f.write(text)
    w = max(len(r[0]) for r in rows)
    print("\n" + "=" * 80)
    for k, v in rows:
        print(f"{k:<{w}}  {v}")
    print("=" * 80)
    return 0


if __name__ == "__main__":
    sys.exit(main())
