"""Gather harnesses and benchmarks on a CUDA GPU (CuPy; Triton's Gluon for the
comparison).  GPU imports happen inside the functions only.

* ``verify_gather_gpu(items)``: every ``(name, GatherPlan)`` harness compiled
  in NVRTC batches and run on fresh random data (``emulator.gather_tensors``:
  repeated, extreme and out-of-range indices) with poisoned outputs; the
  output tensor and every thread's output registers must equal numpy's.
* ``bench_expected``: what the bench kernels (``templates/gather_bench.cu.j2``,
  and the Gluon kernel of ``gluon_gather_kernel``) write -- ``iters`` times
  ``o = take_along_axis(src, idx mod n)``, ``idx ^= o & 1`` per tile.
* ``time_ours`` / ``time_gluon``: check, then time loop minus base (the loop
  without the gather), as ``bench.py`` does for conversions.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Sequence

import numpy as np

from ll_codegen.verify.gpu import DEFAULT_OPTIONS, RAW, RunResult, _arch, _nvrtc, _short_log, cuda_include_dirs
from ll_codegen.verify.host import INDEX_NP, gather_expected


def verify_gather_gpu(items: Sequence[tuple[str, Any]], runs: int = 2, seed: int = 0,
                      batch_size: int = 24) -> dict[str, RunResult]:
    """Compile (NVRTC, batches) and run every harness ``runs`` times; one result per name."""
    import cupy
    from ll_codegen.emit.gather import gather_files
    d = tempfile.mkdtemp(prefix="llgen_gather_gpu_")
    for name, p in items:
        for fname, text in gather_files(p, name).items():
            with open(os.path.join(d, fname), "w") as fh:
                fh.write(text)
    opts = list(DEFAULT_OPTIONS) + [f"--gpu-architecture={_arch()}", f"-I{d}"] + \
        [f"-I{x}" for x in cuda_include_dirs()]
    results: dict[str, RunResult] = {}
    fns: dict[str, Any] = {}

    def build(chunk: list[tuple[str, Any]], tag: str) -> None:
        src = "\n".join(f'#include "{n}_harness.cu"' for n, _ in chunk) + "\n"
        cubin, log = _nvrtc(src, opts)
        if cubin is None:
            if len(chunk) == 1:
                results[chunk[0][0]] = RunResult(False, f"{chunk[0][0]}: compile error: {_short_log(log)}")
                return
            h = len(chunk) // 2
            build(chunk[:h], tag + "a")
            build(chunk[h:], tag + "b")
            return
        path = os.path.join(d, tag + ".cubin")
        with open(path, "wb") as fh:
            fh.write(cubin)
        mod = cupy.RawModule(path=path)
        for n, p in chunk:
            fns[n] = mod.get_function(f"{n}_harness")
            if p.smem_bytes > 48 * 1024:
                fns[n].max_dynamic_shared_size_bytes = p.smem_bytes
    for k in range(0, len(items), batch_size):
        build(list(items[k:k + batch_size]), f"b{k}")
    rng = np.random.default_rng(seed)
    for name, p in items:
        if name in results:
            continue
        res = RunResult(True, f"{name}: ok (bit-exact)")
        try:
            for _ in range(runs):
                src_t, idx_t, want_t, regs = gather_expected(p, rng)
                d_out, d_regs = cupy.asarray(~want_t), cupy.asarray(~regs)
                fns[name]((1,), (p.threads,), (cupy.asarray(src_t), cupy.asarray(idx_t), d_out, d_regs),
                          shared_mem=p.smem_bytes)
                cupy.cuda.runtime.deviceSynchronize()
                out, got = d_out.get(), d_regs.get()
                if not (out == want_t).all():
                    res = RunResult(False, f"{name}: output differs at {int((out != want_t).sum())} element(s)")
                    break
                if not (got == regs).all():
                    t, r = np.argwhere(got != regs)[0]
                    res = RunResult(False, f"{name}: thread {t} register {r}: got {got[t, r]:#x}, want {regs[t, r]:#x}",
                                    int(t), int(r), int(regs[t, r]), int(got[t, r]))
                    break
        except Exception as e:   # noqa: BLE001 - a launch error is sticky; report it for this case
            res = RunResult(False, f"{name}: {type(e).__name__}: {e}")
        results[name] = res
    return results


# ------------------------------------------------------------------ bench
def bench_inputs(plan, ctas: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random source tiles (raw bits) and in-range index tiles (Triton's gather
    needs in-range indices; ``idx ^= o & 1`` keeps them in range)."""
    rng = np.random.default_rng(seed)
    w = plan.elem_bytes
    src = rng.integers(0, 1 << (8 * w), size=(ctas,) + tuple(plan.src_shape), dtype=np.uint64).astype(RAW[w])
    idx = rng.integers(0, plan.axis_size, size=(ctas,) + tuple(plan.idx_shape)).astype(INDEX_NP[plan.index_dtype])
    return src, idx


def bench_expected(plan, src: np.ndarray, idx: np.ndarray, iters: int) -> np.ndarray:
    """What the bench kernels write: per tile, ``iters`` times o = gather, idx ^= o & 1."""
    idx = idx.copy()
    o = None
    for _ in range(iters):
        o = np.take_along_axis(src, np.mod(idx.astype(np.int64), plan.axis_size), axis=plan.axis + 1)
        idx ^= (o & 1).astype(idx.dtype)
    return o


def time_ours(cubin: str, name: str, plan, src, idx, iters: int, check_iters: int = 3, **tk) -> dict:
    """Check (``check_iters`` and ``iters`` on the first 8 tiles) and time ``<name>_bench`` and
    ``<name>_base``; ``ms`` is their difference."""
    import cupy
    from ll_codegen.bench import _cupy_events, time_launches
    mod = cupy.RawModule(path=cubin)
    ctas = src.shape[0]
    d_src, d_idx = cupy.asarray(src), cupy.asarray(idx)
    d_out = cupy.zeros((ctas,) + tuple(plan.idx_shape), dtype=src.dtype)
    res: dict[str, Any] = {"ok": True}
    for kind in ("bench", "base"):
        fn = mod.get_function(f"{name}_{kind}")
        if plan.smem_bytes > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = plan.smem_bytes

        def launch(k=iters, fn=fn):
            fn((ctas,), (plan.threads,), (d_src, d_idx, d_out, np.int32(k)), shared_mem=plan.smem_bytes)
        if kind == "bench":
            for k in (check_iters, iters):
                d_out.fill(0)
                launch(k)
                cupy.cuda.runtime.deviceSynchronize()
                want = bench_expected(plan, src[:8], idx[:8], k)
                res["ok"] = res["ok"] and bool((d_out[:8].get() == want).all())
            res["regs"] = fn.num_regs
        ms = time_launches(launch, _cupy_events, **tk)
        res["ms_loop" if kind == "bench" else "ms_base"] = ms
    res["ms"] = res["ms_loop"] - res["ms_base"]
    return res


_GLUON: dict = {}


def gluon_gather_kernel():
    """The Gluon gather loop (1-D and 2-D tiles), built once; ``GATHER=False`` is the base loop."""
    if _GLUON:
        return _GLUON
    from triton.experimental import gluon
    from triton.experimental.gluon import language as ttgl
    if not hasattr(ttgl, "gather"):
        raise RuntimeError("this Triton's Gluon has no gather (triton.experimental.gluon.language.gather)")

    @gluon.jit
    def loop_2d(in_ptr, idx_ptr, out_ptr, iters, SRC: ttgl.constexpr, IDX: ttgl.constexpr, M: ttgl.constexpr,
                N: ttgl.constexpr, MI: ttgl.constexpr, NI: ttgl.constexpr, AXIS: ttgl.constexpr,
                GATHER: ttgl.constexpr):
        b = ttgl.program_id(0)
        so = (ttgl.arange(0, M, layout=ttgl.SliceLayout(1, SRC))[:, None] * N
              + ttgl.arange(0, N, layout=ttgl.SliceLayout(0, SRC))[None, :])
        io = (ttgl.arange(0, MI, layout=ttgl.SliceLayout(1, IDX))[:, None] * NI
              + ttgl.arange(0, NI, layout=ttgl.SliceLayout(0, IDX))[None, :])
        x = ttgl.load(in_ptr + b * (M * N) + so)
        idx = ttgl.load(idx_ptr + b * (MI * NI) + io)
        o = idx.to(x.dtype)
        for k in range(iters):
            if GATHER:
                o = ttgl.gather(x, idx, AXIS)
            else:
                o = idx.to(x.dtype)
            idx = idx ^ (o & 1).to(idx.dtype)
        ttgl.store(out_ptr + b * (MI * NI) + io, o)

    @gluon.jit
    def loop_1d(in_ptr, idx_ptr, out_ptr, iters, SRC: ttgl.constexpr, IDX: ttgl.constexpr, M: ttgl.constexpr,
                MI: ttgl.constexpr, GATHER: ttgl.constexpr):
        b = ttgl.program_id(0)
        x = ttgl.load(in_ptr + b * M + ttgl.arange(0, M, layout=SRC))
        io = ttgl.arange(0, MI, layout=IDX)
        idx = ttgl.load(idx_ptr + b * MI + io)
        o = idx.to(x.dtype)
        for k in range(iters):
            if GATHER:
                o = ttgl.gather(x, idx, 0)
            else:
                o = idx.to(x.dtype)
            idx = idx ^ (o & 1).to(idx.dtype)
        ttgl.store(out_ptr + b * MI + io, o)

    _GLUON.update(k1=loop_1d, k2=loop_2d, ttgl=ttgl)
    return _GLUON


TORCH_INT = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def time_gluon(plan, src, idx, iters: int, check_iters: int = 3, cubin: str | None = None, **tk) -> dict:
    """Gluon's gather with exactly our bases (``DistributedLinearLayout``), checked and timed
    like ``time_ours`` (torch tensors, signed raw types of the same width); ``cubin``: where
    to write the gather loop's cubin (``res["cubin"]``)."""
    import torch
    from ll_codegen.bench import _torch_events, gluon_linear, time_launches
    from ll_codegen.verify.gpu import layout_of
    K = gluon_gather_kernel()
    S, I = gluon_linear(layout_of(plan.src_bases)), gluon_linear(layout_of(plan.idx_bases))
    t = getattr(torch, TORCH_INT[plan.elem_bytes])
    d_src = torch.from_numpy(np.ascontiguousarray(src).view(f"i{src.itemsize}")).cuda()
    d_idx = torch.from_numpy(idx.astype(np.int32)).cuda()
    ctas = src.shape[0]
    d_out = torch.zeros((ctas,) + tuple(plan.idx_shape), dtype=t, device="cuda")
    res: dict[str, Any] = {"ok": True}
    for do in (True, False):
        if len(plan.src_shape) == 1:
            def launch(k=iters, do=do):
                return K["k1"][(ctas,)](d_src, d_idx, d_out, k, S, I, plan.src_shape[0], plan.idx_shape[0], do,
                                        num_warps=plan.num_warps)
        else:
            def launch(k=iters, do=do):
                return K["k2"][(ctas,)](d_src, d_idx, d_out, k, S, I, plan.src_shape[0], plan.src_shape[1],
                                        plan.idx_shape[0], plan.idx_shape[1], plan.axis, do, num_warps=plan.num_warps)
        if do:
            for k in (check_iters, iters):
                d_out.zero_()
                compiled = launch(k)
                torch.cuda.synchronize()
                want = bench_expected(plan, src[:8], idx.astype(np.int32)[:8], k)
                got = d_out[:8].cpu().numpy().view(want.dtype)
                res["ok"] = res["ok"] and bool((got == want).all())
            res["regs"] = getattr(compiled, "n_regs", None)
            res["smem"] = getattr(getattr(compiled, "metadata", None), "shared", None)
            if cubin:
                with open(cubin, "wb") as fh:
                    fh.write(compiled.asm["cubin"])
                res["cubin"] = cubin
        ms = time_launches(launch, _torch_events, **tk)
        res["ms_loop" if do else "ms_base"] = ms
    res["ms"] = res["ms_loop"] - res["ms_base"]
    return res
