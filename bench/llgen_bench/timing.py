"""CUDA-event timing of bench kernels (CuPy and torch) and the bench kernels' data.

``time_launches`` is the one timer: after ``warmup`` launches, the median over
``repeats`` groups of back-to-back launches (each group lasts >= ``group_ms``)
of CUDA-event time per launch.  ``bench_key``/``expected_output`` are what the
round-trip kernels (``templates/bench.cu.j2``) write, ``make_buffers`` and
``check_output`` the same on the GPU; ``run_ours`` checks and times one of our
variants and its base loop; ``measure_clock_mhz`` the SM clock under load.
GPU imports (CuPy, torch) happen inside the functions only.
"""
from __future__ import annotations

import math
import statistics
import subprocess
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ll_codegen.emit.convert import BENCH_KEY_COLUMNS, bench_smem
from llgen_bench.jobs import Job, Variant

# ---------------------------------------------------------------- timing
def xor_upto(n: int, bits: int) -> int:
    """XOR of k mod 2^bits over k < n (what the bench loop xors in)."""
    x = 0
    for k in range(n):
        x ^= k & ((1 << bits) - 1)
    return x


def time_launches(launch: Callable[[], None], event_pair: Callable[[], tuple[Any, Any, Callable]],
                  warmup: int = 2, repeats: int = 7, group_ms: float = 2.0) -> float:
    """Median milliseconds per launch (groups of back-to-back launches)."""
    for _ in range(warmup):
        launch()
    s, e, elapsed = event_pair()
    s.record()
    launch()
    e.record()
    e.synchronize()
    one = max(elapsed(s, e), 1e-3)
    n = max(1, min(200, math.ceil(group_ms / one)))
    ts = []
    for _ in range(repeats):
        s, e, elapsed = event_pair()
        s.record()
        for _ in range(n):
            launch()
        e.record()
        e.synchronize()
        ts.append(elapsed(s, e) / n)
    return statistics.median(ts)


def cupy_events():
    """A (start, end, elapsed ms) CUDA event pair of CuPy for ``time_launches``."""
    import cupy
    return cupy.cuda.Event(), cupy.cuda.Event(), lambda a, b: cupy.cuda.get_elapsed_time(a, b)


def torch_events():
    """A (start, end, elapsed ms) CUDA event pair of torch for ``time_launches``."""
    import torch
    return (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True),
            lambda a, b: a.elapsed_time(b))


def bench_key(e: np.ndarray) -> np.ndarray:
    """key(e) of the bench kernels (``templates/bench.cu.j2``) for row-major tile indices ``e``: the
    XOR of ``BENCH_KEY_COLUMNS[i]`` over the set bits i of e (F2-linear in e, 16 bits)."""
    e = np.asarray(e, dtype=np.uint32)
    key = np.zeros(e.shape, dtype=np.uint32)
    for i, col in enumerate(BENCH_KEY_COLUMNS):
        key ^= np.where((e >> np.uint32(i)) & np.uint32(1), np.uint32(col), np.uint32(0))
    return key


def expected_output(inp: np.ndarray, tile_elems: int, iters: int) -> np.ndarray:
    """What a bench kernel writes for input ``inp`` (raw integers, tiles of ``tile_elems``)."""
    bits = 8 * inp.dtype.itemsize
    key = bench_key(np.arange(inp.size) % tile_elems).astype(np.uint64) & np.uint64((1 << bits) - 1)
    change = (key if iters % 2 else np.zeros_like(key)) ^ np.uint64(xor_upto(iters, bits))
    return inp ^ change.astype(f"u{inp.dtype.itemsize}").view(inp.dtype)


@dataclass
class Buffers:
    inp: Any            # torch tensor (int of the element width)
    out: Any
    n: int
    key: Any = None     # bench_key of every element's tile index, as the element type (the check)


def _as_signed(x, bits: int):
    """int64 torch values in [0, 2^bits) -> the same bits as a signed ``bits``-wide value."""
    return x - ((x >> (bits - 1)) & 1) * (1 << bits) if bits < 64 else x


def make_buffers(job: Job, ctas: int, seed: int = 0) -> Buffers:
    import torch
    n = ctas * int(np.prod(job.shape))
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    raw = torch.randint(0, 256, (n * job.elem_bytes,), dtype=torch.uint8, device="cuda", generator=g)
    inp = raw.view(getattr(torch, f"int{8 * job.elem_bytes}"))
    e = torch.arange(n, device="cuda", dtype=torch.int64) % int(np.prod(job.shape))
    bits = 8 * job.elem_bytes
    key = torch.zeros_like(e)
    for i, col in enumerate(BENCH_KEY_COLUMNS):                          # bench_key, truncated
        key ^= ((e >> i) & 1) * col
    key &= min(0xFFFF, (1 << bits) - 1)
    return Buffers(inp, torch.empty_like(inp), n, _as_signed(key, bits).to(inp.dtype))


def check_output(buf: Buffers, iters: int, tile_elems: int) -> bool:
    """The kernels' output is ``expected_output`` (computed on the GPU)."""
    import torch
    bits = 8 * buf.inp.element_size()
    change = _as_signed(torch.tensor(xor_upto(iters, bits), dtype=torch.int64), bits).to(buf.inp.dtype)
    want = buf.inp ^ change ^ buf.key if iters % 2 else buf.inp ^ change
    return bool(torch.equal(buf.out, want))


def occupancy(fn: Any, threads: int, smem: int) -> int | None:
    """CTAs of ``fn`` per SM (CUDA occupancy API), or None when it cannot be asked."""
    try:
        import cupy
        ptr = getattr(fn, "ptr", None) or fn.kernel.ptr
        return int(cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(ptr, threads, smem))
    except Exception:
        return None


def run_ours(job: Job, v: Variant, buf: Buffers, iters: int, ctas: int, check_iters: int = 5,
             **tk) -> dict:
    """Check (``check_iters`` round trips, odd: the check sees element placement) and time the
    bench kernel and its base (the loop without the conversions); ``ms`` is their difference."""
    import cupy
    mod = cupy.RawModule(path=v.cubin)
    smem = bench_smem(v.fwd, v.back)[1]
    threads = v.fwd.threads
    cin = cupy.asarray(buf.inp)
    cout = cupy.asarray(buf.out)
    tile = int(np.prod(job.shape))
    res: dict[str, Any] = {"smem": smem, "ok": True}
    for kind in ("bench", "base"):
        fn = mod.get_function(f"{v.kernel}_{kind}")
        if smem > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = smem

        def launch(k=iters, fn=fn):
            fn((ctas,), (threads,), (cin, cout, np.int32(k)), shared_mem=smem)
        buf.out.fill_(0x35)
        launch(check_iters)
        cupy.cuda.runtime.deviceSynchronize()
        ok = check_output(buf, check_iters, tile)
        ms = time_launches(launch, cupy_events, **tk)
        res["ok"] = res["ok"] and ok and check_output(buf, iters, tile)
        local = getattr(fn, "local_size_bytes", None)     # local memory per thread: spills, local arrays
        if kind == "bench":
            res.update(regs=fn.num_regs, local_bytes=local, ctas_per_sm=occupancy(fn, threads, smem), ms_loop=ms)
        else:
            res.update(base_regs=fn.num_regs, base_local_bytes=local, ms_base=ms)
    res["ms"] = res["ms_loop"] - res["ms_base"]
    return res


def measure_clock_mhz(sms: int = 132) -> dict:
    """SM clock under load: clock64 cycles over %globaltimer nanoseconds in a spin kernel."""
    import cupy
    src = r'''
extern "C" __global__ void spin(unsigned long long* out, int n) {
    unsigned long long g0, g1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
    long long t0 = clock64();
    float x = threadIdx.x;
    for (int i = 0; i < n; ++i) x = x * 1.0000001f + 0.5f;
    long long t1 = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
    if (threadIdx.x == 0) { out[2 * blockIdx.x] = t1 - t0; out[2 * blockIdx.x + 1] = g1 - g0; }
    if (x == 1.2345f) out[0] = 0;
}'''
    fn = cupy.RawKernel(src, "spin")
    out = cupy.zeros(2 * sms * 4, dtype=cupy.uint64)
    for n in (1000, 2_000_000):
        fn((sms * 4,), (256,), (out, np.int32(n)))
    cupy.cuda.runtime.deviceSynchronize()
    o = out.get().reshape(-1, 2).astype(np.float64)
    mhz = float(np.median(o[:, 0] / o[:, 1] * 1e3))
    res = {"clock_mhz": mhz, "spin_ms": float(np.median(o[:, 1]) / 1e6)}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        res["nvidia_smi"] = q.stdout.strip()
    except Exception:  # noqa: BLE001
        pass
    return res
