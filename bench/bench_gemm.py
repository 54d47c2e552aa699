"""Time the GEMMs built from generated headers against cuBLAS and Triton, in one device call.

    python bench/bench_gemm.py --out DIR [--sizes 4096,4096,4096 ...] [--exact] [--no-ncu] [--ladder]

Builds the examples with nvcc for this GPU, checks every kernel at every size, then times, at each
size, with CUDA events (``timed``: the median of 15 samples of 10 back-to-back launches, the kernels
taking turns; the Hopper GEMMs' tensor maps are encoded once, outside):

* ``wgmma``: examples/kernels/gemm_wgmma.cu (TMA, wgmma m64n256k16 / m64n128k16 (+ m64n64k16), 128 x
  256, 128 x 192 or 128 x 128 tiles 64 deep, an mbarrier stage ring, a producer and two consumer warp groups, the persistent
  grouped scheduler of gemm_hopper.h, K split among CTAs where the tiles are too few for the SMs;
  the tile and split chosen per size by gemm_hopper_plan.h, reported per row as ``plan``: the tile's
  columns, the splits, the tiles computed whole), 16-bit C (``wgmma``) and f32 C (``wgmma f32``),
  f16 and bf16 inputs.  In the same run, where the chosen plan is not already one of them, the same
  kernel with K never split (``llgen no split``), with the 128 x 256 tile forced (``llgen 128x256``) and
  with both (``llgen 128x256 no split``: the kernel before either choice): the gain of each choice
  (a 128 x 192 or 128 x 128 tile against 128 x 256: fuller waves of SMs against wider tiles),
  measured beside it (``—``: the variant's plan is the chosen one, or an earlier variant's);
* ``mma.sync``: examples/kernels/gemm_mma.cu (mma.sync m16n8k16, cp.async, 128 x 128 x 32, f32 C; f16);
* ``cublas``: ``torch.matmul`` on the same dtypes (16-bit C, f32 accumulation);
* ``triton``: a Triton matmul with TMA descriptors and the same 128 x 256 x 64 tiles (8 warps, 4
  stages; ``tl.dot`` is wgmma on sm_90), 16-bit C;
* fp8 rows (e4m3 A M x K and B N x K, per-tensor f32 scales, bf16 C): ``fp8`` is
  examples/kernels/gemm_fp8.cu (wgmma m64n256k32 / m64n128k32 (+ m64n64k32), 128 x 256, 128 x 192 or
  128 x 128 tiles 128 deep, the same control, plan and variants),
  ``fp8 1/tile`` the same built with -DLLGEN_GEMM_PERSISTENT=0 (one CTA per tile), ``llgen B KxN`` the
  same kernel given B as K x N (N contiguous; its producer warp group transposes B's tiles in shared
  memory; its own plan, 128 x 256 or 128 x 128 tiles; sizes with N a multiple of 16), ``cublas`` is
  ``torch._scaled_mm`` (e4m3, bf16 out, the same scales), ``triton`` a Triton fp8 matmul of the same
  tiles (A and B^T both K-major, f32 accumulation, the scales applied to the accumulator).

Inputs: random normal by default (realistic data: tensor cores draw more power on it and the clock
drops), each result checked against the float64 product of the same rounded inputs with the bound
``tolerance`` states (|C - ref| <= rel * sum_k |a_ik b_kj| + half an ulp of C's type); cuBLAS's
result is held to the same bound and reported beside ours.  ``--exact``: small integers, so f32 sums
are exact and every result must equal the reference (rounded to C's type) bit for bit.  A result out
of bounds fails the bench (exit 1).

TFLOP/s = 2 M N K / time.  ``--ladder`` also times variants of the wgmma kernel's hand-written control
(stages, wgmma groups left in flight, tile order, the persistent scheduler) at 8192^3 f16.  With
``ncu`` (unless ``--no-ncu``) one 2048^3 launch of each kernel is profiled (shared-memory bank
conflicts, global sectors).  Writes DIR/gemm.json and DIR/gemm_table.md and prints the table last.
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
#: the shapes the GEMMs are held to: big squares, short K, ragged, skinny M, small M x N with long K
SIZES = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 8192, 4096), (4096, 4096, 1024), (3000, 5000, 4000),
         (1024, 4096, 8192), (8192, 8192, 512), (512, 512, 8192)]
#: the relative part of each result's bound (of sum_k |a_ik b_kj|): f32 accumulation of 16-bit products
#: errs by far less than 2^-16 of it at these K; Hopper's fp8 wgmma adds with fewer bits (about 14, as
#: DeepSeek-V3 reports; up to 2^-10.7 measured on an H200), so fp8 gets 2^-9.
REL = {"f16": 2.0 ** -16, "bf16": 2.0 ** -16, "e4m3": 2.0 ** -9}
#: half an ulp of C's type, relative
HALF_ULP = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}



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


def triton_fp8_matmul():
    """C = (A B^T) * scale_a * scale_b with Triton, e4m3 A (M x K) and B (N x K) by TMA descriptors,
    128 x 256 x 128 tiles, f32 accumulation, bf16 C."""
    import torch
    import triton
    import triton.language as tl

    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))

    @triton.jit
    def mm(a_ptr, b_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pid = tl.program_id(0)
        tiles_n = tl.cdiv(N, BN)
        group = 8 * tiles_n
        first = (pid // group) * 8
        rows = min(tl.cdiv(M, BM) - first, 8)
        pm = first + (pid % group) % rows
        pn = (pid % group) // rows
        a_d = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
        b_d = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
        c_d = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            acc = tl.dot(a_d.load([pm * BM, k * BK]), b_d.load([pn * BN, k * BK]).T, acc)
        acc = acc * (tl.load(sa_ptr) * tl.load(sb_ptr))
        c_d.store([pm * BM, pn * BN], acc.to(c_ptr.dtype.element_ty))

    def run(a, b, c, sa, sb, M, N, K):
        mm[(triton.cdiv(M, 128) * triton.cdiv(N, 256),)](a, b, c, sa, sb, M, N, K, BM=128, BN=256, BK=128,
                                                        num_warps=8, num_stages=4)
    return run


def operands(M: int, N: int, K: int, dtype, exact: bool, seed: int, transpose_b: bool = False):
    """A (M x K) and B (K x N, or N x K with ``transpose_b``) on the GPU in ``dtype``: small integers
    (``exact``; -3 .. 3, or -8 .. 8 for fp8, each exact in its type) or random normal rounded to it."""
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    shape_b = (N, K) if transpose_b else (K, N)
    if exact:
        lim = 8 if dtype == torch.float8_e4m3fn else 3
        return (torch.randint(-lim, lim + 1, (M, K), device="cuda", generator=g).float().to(dtype),
                torch.randint(-lim, lim + 1, shape_b, device="cuda", generator=g).float().to(dtype))
    return (torch.randn((M, K), device="cuda", generator=g).to(dtype),
            torch.randn(shape_b, device="cuda", generator=g).to(dtype))


def reference(A, B, scale: float = 1.0):
    """The float64 product of the rounded inputs, and sum_k |a_ik b_kj| (the error bound's scale)."""
    Ad, Bd = A.double(), B.double()
    return (Ad @ Bd) * scale, (Ad.abs() @ Bd.abs()) * abs(scale)


def tolerance(C, ref, mag, rel: float, exact: bool) -> float:
    """max |C - ref| / bound, bound = rel * mag + half an ulp of C's type at |ref| (<= 1 passes); with
    ``exact`` the bound is 0 against ref rounded to C's type (0 passes, inf fails)."""
    import torch
    if exact:
        return 0.0 if bool(torch.equal(C, ref.float().to(C.dtype))) else float("inf")
    half = HALF_ULP[{torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}[C.dtype]]
    bound = rel * mag + half * ref.abs() + 1e-30
    return float(((C.double() - ref).abs() / bound).max())


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
    ap.add_argument("--exact", action="store_true", help="small-integer inputs, every result bit-exact")
    ap.add_argument("--no-ncu", action="store_true")
    ap.add_argument("--ladder", action="store_true", help="also time variants of the wgmma kernel's control")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    import cupy
    import torch
    import test_gemm
    import test_gemm_fp8 as t8
    import test_gemm_wgmma as tw
    sizes = [tuple(int(x) for x in s.split(",")) for s in a.sizes] if a.sizes else SIZES
    d = tempfile.mkdtemp(prefix="llgen_gemm_")
    cubin = test_gemm.build(d)
    kernels = {"sync": cupy.RawModule(path=cubin).get_function("gemm_mma")}
    lib = tw.build(d)
    kernels["wgmma"] = tw.Library(lib)
    kernels["fp8"] = t8.Library(t8.build(d))
    tile = os.path.join(d, "one_cta_per_tile")
    os.makedirs(tile)
    kernels["wgmma 1/tile"] = tw.Library(tw.build(tile, ("-DLLGEN_GEMM_PERSISTENT=0",)))
    kernels["fp8 1/tile"] = t8.Library(t8.build(tile, ("-DLLGEN_GEMM_PERSISTENT=0",)))
    kernels["triton"], kernels["triton fp8"] = triton_matmul(), triton_fp8_matmul()
    dev = torch.cuda.get_device_name()
    rows, bad = [], []
    for M, N, K in sizes:
        for dt in ("f16", "bf16", "e4m3"):
            run = fp8_row if dt == "e4m3" else row16
            rows.append(run(kernels, M, N, K, dt, a.exact, bad))
            torch.cuda.empty_cache()
    ladder = run_ladder(tw, d, a.exact) if a.ladder else []
    prof = None if a.no_ncu else ncu_profile(cubin, lib, a.out)
    table = report(dev, rows, ladder, prof, a.exact)
    with open(os.path.join(a.out, "gemm.json"), "w") as f:
        json.dump({"device": dev, "exact_inputs": a.exact, "rows": rows, "ladder": ladder, "ncu": prof,
                   "failures": bad}, f, indent=1)
    with open(os.path.join(a.out, "gemm_table.md"), "w") as f:
        f.write(table)
    for b in bad:
        print("FAILED", b)
    print(table)
    wrong = any(not ok for r in rows for ok in r["ok"].values()) or any(not r["exact"] for r in ladder)
    return 1 if wrong else 0


#: the kernels of this repository: a result out of bounds fails the bench (cuBLAS's and Triton's are reported)
OURS = ("llgen", "llgen f32 C", "llgen 1 CTA/tile", "llgen no split", "llgen 128x256", "llgen 128x256 no split",
        "llgen stream K", "llgen 128x192 stream K",
        "mma.sync f32 C", "llgen B KxN")
#: gemm_hopper::STREAM_K: the splits argument and report of a stream-K plan
STREAM_K = -1
#: variants of the chosen plan timed in the same run (16-bit C): (bn, splits) forced, 0 = chosen
VARIANTS = {"llgen no split": (0, 1), "llgen 128x256": (256, 0), "llgen 128x256 no split": (256, 1),
            "llgen stream K": (256, STREAM_K), "llgen 128x192 stream K": (192, STREAM_K)}


def plan_text(p: dict) -> str:
    """A plan as the table shows it: 128 x bn, the splits or stream K and (a tail after whole tiles) the
    tiles computed whole."""
    text = f"128x{p['bn']}"
    if p["splits"] != 1:
        text += (" stream K" if p["splits"] == STREAM_K else f" K/{p['splits']}") + (
            f" after {p['dp']} whole" if p["dp"] else "")
    return text


def variants(lib, M: int, N: int, K: int) -> tuple[dict, dict]:
    """The chosen plan and the variants whose plan differs from it and from the variants before them:
    name -> (bn, splits)."""
    chosen = lib.plan(M, N, K)
    seen, out = {(chosen["bn"], chosen["splits"], chosen["dp"])}, {}
    for name, (bn, splits) in VARIANTS.items():
        p = lib.plan(M, N, K, bn, splits)
        if (p["bn"], p["splits"], p["dp"]) not in seen:
            seen.add((p["bn"], p["splits"], p["dp"]))
            out[name] = (bn, splits)
    return chosen, out


def checked(go: dict, err: dict, key: str, launch, C, ref, mag, rel: float, exact: bool, bad: list, what: str):
    """Launch once, check C against the reference (``tolerance``), and keep the launch for timing;
    a launch that raises is reported in ``bad`` and not timed."""
    import torch
    try:
        out = launch()
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - a missing or refusing baseline is reported, not fatal
        bad.append(f"{key} {what}: {type(e).__name__}: {str(e)[:300]}")
        return
    err[key] = tolerance(C if out is None else out, ref, mag, rel, exact)
    go[key] = launch


def row16(kernels: dict, M: int, N: int, K: int, dt: str, exact: bool, bad: list) -> dict:
    """One size, f16 or bf16 inputs: the wgmma GEMM (16-bit and f32 C; persistent and one CTA per
    tile), mma.sync (f16), cuBLAS, Triton."""
    import cupy
    import torch
    import test_gemm
    bf, t16 = dt == "bf16", (torch.bfloat16 if dt == "bf16" else torch.float16)
    A, B = operands(M, N, K, t16, exact, M + N + K)
    ref, mag = reference(A, B)
    what = f"{dt} {M}x{N}x{K}"
    go, err = {}, {}
    chosen, extra = variants(kernels["wgmma"], M, N, K)
    runs = [("llgen", "wgmma", True, 0, 0), ("llgen f32 C", "wgmma", False, 0, 0),
            ("llgen 1 CTA/tile", "wgmma 1/tile", True, 0, 0)]
    runs += [(name, "wgmma", True, bn, splits) for name, (bn, splits) in extra.items()]
    for key, lib, out16, bn, splits in runs:
        C = torch.full((M, N), float("nan"), device="cuda", dtype=t16 if out16 else torch.float32)
        launch = kernels[lib].prepared(bf, out16, A.data_ptr(), B.data_ptr(), C.data_ptr(), M, N, K, torch_stream,
                                       bn=bn, splits=splits)
        checked(go, err, key, launch, C, ref, mag, REL[dt], exact, bad, what)
    if not bf:
        C32 = torch.full((M, N), float("nan"), device="cuda")
        ca, cb, cc = (cupy.asarray(x) for x in (A, B, C32))
        checked(go, err, "mma.sync f32 C", lambda: test_gemm.launch(kernels["sync"], ca, cb, cc, M, N, K), C32, ref, mag,
                REL[dt], exact, bad, what)
    checked(go, err, "cuBLAS", lambda: torch.matmul(A, B), None, ref, mag, REL[dt], exact, bad, what)
    Ct = torch.empty((M, N), device="cuda", dtype=t16)
    checked(go, err, "Triton", lambda: kernels["triton"](A, B, Ct, M, N, K), Ct, ref, mag, REL[dt], exact, bad, what)
    return finish(go, err, M, N, K, dt, bad, plan_text(chosen))


def fp8_row(kernels: dict, M: int, N: int, K: int, dt: str, exact: bool, bad: list) -> dict:
    """One size, e4m3 A (M x K) and B (N x K), per-tensor scales, bf16 C: the fp8 GEMM (persistent and
    one CTA per tile; an f32 C too; B given K x N), torch._scaled_mm (cuBLAS), Triton."""
    import torch
    A, B = operands(M, N, K, torch.float8_e4m3fn, exact, M + N + K + 1, transpose_b=True)
    # one allocation each: cuBLASLt refuses (NOT_SUPPORTED) a scale 4 bytes into an allocation
    sa, sb = (torch.tensor([x], device="cuda", dtype=torch.float32) for x in ((0.5, 4.0) if exact else (0.37, 1.9)))
    ref, mag = reference(A, B.t(), float(sa) * float(sb))
    what = f"e4m3 {M}x{N}x{K}"
    go, err = {}, {}
    chosen, extra = variants(kernels["fp8"], M, N, K)
    runs = [("llgen", "fp8", "bf16", 0, 0), ("llgen f32 C", "fp8", "f32", 0, 0),
            ("llgen 1 CTA/tile", "fp8 1/tile", "bf16", 0, 0)]
    runs += [(name, "fp8", "bf16", bn, splits) for name, (bn, splits) in extra.items()]
    for key, lib, out, bn, splits in runs:
        C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16 if out == "bf16" else torch.float32)
        launch = kernels[lib].prepared("e4m3", out, A.data_ptr(), B.data_ptr(), C.data_ptr(), sa.data_ptr(),
                                       sb.data_ptr(), M, N, K, torch_stream, bn=bn, splits=splits)
        checked(go, err, key, launch, C, ref, mag, REL[dt], exact, bad, what)
    if N % 16 == 0:  # B given K x N: its rows 16-byte aligned
        Bkn = B.t().contiguous()
        C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        launch = kernels["fp8"].prepared("e4m3", "bf16", A.data_ptr(), Bkn.data_ptr(), C.data_ptr(), sa.data_ptr(),
                                         sb.data_ptr(), M, N, K, torch_stream, kn=True)
        checked(go, err, "llgen B KxN", launch, C, ref, mag, REL[dt], exact, bad, what)
    checked(go, err, "cuBLAS", lambda: torch._scaled_mm(A, B.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
            None, ref, mag, REL[dt], exact, bad, what)
    Ct = torch.empty((M, N), device="cuda", dtype=torch.bfloat16)
    checked(go, err, "Triton", lambda: kernels["triton fp8"](A, B, Ct, sa, sb, M, N, K), Ct, ref, mag, REL[dt], exact,
            bad, what)
    return finish(go, err, M, N, K, dt, bad, plan_text(chosen))


def finish(go: dict, err: dict, M: int, N: int, K: int, dt: str, bad: list, plan: str) -> dict:
    """Time the checked launches; the row: the chosen plan, errors (max |C - ref| / bound), ok per
    kernel, ms, TFLOP/s."""
    ok = {k: e <= 1.0 for k, e in err.items()}
    for k in OURS:
        if k in err and not ok[k]:
            bad.append(f"{k} {dt} {M}x{N}x{K}: error {err[k]:.3g} of the bound")
    ms = timed(go)
    fl = 2.0 * M * N * K
    return {"M": M, "N": N, "K": K, "dtype": dt, "plan": plan, "err": err,
            "ok": {k: v for k, v in ok.items() if k in OURS},
            "ms": ms, "tflops": {k: fl / (t * 1e-3) / 1e12 for k, t in ms.items()}}


LADDER = [("persistent, grouped order, 1 wgmma group in flight, stages as fit (3 beside the C buffer): the example", ()),
          ("one CTA per tile (PERSISTENT 0: 4 stages, C staged in them)", ("-DLLGEN_GEMM_PERSISTENT=0",)),
          ("wgmma wait<0> each k-step (0 in flight)", ("-DLLGEN_GEMM_IN_FLIGHT=0",)),
          ("2 stages", ("-DLLGEN_GEMM_STAGES=2",)),
          ("row-major tile order (GROUP_M 1)", ("-DLLGEN_GEMM_GROUP_M=1",))]


def run_ladder(tw, d: str, exact: bool, M: int = 8192, N: int = 8192, K: int = 8192) -> list[dict]:
    """Variants of the hand-written control, f16 at 8192^3, 16-bit C: which step buys what."""
    import torch
    A, B = operands(M, N, K, torch.float16, exact, 1)
    ref, mag = reference(A, B)
    go, err = {}, {}
    for i, (what, flags) in enumerate(LADDER):
        sub = os.path.join(d, f"ladder{i}")
        os.makedirs(sub, exist_ok=True)
        wg = tw.Library(tw.build(sub, flags))
        C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
        go[what] = wg.prepared(False, True, A.data_ptr(), B.data_ptr(), C.data_ptr(), M, N, K, torch_stream)
        go[what]()
        torch.cuda.synchronize()
        err[what] = tolerance(C, ref, mag, REL["f16"], exact)
    go["cublas"] = lambda: torch.matmul(A, B)  # noqa: E731
    ms = timed(go)
    return [{"variant": what, "flags": list(flags), "exact": err[what] <= 1.0, "err": err[what], "ms": ms[what],
             "tflops": 2.0 * M * N * K / (ms[what] * 1e-3) / 1e12, "cublas_ms": ms["cublas"]}
            for what, flags in LADDER]


COLUMNS = ("llgen", "llgen no split", "llgen 128x256", "llgen 128x256 no split", "llgen stream K",
           "llgen 128x192 stream K", "llgen f32 C", "llgen 1 CTA/tile",
           "llgen B KxN", "mma.sync f32 C", "cuBLAS", "Triton")


def report(dev: str, rows: list[dict], ladder: list[dict], prof, exact: bool) -> str:
    """The table: TFLOP/s per kernel, the check (max error over its bound), the time ratios against
    cuBLAS and Triton (< 1: llgen faster), and per input type the geometric mean of the cuBLAS ratio."""
    import math
    fmt = lambda x: "—" if x is None else f"{x:.0f}"  # noqa: E731
    inputs = "small integers, every result bit-exact" if exact else \
        "random normal, each result within its bound (bench_gemm.tolerance; max error / bound shown)"
    lines = [f"GEMM on {dev}: TFLOP/s (median of 15 x 10 launches, kernels interleaved); C 16-bit (fp8: bf16) "
             f"unless said; inputs {inputs}; fp8: e4m3, per-tensor scales, cuBLAS is torch._scaled_mm", "",
             "| M x N x K | in | plan | check (llgen / cuBLAS) | " + " | ".join(COLUMNS) +
             " | time llgen / cuBLAS | time llgen / Triton |", "| --- " * (len(COLUMNS) + 6) + "|"]
    ratios: dict[str, list[float]] = {}
    for r in rows:
        t, e = r["tflops"], r["err"]
        check = "ok" if all(r["ok"].values()) else "FAIL"
        if not exact:
            check += f" {max(v for k, v in e.items() if k in r['ok']):.2g}" if r["ok"] else ""
            check += f" / {e['cuBLAS']:.2g}" if "cuBLAS" in e else " / —"
        cub = t.get("cuBLAS") and t.get("llgen") and t["cuBLAS"] / t["llgen"]
        tri = t.get("Triton") and t.get("llgen") and t["Triton"] / t["llgen"]
        if cub:
            ratios.setdefault(r["dtype"], []).append(cub)
        cells = [fmt(t.get(c)) for c in COLUMNS] + [f"{x:.2f}" if x else "—" for x in (cub, tri)]
        lines.append(f"| {r['M']} x {r['N']} x {r['K']} | {r['dtype']} | {r.get('plan', '')} | {check} | "
                     + " | ".join(cells) + " |")
    lines += ["", "Time ratio llgen / cuBLAS, geometric mean over the sizes (< 1: llgen faster): " + "; ".join(
        f"{k} {math.exp(sum(map(math.log, v)) / len(v)):.3f} (worst {max(v):.2f})" for k, v in ratios.items())]
    if ladder:
        lines += ["", "Ladder (f16, 8192^3, 16-bit C): variants of the hand-written control", "",
                  "| variant | check | TFLOP/s | time / cuBLAS |", "| --- | --- | --- | --- |"]
        lines += [f"| {v['variant']} | {'ok' if v['exact'] else 'FAIL'} | {v['tflops']:.0f} | "
                  f"{v['ms'] / v['cublas_ms']:.2f} |" for v in ladder]
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
