"""Gather benches: our gather kernels (``templates/gather_bench.cu.j2``) and
Triton's Gluon gather with the same layouts, checked and timed.

* ``bench_inputs``: random source tiles and in-range index tiles;
* ``bench_expected``: what both bench kernels write -- ``iters`` times
  ``o = take_along_axis(src, idx mod n)``, ``idx ^= o & 1`` per tile;
* ``time_ours`` / ``time_gluon``: check (a few and ``iters`` iterations on
  the first tiles against ``bench_expected``), then time the loop and the
  base loop (without the gather) with ``timing.time_launches``; ``ms`` is
  the difference, as for conversions.  Both record the loaded kernels'
  registers and local bytes (``time_gluon``: each kernel's integrity record and
  SASS counts, ``gluon.compiled_integrity``); ``bench_gather.py`` adds ours'
  from ptxas ``-v`` and the cubin.
GPU imports (CuPy, torch, Triton) happen inside the functions only.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ll_codegen.core.dtypes import INDEX_DTYPES, NP_RAW
from ll_codegen.core.layout import layout_of
from llgen_bench.gluon import MAXNREG, compiled_integrity, gluon_gather_kernel, gluon_linear
from llgen_bench.timing import cupy_events, time_launches, torch_events


def bench_inputs(plan, ctas: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random source tiles (raw bits) and in-range index tiles (Triton's gather
    needs in-range indices; ``idx ^= o & 1`` keeps them in range)."""
    rng = np.random.default_rng(seed)
    w = plan.elem_bytes
    src = rng.integers(0, 1 << (8 * w), size=(ctas,) + tuple(plan.src_shape), dtype=np.uint64).astype(NP_RAW[w])
    idx = rng.integers(0, plan.axis_size, size=(ctas,) + tuple(plan.idx_shape)).astype(INDEX_DTYPES[plan.index_dtype][2])
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
        local = getattr(fn, "local_size_bytes", None)     # local memory per thread: spills, local arrays
        if kind == "bench":
            res.update(regs=fn.num_regs, local_bytes=local)
        else:
            res.update(base_regs=fn.num_regs, base_local_bytes=local)
        ms = time_launches(launch, cupy_events, **tk)
        res["ms_loop" if kind == "bench" else "ms_base"] = ms
    res["ms"] = res["ms_loop"] - res["ms_base"]
    return res


def time_gluon(plan, src, idx, iters: int, check_iters: int = 3, cubin: str | None = None, **tk) -> dict:
    """Gluon's gather with exactly our bases (``DistributedLinearLayout``), checked and timed
    like ``time_ours`` (torch tensors, signed raw types of the same width; ``maxnreg=255`` where
    the default build spills, as the conversion kernels); ``cubin``: where to write the gather
    loop's cubin (``res["cubin"]``, the base loop's next to it), whose integrity records and SASS
    counts ``res`` then holds."""
    import torch
    K = gluon_gather_kernel()
    S, I = gluon_linear(layout_of(plan.src_bases)), gluon_linear(layout_of(plan.idx_bases))
    t = getattr(torch, f"int{8 * plan.elem_bytes}")
    d_src = torch.from_numpy(np.ascontiguousarray(src).view(f"i{src.itemsize}")).cuda()
    d_idx = torch.from_numpy(idx.astype(np.int32)).cuda()
    ctas = src.shape[0]
    d_out = torch.zeros((ctas,) + tuple(plan.idx_shape), dtype=t, device="cuda")
    res: dict[str, Any] = {"ok": True, "integrity": {}}
    for do in (True, False):
        opts = {"num_warps": plan.num_warps}
        if len(plan.src_shape) == 1:
            def launch(k=iters, do=do, opts=opts):
                return K["k1"][(ctas,)](d_src, d_idx, d_out, k, S, I, plan.src_shape[0], plan.idx_shape[0], do, **opts)
        else:
            def launch(k=iters, do=do, opts=opts):
                return K["k2"][(ctas,)](d_src, d_idx, d_out, k, S, I, plan.src_shape[0], plan.src_shape[1],
                                        plan.idx_shape[0], plan.idx_shape[1], plan.axis, do, **opts)
        if getattr(launch(1), "n_spills", 0):
            opts["maxnreg"] = MAXNREG       # the default build spills: the cap, as for conversions
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
        else:
            compiled = launch(1)
            res["base_regs"] = getattr(compiled, "n_regs", None)
        if cubin:                    # the base kernel's cubin next to the gather's: <cubin>_base.cubin
            path = cubin if do else cubin[:-6] + "_base.cubin"
            info = compiled_integrity(compiled, path, opts.get("maxnreg"))
            res["integrity"]["bench" if do else "base"] = info["integrity"]
            res["sass" if do else "base_sass"] = info["sass"]
            res["cubin" if do else "base_cubin"] = path
        ms = time_launches(launch, torch_events, **tk)
        res["ms_loop" if do else "ms_base"] = ms
    res["ms"] = res["ms_loop"] - res["ms_base"]
    return res
