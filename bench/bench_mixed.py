"""Time the W4A16 GEMM (int4 and mxfp4 weights) built from generated headers against its baselines, in one device call.

    python bench/bench_mixed.py --out DIR [--shapes N,K ...] [--ms 1,16,4096]

Y (M x N, bf16) = X (M x K, bf16) W^T, W int4 with one bf16 scale per 128 K of a row
(examples/kernels/gemm_w4a16.cu: the weights pre-shuffled offline by llgen chain's layout, upcast in
registers into wgmma's A fragment, the scales read in the layout the fragment implies).  At each shape
and M, in the same run, with the kernels taking turns (bench_gemm.timed: the median of 15 samples), each
timed twice: as CUDA graphs of 10 launches (``timed_graphs``: the host's launch cost left out, as a server
replaying graphs runs a decode step) and as 10 launches back to back from Python:

* ``llgen``: the example (decode tiles 256 x 16 for M <= 16, mid 64 x 64 for M <= 64, else 128 x 256;
  K split over CTAs where the tiles do not fill the GPU); ``llgen overlapped``: the same launched with
  ``llgen_w4a16_overlap`` (programmatic dependent launch: a launch streams its first stages' weights under
  the tail of the kernel before it, and reads X only once that kernel completed);
* ``cublas bf16``: ``torch.matmul`` of X and the dequantised bf16 W^T (what the int4 weights replace);
* ``torch int4``: ``torch._weight_int4pack_mm`` (tinygemm, group 128), where this torch has it (int4 rows);
* ``triton dot_scaled``: a Triton matmul of bf16 X and the mxfp4 weights through ``tl.dot_scaled``
  (mxfp4 rows: e2m1 with an e8m0 exponent per 32 along K, the same codes and exponents);
* ``HBM bound``: the weight and scale bytes over the device-to-device copy bandwidth measured in the
  same run (a 1 GiB copy; read + write bytes over its time).

``--ladder`` also times variants beside the default build (``LADDER``, CUDA graphs: the weights row-major
-- the identity choice llgen chain's pre-shuffle is timed against --, 128- and 64-row decode tiles, fewer stages,
four threads issuing the TMA boxes, the int4 scales applied in the upcast instead of to each group's f32
sums and one accumulator at M <= 16, each chunk's wgmma
drained before the next chunk's upcast, a chunk's slices read from shared memory when its stage lands; and
five diagnostic
builds, their results wrong by design and not checked: no upcast, no wgmma, the stream alone, the stream
without X, the stream without the weights -- which part bounds the
kernel) at the table's M (--ms), N = K = 8192.

Inputs are random normal (X; scales ~0.01; q uniform in -8 .. 7).  Every result of ours is checked
against the float64 product of the same operands (|Y - ref| <= 2^-16 sum_k |x w| + 2^-8 |ref|; int4 weights
q s exactly at the decode tile, whose scales multiply each group's f32 sums, RNE_bf16(q s) elsewhere; a ladder
variant against either); a result out of bounds fails the bench (exit 1).  Writes DIR/mixed.json, DIR/mixed_table.md and
prints the table last.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ll_codegen.verify.emulate.reference import round16_bits
from ll_codegen.verify.emulate.upcast import half_values

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "gpu_tests"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
#: (N, K): a square 8192 layer and Llama-like MLP projections
SHAPES = [(8192, 8192), (4096, 14336), (14336, 4096)]
MS = [1, 16, 64, 4096]


def copy_bandwidth() -> float:
    """Bytes a second of a device-to-device copy of 1 GiB (read + write)."""
    import torch
    from bench_gemm import timed
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    ms = timed({"copy": lambda: b.copy_(a)}, reps=7, batch=5)["copy"]
    return 2 * a.numel() / (ms * 1e-3)


def torch_int4(x, q: np.ndarray, s: np.ndarray):
    """tinygemm's launch for the same weights (its own packing: uint4 = q + 8, zero point folded in),
    or the reason it is not there."""
    import torch
    try:
        N, K = q.shape
        w = torch.tensor((q + 8).astype(np.int32), device="cuda")
        w = (w[:, ::2] << 4 | w[:, 1::2]).to(torch.uint8)
        packed = torch._convert_weight_to_int4pack(w, 8)
        sz = torch.empty((K // 128, N, 2), dtype=torch.bfloat16, device="cuda")
        sz[..., 0] = torch.tensor(s.T, device="cuda", dtype=torch.float32).to(torch.bfloat16)
        sz[..., 1] = 0
        out = torch._weight_int4pack_mm(x, packed, 128, sz)
        return (lambda: torch._weight_int4pack_mm(x, packed, 128, sz)), out
    except Exception as e:   # noqa: BLE001 -- the baseline is optional; its absence is reported
        return str(e).splitlines()[0][:80], None


#: the 4-bit baseline of each weight format
BASELINE = {"int4": "torch int4", "mxfp4": "triton dot_scaled"}


def triton_mxfp4(x, codes: np.ndarray, e: np.ndarray, M: int, N: int, K: int):
    """Triton's tl.dot_scaled (bf16 X, e2m1 W^T with its e8m0 scales per 32) on the same weights:
    a launch and its result, or the reason there is none."""
    import torch
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def mm(x_ptr, w_ptr, s_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
            pm, pn = tl.program_id(0), tl.program_id(1)
            om, on = pm * BM + tl.arange(0, BM), pn * BN + tl.arange(0, BN)
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k in range(0, K, BK):
                ok, okb, oks = k + tl.arange(0, BK), k // 2 + tl.arange(0, BK // 2), k // 32 + tl.arange(0, BK // 32)
                xa = tl.load(x_ptr + om[:, None] * K + ok[None, :], mask=om[:, None] < M, other=0.0)
                wb = tl.load(w_ptr + on[None, :] * (K // 2) + okb[:, None])      # W^T, two e2m1 a byte along K
                sc = tl.load(s_ptr + on[:, None] * (K // 32) + oks[None, :])     # N x K / 32, not transposed
                acc = tl.dot_scaled(xa, None, "bf16", wb, sc, "e2m1", acc)
            tl.store(y_ptr + om[:, None] * N + on[None, :], acc.to(tl.bfloat16), mask=om[:, None] < M)

        w = torch.tensor(codes[:, 0::2] | codes[:, 1::2] << 4, dtype=torch.uint8, device="cuda")
        sc = torch.tensor(e, dtype=torch.uint8, device="cuda")
        y = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
        bm = 16 if M <= 16 else 64 if M <= 64 else 128
        grid = (triton.cdiv(M, bm), triton.cdiv(N, 128))

        def go():
            mm[grid](x, w, sc, y, M, N, K, BM=bm, BN=128, BK=128, num_warps=4 if bm < 128 else 8, num_stages=3)
        go()
        return go, y
    except Exception as err:   # noqa: BLE001 -- the baseline is optional; its absence is reported
        return str(err).splitlines()[0][:80] if str(err) else type(err).__name__, None


def timed_graphs(launches: dict, count: int = 10) -> dict:
    """Milliseconds per launch of each of ``launches`` with the host's launch cost left out: ``count``
    launches captured in one CUDA graph, replays timed as ``bench_gemm.timed`` times launches (a decode
    kernel here runs in less time than Python and ctypes take to launch it, as in a server that replays
    graphs)."""
    import torch
    from bench_gemm import timed
    graphs = {}
    for name, go in launches.items():
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(count):
                go()
        graphs[name] = g
    ms = timed({n: g.replay for n, g in graphs.items()}, batch=2)
    return {n: t / count for n, t in ms.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    ap.add_argument("--shapes", nargs="*", default=None, help="N,K (default: SHAPES)")
    ap.add_argument("--ms", default=",".join(map(str, MS)))
    ap.add_argument("--ladder", action="store_true", help="also time the build variants (LADDER)")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    import cupy
    import torch
    import test_gemm_w4a16 as t
    from bench_gemm import timed, torch_stream
    shapes = [tuple(int(v) for v in s.split(",")) for s in a.shapes] if a.shapes else SHAPES
    ms = [int(v) for v in a.ms.split(",")]
    d = tempfile.mkdtemp(prefix="llgen_w4a16_")
    with ThreadPoolExecutor() as ex:   # the variants build while the default one runs
        ladder_libs = {name: ex.submit(t.build, *variant_dir(d, name, f)) for name, f in LADDER.items()} \
            if a.ladder else {}
        lib = t.Library(t.build(d))
        if ladder_libs:
            ladder_libs = {"default": lib} | {name: t.Library(f.result()) for name, f in ladder_libs.items()}
    bw = copy_bandwidth()
    dev = torch.cuda.get_device_name()
    rows, bad = [], []
    for (N, K), fmt in [(nk, f) for nk in shapes for f in ("int4", "mxfp4")]:
        rng = np.random.default_rng(N + K)
        if fmt == "int4":
            q = rng.integers(-8, 8, size=(N, K))
            s = np.abs(rng.standard_normal((N, K // t.GROUP))) * 0.01 + 0.001
            sb = round16_bits(s, "bf16")
            packed, st = t.pack(q, sb)
            w64 = t.weights(q, sb)                   # RNE_bf16(q s): what the upcast feeds wgmma (M > 16)
            scale_bytes = N * K // t.GROUP * 2
        else:
            codes = rng.integers(0, 16, size=(N, K)).astype(np.uint8)
            e = rng.integers(119, 128, size=(N, K // 32)).astype(np.uint8)
            packed, st = t.reorder_module().reorder(codes).reshape(-1), np.ascontiguousarray(e.T)
            w64 = t.mxfp4_weights(codes, e)
            scale_bytes = N * K // 32
        Wd, Sd = cupy.asarray(packed), cupy.asarray(st)
        wt = torch.tensor(w64, dtype=torch.float32, device="cuda").to(torch.bfloat16)   # exact: w64 is bf16
        for M in ms:
            xb = round16_bits(rng.standard_normal((M, K)), "bf16")
            X = cupy.asarray(xb)
            Y = cupy.zeros((M, N), dtype=cupy.uint16)
            xt = torch.as_tensor(X, device="cuda").view(torch.bfloat16)
            go = lib.prepared(X.data.ptr, Wd.data.ptr, Sd.data.ptr, Y.data.ptr, M, N, K, stream=torch_stream,
                              mxfp4=fmt == "mxfp4")
            go()
            torch.cuda.synchronize()
            w = t.weights(q, sb, M) if fmt == "int4" else w64   # decode: q s exactly (scaled f32 sums)
            ref = half_values(xb, "bf16") @ w.T
            mag = np.abs(half_values(xb, "bf16")) @ np.abs(w).T
            worst = float(np.max(np.abs(half_values(cupy.asnumpy(Y), "bf16") - ref) / t.bound(ref, mag)))
            ok = worst <= 1.0
            if not ok:
                bad.append(f"llgen {fmt} M={M} N={N} K={K}: max err/bound {worst:.3g}")
            over = lib.prepared(X.data.ptr, Wd.data.ptr, Sd.data.ptr, Y.data.ptr, M, N, K, stream=torch_stream,
                                mxfp4=fmt == "mxfp4", overlap=True)
            launches = {"llgen": go, "llgen overlapped": over, "cublas bf16": lambda: torch.matmul(xt, wt.T)}
            base, _ = torch_int4(xt, q, s) if fmt == "int4" else triton_mxfp4(xt, codes, e, M, N, K)
            if callable(base):
                launches[BASELINE[fmt]] = base
            ms_, graph_ms = timed(launches), timed_graphs(launches)
            bound = (N * K // 2 + scale_bytes) / bw * 1e3
            rows.append({"format": fmt, "M": M, "N": N, "K": K, "ok": ok, "ms": ms_, "graph_ms": graph_ms,
                         "hbm_bound_ms": bound, "baseline_missing": None if callable(base) else base})
            # each row as it is measured: a call cut short (a kernel that hangs) still shows what ran
            print(f"{fmt} M={M} N={N} K={K}: llgen {graph_ms['llgen'] * 1e3:.1f} us in graphs, ok {ok}", flush=True)
            del go, over
            torch.cuda.empty_cache()
    ladder = run_ladder(t, ladder_libs, bad, ms=ms) if ladder_libs else []
    table = report(dev, bw, rows) + ladder_table(ladder)
    with open(os.path.join(a.out, "mixed.json"), "w") as f:
        json.dump({"device": dev, "copy_bandwidth": bw, "rows": rows, "ladder": ladder, "failures": bad}, f, indent=1)
    with open(os.path.join(a.out, "mixed_table.md"), "w") as f:
        f.write(table)
    for b in bad:
        print("FAILED", b)
    print(table)
    return 1 if bad else 0


#: variants of the build (the defaults: the chain's pre-shuffled weights, 16 stages at most, decode 4 A buffers
#: and 4 accumulators); "row-major weights" is the identity choice the chain's layout is timed against
LADDER = {"row-major weights": ("-DLLGEN_W4A16_ROW_MAJOR=1",),
          "128-row decode tiles": ("-DLLGEN_W4A16_DECODE_ROWS=128",),
          "64-row decode tiles": ("-DLLGEN_W4A16_DECODE_ROWS=64",),
          "8 stages": ("-DLLGEN_W4A16_STAGES=8",),
          "4 producer lanes": ("-DLLGEN_W4A16_PRODUCER_LANES=4",),
          "scales in the upcast": ("-DLLGEN_W4A16_ACC_SCALES=0",),
          "1 accumulator": ("-DLLGEN_W4A16_DECODE_CHAINS=1",),
          "chunks drained": ("-DLLGEN_W4A16_DRAIN_CHUNKS=1",),
          "slices prefetched": ("-DLLGEN_W4A16_PREFETCH=1",),
          "diagnostic: no upcast": ("-DLLGEN_W4A16_DIAGNOSE=1",),
          "diagnostic: no wgmma": ("-DLLGEN_W4A16_DIAGNOSE=2",),
          "diagnostic: stream only": ("-DLLGEN_W4A16_DIAGNOSE=3",),
          "diagnostic: stream without X": ("-DLLGEN_W4A16_DIAGNOSE=4",),
          "diagnostic: stream without weights": ("-DLLGEN_W4A16_DIAGNOSE=5",)}
#: the ladder's variants whose results are wrong by design (timing which part bounds the kernel)
UNCHECKED = ("diagnostic:",)


def variant_dir(d: str, name: str, flags: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    out = os.path.join(d, f"variant{list(LADDER).index(name)}")
    os.makedirs(out, exist_ok=True)
    return out, flags


def run_ladder(t, libs: dict, bad: list, N: int = 8192, K: int = 8192, ms=(1, 16, 64, 4096)) -> list[dict]:
    """Each variant at each M, checked like the rows, timed taking turns."""
    import cupy
    import torch
    from bench_gemm import torch_stream
    rng = np.random.default_rng(7)
    q = rng.integers(-8, 8, size=(N, K))
    sb = round16_bits(np.abs(rng.standard_normal((N, K // t.GROUP))) * 0.01 + 0.001, "bf16")
    packed, st = t.pack(q, sb)
    # the references of both ways to apply the scales: q s exactly (decode's scaled f32 sums) and
    # RNE_bf16(q s) (scales in the upcast: the other tiles, and builds without the scaled sums)
    w64s = (t.weights(q, sb, 1), t.weights(q, sb))
    Wd, Sd, Wr = cupy.asarray(packed), cupy.asarray(st), cupy.asarray(t.row_major(q))
    out = []
    for M in ms:
        xb = round16_bits(rng.standard_normal((M, K)), "bf16")
        X = cupy.asarray(xb)
        refs = [(half_values(xb, "bf16") @ w.T, np.abs(half_values(xb, "bf16")) @ np.abs(w).T) for w in w64s]
        gos, ys = {}, {}
        for name, lib in libs.items():
            ys[name] = cupy.zeros((M, N), dtype=cupy.uint16)
            W = Wr if "-DLLGEN_W4A16_ROW_MAJOR=1" in LADDER.get(name, ()) else Wd
            gos[name] = lib.prepared(X.data.ptr, W.data.ptr, Sd.data.ptr, ys[name].data.ptr, M, N, K,
                                     stream=torch_stream)
            print(f"ladder M={M}: {name}", flush=True)   # the last one named is the one that hangs, if any
            gos[name]()
            torch.cuda.synchronize()
        torch.cuda.synchronize()
        for name, y in ys.items():
            got = half_values(cupy.asnumpy(y), "bf16")
            if not name.startswith(UNCHECKED) and not any(np.all(np.abs(got - r) <= t.bound(r, m)) for r, m in refs):
                bad.append(f"ladder {name} M={M}")
        out.append({"M": M, "N": N, "K": K, "ms": timed_graphs(gos)})
    return out


def ladder_table(ladder: list[dict]) -> str:
    if not ladder:
        return ""
    names = list(ladder[0]["ms"])
    lines = ["", "Control ladder (us a launch, CUDA graphs): " + ", ".join(f"{n} {' '.join(LADDER.get(n, ()))}" for n in names), "",
             "| M | N | K | " + " | ".join(names) + " |", "|---|---|---|" + "---|" * len(names)]
    for r in ladder:
        times = " | ".join(f"{r['ms'][n] * 1e3:.1f}" for n in names)
        lines.append(f"| {r['M']} | {r['N']} | {r['K']} | {times} |")
    return "\n".join(lines) + "\n"


def report(dev: str, bw: float, rows: list[dict]) -> str:
    head = (f"4-bit weights x bf16 (int4 with bf16 scales per 128; mxfp4: e2m1 with e8m0 scales per 32; bf16 X "
            f"and Y) on {dev}; copy bandwidth {bw / 1e12:.2f} TB/s")
    return head + "\n" + "".join(_table(rows, key, title) for key, title in (
        ("graph_ms", "CUDA graphs of 10 launches (the host's launch cost left out)"),
        ("ms", "back-to-back launches from Python")))


def _table(rows: list[dict], key: str, title: str) -> str:
    lines = ["", title + ":", "",
             "| weights | M | N | K | llgen us | HBM bound us | llgen / bound | overlapped us | overlapped / bound | "
             "cublas bf16 us | llgen / cublas | 4-bit baseline us | llgen / baseline | ok |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r[key]
        ours, over, base = t["llgen"], t["llgen overlapped"], t.get(BASELINE[r["format"]])
        lines.append(f"| {r['format']} | {r['M']} | {r['N']} | {r['K']} | {ours * 1e3:.1f} | "
                     f"{r['hbm_bound_ms'] * 1e3:.1f} | {ours / r['hbm_bound_ms']:.2f} | {over * 1e3:.1f} | "
                     f"{over / r['hbm_bound_ms']:.2f} | {t['cublas bf16'] * 1e3:.1f} | "
                     f"{ours / t['cublas bf16']:.2f} | "
                     f"{BASELINE[r['format']] + ' ' + (f'{base * 1e3:.1f}' if base else 'n/a')} | "
                     f"{'-' if base is None else f'{ours / base:.2f}'} | {'yes' if r['ok'] else 'NO'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
