"""Time the GEMM built from generated headers (examples/kernels/gemm_mma.cu) against cuBLAS and Triton.

    python bench/bench_gemm.py --out DIR [--sizes 4096,4096,4096 ...] [--no-ncu]

One device call: builds the kernel with nvcc for this GPU, checks it exactly at every size
(small-integer inputs, so f32 sums are exact; a wrong kernel fails the bench, exit 1), then
times, at each size, with CUDA events (median of 20 timed launches after 3 warm-ups):

* ``llgen``: gemm_mma (mma.sync m16n8k16, 128 x 128 x 32 tiles, 4 warps, 3-stage cp.async);
* ``cublas``: ``torch.matmul`` on f16 (cuBLAS; f16 output, f32 accumulation);
* ``triton``: a Triton matmul with the same tiles (128 x 128 x 32, 4 warps, 3 stages; f32 output),
  which on sm_90 compiles ``tl.dot`` to wgmma -- an instruction the hand-written kernel does not use.

TFLOP/s = 2 M N K / time.  With ``ncu`` (unless ``--no-ncu``) one 2048^3 launch is profiled:
shared-memory bank conflicts of the ldmatrix loads and the cp.async stores (predicted 0) and the
32-byte sectors of the cp.async global reads against the bytes the tiles hold (predicted: every
byte of every sector used).  Writes DIR/gemm.json and DIR/gemm_table.md and prints the table last.
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
    import triton
    import triton.language as tl

    @triton.jit
    def mm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pid_m, pid_n = tl.program_id(1), tl.program_id(0)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            kk = k * BK + rk
            a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
            b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc += tl.dot(a, b)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    def run(a, b, c, M, N, K):
        mm[(triton.cdiv(N, 128), triton.cdiv(M, 128))](a, b, c, M, N, K, BM=128, BN=128, BK=32, num_warps=4,
                                                       num_stages=3)
    return run


def timed(launch, reps: int = 20, warm: int = 3) -> float:
    """Median milliseconds of ``reps`` launches (CUDA events around each)."""
    import torch
    for _ in range(warm):
        launch()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        launch()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def ncu_profile(cubin: str, out: str) -> dict:
    """One 2048^3 launch under ncu: bank conflicts and global sectors of the copies and loads."""
    metrics = ["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
               "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
               "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum",
               "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum",
               "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum",
               "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum",
               "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum",
               "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
               "smsp__inst_executed_op_ldsm.sum"]
    # the cp.async (LDGSTS) counters are named per ncu version: take what this one has
    q = subprocess.run(["ncu", "--query-metrics"], capture_output=True, text=True, timeout=120).stdout
    import re
    names = set(re.findall(r"^\s*([a-z0-9_]+__[a-z0-9_]+)", q, re.M))
    extra = sorted(n for n in names if "ldgsts" in n and ("sectors" in n or "requests" in n or "bank_conflicts" in n
                                                         or "wavefronts" in n))
    metrics = [m for m in metrics if m.rsplit(".", 1)[0] in names] + [f"{n}.sum" for n in extra]
    metrics += ["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]
    metrics = sorted(set(metrics))
    script = os.path.join(out, "ncu_gemm_launch.py")
    with open(script, "w") as f:
        f.write(f"""import sys, numpy as np, cupy
sys.path.insert(0, {os.path.join(ROOT, 'gpu_tests')!r})
import test_gemm
fn = cupy.RawModule(path={cubin!r}).get_function("gemm_mma")
M = N = K = 2048
a = cupy.ones((M, K), dtype=np.float16); b = cupy.ones((K, N), dtype=np.float16); c = cupy.zeros((M, N), dtype=np.float32)
test_gemm.launch(fn, a, b, c, M, N, K); cupy.cuda.runtime.deviceSynchronize()
""")
    log = os.path.join(out, "ncu_gemm.csv")
    r = subprocess.run(["ncu", "--metrics", ",".join(metrics), "--csv", "--page", "raw", "--kernel-name", "gemm_mma",
                        "--log-file", log, sys.executable, script], capture_output=True, text=True, timeout=300)
    from ncu_bank_conflicts import parse_raw_csv
    meas = parse_raw_csv(open(log).read() if os.path.exists(log) else "").get("gemm_mma", {})
    M = N = K = 2048
    tiles = (M // 128) * (N // 128)
    bytes_loaded = tiles * (K // 32) * (128 * 32 + 32 * 128) * 2
    return {"rc": r.returncode, "stderr": r.stderr[-2000:], "measured": meas, "metrics": metrics,
            "predicted": {"bank_conflicts": 0, "ldgsts_sectors": bytes_loaded // 32,
                          "ldgsts_requests": bytes_loaded // 512,
                          "ldsm_instructions": tiles * (K // 32) * 4 * 16,
                          "ldsm_wavefronts": tiles * (K // 32) * 4 * 16 * 4}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    ap.add_argument("--sizes", nargs="*", default=None, help="M,N,K (default: the list in SIZES)")
    ap.add_argument("--no-ncu", action="store_true")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    import cupy
    import torch
    import test_gemm
    sizes = [tuple(int(x) for x in s.split(",")) for s in a.sizes] if a.sizes else SIZES
    d = tempfile.mkdtemp(prefix="llgen_gemm_")
    cubin = test_gemm.build(d)
    fn = cupy.RawModule(path=cubin).get_function("gemm_mma")
    tri = triton_matmul()
    dev = torch.cuda.get_device_name()
    rows, bad = [], []
    for M, N, K in sizes:
        g = torch.Generator(device="cuda").manual_seed(M + N + K)
        A = torch.randint(-3, 4, (M, K), device="cuda", generator=g).half()
        B = torch.randint(-3, 4, (K, N), device="cuda", generator=g).half()
        C = torch.full((M, N), float("nan"), device="cuda")
        Ct = torch.empty((M, N), device="cuda")
        ca, cb, cc = (cupy.asarray(x) for x in (A, B, C))
        ours = lambda: test_gemm.launch(fn, ca, cb, cc, M, N, K)  # noqa: E731
        ours()
        torch.cuda.synchronize()
        want = (A.double() @ B.double()).float()
        exact = bool(torch.equal(C, want))
        if not exact:
            bad.append(f"{M}x{N}x{K}: {int((C != want).sum())} elements differ")
        t_ours = timed(ours)
        t_cublas = timed(lambda: torch.matmul(A, B))
        t_triton = None
        try:
            tri(A, B, Ct, M, N, K)
            torch.cuda.synchronize()
            t_triton = timed(lambda: tri(A, B, Ct, M, N, K))
        except Exception as e:  # noqa: BLE001 - Triton missing or failing: reported, not fatal
            bad.append(f"triton {M}x{N}x{K}: {type(e).__name__}: {e}")
        fl = 2.0 * M * N * K
        tf = lambda t: fl / (t * 1e-3) / 1e12 if t else None  # noqa: E731
        rows.append({"M": M, "N": N, "K": K, "exact": exact, "ms": {"llgen": t_ours, "cublas": t_cublas,
                                                                     "triton": t_triton},
                     "tflops": {"llgen": tf(t_ours), "cublas": tf(t_cublas), "triton": tf(t_triton)}})
    prof = None if a.no_ncu else ncu_profile(cubin, a.out)
    lines = [f"GEMM f16 x f16 -> f32 on {dev}: TFLOP/s (median of 20 launches), llgen / cuBLAS / Triton", "",
             "| M x N x K | exact | llgen | cuBLAS (f16 out) | Triton (same tiles) | llgen / cuBLAS | llgen / Triton |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    fmt = lambda x: "—" if x is None else f"{x:.0f}"  # noqa: E731
    for r in rows:
        t = r["tflops"]
        lines.append(f"| {r['M']} x {r['N']} x {r['K']} | {'yes' if r['exact'] else 'NO'} | {fmt(t['llgen'])} | "
                     f"{fmt(t['cublas'])} | {fmt(t['triton'])} | {t['llgen'] / t['cublas']:.2f} | "
                     + (f"{t['llgen'] / t['triton']:.2f} |" if t["triton"] else "— |"))
    if prof:
        m, p = prof["measured"], prof["predicted"]
        lines += ["", f"ncu, one 2048^3 launch (rc {prof['rc']}); predicted: bank conflicts {p['bank_conflicts']}, "
                      f"ldmatrix wavefronts {p['ldsm_wavefronts']} (shared loads: ldmatrix only), cp.async global "
                      f"sectors {p['ldgsts_sectors']} (every byte of every sector), requests {p['ldgsts_requests']}.",
                  "", "| metric | measured |", "| --- | --- |"]
        lines += [f"| `{k}` | {m[k]:g} |" for k in prof["metrics"] if k in m]
    table = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "gemm.json"), "w") as f:
        json.dump({"device": dev, "rows": rows, "ncu": prof, "failures": bad}, f, indent=1)
    with open(os.path.join(a.out, "gemm_table.md"), "w") as f:
        f.write(table)
    for b in bad:
        print("FAILED", b)
    print(table)
    return 1 if any(not r["exact"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
