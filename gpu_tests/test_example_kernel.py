"""The hand-written example kernel ``examples/kernels/mma_store.cu`` on a GPU.

It computes C = A @ B with ``mma.sync.m16n8k16`` (f16 inputs, f32
accumulator), converts the accumulator with the generated
``generated/mma_acc_to_blocked.cuh`` and writes C with 16-byte stores.  CuPy
compiles it with NVRTC exactly as it is in the repository: ``-std=c++17``,
``-I examples/kernels`` (the kernel's ``#include "../../generated/..."``
resolves against it) and the CUDA include folder that the generated header's
``<cuda_runtime.h>`` needs (``gpu.cuda_include_dirs()``).

Inputs are small integers stored as f16, so every product and every partial
sum is an integer below 2**24: the fp32 accumulation is exact in any order,
and C must equal ``(A @ B)`` computed in float64 and cast to float32, bit for
bit.  C is poisoned with NaN bits first, so an element the kernel never writes
cannot pass.

Needs a CUDA GPU of compute capability 8.0 or newer (mma.sync m16n8k16);
otherwise skipped with the reason.
"""
import os

import numpy as np
import pytest

from ll_codegen.run import gpu

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

import cupy  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL_DIR = os.path.join(ROOT, "examples", "kernels")
SOURCE = os.path.join(KERNEL_DIR, "mma_store.cu")
TILE, THREADS = 64, 128
POISON = np.uint32(0xFFFFFFFF)            # a NaN: never equal to a finite result


@pytest.fixture(scope="module")
def kernel():
    cc = int(cupy.cuda.Device().compute_capability)
    if cc < 80:
        pytest.skip(f"mma.sync m16n8k16 needs compute capability 8.0 or newer (this GPU: {cc // 10}.{cc % 10})")
    with open(SOURCE) as f:
        code = f.read()
    cuda_inc = getattr(gpu, "cuda_include_dirs", lambda: [])()
    module = cupy.RawModule(code=code, options=("-std=c++17", f"-I{KERNEL_DIR}") + tuple(f"-I{d}" for d in cuda_inc))
    return module.get_function("mma_store")


def _where(row: int, col: int) -> str:
    """Which thread and register of the blocked destination layout stores C[row, col]."""
    r, c = row % TILE, col % TILE
    lane = (r & 1) * 16 + (c // 4)
    warp = (r >> 1) & 3
    reg = 4 * (r >> 3) + c % 4
    return (f"CTA ({col // TILE}, {row // TILE}), thread {32 * warp + lane} (warp {warp}, lane {lane}), "
            f"out[{reg}]")


@pytest.mark.parametrize("m,n,k", [(64, 64, 16), (64, 64, 128), (128, 192, 96), (256, 128, 64)])
def test_mma_store_bit_exact(kernel, m, n, k):
    rng = np.random.default_rng(1000 * m + 10 * n + k)
    a = rng.integers(-4, 5, size=(m, k)).astype(np.float16)
    b = rng.integers(-4, 5, size=(k, n)).astype(np.float16)
    # float64 products and sums are exact here; "+ 0" turns a -0.0 from the CPU's summation order
    # into the +0.0 that the GPU's accumulator (which starts at +0.0) produces for an exact zero
    ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32) + np.float32(0)
    assert np.all(np.abs(ref) < 2 ** 24)

    d_a = cupy.asarray(a.view(np.uint16))
    d_b = cupy.asarray(b.view(np.uint16))
    d_c = cupy.full((m, n), POISON, dtype=np.uint32)
    kernel((n // TILE, m // TILE), (THREADS,), (d_a, d_b, d_c, np.int32(m), np.int32(n), np.int32(k)))
    cupy.cuda.Device().synchronize()
    got = d_c.get()

    want = ref.view(np.uint32)
    bad = np.argwhere(got != want)
    if len(bad):
        row, col = (int(x) for x in bad[0])
        pytest.fail(f"{len(bad)} of {m * n} elements of C differ (M={m}, N={n}, K={k}); first C[{row}, {col}]: "
                    f"expected {ref[row, col]!r} ({want[row, col]:#010x}), got "
                    f"{got[row, col:col + 1].view(np.float32)[0]!r} ({got[row, col]:#010x}); "
                    f"stored by {_where(row, col)}")
