"""Benchmark generated layout conversions against Triton's convert_layout (GPU).

    python bench/bench_convert.py --out DIR [--pairs REGEX] [--iters 64] [--ctas N] [--quick]
                                  [--no-candidates] [--no-sass] [--no-triton] [--no-legacy]
    python bench/bench_convert.py --offline [--pairs REGEX]      # no GPU: integrity of both sides
    python bench/bench_convert.py --headline RESULTS_JSON          # no GPU: a recorded run's headline

One device call does everything: measures the SM clock under load, plans
every pair of ``CORPUS`` (tiles of rank 1 to 3; auto, the naive baseline -- strategy smem, no
swizzle, one element per access -- and, for the cost-model calibration, every
candidate the planner scores), renders the round-trip bench kernels, compiles
them with nvcc in parallel (``-Xptxas -v``), checks every kernel's output bit for
bit, times them and Triton's Gluon kernel with the same layouts
(``DistributedLinearLayout`` with our bases; for a few pairs also Gluon's legacy
layout classes), records every timed kernel's integrity (registers, spills,
local memory, STL/LDL; both sides, round trip and base loop) and the base
loops' SASS ALU work; times, for each warp count of the pairs whose data crosses warps, the
minimal round trip across warps (the latency floor: ``jobs.latency_floor_specs``; each such
pair's ``floor_clk`` is max(bound, it)), and writes into DIR: ``results.json`` (every number, and
the ``headline``: the format of ``bench/results_h200.json``; ``latency_floors``, those kernels' rows), ``table.md``,
``speedup.png`` and ``sass.tar.gz``.  It prints the table, then the flagged
pairs and, last, the headline over the unflagged pairs
(``llgen_bench/headline.py``).  Exit status 1 if any kernel is wrong.

``--quick`` = ``--no-candidates --no-legacy`` (the headline needs neither; the
candidates are the cost model's calibration data).  ``--offline`` compiles our
``auto`` kernels (nvcc) and Triton's (``triton.compile`` for sm_90) on the CPU
and prints their integrity and base-loop work, the flags a GPU run would
start from.  See ``llgen_bench/convert.py`` for the method.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import sys
import tarfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from llgen_bench.convert import fmt as fmt_num, format_table, preflight_job, regs_cell, run_job, with_floor  # noqa: E402
from llgen_bench.headline import format_headline, headline  # noqa: E402
from llgen_bench.integrity import describe as describe_integrity  # noqa: E402
from llgen_bench.jobs import Job, compile_jobs, describe, latency_floor_specs, prepare  # noqa: E402
from llgen_bench.timing import measure_clock_mhz  # noqa: E402
from ll_codegen.testing.corpus import COL, MMA, MMA_4x1, ROW, blocked, dot, mma_v2, sliced, wgmma  # noqa: E402
from ll_codegen.testing.corpus import linear as linear_spec  # noqa: E402

ROW128 = blocked([1, 8], [4, 8], [4, 1], [1, 0], [128, 128])
ROW128_8W = blocked([1, 8], [4, 8], [8, 1], [1, 0], [128, 128])
WARP_T_SRC = blocked([1, 8], [8, 4], [8, 1], [1, 0], [64, 32])
WARP_T_DST = blocked([8, 1], [1, 32], [8, 1], [1, 0], [64, 32])
REGS_ONLY = linear_spec(register=[[16, 0], [0, 32], [0, 1], [32, 0], [0, 2]],
                        lane=[[0, 4], [0, 8], [0, 16], [1, 0], [2, 0]], warp=[[4, 0], [8, 0]], shape=[64, 64])

# (name, src spec, dst spec, dtype, time legacy Gluon classes too, note)
CORPUS = [
    # the pairs Triton 3.6 was first measured on (H100): blocked transposes, mma/wgmma -> blocked, mma -> dot operand
    ("T_row_col_64_f16", ROW, COL, "f16", True, "blocked row->col transpose"),
    ("T_row_col_64_f8", ROW, COL, "f8e4m3", False, "paper Fig. 2"),
    ("T_row_col_128_f32_8w", blocked([1, 4], [4, 8], [8, 1], [1, 0], [128, 128]),
     blocked([4, 1], [8, 4], [1, 8], [0, 1], [128, 128]), "f32", True, ""),
    ("mma2_to_blocked_64_f32", MMA, ROW, "f32", True, ""),
    ("mma2_to_blocked_128_f16", mma_v2([2, 2], [128, 128]), ROW128, "f16", False, ""),
    ("wgmma_to_blocked_128_f32", wgmma([4, 1], 128, [128, 128]),
     blocked([1, 4], [2, 16], [4, 1], [1, 0], [128, 128]), "f32", True, ""),
    ("wgmma_to_blocked_128x256_f16_8w", wgmma([8, 1], 256, [128, 256]),
     blocked([1, 8], [2, 16], [8, 1], [1, 0], [128, 256]), "f16", False, ""),
    ("acc_to_dotA_kw2_f16", MMA_4x1, dot(MMA_4x1, 0, 2, [64, 64]), "f16", True, "no data movement"),
    # more of each family
    ("mma2_to_blocked_128_bf16", mma_v2([2, 2], [128, 128]), ROW128, "bf16", False, ""),
    ("blocked_to_mma2_64_f16", ROW, MMA, "f16", False, ""),
    ("blocked_to_mma2_128_bf16_8w", ROW128_8W, mma_v2([4, 2], [128, 128]), "bf16", False, ""),
    ("blocked_to_mma2_64_f32", blocked([1, 4], [4, 8], [4, 1], [1, 0], [64, 64]), MMA, "f32", False, ""),
    ("acc_to_dotA_kw4_f8", MMA_4x1, dot(MMA_4x1, 0, 4, [64, 64]), "f8e4m3", False, "warp shuffles"),
    ("acc_to_dotB_kw2_f16", MMA_4x1, dot(MMA_4x1, 1, 2, [64, 64]), "f16", False, ""),
    ("blocked_to_dotA_128x64_f16", blocked([1, 8], [8, 4], [4, 1], [1, 0], [128, 64]),
     dot(mma_v2([4, 1], [128, 64]), 0, 2, [128, 64]), "f16", False, "seed 001 example"),
    ("wgmma_to_blocked_128_bf16", wgmma([4, 1], 128, [128, 128]), ROW128, "bf16", False, ""),
    ("wgmma_to_blocked_128_f8", wgmma([4, 1], 128, [128, 128]),
     blocked([1, 16], [8, 4], [4, 1], [1, 0], [128, 128]), "f8e4m3", False, ""),
    ("T_row_col_128_f8_8w", blocked([1, 16], [8, 4], [8, 1], [1, 0], [128, 128]),
     blocked([16, 1], [4, 8], [1, 8], [0, 1], [128, 128]), "f8e4m3", False, ""),
    ("T_row_col_128x256_f16_8w", blocked([1, 8], [2, 16], [8, 1], [1, 0], [128, 256]),
     blocked([8, 1], [16, 2], [1, 8], [0, 1], [128, 256]), "f16", False, ""),
    ("intra_warp_64_f16", ROW, blocked([1, 4], [4, 8], [4, 1], [1, 0], [64, 64]), "f16", True, "warp-local"),
    ("intra_warp_64_f32", ROW, blocked([1, 4], [4, 8], [4, 1], [1, 0], [64, 64]), "f32", False, "warp-local"),
    ("registers_only_64_f32", blocked([1, 4], [4, 8], [4, 1], [1, 0], [64, 64]), REGS_ONLY, "f32", False,
     "thread-local permutation"),
    ("slice_blocked_to_slice_mma_f32", sliced(ROW, 1, [64]), sliced(MMA, 1, [64]), "f32", True, "slice"),
    ("slice_dim0_row_to_col_f16", sliced(ROW, 0, [64]), sliced(COL, 0, [64]), "f16", False, "slice"),
    # less common shapes: 2 warps, f64, i8, dot operand B, a slice of mma, lanes along dim 0
    ("T_row_col_64_f16_2w", blocked([1, 8], [4, 8], [2, 1], [1, 0], [64, 64]),
     blocked([8, 1], [8, 4], [1, 2], [0, 1], [64, 64]), "f16", False, "2 warps"),
    ("mma2_to_blocked_64_f64", MMA, blocked([1, 2], [4, 8], [4, 1], [1, 0], [64, 64]), "f64", False, ""),
    ("T_row_col_128x64_i8", blocked([1, 16], [8, 4], [4, 1], [1, 0], [128, 64]),
     blocked([16, 1], [4, 8], [1, 4], [0, 1], [128, 64]), "i8", False, ""),
    ("blocked_to_dotB_64_f16", ROW, dot(MMA, 1, 2, [64, 64]), "f16", False, "dot operand B"),
    ("slice_mma_to_slice_row_f32", sliced(MMA, 0, [64]), sliced(ROW, 0, [64]), "f32", False, "slice of mma"),
    ("lanes_dim0_to_row_128x64_f32", blocked([1, 4], [32, 1], [1, 4], [0, 1], [128, 64]),
     blocked([1, 4], [4, 8], [4, 1], [1, 0], [128, 64]), "f32", False, "lanes along dim 0"),
    ("T_row_col_128x64_f16_8w", blocked([1, 8], [4, 8], [8, 1], [1, 0], [128, 64]),
     blocked([8, 1], [8, 4], [1, 8], [0, 1], [128, 64]), "f16", False, "8 warps"),
    # held-out pairs a user benchmarked: blocked -> dot operand B of a 64 x 128 mma, a 2-warp f32 transpose
    ("blocked_to_dotB_64x128_f16", blocked([1, 8], [4, 8], [4, 1], [1, 0], [64, 128]),
     dot(mma_v2([4, 1], [64, 128]), 1, 2, [64, 128]), "f16", False, "dot operand B, 64 x 128"),
    ("blocked_to_dotB_64x128_f16_2x2", blocked([1, 8], [4, 8], [4, 1], [1, 0], [64, 128]),
     dot(mma_v2([2, 2], [64, 128]), 1, 2, [64, 128]), "f16", False, "dot operand B, 64 x 128"),
    ("T_row_col_64x128_f32_2w", blocked([1, 4], [8, 4], [2, 1], [1, 0], [64, 128]),
     blocked([4, 1], [4, 8], [1, 2], [0, 1], [64, 128]), "f32", False, "2 warps"),
    # rank 3: batched transposes (the batch over warps), a permutation of the dims, a batched mma accumulator
    ("T3_batch_row_col_2x64x64_f16", blocked([1, 1, 8], [1, 4, 8], [2, 2, 1], [2, 1, 0], [2, 64, 64]),
     blocked([1, 8, 1], [1, 8, 4], [2, 1, 2], [1, 2, 0], [2, 64, 64]), "f16", False, "rank 3"),
    ("T3_batch_row_col_4x32x64_f32_8w", blocked([1, 1, 4], [1, 4, 8], [4, 2, 1], [2, 1, 0], [4, 32, 64]),
     blocked([1, 4, 1], [1, 8, 4], [4, 1, 2], [1, 2, 0], [4, 32, 64]), "f32", False, "rank 3"),
    ("T3_dims_021_8x16x32_f16", blocked([1, 1, 8], [1, 4, 8], [4, 1, 1], [2, 1, 0], [8, 16, 32]),
     blocked([8, 1, 1], [8, 4, 1], [1, 1, 4], [0, 1, 2], [8, 16, 32]), "f16", False, "rank 3"),
    ("mma2_3d_to_blocked_2x64x64_f16", mma_v2([2, 2, 1], [2, 64, 64], (1, 16, 8)),
     blocked([1, 1, 8], [1, 4, 8], [2, 2, 1], [2, 1, 0], [2, 64, 64]), "f16", False, "rank 3"),
    # warp-local transposes: each warp's 8x32 block, registers along columns -> along rows
    *[(f"warp_T_64x32_{dt}_8w", WARP_T_SRC, WARP_T_DST, dt, False, "warp-local transpose") for dt in ("i8", "f16", "f32")],
]


def latency_floor_jobs(jobs: list[Job], work: str, arch: str) -> dict[int, Job]:
    """One latency-floor job (``jobs.latency_floor_specs``: the minimal round trip across warps) per
    warp count of the pairs whose data crosses warps, keyed by that count."""
    warps = sorted({j.warps for j in jobs if j.bound["level"] == "smem"})
    return {w: prepare(f"latency_floor_{w}w", *latency_floor_specs(w), "f32", work, naive=False, arch=arch,
                       note="latency floor: one 4-byte store and one load a thread, across warps") for w in warps}


def plot(rows: list[dict], path: str, device: str = "GPU") -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r["name"] + f" ({r['dtype']})" for r in rows]
    tri = [1 / r["ours_over_triton"] if r.get("ours_over_triton") else 0 for r in rows]
    nai = [r.get("naive_over_ours") or 0 for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.38 * len(rows) + 1.5))
    y = range(len(rows))
    ax.barh([i - 0.2 for i in y], tri, height=0.4, label="over Triton convert_layout (Gluon)")
    ax.barh([i + 0.2 for i in y], nai, height=0.4, label="over naive llgen (smem, no swizzle, scalar)")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticks(list(y))
    ax.set_yticklabels(names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("speedup of llgen auto (time per conversion per SM; >1: llgen faster)")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"llgen round-trip conversions on {device}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    ap.add_argument("--pairs", default=".*", help="regex over pair names")
    ap.add_argument("--iters", type=int, default=64)
    ap.add_argument("--ctas", type=int, default=0, help="CTAs per launch (default 48 per SM)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--no-candidates", action="store_true")
    ap.add_argument("--no-sass", action="store_true")
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--no-legacy", action="store_true")
    ap.add_argument("--arch", default="sm_90", help="plan for this CUDA arch; other than sm_90: compute_XX PTX, "
                    "JIT-compiled by the driver (e.g. sm_80's ldmatrix-without-stmatrix plans on an H100)")
    ap.add_argument("--quick", action="store_true", help="--no-candidates --no-legacy: the headline's kernels only")
    ap.add_argument("--offline", action="store_true", help="no GPU: compile both sides, print their integrity")
    ap.add_argument("--headline", metavar="RESULTS_JSON", help="no GPU: print the headline of a recorded run")
    args = ap.parse_args(argv)
    if args.headline:
        with open(args.headline) as f:
            print(format_headline(headline(json.load(f)["rows"])))
        return 0
    if args.quick:
        args.no_candidates = args.no_legacy = True
    if args.offline:
        return offline(args)
    import cupy
    t0 = time.time()
    out = args.out
    work = os.path.join(out, "work") if not os.environ.get("OUT") else "/tmp/llgen_bench_work"
    os.makedirs(work, exist_ok=True)
    os.makedirs(out, exist_ok=True)
    dev = cupy.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    ctas = args.ctas or 48 * sms
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    clock = measure_clock_mhz(sms)
    print(f"device {props['name'].decode()} SMs {sms}; clock {clock}", flush=True)
    pat = re.compile(args.pairs)
    jobs = []
    for name, s, d, dt, legacy, note in CORPUS:
        if not pat.search(name):
            continue
        jobs.append(prepare(name, s, d, dt, work, candidates=not args.no_candidates, arch=args.arch,
                              legacy_specs=(s, d) if legacy and not args.no_legacy else None, note=note))
    floors = latency_floor_jobs(jobs, work, args.arch)
    print(f"planned {len(jobs)} pairs, {sum(1 for j in jobs for v in j.variants if v.source)} kernels "
          f"({time.time() - t0:.0f} s)", flush=True)
    compile_jobs(jobs + list(floors.values()), arch=args.arch)
    print(f"compiled ({time.time() - t0:.0f} s)", flush=True)
    floor_rows = {w: run_job(j, iters=args.iters, ctas=ctas, triton=False, sms=sms, clock_mhz=clock["clock_mhz"],
                             sass_dir=work, repeats=args.repeats) for w, j in floors.items()}
    floor_clk = {w: r["variants"]["auto"].get("clk_per_conv_sm") for w, r in floor_rows.items()}
    for w, r in floor_rows.items():
        print(f"latency floor, {w} warps: {fmt_num(floor_clk[w], '{:.1f}')} clk per conversion per SM "
              f"({r['plan']}; ok {r['variants']['auto'].get('ok')})", flush=True)
    rows = []
    for j in jobs:
        r = run_job(j, iters=args.iters, ctas=ctas, triton=not args.no_triton, sms=sms,
                      clock_mhz=clock["clock_mhz"], sass=not args.no_sass, sass_dir=work, repeats=args.repeats)
        with_floor(r, floor_clk.get(j.warps))
        rows.append(r)
        with open(os.path.join(out, "results.partial.json"), "w") as f:   # what a run cut short leaves
            json.dump({"rows": rows}, f, default=str)
        v = r["variants"]["auto"]
        t = r.get("triton", {})
        print(f"{r['name']:<34} {r['dtype']:<7} {r['plan']:<28} ours {v.get('clk_per_conv_sm', float('nan')):7.0f} "
              f"triton {t.get('clk_per_conv_sm', float('nan')):7.0f} bound {r['bound_clk']:6.0f} "
              f"ok {v.get('ok')}/{t.get('ok')} {t.get('error', '')[:80]} ({time.time() - t0:.0f} s)", flush=True)
    clock_after = measure_clock_mhz(sms)
    meta = {"device": props["name"].decode(), "sms": sms, "clock_before": clock, "clock_after": clock_after,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": "python bench/bench_convert.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "iters": args.iters, "ctas": ctas, "python": platform.python_version(), "arch": args.arch}
    try:
        import torch
        import triton
        meta.update(triton=triton.__version__, torch=torch.__version__, cupy=cupy.__version__)
    except Exception:  # noqa: BLE001
        pass
    head = headline(rows)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows, "headline": head, "latency_floors": list(floor_rows.values())}, f,
                  indent=1, default=str)
    os.remove(os.path.join(out, "results.partial.json"))
    table = format_table(rows)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table + "\n")
    try:
        plot(rows, os.path.join(out, "speedup.png"), meta["device"])
    except Exception as e:  # noqa: BLE001
        print(f"plot failed: {e}")
    if not args.no_sass:
        with tarfile.open(os.path.join(out, "sass.tar.gz"), "w:gz") as tf:
            for fn in sorted(os.listdir(work)):
                if fn.endswith((".sass", ".cuh", ".cu")):
                    tf.add(os.path.join(work, fn), arcname=fn)
    print(f"\n{meta['device']}, clock {clock['clock_mhz']:.0f}/{clock_after['clock_mhz']:.0f} MHz, "
          f"iters {args.iters}, ctas {ctas}; {time.time() - t0:.0f} s")
    print(f"{'pair':<34} {'plan':<28} {'bound':>6} {'ours':>6} {'triton':>6} {'o/T':>5} {'loop':>5} {'o/b':>5} {'o/f':>5} "
          f"{'T/b':>5} {'nv/o':>5} {'regs o':>8} {'regs T':>8} {'base ALU o/T':>12} fastest")
    for r in rows:
        v, t = r["variants"]["auto"], r.get("triton", {})
        fmt = lambda x, f="{:.2f}": fmt_num(x, f)  # noqa: E731
        bw = r.get("base_work") or {}
        print(f"{r['name']:<34} {r['plan'][:28]:<28} {r['bound_clk']:6.0f} {fmt(v.get('clk_per_conv_sm'), '{:.0f}'):>6} "
              f"{fmt(t.get('clk_per_conv_sm'), '{:.0f}'):>6} {fmt(r.get('ours_over_triton')):>5} "
              f"{fmt(r.get('loop_ours_over_triton')):>5} {fmt(r.get('ours_over_bound')):>5} {fmt(r.get('ours_over_floor')):>5} "
              f"{fmt(r.get('triton_over_bound')):>5} {fmt(r.get('naive_over_ours')):>5} {regs_cell(v):>8} {regs_cell(t):>8} "
              f"{fmt(bw.get('ours'), '{:.1f}') + '/' + fmt(bw.get('triton'), '{:.1f}'):>12} {r.get('auto_is_fastest', '-')}"
              f"{'' if v.get('ok') else ' WRONG'}{'' if t.get('ok', True) else ' TRITON-WRONG'}"
              f"{' FLAGGED' if r.get('flags') else ''}")
    bw = [r["base_work"] for r in rows if (r.get("base_work") or {}).get("ok") is not None]
    print(f"base loops' SASS ALU per iteration within 10% (or 2): {sum(b['ok'] for b in bw)}/{len(bw)}; off: "
          + (", ".join(f"{r['name']} {r['base_work']['ours']:.1f}/{r['base_work']['triton']:.1f}" for r in rows
                       if (r.get("base_work") or {}).get("ok") is False) or "none"))
    wrong = [r["name"] for r in rows if not all(v.get("ok") for v in r["variants"].values())]
    wrong += [f"{r['name']} ({tag})" for r in rows for tag in ("triton", "triton_legacy")
              if r.get(tag, {}).get("ok") is False]
    if wrong:
        print(f"WRONG kernels: {', '.join(wrong)}")
    print(format_headline(head))                     # last: the headline over the unflagged pairs
    return 1 if wrong else 0


def offline(args) -> int:
    """``--offline``: plan and compile our auto kernels, compile Triton's for sm_90 (no GPU), print
    every pair's integrity on both sides, the base loops' ALU work and the flags; ``DIR/offline.json``."""
    from llgen_bench.jobs import compile_jobs, prepare
    t0 = time.time()
    work = os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    pat = re.compile(args.pairs)
    jobs = [prepare(name, s, d, dt, work, naive=False, note=note) for name, s, d, dt, _, note in CORPUS
            if pat.search(name)]
    floors = latency_floor_jobs(jobs, work, args.arch)
    compile_jobs(jobs + list(floors.values()))
    rows = []
    print(f"{'pair':<34} {'pack':>4}  {'ours bench / base':<44} {'Triton bench / base':<44} base ALU/iter o/T")
    for j in jobs:
        r = preflight_job(j, work=work)
        rows.append(r)
        o, t, b = r["variants"]["auto"].get("integrity", {}), r["triton"].get("integrity", {}), r["base_work"]
        d = lambda x: describe_integrity(x)[:21]  # noqa: E731
        print(f"{r['name']:<34} {r['pack']:>4}  {d(o.get('bench')) + ' / ' + d(o.get('base')):<44} "
              f"{d(t.get('bench')) + ' / ' + d(t.get('base')):<44} {fmt_num(b['ours'], '{:.1f}')}/"
              f"{fmt_num(b['triton'], '{:.1f}')}{' OFF' if b['ok'] is False else ''} {r['triton'].get('error', '')[:60]}",
              flush=True)
    for w, j in floors.items():          # the latency floor's kernel: its loop, per round trip and thread
        v = j.variants[0]
        loop = (v.sass.get(f"{v.kernel}_bench") or {}).get("loop") or {}
        print(f"latency floor, {w} warps: {describe(v.fwd)}; SASS loop " + " ".join(
            f"{k} {loop.get(k)}" for k in ("STS", "LDS", "BAR", "ALU", "total")) + (f" ({v.error})" if v.error else ""))
    with open(os.path.join(args.out, "offline.json"), "w") as f:
        json.dump({"rows": rows}, f, indent=1, default=str)
    flagged = [r for r in rows if r["flags"]]
    off = [r["name"] for r in rows if r["base_work"]["ok"] is False]
    for r in flagged:
        print(f"FLAG {r['name']}: {'; '.join(r['flags'][:4])}")
    print(f"offline ({time.time() - t0:.0f} s): {len(flagged)} of {len(rows)} pairs would be flagged; base ALU "
          f"work off on {len(off)}: {', '.join(off) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
