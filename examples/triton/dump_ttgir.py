"""Compile small Triton kernels on the CPU (no GPU, no driver) and write their TTGIR dumps.

    python examples/triton/dump_ttgir.py OUTDIR

writes one ``.ttgir`` per kernel and target: a Triton matmul for sm_90 (wgmma, nvmma_shared),
sm_80 (mma v2, dot operands, swizzled shared) and gfx942 (MFMA), and Gluon kernels whose
``convert_layout``s and shared allocations use every layout kind llgen reads (blocked, slice,
nvidia_mma v2/v3, dot_op, linear, nvmma_shared, swizzled_shared, shared_linear, amd_mfma,
amd_wmma, and the CTA layout of a 2-CTA cluster).  ``llgen show OUTDIR/matmul_sm80.ttgir`` lists
a dump's layouts.  ``triton.compile`` with a ``GPUTarget`` runs every Triton pass on the CPU; the
dump is ``compiled.asm["ttgir"]`` (on a GPU machine ``MLIR_ENABLE_DUMP=1`` or
``TRITON_KERNEL_DUMP=1`` print the same text).  Needs ``pip install triton``; the files in this
folder were written by it with Triton 3.9.
"""
from __future__ import annotations

import os
import re
import sys


def kernels() -> dict:
    """name -> (source, target, options) of every dump."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.experimental import gluon
    from triton.experimental.gluon import language as ttgl
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.experimental.gluon.language import amd

    @triton.jit
    def matmul(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.arange(0, BM)
        rn = tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
            b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc.to(tl.float16))

    @gluon.jit
    def relayout(in_ptr, out_ptr, L0: ttgl.constexpr, L1: ttgl.constexpr, L2: ttgl.constexpr, L3: ttgl.constexpr,
                 S0: ttgl.constexpr, S1: ttgl.constexpr, M: ttgl.constexpr, N: ttgl.constexpr):
        offs = (ttgl.arange(0, M, layout=ttgl.SliceLayout(1, L0))[:, None] * N
                + ttgl.arange(0, N, layout=ttgl.SliceLayout(0, L0))[None, :])
        x = ttgl.load(in_ptr + offs)
        y = ttgl.convert_layout(ttgl.convert_layout(ttgl.convert_layout(x, L1), L2), L3)
        s = ttgl.allocate_shared_memory(x.dtype, [M, N], S0, y)
        t = ttgl.allocate_shared_memory(x.dtype, [M, N], S1, s.load(L0))
        ttgl.store(out_ptr + offs, t.load(L0))

    mm_sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "K": "i32", "BM": "constexpr",
              "BN": "constexpr", "BK": "constexpr"}
    mm = ASTSource(fn=matmul, signature=mm_sig, constexprs={"BM": 128, "BN": 128, "BK": 64})
    rl_sig = {"in_ptr": "*fp16", "out_ptr": "*fp16", **{n: "constexpr" for n in
                                                          ("L0", "L1", "L2", "L3", "S0", "S1", "M", "N")}}

    def gluon_src(*layouts):
        return GluonASTSource(relayout, rl_sig, {(2 + i,): v for i, v in enumerate(layouts + (64, 64))})

    blocked = ttgl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    mma3 = ttgl.NVMMADistributedLayout([3, 0], [4, 1], [16, 64, 16])
    mma2 = ttgl.NVMMADistributedLayout([2, 0], [2, 2], [16, 8])
    linear = ttgl.DistributedLinearLayout([[0, 1], [0, 2], [0, 8], [0, 16], [0, 32]],
                                          [[1, 0], [2, 0], [4, 0], [8, 0], [0, 4]], [[16, 0], [32, 0]], [], [64, 64])
    shared_linear = ttgl.SharedLinearLayout([[0, 1], [0, 2], [0, 4], [0, 8], [0, 16], [0, 32], [1, 0], [2, 0],
                                             [4, 0], [8, 0], [16, 0], [32, 0]])
    cga = [[1, 0]]
    blocked2 = ttgl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0], cga)
    mma3_2 = ttgl.NVMMADistributedLayout([3, 0], [4, 1], [16, 64, 16], cga)
    mfma3 = amd.AMDMFMALayout(3, [32, 32, 8], True, [2, 2])
    mfma4 = amd.AMDMFMALayout(4, [16, 16, 16], False, [4, 1], 64, [1, 2])
    wmma2 = amd.AMDWMMALayout(2, True, [[0, 1], [1, 0]], None, [16, 16, 16])
    wmma1 = amd.AMDWMMALayout(1, False, [[1, 0], [2, 0]])
    sm90, sm80 = GPUTarget("cuda", 90, 32), GPUTarget("cuda", 80, 32)
    return {
        "matmul_sm90": (mm, sm90, {"num_stages": 3}),
        "matmul_sm80": (mm, sm80, {"num_stages": 3}),
        "matmul_gfx942": (mm, GPUTarget("hip", "gfx942", 64), {"num_stages": 2}),
        "layouts_sm90": (gluon_src(blocked, mma3, ttgl.DotOperandLayout(0, mma3, 2), linear,
                                   ttgl.NVMMASharedLayout(128, 16, 2, False, False),
                                   ttgl.SwizzledSharedLayout(8, 1, 8, [1, 0])), sm90, {}),
        "layouts_mma2_sm90": (gluon_src(blocked, mma2, ttgl.DotOperandLayout(1, mma2, 2),
                                        ttgl.DotOperandLayout(1, blocked, 0), shared_linear,
                                        ttgl.NVMMASharedLayout(64, 16, 2, True, False)), sm90, {}),
        "layouts_2cta_sm90": (gluon_src(blocked2, mma3_2, ttgl.DotOperandLayout(0, mma3_2, 2), blocked2,
                                        ttgl.NVMMASharedLayout(128, 16, 2, False, False, cga),
                                        ttgl.SwizzledSharedLayout(8, 1, 8, [1, 0], cga)), sm90, {"num_ctas": 2}),
        "layouts_gfx942": (gluon_src(ttgl.BlockedLayout([1, 8], [8, 8], [4, 1], [1, 0]), mfma3,
                                     ttgl.DotOperandLayout(0, mfma3, 4), mfma4, ttgl.SwizzledSharedLayout(8, 1, 8, [1, 0]),
                                     ttgl.SwizzledSharedLayout(4, 2, 4, [0, 1])), GPUTarget("hip", "gfx942", 64), {}),
        "layouts_gfx1200": (gluon_src(blocked, wmma2, ttgl.DotOperandLayout(1, wmma2, 8), wmma1,
                                      ttgl.SwizzledSharedLayout(8, 1, 8, [1, 0]),
                                      ttgl.SwizzledSharedLayout(4, 2, 4, [0, 1])), GPUTarget("hip", "gfx1200", 32), {}),
    }


def dump(outdir: str, names: list[str] | None = None) -> list[str]:
    """Compile the kernels (all, or ``names``) and write ``OUTDIR/<name>.ttgir``; their paths."""
    import triton
    os.makedirs(outdir, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    paths = []
    for name, (src, target, options) in kernels().items():
        if names and name not in names:
            continue
        text = triton.compile(src, target=target, options=options).asm["ttgir"]
        path = os.path.join(outdir, name + ".ttgir")
        # source locations by file name, whichever folder compiled it (Triton's cache keeps the first)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(re.sub(r'loc\("[^"]*/([^"/]+\.py)"', r'loc("\1"', text.replace(here, "")))
        paths.append(path)
    return paths


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python examples/triton/dump_ttgir.py OUTDIR [NAME...]")
    for p in dump(sys.argv[1], sys.argv[2:]):
        print(p)
