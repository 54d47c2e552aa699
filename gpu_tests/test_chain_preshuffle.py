"""Pre-shuffled weights on the GPU (``llgen chain``, ``free: global``; docs/chains.md): for the
e4m3 mma.sync m16n8k32 B fragment and the wgmma-from-registers A fragment, the generated CUDA
reorder kernel packs a tensor of 2 x 3 tiles (row-major source with padded rows) on the device,
then every thread of one CTA loads one tile's fragment through the chain's generated load header
(16-byte vectors from the packed buffer) and through the reference header (the tensor as written);
both register sets must equal numpy's fragment of that tile bit for bit, and the packed buffer
must equal the generated numpy reorder's.  The restore kernel must give the source back, its
padding untouched.

    python -m pytest -q gpu_tests/test_chain_preshuffle.py
"""
import os
import tempfile

import numpy as np
import pytest

from ll_codegen.run import gpu

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples", "chains")
CASES = {"mma_sync_b": "preshuffled_mma_b_e4m3.yaml", "wgmma_a": "preshuffled_wgmma_a_e4m3.yaml"}
TILES = (2, 3)

KERNEL = r"""
#include "ps_0_W_to_{dst}.cuh"
#include "ref.cuh"
#include "ps_W_reorder.cuh"
extern "C" __global__ void load_both(const uint8_t* packed, const uint8_t* w, long long tile, long long origin,
                                     long long ld, uint8_t* got, uint8_t* want) {{
    extern __shared__ __align__(16) unsigned char smem[];
    uint8_t a[ps_0_W_to_{dst}::kRegs], b[ref::kRegs];
    const long long packed_strides[1] = {{1}};
    ps_0_W_to_{dst}::load(packed + tile * ps_W_reorder::kTileElems, packed_strides, a, smem);
    __syncthreads();
    const long long ref_strides[2] = {{{s0}, {s1}}};
    ref::load(w + origin, ref_strides, b, smem);
    for (int i = 0; i < ps_0_W_to_{dst}::kRegs; ++i) got[threadIdx.x * ps_0_W_to_{dst}::kRegs + i] = a[i];
    for (int i = 0; i < ref::kRegs; ++i) want[threadIdx.x * ref::kRegs + i] = b[i];
}}
extern "C" __global__ void pack(const uint8_t* w, uint8_t* packed, long long ld) {{
    ps_W_reorder::Extent e{{{{{t0}, {t1}}}, {{{s0}, {s1}}}}};
    const long long v = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (v < ps_W_reorder::vectors(e)) ps_W_reorder::reorder_vector(v, w, packed, e);
}}
extern "C" __global__ void unpack(const uint8_t* packed, uint8_t* w, long long ld) {{
    ps_W_reorder::Extent e{{{{{t0}, {t1}}}, {{{s0}, {s1}}}}};
    const long long v = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (v < ps_W_reorder::vectors(e)) ps_W_reorder::restore_vector(v, packed, w, e);
}}
"""


@pytest.mark.parametrize("case", sorted(CASES))
def test_reordered_weights_load_the_reference_registers(case):
    import cupy as cp
    from ll_codegen.chain.description import load_chain
    from ll_codegen.chain.files import chain_files
    from ll_codegen.chain.search import plan_chain
    from ll_codegen.operations import render_files
    from ll_codegen.verify.emulate.reference import regs_of

    plan = plan_chain(load_chain(os.path.join(EXAMPLES, CASES[case])))
    step = plan.chain.steps[0]
    fragment = plan.chain.tensor(step.dst).spec.linear
    ref_plan = plan.identity_plans[0]
    shape = plan.chain.tensor("W").spec.shape
    row_major = list(ref_plan.memory.layout["order"])[0] == 1     # W's dim 1 contiguous (else dim 0)
    with tempfile.TemporaryDirectory() as d:
        files = chain_files(plan, "ps", "chain.yaml", ["header"])
        files.update(render_files(ref_plan, "ref", ["header"], "reference", "W as written", step.dst))
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        full = (shape[0] * TILES[0], shape[1] * TILES[1])           # W of 2 x 3 tiles
        rng = np.random.default_rng(41)
        logical = rng.integers(0, 256, size=full, dtype=np.uint8)
        stored = logical if row_major else logical.T                # as the weights sit in memory
        ld = stored.shape[1] + 16                                   # padded rows: a stride of its own
        buf = np.zeros((stored.shape[0], ld), dtype=np.uint8)
        buf[:, :stored.shape[1]] = stored
        s0, s1 = ("ld", "1") if row_major else ("1", "ld")          # W's strides (elements) per dim
        src = KERNEL.format(dst=step.dst, s0=s0, s1=s1, t0=TILES[0], t1=TILES[1])
        opts = ("-std=c++17", f"-arch={gpu.arch()}", f"-I{d}", *[f"-I{x}" for x in gpu.cuda_include_dirs()])
        mod = cp.RawModule(code=src, options=opts)
        w = cp.asarray(buf)
        packed = cp.zeros(logical.size, dtype=np.uint8)
        vectors = logical.size // 16
        mod.get_function("pack")(((vectors + 127) // 128,), (128,), (w, packed, np.int64(ld)))
        scope: dict = {}
        exec(compile(files["ps_W_reorder.py"], "reorder", "exec"), scope)
        assert np.array_equal(cp.asnumpy(packed), scope["reorder"](logical).reshape(-1))
        back = cp.full(buf.shape, 0xA5, dtype=np.uint8)
        mod.get_function("unpack")(((vectors + 127) // 128,), (128,), (packed, back, np.int64(ld)))
        back = cp.asnumpy(back)
        n_cols = stored.shape[1]
        assert np.array_equal(back[:, :n_cols], stored) and (back[:, n_cols:] == 0xA5).all()
        ti, tj = 1, 2
        origin = (ti * shape[0], tj * shape[1])
        offset = origin[0] * ld + origin[1] if row_major else origin[1] * ld + origin[0]
        threads = 32 * fragment.in_dim_size("warp")
        n = fragment.in_dim_size("register")
        got = cp.zeros(threads * n, dtype=np.uint8)
        want = cp.zeros(threads * n, dtype=np.uint8)
        mod.get_function("load_both")((1,), (threads,), (packed, w, np.int64(ti * TILES[1] + tj), np.int64(offset),
                                                        np.int64(ld), got, want), shared_mem=16384)
        tile = logical[origin[0]:origin[0] + shape[0], origin[1]:origin[1] + shape[1]]
        numpy_regs = regs_of(fragment, tile).reshape(threads, n)
        assert np.array_equal(cp.asnumpy(want).reshape(threads, n), numpy_regs)
        assert np.array_equal(cp.asnumpy(got).reshape(threads, n), numpy_regs)
