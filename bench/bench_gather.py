"""Benchmark generated gathers: ours shuffle vs ours smem vs Triton's Gluon ``gather`` (GPU).

    python bench/bench_gather.py --out DIR [--cases REGEX] [--iters 64] [--ctas N] [--no-triton]

One device call: measures the SM clock, plans every case (``corpus.GATHER_NAMED``
CUDA cases, plus a sweep where the gather axis is held by 1..8 registers and
4..32 lanes, i.e. 1..8 shuffle candidates per element) with strategy shuffle
(where warp-local), smem and auto, renders the bench kernels
(``templates/gather_bench.cu.j2``: each CTA gathers its tile ``iters`` times,
``idx ^= out & 1`` between gathers), compiles them with nvcc in parallel, checks
every kernel's output (``llgen_bench.gather.bench_expected``; Gluon's too), times each
kernel and its base loop (the loop without the gather) and reports *clocks per
gather per SM*: ``(time - base time) * clock / (ctas * iters / SMs)``.  Indices
are in range (Triton's gather needs that).  Every timed kernel (ours and
Gluon's, gather loop and base loop) gets an integrity record
(``llgen_bench.integrity``: registers, spill bytes from ptxas ``-v``, stack and
local bytes, STL/LDL); a case where a kernel it is compared by spills or uses
local memory is flagged and left out of the summary counts.  The two base
loops do the same work (one xor and one ``idx ^= o & 1`` per element) and their
SASS ALU instructions per iteration are compared (``integrity.base_work``).
Writes ``results.json`` and ``table.md`` into DIR; exit status 1 if any kernel
(ours or Triton's) is wrong.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from llgen_bench.gather import bench_inputs, time_gluon, time_ours  # noqa: E402
from llgen_bench.jobs import MAXRREG  # noqa: E402
from llgen_bench.integrity import base_work, kernel_record, parse_ptxas, problems, res_usage, spills  # noqa: E402
from llgen_bench.sass import functions, sass_counts, sass_text  # noqa: E402
from llgen_bench.timing import measure_clock_mhz  # noqa: E402
from ll_codegen.testing.corpus import GATHER_NAMED, blocked  # noqa: E402
from ll_codegen.plan.gather import plan_gather  # noqa: E402
from ll_codegen.operations import render_files  # noqa: E402
from ll_codegen.spec import spec_from_dict  # noqa: E402


def cases() -> list[tuple[str, dict, dict, int, str]]:
    """(name, src spec, index spec, axis, dtype): the named CUDA cases, then the sweep."""
    out = []
    for c in GATHER_NAMED:
        if c.target == "cuda":
            out += [(f"{c.name}_{dt}", c.src, c.idx, c.axis, dt) for dt in c.dtypes if dt in ("f32", "f16")]
    for regs in (1, 2, 4, 8):                     # axis: `regs` registers x `lanes` lanes; 4 warps off the axis
        for lanes in (4, 8, 16, 32):
            shape = [4 * 32 // lanes * 2, regs * lanes]
            spec = blocked([1, regs], [32 // lanes, lanes], [4, 1], [1, 0], shape)
            out.append((f"sweep_r{regs}_l{lanes}_f32", spec, spec, 1, "f32"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_gather_out"))
    ap.add_argument("--cases", default=".*", help="regex over case names")
    ap.add_argument("--iters", type=int, default=64)
    ap.add_argument("--ctas", type=int, default=0, help="CTAs per launch (default 16 per SM)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-triton", action="store_true")
    args = ap.parse_args(argv)
    import cupy
    t0 = time.time()
    os.makedirs(os.path.join(args.out, "sass"), exist_ok=True)
    work = "/tmp/llgen_bench_gather"
    os.makedirs(work, exist_ok=True)
    dev = cupy.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    ctas = args.ctas or 16 * sms
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    clock = measure_clock_mhz(sms)
    mhz = clock["clock_mhz"]
    print(f"device {props['name'].decode()} SMs {sms}; clock {clock}", flush=True)
    pat = re.compile(args.cases)
    jobs = []                                     # (case, label, plan, kernel name, source, cubin)
    for name, s, i, axis, dt in cases():
        if not pat.search(name):
            continue
        S, I = spec_from_dict(s).linear, spec_from_dict(i).linear
        auto = plan_gather(S, I, axis, dt, "i32", "cuda")
        for label in ("shuffle", "smem"):
            try:
                p = plan_gather(S, I, axis, dt, "i32", "cuda", strategy=label)
            except ValueError:
                continue
            kname = re.sub(r"\W", "_", f"{name}_{label}")
            for f, text in render_files(p, kname, ("header", "bench")).items():
                with open(os.path.join(work, f), "w") as fh:
                    fh.write(text)
            jobs.append({"case": name, "label": label, "plan": p, "kernel": kname, "auto": auto.strategy,
                         "source": os.path.join(work, f"{kname}_bench.cu"), "scores":
                         {c.strategy: c.score for c in auto.candidates}})

    def build(j):
        out = j["source"][:-3] + ".cubin"
        # -Xptxas -v: registers, stack frame and spill bytes per kernel (the integrity columns); where
        # the default build spills, again with -maxrregcount=255 (the Gluon kernels' rule: jobs.compile_jobs)
        cmd = ["nvcc", "-cubin", "-arch=sm_90", "-O3", "-std=c++17", "-Xptxas", "-v", "-o", out, j["source"]]
        r = subprocess.run(cmd, capture_output=True, text=True)
        j["maxrreg"] = None
        if r.returncode == 0 and spills(parse_ptxas(r.stderr)):
            j["maxrreg"] = MAXRREG
            r = subprocess.run(cmd[:-3] + [f"-maxrregcount={MAXRREG}"] + cmd[-3:], capture_output=True, text=True)
        j["cubin"] = out if r.returncode == 0 else None
        j["error"] = None if r.returncode == 0 else r.stderr[-1500:]
        if j["cubin"]:
            j["ptxas"], j["res"] = parse_ptxas(r.stderr), res_usage(out)
            j["sass_text"] = sass_text(out)
    with ThreadPoolExecutor(os.cpu_count() or 4) as ex:
        list(ex.map(build, jobs))
    print(f"{len(jobs)} kernels compiled ({time.time() - t0:.0f} s)", flush=True)
    per_sm = lambda ms, iters=args.iters: ms * 1e6 / (ctas * iters / sms) * mhz / 1e3  # noqa: E731

    def timed(res: dict, name: str, j: dict | None = None) -> dict:
        """``res`` with clocks per gather per SM (difference and whole loop), the loops' SASS counts
        (``sass``: the gather loop body, ``base_loop``: the base loop's counts) and, for ours (``j``),
        both kernels' integrity records; the SASS goes to OUT/sass/NAME.sass."""
        if j is not None:
            text, fns = j["sass_text"], functions(j["sass_text"])
            counts = {kind: sass_counts(fns[f"{name}_{kind}"]) for kind in ("bench", "base") if f"{name}_{kind}" in fns}
            res["integrity"] = {kind: kernel_record(
                regs=res.get("regs" if kind == "bench" else "base_regs"), ptxas=j["ptxas"].get(f"{name}_{kind}"),
                res=j["res"].get(f"{name}_{kind}"), sass=counts.get(kind),
                local_bytes=res.get("local_bytes" if kind == "bench" else "base_local_bytes"), cap=j["maxrreg"])
                for kind in ("bench", "base")}
        else:
            text = "\n".join(sass_text(res[k]) for k in ("cubin", "base_cubin") if res.get(k))
            counts = {"bench": res.get("sass"), "base": res.get("base_sass")}
        with open(os.path.join(args.out, "sass", f"{name}.sass"), "w") as fh:
            fh.write(text)
        return dict(res, clk=per_sm(res["ms"]), loop_clk=per_sm(res["ms_loop"]),
                    sass=(counts.get("bench") or {}).get("loop"), base_loop=counts.get("base"))
    rows: dict[str, dict] = {}
    wrong = []
    for j in jobs:
        p = j["plan"]
        row = rows.setdefault(j["case"], {"case": j["case"], "auto": j["auto"], "scores": j["scores"],
                                          "dtype": p.dtype, "shape": list(p.src_shape), "axis": p.axis})
        src, idx = bench_inputs(p, ctas)
        if j["cubin"] is None:
            row[j["label"]] = {"error": j["error"]}
            wrong.append(f"{j['case']} {j['label']} (compile)")
            continue
        try:
            res = time_ours(j["cubin"], j["kernel"], p, src, idx, args.iters, repeats=args.repeats)
            row[j["label"]] = timed(res, j["kernel"], j)
            if not res["ok"]:
                wrong.append(f"{j['case']} {j['label']}")
        except Exception as e:  # noqa: BLE001
            row[j["label"]] = {"error": f"{type(e).__name__}: {e}"[:300]}
            wrong.append(f"{j['case']} {j['label']} ({type(e).__name__})")
        if not args.no_triton and "triton" not in row:
            try:
                res = time_gluon(p, src, idx, args.iters, repeats=args.repeats,
                                   cubin=os.path.join(work, f"{j['case']}_triton.cubin"))
                row["triton"] = timed(res, f"{j['case']}_triton")
                if not res["ok"]:
                    wrong.append(f"{j['case']} triton")
            except Exception as e:  # noqa: BLE001
                row["triton"] = {"error": f"{type(e).__name__}: {e}"[:300]}
        print(f"{j['case']:<34} {j['label']:<8} {row[j['label']].get('clk', float('nan')):8.1f} clk "
              f"ok {row[j['label']].get('ok')}  triton {row.get('triton', {}).get('clk', float('nan')):8.1f} "
              f"{row.get('triton', {}).get('error', '')[:60]} ({time.time() - t0:.0f} s)", flush=True)
    # clk: loop minus base; loop: the whole loop (gathers + the index update), the same work on both
    # sides; SHFL/LDS+STS: SASS instructions in the loop body (ptxas may unroll: compare the ratios)
    # integrity: registers of the gather/base kernel (! = spills or local memory), the base loops' SASS ALU
    # instructions per iteration (auto/Triton), and why a case is flagged (left out of the summary counts)
    lines = ["| case | auto | shuffle clk | smem clk | auto clk | Triton clk | auto / best ours | auto / Triton | "
             "loop auto / Triton | SHFL auto / Triton | LDS+STS auto / Triton | auto regs | Triton regs "
             "| base ALU/iter | flag |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | --- |"]
    f = lambda x, fmt="{:.0f}": "-" if x is None else fmt.format(x)  # noqa: E731

    def regs(entry: dict) -> str:
        recs = [(entry.get("integrity") or {}).get(k) for k in ("bench", "base")]
        return "/".join(f"{(x or {}).get('regs', '?')}{'!' if x and problems(x) else ''}" for x in recs)
    for r in rows.values():
        auto_e, tri_e = r.get(r["auto"], {}), r.get("triton", {})
        r["base_work"] = base_work(auto_e.get("base_loop"), tri_e.get("base_loop"))
        r["flags"] = [f"{side} {k}: {x}" for side, e in (("ours", auto_e), ("Triton", tri_e)) if e and "error" not in e
                      for k in ("bench", "base") for x in problems((e.get("integrity") or {}).get(k))]
        ours = {k: r[k]["clk"] for k in ("shuffle", "smem") if "clk" in r.get(k, {})}
        a = ours.get(r["auto"])
        best = min(ours.values()) if ours else None
        tri = r.get("triton", {})
        t = tri.get("clk")
        r["auto_over_best"] = a / best if a and best and best > 0 else None
        r["auto_over_triton"] = a / t if a and t and t > 0 else None
        la, lt = r.get(r["auto"], {}).get("loop_clk"), tri.get("loop_clk")
        r["loop_auto_over_triton"] = la / lt if la and lt else None
        sa, stri = r.get(r["auto"], {}).get("sass", {}), tri.get("sass", {})
        shfl = f"{sa.get('SHFL', '-')} / {stri.get('SHFL', '-')}"
        lds = f"{sa.get('LDS', 0) + sa.get('STS', 0) if sa else '-'} / {stri.get('LDS', 0) + stri.get('STS', 0) if stri else '-'}"
        lines.append(f"| {r['case']} | {r['auto']} | {f(ours.get('shuffle'))} | {f(ours.get('smem'))} | {f(a)} | "
                     f"{f(t)} | {f(r['auto_over_best'], '{:.2f}')} | {f(r['auto_over_triton'], '{:.2f}')} | "
                     f"{f(r['loop_auto_over_triton'], '{:.2f}')} | {shfl} | {lds} | {regs(auto_e)} | {regs(tri_e)} "
                     f"| {f(r['base_work']['ours'], '{:.1f}')}/{f(r['base_work']['triton'], '{:.1f}')}"
                     f"{' (off)' if r['base_work']['ok'] is False else ''} | {'; '.join(r['flags'][:2])} |")
    table = "\n".join(lines)
    meta = {"device": props["name"].decode(), "sms": sms, "clock": clock, "iters": args.iters, "ctas": ctas,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": "python bench/bench_gather.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    try:
        import triton
        meta["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump({"meta": meta, "rows": list(rows.values())}, fh, indent=1, default=str)
    with open(os.path.join(args.out, "table.md"), "w") as fh:
        fh.write(table + "\n")
    print(f"\n{meta['device']}, clock {mhz:.0f} MHz, iters {args.iters}, ctas {ctas}; {time.time() - t0:.0f} s")
    print(table)
    clean = [r for r in rows.values() if not r["flags"]]
    for r in rows.values():
        if r["flags"]:
            print(f"FLAGGED {r['case']}: {'; '.join(r['flags'][:4])}")
    bw = [r["base_work"]["ok"] for r in rows.values() if r["base_work"]["ok"] is not None]
    print(f"base loops' SASS ALU per iteration within 10% (or 2): {sum(bw)}/{len(bw)}")
    ok_auto = [r for r in clean if r.get("auto_over_best") is not None]
    print(f"over {len(clean)} unflagged cases ({len(rows) - len(clean)} flagged): auto within 5% of the better of "
          f"ours on {sum(r['auto_over_best'] <= 1.05 for r in ok_auto)}/{len(ok_auto)}; "
          f"faster than Triton on {sum((r.get('auto_over_triton') or 9) < 1 for r in clean)}/{len(clean)} "
          f"(whole loops: {sum((r.get('loop_auto_over_triton') or 9) < 1 for r in clean)}/{len(clean)})")
    for lanes in (4, 8, 16, 32):                  # the crossover: fewest registers along the axis where smem wins
        sweep = [(regs, rows.get(f"sweep_r{regs}_l{lanes}_f32", {})) for regs in (1, 2, 4, 8)]
        won = [regs for regs, r in sweep if r.get("smem", {}).get("clk") is not None
               and r.get("shuffle", {}).get("clk") is not None and r["smem"]["clk"] < r["shuffle"]["clk"]]
        picked = [regs for regs, r in sweep if r.get("auto") == "smem"]
        print(f"crossover, axis over {lanes} lanes: smem faster from {min(won) if won else '-'} register(s) on; "
              f"auto picks smem from {min(picked) if picked else '-'}")
    if wrong:
        print(f"WRONG kernels: {', '.join(wrong)}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
