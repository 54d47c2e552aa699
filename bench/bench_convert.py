"""Benchmark generated layout conversions against Triton's convert_layout (GPU).

    python bench/bench_convert.py --out DIR [--pairs REGEX] [--iters 64] [--ctas N]
                                  [--no-candidates] [--no-sass] [--no-triton]

One device call does everything: measures the SM clock under load, plans
every pair of ``CORPUS`` (auto, the naive baseline -- strategy smem, no
swizzle, one element per access -- and, for the cost-model calibration, every
candidate the planner scores), renders the round-trip bench kernels, compiles
them with nvcc in parallel, checks every kernel's output bit for bit, times
them and Triton's Gluon kernel with the same layouts (``DistributedLinearLayout``
with our bases; for a few pairs also Gluon's legacy layout classes), disassembles
the cubins (``cuobjdump -sass``) and writes into DIR: ``results.json`` (every
number), ``table.md``, ``speedup.png`` and ``sass.tar.gz``.  The last thing it
prints is a short table.  See ``llgen_bench/convert.py`` for the method.
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

from llgen_bench.convert import fmt as fmt_num, format_table, geomean, run_job  # noqa: E402
from llgen_bench.jobs import compile_jobs, prepare  # noqa: E402
from llgen_bench.timing import measure_clock_mhz  # noqa: E402
from llgen_bench.corpus import COL, MMA, MMA_4x1, ROW, blocked, dot, mma_v2, sliced, wgmma  # noqa: E402
from llgen_bench.corpus import linear as linear_spec  # noqa: E402

ROW128 = blocked([1, 8], [4, 8], [4, 1], [1, 0], [128, 128])
ROW128_8W = blocked([1, 8], [4, 8], [8, 1], [1, 0], [128, 128])
WARP_T_SRC = blocked([1, 8], [8, 4], [8, 1], [1, 0], [64, 32])
WARP_T_DST = blocked([8, 1], [1, 32], [8, 1], [1, 0], [64, 32])
REGS_ONLY = linear_spec(register=[[16, 0], [0, 32], [0, 1], [32, 0], [0, 2]],
                        lane=[[0, 4], [0, 8], [0, 16], [1, 0], [2, 0]], warp=[[4, 0], [8, 0]], shape=[64, 64])

# (name, src spec, dst spec, dtype, time legacy Gluon classes too, note)
CORPUS = [
    # the pairs of issue 6's "what Triton does today"
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
    # pairs a new user tried (issue 14): 2 warps, f64, i8, dot operand B, a slice of mma, lanes along dim 0
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
    # warp-local transposes (issue 14): each warp's 8x32 block, registers along columns -> along rows
    *[(f"warp_T_64x32_{dt}_8w", WARP_T_SRC, WARP_T_DST, dt, False, "warp-local transpose") for dt in ("i8", "f16", "f32")],
]


def plot(rows: list[dict], path: str) -> None:
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
    ax.set_title("llgen round-trip conversions on H100", fontsize=10)
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
    args = ap.parse_args(argv)
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
    print(f"planned {len(jobs)} pairs, {sum(1 for j in jobs for v in j.variants if v.source)} kernels "
          f"({time.time() - t0:.0f} s)", flush=True)
    compile_jobs(jobs, arch=args.arch)
    print(f"compiled ({time.time() - t0:.0f} s)", flush=True)
    rows = []
    for j in jobs:
        r = run_job(j, iters=args.iters, ctas=ctas, triton=not args.no_triton, sms=sms,
                      clock_mhz=clock["clock_mhz"], sass=not args.no_sass, sass_dir=work, repeats=args.repeats)
        rows.append(r)
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
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1, default=str)
    table = format_table(rows)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table + "\n")
    try:
        plot(rows, os.path.join(out, "speedup.png"))
    except Exception as e:  # noqa: BLE001
        print(f"plot failed: {e}")
    if not args.no_sass:
        with tarfile.open(os.path.join(out, "sass.tar.gz"), "w:gz") as tf:
            for fn in sorted(os.listdir(work)):
                if fn.endswith((".sass", ".cuh", ".cu")):
                    tf.add(os.path.join(work, fn), arcname=fn)
    ot = [r["ours_over_triton"] for r in rows if r.get("ours_over_triton")]
    print(f"\n{meta['device']}, clock {clock['clock_mhz']:.0f}/{clock_after['clock_mhz']:.0f} MHz, "
          f"iters {args.iters}, ctas {ctas}; {time.time() - t0:.0f} s")
    print(f"{'pair':<34} {'plan':<28} {'bound':>6} {'ours':>6} {'triton':>6} {'o/T':>5} {'o/b':>5} {'T/b':>5} "
          f"{'nv/o':>5} fastest")
    for r in rows:
        v, t = r["variants"]["auto"], r.get("triton", {})
        fmt = lambda x, f="{:.2f}": fmt_num(x, f)  # noqa: E731
        print(f"{r['name']:<34} {r['plan'][:28]:<28} {r['bound_clk']:6.0f} {fmt(v.get('clk_per_conv_sm'), '{:.0f}'):>6} "
              f"{fmt(t.get('clk_per_conv_sm'), '{:.0f}'):>6} {fmt(r.get('ours_over_triton')):>5} "
              f"{fmt(r.get('ours_over_bound')):>5} {fmt(r.get('triton_over_bound')):>5} "
              f"{fmt(r.get('naive_over_ours')):>5} {r.get('auto_is_fastest', '-')}"
              f"{'' if v.get('ok') else ' WRONG'}{'' if t.get('ok', True) else ' TRITON-WRONG'}")
    loop = [r["loop_ours_over_triton"] for r in rows if r.get("loop_ours_over_triton")]
    print(f"geomean ours/Triton {geomean(ot):.3f} over {len(ot)} pairs (conversions: loop minus base); "
          f"whole loops {geomean(loop):.3f}")
    wrong = [r["name"] for r in rows if not all(v.get("ok") for v in r["variants"].values())]
    wrong += [f"{r['name']} ({tag})" for r in rows for tag in ("triton", "triton_legacy")
              if r.get(tag, {}).get("ok") is False]
    if wrong:
        print(f"WRONG kernels: {', '.join(wrong)}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
