"""Benchmark generated reductions against Triton's ``tl.max`` / ``tl.sum`` over the same layouts (GPU).

    python bench/bench_reduce.py --out DIR [--cases REGEX] [--ops max,sum] [--iters 64] [--ctas N]
                                 [--repeats 7] [--no-triton] [--form auto|direct|spread]

One device call.  Every 2-D CUDA case of ``corpus.REDUCE_NAMED`` (the wgmma accumulator's rows --
the softmax row max and row sum -- with 4 and 8 warps, its columns across warps, a 4x2-warp tile
whose rows span two warps, mma.sync accumulator and dot-operand rows, blocked tiles along either
dim, a tile smaller than the CTA (broadcast lanes and warps), one warp per row, a slice of a 3-D
blocked layout), f32, ``max`` and ``sum``.  Both sides run the same loop on the same random normal
tile per CTA, loaded in exactly the source layout (ours: the header's ``src_index``; Triton: a Gluon
kernel whose layout is ``DistributedLinearLayout`` with our bases, ``llgen_bench.gluon.gluon_linear``):

    repeat iters times:  r = reduce(x, dim);  x = x - broadcast(r) * scale

(``scale`` 1 for max, 1/n for sum: one FFMA per element on both sides; ours broadcasts with the
header's ``broadcast()``, Triton with ``expand_dims`` of its slice-layout result -- neither moves
data), then stores ``x``.  ``iters`` is a run-time argument on both sides, so the base (``iters = 0``:
load and store) is the same kernel; clocks per reduction per SM are ``(ms - base ms) * clock /
(ctas * iters / SMs)``, each ``ms`` the median of ``--repeats`` groups of launches
(``llgen_bench.timing.time_launches``).  Both outputs are checked after one iteration against numpy
(ours: the reference's sums in the plan's order; Triton's within float tolerance).  SASS: shuffles
and barriers per iteration of each loop (``llgen_bench.sass``) next to the shuffle-count bound --
one ``SHFL`` per reduced lane bit and 32-bit word of result registers per thread (what a butterfly
needs so that every lane holds its rows' results) -- and both kernels' registers (``!``: local
memory or spills).  Clocks are a throughput difference: where the reduction costs little next to
the tile's load and store (a few registers per thread) they are within noise of 0, negative too.
Writes ``results.json`` and ``table.md`` into DIR and prints the table last; exit status 1 if any
kernel is wrong.
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

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

OURS_KERNEL = r'''#include "{name}.cuh"
extern "C" __global__ void __launch_bounds__({name}::kThreads)
{name}_bench(const float* __restrict__ in, float* __restrict__ out, int iters, float scale) {{
    extern __shared__ __align__(16) unsigned char smem[];
    const int tid = threadIdx.x, lane = tid % {name}::kWarpSize, warp = tid / {name}::kWarpSize;
    // src_index(r, lane, warp) = src_index(0, lane, warp) + src_index(r, 0, 0) for these layouts (checked by
    // the bench): one address per thread, the registers' offsets folded into the loads as Triton's are
    const float* x = in + (size_t)blockIdx.x * {tile} + {name}::src_index(0, lane, warp);
    float src[{name}::kSrcRegs];
#pragma unroll
    for (int r = 0; r < {name}::kSrcRegs; ++r) src[r] = x[{name}::src_index(r, 0, 0)];
    for (int k = 0; k < iters; ++k) {{
        float dst[{name}::kDstRegs], bc[{name}::kSrcRegs];
        {name}::reduce(src, dst, smem);
        {name}::broadcast(dst, bc);
#pragma unroll
        for (int r = 0; r < {name}::kSrcRegs; ++r) src[r] = src[r] - bc[r] * scale;
    }}
    float* y = out + (size_t)blockIdx.x * {tile} + {name}::src_index(0, lane, warp);
#pragma unroll
    for (int r = 0; r < {name}::kSrcRegs; ++r) y[{name}::src_index(r, 0, 0)] = src[r];
}}
'''


def cases():
    """(name, source LinearLayout, dims) of the 2-D CUDA cases of ``corpus.REDUCE_NAMED``."""
    from ll_codegen.spec import spec_from_dict
    from ll_codegen.testing.corpus import REDUCE_NAMED
    out = []
    for c in REDUCE_NAMED:
        L = spec_from_dict(c.src).linear
        if c.target == "cuda" and len(L.out_dims) == 2:
            out.append((c.name, L, c.dims))
    return out


def additive(plan) -> bool:
    """Whether every element's row-major index is its thread's (register 0) plus its register's (lane
    and warp 0): the bench kernel addresses the tile so."""
    from ll_codegen.core.layout import layout_of
    from ll_codegen.verify.emulate.reference import row_major_index
    idx = row_major_index(layout_of(plan.src_bases)).reshape(plan.threads, plan.n_src)
    return bool((idx == idx[:, :1] + idx[:1, :]).all())


def shuffle_bound(plan) -> int:
    """Shuffles per thread a butterfly needs: one per reduced lane bit and 32-bit word of results."""
    return len(plan.lane_xors) * -(-plan.n_dst * plan.elem_bytes // 4)


def expected(plan, x: np.ndarray, scale: float) -> np.ndarray:
    """One iteration on every tile of ``x`` (ctas x tile, f32): x - broadcast(reduce(x)) * scale, the
    reduction in the plan's order (``reference.reduce_reference``), the update in float64."""
    from ll_codegen.core.layout import layout_of
    from ll_codegen.verify.emulate.reference import reduce_reference, row_major_index
    L = layout_of(plan.src_bases)
    idx = row_major_index(L).reshape(plan.threads, plan.n_src)
    out = np.empty_like(x)
    for b in range(x.shape[0]):
        _, _, back = reduce_reference(L, plan.dims, plan.combine, "f32", x[b].view(np.uint32))
        y = np.empty(x.shape[1], dtype=np.float32)
        y[idx] = (x[b][idx].astype(np.float64) - back.view(np.float32).astype(np.float64) * scale).astype(np.float32)
        out[b] = y
    return out


def gluon_reduce_kernel():
    from triton.experimental import gluon
    from triton.experimental.gluon import language as ttgl

    @gluon.jit(do_not_specialize=["iters", "scale"])
    def reduce_2d(in_ptr, out_ptr, iters, scale, L: ttgl.constexpr, M: ttgl.constexpr, N: ttgl.constexpr,
                  AXIS: ttgl.constexpr, SUM: ttgl.constexpr):
        base = ttgl.program_id(0) * (M * N)
        offs = (ttgl.arange(0, M, layout=ttgl.SliceLayout(1, L))[:, None] * N
                + ttgl.arange(0, N, layout=ttgl.SliceLayout(0, L))[None, :])
        x = ttgl.load(in_ptr + base + offs)
        for k in range(iters):
            if SUM:
                r = ttgl.sum(x, axis=AXIS)
            else:
                r = ttgl.max(x, axis=AXIS)
            x = x - ttgl.expand_dims(r, AXIS) * scale
        ttgl.store(out_ptr + base + offs, x)
    return reduce_2d


def per_iter(counts: dict | None, fam: str) -> float | None:
    if not counts:
        return None
    return counts["loop"][fam] / (counts.get("loop_step") or 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_reduce_out"))
    ap.add_argument("--cases", default=".*", help="regex over case names")
    ap.add_argument("--ops", default="max,sum", help="combines to time (max, sum, min)")
    ap.add_argument("--iters", type=int, default=64)
    ap.add_argument("--ctas", type=int, default=0, help="CTAs per launch (default 16 per SM)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--form", choices=("auto", "direct", "spread"), default="auto",
                    help="the cross-warp stage's form (auto: the planner's choice by cost)")
    args = ap.parse_args(argv)

    import cupy
    from llgen_bench.sass import functions, sass_counts, sass_text
    from llgen_bench.timing import cupy_events, measure_clock_mhz, time_launches, torch_events
    from ll_codegen.operations import render_files
    from ll_codegen.plan.reduce import plan_reduce

    t0 = time.time()
    os.makedirs(args.out, exist_ok=True)
    work = os.path.join("/tmp", "llgen_bench_reduce")
    os.makedirs(work, exist_ok=True)
    dev = cupy.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    ctas = args.ctas or 16 * sms
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    clock = measure_clock_mhz(sms)
    mhz = clock["clock_mhz"]
    print(f"device {props['name'].decode()} SMs {sms}; clock {clock}", flush=True)
    pat = re.compile(args.cases)
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    jobs = []
    for name, L, dims in cases():
        if not pat.search(name):
            continue
        for op in ops:
            p = plan_reduce(L, dims, op, "f32", "cuda", "sm_90", form=None if args.form == "auto" else args.form)
            if not additive(p):
                print(f"{name}: skipped (an element's index is not its thread's plus its register's)")
                continue
            kname = re.sub(r"\W", "_", f"{name}_{op}")
            for f, text in render_files(p, kname, ("header",)).items():
                with open(os.path.join(work, f), "w") as fh:
                    fh.write(text)
            tile = int(np.prod(p.shape))
            src = os.path.join(work, f"{kname}_bench.cu")
            with open(src, "w") as fh:
                fh.write(OURS_KERNEL.format(name=kname, tile=tile))
            jobs.append({"case": name, "op": op, "plan": p, "kernel": kname, "source": src, "tile": tile})

    def build(j):
        out = j["source"][:-3] + ".cubin"
        r = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-O3", "-std=c++17", "-o", out, j["source"]],
                           capture_output=True, text=True)
        j["cubin"] = out if r.returncode == 0 else None
        j["error"] = None if r.returncode == 0 else r.stderr[-1500:]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(os.cpu_count() or 4) as ex:
        list(ex.map(build, jobs))
    print(f"{len(jobs)} kernels compiled ({time.time() - t0:.0f} s)", flush=True)

    clk = lambda ms: ms * 1e-3 * mhz * 1e6 / (ctas * args.iters / sms)  # noqa: E731
    gl = None
    if not args.no_triton:
        try:
            import torch
            from llgen_bench.gluon import gluon_linear
            gl = gluon_reduce_kernel()
        except Exception as e:  # noqa: BLE001
            print(f"Triton side unavailable: {type(e).__name__}: {e}", flush=True)
    rows, wrong = [], []
    rng = np.random.default_rng(0)
    for j in jobs:
        p, tile = j["plan"], j["tile"]
        scale = 1.0 if p.combine != "sum" else 1.0 / int(np.prod([p.shape[d] for d in p.dims]))
        form = "-spread" if p.warps is not None and p.warps.spread else ""       # the warp stage's form
        row = {"case": j["case"], "op": p.combine, "strategy": p.strategy + form, "shape": list(p.shape), "dims": list(p.dims),
               "warps": p.num_warps, "n_src": p.n_src, "n_dst": p.n_dst, "rounds": len(p.lane_xors),
               "shuffles": p.shuffles, "bound": shuffle_bound(p), "smem_bytes": p.smem_bytes}
        rows.append(row)
        x = rng.standard_normal((ctas, tile)).astype(np.float32)
        want = expected(p, x[:4], scale)
        if j["cubin"] is None:
            row["ours"] = {"error": j["error"]}
            wrong.append(f"{j['kernel']} (compile)")
            continue
        try:
            fn = cupy.RawModule(path=j["cubin"]).get_function(f"{j['kernel']}_bench")
            if p.smem_bytes > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = p.smem_bytes
            d_in, d_out = cupy.asarray(x), cupy.empty_like(cupy.asarray(x))

            def launch(k, fn=fn, d_in=d_in, d_out=d_out, p=p, scale=scale):
                fn((ctas,), (p.threads,), (d_in, d_out, np.int32(k), np.float32(scale)), shared_mem=p.smem_bytes)
            launch(1)
            cupy.cuda.runtime.deviceSynchronize()
            got = d_out.get()[:4]
            ok = bool(np.array_equal(got.view(np.uint32), want.view(np.uint32)) or
                      np.allclose(got, want, rtol=0, atol=1e-6 * max(1.0, float(np.abs(want).max()))))
            ms = time_launches(lambda: launch(args.iters), cupy_events, repeats=args.repeats)
            ms0 = time_launches(lambda: launch(0), cupy_events, repeats=args.repeats)
            text = sass_text(j["cubin"])
            counts = sass_counts(functions(text).get(f"{j['kernel']}_bench", text)) if text else None
            row["ours"] = {"ok": ok, "bit_exact": bool(np.array_equal(got.view(np.uint32), want.view(np.uint32))),
                           "ms_loop": ms, "ms_base": ms0, "clk": clk(ms - ms0),
                           "regs": getattr(fn, "num_regs", None), "local_bytes": getattr(fn, "local_size_bytes", None),
                           "shfl_per_iter": per_iter(counts, "SHFL"), "bar_per_iter": per_iter(counts, "BAR"),
                           "sass_loop": counts and counts["loop"]}
            if not ok:
                wrong.append(j["kernel"])
        except Exception as e:  # noqa: BLE001
            row["ours"] = {"error": f"{type(e).__name__}: {e}"[:300]}
            wrong.append(f"{j['kernel']} ({type(e).__name__})")
        if gl is not None:
            try:
                from ll_codegen.core.layout import layout_of
                M, N = p.shape
                t_in = torch.from_numpy(x).cuda()
                t_out = torch.empty_like(t_in)
                layout = gluon_linear(layout_of(p.src_bases))
                opts = {"num_warps": p.num_warps}

                def tlaunch(k, t_in=t_in, t_out=t_out, layout=layout, M=M, N=N, p=p, scale=scale, opts=opts):
                    return gl[(ctas,)](t_in, t_out, k, scale, layout, M, N, p.dims[0], p.combine == "sum", **opts)
                compiled = tlaunch(1)
                torch.cuda.synchronize()
                tgot = t_out.cpu().numpy()[:4]
                tol = 1e-5 * max(1.0, float(np.abs(want).max())) * (8 if p.combine == "sum" else 1)
                tok = bool(np.allclose(tgot, want, rtol=1e-5, atol=tol))
                tms = time_launches(lambda: tlaunch(args.iters), torch_events, repeats=args.repeats)
                tms0 = time_launches(lambda: tlaunch(0), torch_events, repeats=args.repeats)
                cubin = os.path.join(work, f"{j['kernel']}_triton.cubin")
                with open(cubin, "wb") as fh:
                    fh.write(compiled.asm["cubin"])
                text = sass_text(cubin)
                fns = functions(text) if text else {}
                counts = sass_counts(next(iter(fns.values()))) if fns else None
                row["triton"] = {"ok": tok, "ms_loop": tms, "ms_base": tms0, "clk": clk(tms - tms0),
                                 "regs": getattr(compiled, "n_regs", None),
                                 "spills": getattr(compiled, "n_spills", None),
                                 "smem": getattr(compiled.metadata, "shared", None),
                                 "shfl_per_iter": per_iter(counts, "SHFL"), "bar_per_iter": per_iter(counts, "BAR"),
                                 "sass_loop": counts and counts["loop"]}
                if not tok:
                    wrong.append(f"{j['kernel']} (triton)")
            except Exception as e:  # noqa: BLE001
                row["triton"] = {"error": f"{type(e).__name__}: {e}"[:300]}
        o, t = row.get("ours", {}), row.get("triton", {})
        row["ours_over_triton"] = o["clk"] / t["clk"] if o.get("clk") and t.get("clk") and t["clk"] > 0 else None
        print(f"{j['kernel']:<34} ours {o.get('clk', float('nan')):7.1f} clk ok {o.get('ok')}  triton "
              f"{t.get('clk', float('nan')):7.1f} clk ok {t.get('ok')} {t.get('error', '')[:80]} "
              f"({time.time() - t0:.0f} s)", flush=True)

    f = lambda v, fmt="{:.1f}": "-" if v is None else fmt.format(v)  # noqa: E731
    lines = ["| case | op | strategy | shuffles/thread (rounds x regs) | bound | SHFL/iter ours / Triton | "
             "BAR/iter ours / Triton | regs ours / Triton | clk ours | clk Triton | ours / Triton | ok ours / Triton |",
             "| --- | --- | --- | ---: | ---: | --- | --- | --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        o, t = r.get("ours", {}), r.get("triton", {})
        lines.append(f"| {r['case']} | {r['op']} | {r['strategy']} | {r['shuffles']} ({r['rounds']} x {r['n_dst']}) | "
                     f"{r['bound']} | {f(o.get('shfl_per_iter'))} / {f(t.get('shfl_per_iter'))} | "
                     f"{f(o.get('bar_per_iter'))} / {f(t.get('bar_per_iter'))} | "
                     f"{f(o.get('regs'), '{}')}{'!' if o.get('local_bytes') else ''} / {f(t.get('regs'), '{}')}"
                     f"{'!' if t.get('spills') else ''} | {f(o.get('clk'))} | {f(t.get('clk'))} | "
                     f"{f(r['ours_over_triton'], '{:.2f}')} | {o.get('ok', o.get('error', '-')[:20])}"
                     f"{' (bit-exact)' if o.get('bit_exact') else ''} / {t.get('ok', t.get('error', '-')[:40])} |")
    table = "\n".join(lines)
    meta = {"device": props["name"].decode(), "sms": sms, "clock": clock, "iters": args.iters, "ctas": ctas,
            "repeats": args.repeats, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": "python bench/bench_reduce.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    try:
        import triton
        meta["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1, default=str)
    with open(os.path.join(args.out, "table.md"), "w") as fh:
        fh.write(table + "\n")
    both = [r for r in rows if r["ours_over_triton"] is not None]
    at_bound = [r for r in rows if r.get("ours", {}).get("shfl_per_iter") is not None
                and r["ours"]["shfl_per_iter"] <= r["bound"]]
    print(f"\n{meta['device']}, clock {mhz:.0f} MHz, iters {args.iters}, ctas {ctas}, medians of {args.repeats}; "
          f"{time.time() - t0:.0f} s")
    print(f"ours faster than Triton on {sum(r['ours_over_triton'] < 1 for r in both)}/{len(both)}; "
          f"ours' SHFL per iteration at the bound on {len(at_bound)}/{len(rows)}")
    if wrong:
        print(f"WRONG kernels: {', '.join(wrong)}")
    print(table)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
