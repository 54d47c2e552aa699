"""Triton's side of the benches: Gluon kernels with exactly our layouts.

``gluon_kernels`` are the round-trip conversion kernels (1-D and 2-D tiles;
``CONVERT=False`` is the base loop), ``gluon_gather_kernel`` the gather loop
(``GATHER=False`` the base); ``gluon_linear`` turns a ``LinearLayout`` into a
``DistributedLinearLayout`` with the same bases, ``gluon_legacy`` a spec dict
into Gluon's legacy layout class.  ``run_triton`` checks and times a
conversion like ``timing.run_ours``.  Triton and torch are imported inside
the functions only.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.planner import normalise
from llgen_bench.jobs import Job, ident, sizes
from llgen_bench.timing import Buffers, check_output, time_launches, torch_events

# ---------------------------------------------------------------- Triton
_GLUON: dict = {}


def gluon_kernels():
    """The two Gluon round-trip kernels (1-D and 2-D tiles), built once."""
    if _GLUON:
        return _GLUON
    from triton.experimental import gluon
    from triton.experimental.gluon import language as ttgl

    @gluon.jit
    def roundtrip_2d(in_ptr, out_ptr, iters, SRC: ttgl.constexpr, DST: ttgl.constexpr,
                     M: ttgl.constexpr, N: ttgl.constexpr, CONVERT: ttgl.constexpr):
        base = ttgl.program_id(0) * (M * N)
        rm = ttgl.arange(0, M, layout=ttgl.SliceLayout(1, SRC))[:, None]
        rn = ttgl.arange(0, N, layout=ttgl.SliceLayout(0, SRC))[None, :]
        offs = base + rm * N + rn
        x = ttgl.load(in_ptr + offs)
        if CONVERT:
            e = ttgl.arange(0, M, layout=ttgl.SliceLayout(1, DST))[:, None] * N + \
                ttgl.arange(0, N, layout=ttgl.SliceLayout(0, DST))[None, :]
        else:
            e = rm * N + rn
        key = (((e * 40503) ^ (e >> 5)) & 0xFFFF).to(x.dtype)
        for k in range(iters):
            if CONVERT:
                y = ttgl.convert_layout(x, DST)
                y = y ^ (key ^ k.to(y.dtype))
                x = ttgl.convert_layout(y, SRC)
            else:
                x = x ^ (key ^ k.to(x.dtype))
        ttgl.store(out_ptr + offs, x)

    @gluon.jit
    def roundtrip_1d(in_ptr, out_ptr, iters, SRC: ttgl.constexpr, DST: ttgl.constexpr, M: ttgl.constexpr,
                     CONVERT: ttgl.constexpr):
        offs = ttgl.program_id(0) * M + ttgl.arange(0, M, layout=SRC)
        x = ttgl.load(in_ptr + offs)
        if CONVERT:
            e = ttgl.arange(0, M, layout=DST)
        else:
            e = ttgl.arange(0, M, layout=SRC)
        key = (((e * 40503) ^ (e >> 5)) & 0xFFFF).to(x.dtype)
        for k in range(iters):
            if CONVERT:
                y = ttgl.convert_layout(x, DST)
                y = y ^ (key ^ k.to(y.dtype))
                x = ttgl.convert_layout(y, SRC)
            else:
                x = x ^ (key ^ k.to(x.dtype))
        ttgl.store(out_ptr + offs, x)

    _GLUON.update(k1=roundtrip_1d, k2=roundtrip_2d, ttgl=ttgl)
    return _GLUON


def gluon_linear(L: LinearLayout):
    """Our layout as ``ttgl.DistributedLinearLayout`` with exactly our bases."""
    ttgl = gluon_kernels()["ttgl"]
    b = normalise(L).bases
    return ttgl.DistributedLinearLayout(reg_bases=b["register"], lane_bases=b["lane"], warp_bases=b["warp"],
                                        block_bases=b.get("block", []), shape=sizes(L))


def gluon_legacy(spec: dict):
    """A spec dict as Gluon's legacy layout class (blocked, slice, nvidia_mma,
    dot_operand); raises ValueError for anything else."""
    ttgl = gluon_kernels()["ttgl"]
    k = spec["kind"]
    if k == "blocked":
        return ttgl.BlockedLayout(size_per_thread=spec["size_per_thread"], threads_per_warp=spec["threads_per_warp"],
                                  warps_per_cta=spec["warps_per_cta"], order=spec["order"])
    if k == "slice":
        return ttgl.SliceLayout(spec["dim"], gluon_legacy(spec["parent"]))
    if k == "nvidia_mma":
        return ttgl.NVMMADistributedLayout(version=spec["version"], warps_per_cta=spec["warps_per_cta"],
                                           instr_shape=spec["instr_shape"])
    if k == "dot_operand":
        return ttgl.DotOperandLayout(operand_index=spec["operand_index"], parent=gluon_legacy(spec["parent"]),
                                     k_width=spec["k_width"])
    raise ValueError(f"no Gluon legacy class for kind {k!r}")


def run_triton(job: Job, buf: Buffers, iters: int, ctas: int, src_layout=None, dst_layout=None,
               check_iters: int = 5, sass_dir: str | None = None, tag: str = "triton", **tk) -> dict:
    """Compile, check and time the Gluon round trip and its base (``CONVERT=False``); layouts
    default to our exact bases; ``ms`` is the difference, as in ``run_ours``."""
    K = gluon_kernels()
    src_layout = src_layout if src_layout is not None else gluon_linear(job.src)
    dst_layout = dst_layout if dst_layout is not None else gluon_linear(job.dst)
    import torch
    tile = int(np.prod(job.shape))
    res: dict[str, Any] = {"ok": True}
    for convert in (True, False):
        if len(job.shape) == 1:
            def launch(k=iters, convert=convert):
                return K["k1"][(ctas,)](buf.inp, buf.out, k, src_layout, dst_layout, job.shape[0], convert,
                                        num_warps=job.warps)
        else:
            def launch(k=iters, convert=convert):
                return K["k2"][(ctas,)](buf.inp, buf.out, k, src_layout, dst_layout, job.shape[0], job.shape[1],
                                        convert, num_warps=job.warps)
        buf.out.fill_(0x35)
        compiled = launch(check_iters)
        torch.cuda.synchronize()
        ok = check_output(buf, check_iters, tile)
        ms = time_launches(launch, torch_events, **tk)
        res["ok"] = res["ok"] and ok and check_output(buf, iters, tile)
        if not convert:
            res["ms_base"] = ms
            continue
        res.update(regs=getattr(compiled, "n_regs", None), smem=getattr(compiled.metadata, "shared", None),
                   ms_loop=ms)
        if sass_dir:
            try:
                path = os.path.join(sass_dir, ident(f"{job.name}_{tag}") + ".cubin")
                with open(path, "wb") as f:
                    f.write(compiled.asm["cubin"])
                res["cubin"] = path
            except Exception as e:  # noqa: BLE001
                res["cubin_error"] = str(e)
    res["ms"] = res["ms_loop"] - res["ms_base"]
    return res



_GLUON_GATHER: dict = {}


def gluon_gather_kernel():
    """The Gluon gather loop (1-D and 2-D tiles), built once; ``GATHER=False`` is the base loop."""
    if _GLUON_GATHER:
        return _GLUON_GATHER
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

    _GLUON_GATHER.update(k1=loop_1d, k2=loop_2d, ttgl=ttgl)
    return _GLUON_GATHER
