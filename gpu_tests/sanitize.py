"""compute-sanitizer on a representative subset of generated harnesses.

    python3 gpu_tests/sanitize.py [--out DIR] [--tools memcheck,racecheck,synccheck,initcheck]

The subset (``cases.sanitizer_subset()`` plus the Nsight Compute showcase's
ldmatrix/stmatrix and multi-round plans) covers every strategy (noop,
register, shuffle, smem), every shared-memory instruction pairing
(st.shared/stmatrix[.trans] x ld.shared/ldmatrix[.trans]), swizzle none,
several rounds and every element size.  The harnesses are compiled here
(NVRTC); then, for each tool, ONE process (``_drive.py``) launches every
harness once under ``compute-sanitizer --tool <tool>`` and checks it bit for
bit.  A tool is clean when its summary reports 0 errors (racecheck: 0
hazards) and every harness was launched and bit-exact.  A harness that does
not compile fails the run (exit status 1), named with its compiler error:
it was never sanitized.  Writes ``DIR/sanitize.json``.
"""
from __future__ import annotations

import argparse
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

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")


def subset():
    import cases
    all_cases = cases.pair_cases()
    sel = cases.sanitizer_subset(all_cases)
    names = {c.name for c in sel}
    for c in cases.smem_showcase(all_cases):
        m = c.plan.smem
        if c.name not in names and (m.store_instr != "vector" or m.load_instr != "vector" or len(m.rounds) > 1
                                    or m.bytes > 48 * 1024):
            sel.append(c)
            names.add(c.name)
    # memory plans: every named store/load and one random plan per (kind, direction, element size); global
    # tiles run their masked harness too (an extent that cuts every dim)
    mem = cases.memory_cases()
    # copies (cp.async, and its zero-filling masked form): the named ones (the showcase has some of them)
    copies = [c for c in mem if c.plan.operation == "copy" and not c.pair.startswith("random")]
    for c in cases.memory_showcase(mem) + copies:
        if c.name not in names:
            sel.append(c)
            names.add(c.name)
    return sel


def parse(tool: str, text: str) -> tuple[int | None, str]:
    """(number of errors or hazards, summary line) from the tool's output."""
    if tool == "racecheck":
        m = re.search(r"RACECHECK SUMMARY:\s*(\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)", text)
        if m:
            return int(m.group(1)), m.group(0)
    m = re.search(r"ERROR SUMMARY:\s*(\d+) errors?", text)
    if m:
        return int(m.group(1)), m.group(0)
    return None, "no summary line"


def exit_status(results: list[dict], compile_errors: dict[str, str], cases: int) -> tuple[int, str]:
    """(exit status, summary line): 0 only when every harness compiled and every tool is clean."""
    tools = ", ".join(f"{r['tool']} {'clean' if r['clean'] else 'NOT clean'}" for r in results)
    line = f"sanitize: {cases} harnesses"
    if compile_errors:
        line += f", {len(compile_errors)} did NOT compile ({', '.join(sorted(compile_errors)[:5])})"
    line += f"; {tools}" if tools else "; no tool ran"
    return (0 if results and all(r["clean"] for r in results) and not compile_errors else 1), line


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", os.path.join(HERE, "out")))
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--timeout", type=int, default=120)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    import _drive
    t0 = time.time()
    sel = subset()
    work = tempfile.mkdtemp(prefix="llgen_sanitize_")
    manifest, errors = _drive.prepare([(c.name, c.plan) for c in sel], work)
    prep_s = time.time() - t0
    for name, err in sorted(errors.items()):     # never launched, so never sanitized: a failure
        last = (err or "").strip().splitlines()
        print(f"compile error: {name}: {last[-1] if last else '(no message)'}", flush=True)
    version = subprocess.run(["compute-sanitizer", "--version"], capture_output=True, text=True).stdout.strip()
    results = []
    for tool in a.tools.split(","):
        cmd = ["compute-sanitizer", "--tool", tool, "--print-limit", "20"]
        if tool == "racecheck":
            cmd += ["--racecheck-report", "all"]
        cmd += [sys.executable, os.path.join(HERE, "_drive.py"), manifest]
        t = time.time()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout,
                               env=dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])))
            text, rc = r.stdout + r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            text, rc = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout"
        n, line = parse(tool, text)
        drive = [ln for ln in text.splitlines() if ln.startswith("DRIVE total")]
        launched = re.search(r"DRIVE total (\d+) launched", drive[-1]) if drive else None
        launched_ok = (bool(drive) and re.search(r", 0 failed", drive[-1]) is not None
                       and launched is not None and int(launched.group(1)) == len(sel) - len(errors))
        clean = n == 0 and launched_ok and rc == 0
        issues = [ln for ln in text.splitlines() if ln.startswith("=========") and
                  re.search(r"Error|Hazard|Invalid|Race|Barrier|Uninitialized", ln)][:20]
        results.append({"tool": tool, "clean": clean, "count": n, "summary": line, "rc": rc,
                        "drive": drive[-1] if drive else "no DRIVE total line", "issues": issues,
                        "seconds": round(time.time() - t, 1), "tail": text[-1500:] if not clean else ""})
        print(f"{tool:10s} {'clean' if clean else 'NOT CLEAN'}: {line}; {drive[-1] if drive else 'no drive output'} "
              f"({time.time() - t:.0f} s)", flush=True)
        for ln in issues[:5]:
            print("   ", ln)
    out = {"version": version, "cases": [{"name": c.name, "pair": c.pair, "variant": c.variant, "tag": c.tag}
                                         for c in sel],
           "compile_errors": errors, "prepare_s": prep_s, "results": results}
    with open(os.path.join(a.out, "sanitize.json"), "w") as f:
        json.dump(out, f, indent=1)
    status, line = exit_status(results, errors, len(sel))
    print(line)
    return status


if __name__ == "__main__":
    sys.exit(main())
