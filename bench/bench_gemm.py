"""Time the GEMMs built from generated headers against cuBLAS and Triton, in one device call.

    python bench/bench_gemm.py --out DIR [--sizes 4096,4096,4096 ...] [--no-ncu] [--ladder]

Builds both examples with nvcc for this GPU, checks every kernel exactly at every size (small-integer
inputs, so f32 sums are exact and a 16-bit C is that sum rounded to nearest even; a wrong kernel fails
the bench, exit 1), then times, at each size, with CUDA events (``timed``: the median of 15 samples of 10 back-to-back
launches, the kernels taking turns; the wgmma GEMM's tensor maps are encoded once, outside):

* ``wgmma``: examples/kernels/gemm_wgmma.cu (TMA, wgmma m64n256k16, 128 x 256 x 64 tiles, 4-stage
  mbarrier ring, a producer and two consumer warp groups), 16-bit C (``wgmma``) and f32 C
  (``wgmma f32``), f16 and bf16 inputs;
* ``mma.sync``: examples/kernels/gemm_mma.cu (mma.sync m16n8k16, cp.async, 128 x 128 x 32, f32 C; f16);
* ``cublas``: ``torch.matmul`` on the same dtypes (16-bit C, f32 accumulation);
* ``triton``: a Triton matmul with TMA descriptors and the same 128 x 256 x 64 tiles (8 warps, 4
  stages; ``tl.dot`` is wgmma on sm_90), 16-bit C.

TFLOP/s = 2 M N K / time.  ``--ladder`` also times variants of the wgmma kernel's hand-written control
(stages, wgmma groups left in flight, tile order) at 8192^3 f16.  With ``ncu`` (unless ``--no-ncu``)
one 2048^3 launch of each kernel is profiled (shared-memory bank conflicts, global sectors).  Writes
DIR/gemm.json and DIR/gemm_table.md and prints the table last.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "gpu_tests"))
SIZES = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 2048, 2048), (4000, 4000, 4000), (1024, 4096, 8192)]


def triton_matmul():
    """C = A B with Triton, TMA descriptors, 128 x 256 x 64 tiles (what its Hopper tutorials use)."""
    import torch
    import triton
    import triton.language as tl

    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))

    @triton.jit
    def mm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pid = tl.program_id(0)
        tiles_n = tl.cdiv(N, BN)
        group = 8 * tiles_n
        first = (pid // group) * 8
        rows = min(tl.cdiv(M, BM) - first, 8)
        pm = first + (pid % group) % rows
        pn = (pid % group) // rows
        a_d = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
        b_d = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
        c_d = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            acc = tl.dot(a_d.load([pm * BM, k * BK]), b_d.load([k * BK, pn * BN]), acc)
        c_d.store([pm * BM, pn * BN], acc.to(c_ptr.dtype.element_ty))

    def run(a, b, c, M, N, K):
        mm[(triton.cdiv(M, 128) * triton.cdiv(N, 256),)](a, b, c, M, N, K, BM=128, BN=256, BK=64, num_warps=8,
                                                        num_stages=4)
    return run


def torch_stream() -> int:
    """torch's current CUDA stream (the one cuBLAS and Triton launch on)."""
    import torch
    return torch.cuda.current_stream().cuda_stream


def timed(launches: dict, reps: int = 15, batch: int = 10, warm: int = 3) -> dict:
    """Milliseconds per launch of each of ``launches`` (name -> function): the median over ``reps``
    samples of ``batch`` back-to-back launches between two CUDA events (so the host's launch cost,
    ctypes or cuBLAS's heuristics, hides behind the GPU's work as in a real program).  The kernels
    take turns, in an order rotated every round, so that each meets the GPU in the same thermal and
    clock state (run one after the other, the second of two equal 8192^3 GEMMs measured up to 17%
    slower on the H200)."""
    import torch
    names = list(launches)
    for _ in range(warm):
        for n in names:
            launches[n]()
    torch.cuda.synchronize()
    times = {n: [] for n in names}
    for r in range(reps):
        for n in names[r % len(names):] + names[:r % len(names)]:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(batch):
                launches[n]()
            e.record()
            e.synchronize()
            times[n].append(s.elapsed_time(e) / batch)
    return {n: statistics.median(t) for n, t in times.items()}


def ncu_profile(cubin: str, lib: str, out: str) -> dict:
    """One 2048^3 f16 launch of each kernel under ncu: shared-memory bank conflicts (LSU: ldmatrix,
    st.shared, cp.async; the TMA writes and wgmma reads where this ncu names counters for them) and
    global sectors, against what the plans predict."""
    import re
    q = subprocess.run(["ncu", "--query-metrics"], capture_output=True, text=True, timeout=120).stdout
    names = set(re.findall(r"^\s*([a-z0-9_]+__[a-z0-9_]+)", q, re.M))
    want = [n for n in names if n.startswith("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_")
            or n.startswith("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_")
            or re.match(r"l1tex__t_(sectors|requests)_pipe_lsu_mem_global_op_(st|ldgsts)$", n)
            or (("gmma" in n or "tma" in n) and ("bank" in n or "sectors" in n or "wavefronts" in n))]
    metrics = sorted(f"{n}.sum" for n in want)
    script = os.path.join(out, "ncu_gemm_launch.py")
    with open(script, "w") as f:
        f.write(f"""import sys, numpy as np, cupy, torch
sys.path.insert(0, {os.path.join(ROOT, 'gpu_tests')!r})
import test_gemm, test_gemm_wgmma
M = N = K = 2048
a = torch.ones((M, K), dtype=torch.float16, device="cuda"); b = torch.ones((K, N), dtype=torch.float16, device="cuda")
c = torch.zeros((M, N), device="cuda"); c16 = torch.zeros((M, N), dtype=torch.float16, device="cuda")
fn = cupy.RawModule(path={cubin!r}).get_function("gemm_mma")
test_gemm.launch(fn, cupy.asarray(a), cupy.asarray(b), cupy.asarray(c), M, N, K)
wg = test_gemm_wgmma.Library({lib!r})
p = lambda x: x.data_ptr()
wg.prepared(False, False, p(a), p(b), p(c), M, N, K)(); wg.prepared(False, True, p(a), p(b), p(c16), M, N, K)()
torch.cuda.synchronize()
""")
    log = os.path.join(out, "ncu_gemm.csv")
    r = subprocess.run(["ncu", "--metrics", ",".join(metrics), "--csv", "--page", "raw", "--kernel-name",
                        "regex:gemm_", "--log-file", log,
                        sys.executable, script], capture_output=True, text=True, timeout=300)
    from ncu_bank_conflicts import parse_raw_csv
    meas = parse_raw_csv(open(log).read() if os.path.exists(log) else "")
    M = N = K = 2048
    return {"rc": r.returncode, "stderr": r.stderr[-2000:], "measured": meas, "metrics": metrics,
            "predicted": {"bank_conflicts": 0,
                          "gemm_mma ldgsts_sectors": (M // 128) * (N // 128) * (K // 32) * (128 * 32 * 2 * 2) // 32,
                          "gemm_wgmma_f16_f32 st sectors (every byte of C once)": M * N * 4 // 32,
                          "gemm_wgmma_f16_f32 st requests (8 sectors each)": M * N * 4 // 32 // 8,
                          "gemm_wgmma TMA load sectors (every operand byte once per tile)":
                              (M // 128) * (N // 256) * (K // 64) * (128 * 64 + 64 * 256) * 2 // 32,
                          "gemm_wgmma gmma shared wavefronts (128 B each, conflict-free)":
                              (M // 128) * (N // 256) * (K // 64) * 2 * (64 * 64 + 64 * 256) * 2 // 128,
                          "gemm_wgmma_f16_f16 TMA store sectors": M * N * 2 // 32,
                          "gemm_wgmma_f16_f16 st.shared wavefronts (stage_c, conflict-free)":
                              (M // 128) * (N // 256) * 8 * 64}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    ap.add_argument("--sizes", nargs="*", default=None, help="M,N,K (default: the list in SIZES)")
    ap.add_argument("--no-ncu", action="store_true")
    ap.add_argument("--ladder", action="store_true", help="also time variants of the wgmma kernel's control")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    import cupy
    import torch
    import test_gemm
    import test_gemm_wgmma as tw
    sizes = [tuple(int(x) for x in s.split(",")) for s in a.sizes] if a.sizes else SIZES
    d = tempfile.mkdtemp(prefix="llgen_gemm_")
    cubin = test_gemm.build(d)
    sync_fn = cupy.RawModule(path=cubin).get_function("gemm_mma")
    lib = tw.build(d)
    wg = tw.Library(lib)
    tri = triton_matmul()
    dev = torch.cuda.get_device_name()
    rows, bad = [], []
    for M, N, K in sizes:
        for bf in (False, True):
            t16 = torch.bfloat16 if bf else torch.float16
            g = torch.Generator(device="cuda").manual_seed(M + N + K)
            A = torch.randint(-3, 4, (M, K), device="cuda", generator=g).to(t16)
            B = torch.randint(-3, 4, (K, N), device="cuda", generator=g).to(t16)
            want = (A.double() @ B.double()).float()
            C16 = torch.full((M, N), float("nan"), device="cuda", dtype=t16)
            C32 = torch.full((M, N), float("nan"), device="cuda")
            go, exact = {}, {}
            for key, C in (("wgmma", C16), ("wgmma f32", C32)):
                go[key] = wg.prepared(bf, C is C16, A.data_ptr(), B.data_ptr(), C.data_ptr(), M, N, K, torch_stream)
                go[key]()
                torch.cuda.synchronize()
                exact[key] = bool(torch.equal(C, want.to(C.dtype)))
            if not bf:
                ca, cb, cc = (cupy.asarray(x) for x in (A, B, C32.fill_(float("nan"))))
                go["mma.sync"] = lambda: test_gemm.launch(sync_fn, ca, cb, cc, M, N, K)  # noqa: E731
                go["mma.sync"]()
                torch.cuda.synchronize()
                exact["mma.sync"] = bool(torch.equal(C32, want))
            go["cublas"] = lambda: torch.matmul(A, B)  # noqa: E731
            try:
                Ct = torch.empty((M, N), device="cuda", dtype=t16)
                tri(A, B, Ct, M, N, K)
                torch.cuda.synchronize()
                go["triton"] = lambda: tri(A, B, Ct, M, N, K)  # noqa: E731
            except Exception as e:  # noqa: BLE001 - Triton missing or failing: reported, not fatal
                bad.append(f"triton {M}x{N}x{K}: {type(e).__name__}: {str(e)[:300]}")
            ms = timed(go)
            for key, ok in exact.items():
                if not ok:
                    bad.append(f"{key} {'bf16' if bf else 'f16'} {M}x{N}x{K}: wrong result")
            fl = 2.0 * M * N * K
            rows.append({"M": M, "N": N, "K": K, "dtype": "bf16" if bf else "f16", "exact": exact, "ms": ms,
                         "tflops": {k: fl / (t * 1e-3) / 1e12 for k, t in ms.items()}})
    ladder = run_ladder(tw, d) if a.ladder else []
    prof = None if a.no_ncu else ncu_profile(cubin, lib, a.out)
    table = report(dev, rows, ladder, prof)
    with open(os.path.join(a.out, "gemm.json"), "w") as f:
        json.dump({"device": dev, "rows": rows, "ladder": ladder, "ncu": prof, "failures": bad}, f, indent=1)
    with open(os.path.join(a.out, "gemm_table.md"), "w") as f:
        f.write(table)
    for b in bad:
        print("FAILED", b)
    print(table)
    wrong = any(not ok for r in rows for ok in r["exact"].values()) or any(not r["exact"] for r in ladder)
    return 1 if wrong else 0


LADDER = [("1 in flight, 4 stages, grouped order (the example)", ()),
          ("wgmma wait<0> each k-step (0 in flight)", ("-DLLGEN_GEMM_IN_FLIGHT=0",)),
          ("2 stages", ("-DLLGEN_GEMM_STAGES=2",)),
          ("3 stages", ("-DLLGEN_GEMM_STAGES=3",)),
          ("row-major tile order (GROUP_M 1)", ("-DLLGEN_GEMM_GROUP_M=1",))]


def run_ladder(tw, d: str, M: int = 8192, N: int = 8192, K: int = 8192) -> list[dict]:
    """Variants of the hand-written control, f16 at 8192^3: which step buys what."""
    import torch
    A = torch.randint(-3, 4, (M, K), device="cuda").half()
    B = torch.randint(-3, 4, (K, N), device="cuda").half()
    want = (A.double() @ B.double()).half()
    go, exact = {}, {}
    for i, (what, flags) in enumerate(LADDER):
        sub = os.path.join(d, f"ladder{i}")
        os.makedirs(sub, exist_ok=True)
        wg = tw.Library(tw.build(sub, flags))
        C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
        go[what] = wg.prepared(False, True, A.data_ptr(), B.data_ptr(), C.data_ptr(), M, N, K, torch_stream)
        go[what]()
        torch.cuda.synchronize()
        exact[what] = bool(torch.equal(C, want))
    go["cublas"] = lambda: torch.matmul(A, B)  # noqa: E731
    ms = timed(go)
    return [{"variant": what, "flags": list(flags), "exact": exact[what], "ms": ms[what],
             "tflops": 2.0 * M * N * K / (ms[what] * 1e-3) / 1e12, "cublas_ms": ms["cublas"]}
            for what, flags in LADDER]


def report(dev: str, rows: list[dict], ladder: list[dict], prof) -> str:
    fmt = lambda x: "—" if x is None else f"{x:.0f}"  # noqa: E731
    lines = [f"GEMM on {dev}: TFLOP/s (median of 15 x 10 launches, kernels interleaved); C 16-bit unless said; ratios against cuBLAS", "",
             "| M x N x K | in | exact | wgmma | wgmma f32 C | mma.sync f32 C | cuBLAS | Triton TMA | "
             "wgmma / cuBLAS | wgmma / Triton |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        t = r["tflops"]
        tri = t.get("triton")
        lines.append(f"| {r['M']} x {r['N']} x {r['K']} | {r['dtype']} | "
                     f"{'yes' if all(r['exact'].values()) else 'NO'} | {fmt(t['wgmma'])} | {fmt(t['wgmma f32'])} | "
                     f"{fmt(t.get('mma.sync'))} | {fmt(t['cublas'])} | {fmt(tri)} | "
                     f"{t['wgmma'] / t['cublas']:.2f} | " + (f"{t['wgmma'] / tri:.2f} |" if tri else "— |"))
    if ladder:
        lines += ["", "Ladder (f16, 8192^3, 16-bit C): variants of the hand-written control", "",
                  "| variant | exact | TFLOP/s | / cuBLAS |", "| --- | --- | --- | --- |"]
        lines += [f"| {v['variant']} | {'yes' if v['exact'] else 'NO'} | {v['tflops']:.0f} | "
                  f"{v['cublas_ms'] / v['ms']:.2f} |" for v in ladder]
    if prof:
        lines += ["", f"ncu, one 2048^3 launch of each (rc {prof['rc']}); predicted: "
                  + "; ".join(f"{k} {v}" for k, v in prof["predicted"].items()), "", "| kernel | metric | measured |",
                  "| --- | --- | --- |"]
        for kern, meas in sorted(prof["measured"].items()):
            lines += [f"| {kern} | `{k}` | {v:g} |" for k, v in sorted(meas.items())
                      if k in prof["metrics"] and (v or "bank_conflicts" in k)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
