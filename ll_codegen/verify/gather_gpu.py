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

from ll_codegen.verify.gpu import DEFAULT_OPTIONS, RunResult, _arch, _nvrtc, _short_log, cuda_include_dirs
from ll_codegen.verify.host import gather_expected


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
