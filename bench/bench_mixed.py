"""Time the W4A16 GEMM built from generated headers against its baselines, in one device call.

    python bench/bench_mixed.py --out DIR [--shapes N,K ...] [--ms 1,16,4096]

Y (M x N, bf16) = X (M x K, bf16) W^T, W int4 with one bf16 scale per 128 K of a row
(examples/kernels/gemm_w4a16.cu: the weights pre-shuffled offline by llgen chain's layout, upcast in
registers into wgmma's A fragment, the scales read in the layout the fragment implies).  At each shape
and M, in the same run, with the kernels taking turns (bench_gemm.timed: the median of 15 samples of 10
launches):

* ``llgen``: the example (decode tile 64 x 16 for M <= 64, else 128 x 256; K split over CTAs where
  the row blocks do not fill the GPU);
* ``cublas bf16``: ``torch.matmul`` of X and the dequantised bf16 W^T (what the int4 weights replace);
* ``torch int4``: ``torch._weight_int4pack_mm`` (tinygemm, group 128), where this torch has it;
* ``HBM bound``: the weight and scale bytes over the device-to-device copy bandwidth measured in the
  same run (a 1 GiB copy; read + write bytes over its time).

``--ladder`` also times variants beside the default build (``LADDER``: the weights row-major -- the
identity choice llgen chain's pre-shuffle is timed against --, fewer stages, one accumulator and two A
buffers at M <= 16) at M = 1, 16 and 4096, N = K = 8192.

Inputs are random normal (X; scales ~0.01; q uniform in -8 .. 7).  Every result of ours is checked
against the float64 product of the same bf16 operands (|Y - ref| <= 2^-16 sum_k |x w| + 2^-8 |ref|);
a result out of bounds fails the bench (exit 1).  Writes DIR/mixed.json, DIR/mixed_table.md and
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "gpu_tests"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
#: (N, K): a square 8192 layer and Llama-like MLP projections
SHAPES = [(8192, 8192), (4096, 14336), (14336, 4096)]
MS = [1, 16, 64, 4096]


def bound_of(ref: np.ndarray, mag: np.ndarray) -> np.ndarray:
    """The error allowed: f32 sums (2^-16 of sum_k |x w|), then Y's rounding to bf16 (2^-8 |ref|)."""
    return 2.0 ** -16 * mag + np.abs(ref) * 2.0 ** -8


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    ap.add_argument("--shapes", nargs="*", default=None, help="N,K (default: SHAPES)")
    ap.add_argument("--ms", default=",".join(map(str, MS)))
    ap.add_argument("--ladder", action="store_true", help="also time the decode tile's consumer variants")
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
        ladder_libs = {"default": lib} | {name: t.Library(f.result()) for name, f in ladder_libs.items()}
    bw = copy_bandwidth()
    dev = torch.cuda.get_device_name()
    rows, bad = [], []
    for N, K in shapes:
        rng = np.random.default_rng(N + K)
        q = rng.integers(-8, 8, size=(N, K))
        s = np.abs(rng.standard_normal((N, K // t.GROUP))) * 0.01 + 0.001
        sb = t.bf16_bits(s)
        packed, st = t.pack(q, sb)
        w64 = t.weights(q, sb)                       # RNE_bf16(q s): what the upcast feeds wgmma
        Wd, Sd = cupy.asarray(packed), cupy.asarray(st)
        wt = torch.tensor(w64, dtype=torch.float32, device="cuda").to(torch.bfloat16)   # exact: w64 is bf16
        for M in ms:
            xb = t.bf16_bits(rng.standard_normal((M, K)))
            X = cupy.asarray(xb)
            Y = cupy.zeros((M, N), dtype=cupy.uint16)
            xt = torch.as_tensor(X, device="cuda").view(torch.bfloat16)
            go = lib.prepared(X.data.ptr, Wd.data.ptr, Sd.data.ptr, Y.data.ptr, M, N, K, stream=torch_stream)
            go()
            torch.cuda.synchronize()
            ref = t.bf16_value(xb) @ w64.T
            mag = np.abs(t.bf16_value(xb)) @ np.abs(w64).T
            worst = float(np.max(np.abs(t.bf16_value(cupy.asnumpy(Y)) - ref) / bound_of(ref, mag)))
            ok = worst <= 1.0
            if not ok:
                bad.append(f"llgen M={M} N={N} K={K}: max err/bound {worst:.3g}")
            launches = {"llgen": go, "cublas bf16": lambda: torch.matmul(xt, wt.T)}
            int4, _ = torch_int4(xt, q, s)
            if callable(int4):
                launches["torch int4"] = int4
            ms_ = timed(launches)
            bound = (N * K // 2 + N * K // t.GROUP * 2) / bw * 1e3
            rows.append({"M": M, "N": N, "K": K, "ok": ok, "ms": ms_, "hbm_bound_ms": bound,
                         "torch_int4": None if callable(int4) else int4})
            del go
            torch.cuda.empty_cache()
    ladder = run_ladder(t, ladder_libs, bad) if ladder_libs else []
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
          "8 stages": ("-DLLGEN_W4A16_STAGES=8",),
          "1 accumulator, 2 buffers": ("-DLLGEN_W4A16_DECODE_BUFFERS=2", "-DLLGEN_W4A16_DECODE_CHAINS=1")}


def variant_dir(d: str, name: str, flags: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    out = os.path.join(d, f"variant{list(LADDER).index(name)}")
    os.makedirs(out, exist_ok=True)
    return out, flags


def run_ladder(t, libs: dict, bad: list, N: int = 8192, K: int = 8192, ms=(1, 16, 4096)) -> list[dict]:
    """Each variant at each M, checked like the rows, timed taking turns."""
    import cupy
    import torch
    from bench_gemm import timed, torch_stream
    rng = np.random.default_rng(7)
    q = rng.integers(-8, 8, size=(N, K))
    sb = t.bf16_bits(np.abs(rng.standard_normal((N, K // t.GROUP))) * 0.01 + 0.001)
    packed, st = t.pack(q, sb)
    w64 = t.weights(q, sb)
    Wd, Sd, Wr = cupy.asarray(packed), cupy.asarray(st), cupy.asarray(t.row_major(q))
    out = []
    for M in ms:
        xb = t.bf16_bits(rng.standard_normal((M, K)))
        X = cupy.asarray(xb)
        ref = t.bf16_value(xb) @ w64.T
        bound = bound_of(ref, np.abs(t.bf16_value(xb)) @ np.abs(w64).T)
        gos, ys = {}, {}
        for name, lib in libs.items():
            ys[name] = cupy.zeros((M, N), dtype=cupy.uint16)
            W = Wr if "-DLLGEN_W4A16_ROW_MAJOR=1" in LADDER.get(name, ()) else Wd
            gos[name] = lib.prepared(X.data.ptr, W.data.ptr, Sd.data.ptr, ys[name].data.ptr, M, N, K,
                                     stream=torch_stream)
            gos[name]()
        torch.cuda.synchronize()
        for name, y in ys.items():
            if not np.all(np.abs(t.bf16_value(cupy.asnumpy(y)) - ref) <= bound):
                bad.append(f"ladder {name} M={M}")
        out.append({"M": M, "N": N, "K": K, "ms": timed(gos)})
    return out


def ladder_table(ladder: list[dict]) -> str:
    if not ladder:
        return ""
    names = list(ladder[0]["ms"])
    lines = ["", "Control ladder (us): " + ", ".join(f"{n} {' '.join(LADDER.get(n, ()))}" for n in names), "",
             "| M | N | K | " + " | ".join(names) + " |", "|---|---|---|" + "---|" * len(names)]
    for r in ladder:
        lines.append(f"| {r['M']} | {r['N']} | {r['K']} | " + " | ".join(f"{r['ms'][n] * 1e3:.1f}" for n in names) + " |")
    return "\n".join(lines) + "\n"


def report(dev: str, bw: float, rows: list[dict]) -> str:
    lines = [f"W4A16 (int4 weights, bf16 scales per 128, bf16 X and Y) on {dev}; copy bandwidth {bw / 1e12:.2f} TB/s",
             "", "| M | N | K | llgen us | HBM bound us | llgen / bound | cublas bf16 us | llgen / cublas | torch int4 us |"
             " llgen / torch int4 | ok |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r["ms"]
        ours, i4 = t["llgen"], t.get("torch int4")
        lines.append(f"| {r['M']} | {r['N']} | {r['K']} | {t['llgen'] * 1e3:.1f} | {r['hbm_bound_ms'] * 1e3:.1f} | "
                     f"{t['llgen'] / r['hbm_bound_ms']:.2f} | {t['cublas bf16'] * 1e3:.1f} | "
                     f"{t['llgen'] / t['cublas bf16']:.2f} | {'-' if i4 is None else f'{i4 * 1e3:.1f}'} | "
                     f"{'-' if i4 is None else f'{ours / i4:.2f}'} | "
                     f"{'yes' if r['ok'] else 'NO'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
