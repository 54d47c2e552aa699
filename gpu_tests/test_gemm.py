"""The GEMM built only from generated headers (``examples/kernels/gemm_mma.cu``):
exact against numpy on sizes that are and are not multiples of the 128 x 128 x 32 tile.

Inputs are small integers (-3 .. 3) in f16, so every product and every f32 partial sum is exact
and C must equal the float64 reference bit for bit.  The kernel is compiled with nvcc for the
device's arch (``gemm.build``) and launched through CuPy.
"""
import os
import subprocess
import tempfile

import numpy as np
import pytest

from ll_codegen.run import gpu

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

import cupy  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = os.path.join(ROOT, "examples", "kernels", "gemm_mma.cu")
BM = BN = 128
SMEM = 3 * (128 * 32 + 32 * 128) * 2


def build(directory: str) -> str:
    """nvcc -O3 for this GPU's arch; the cubin path."""
    arch = "sm_" + cupy.cuda.Device().compute_capability
    out = os.path.join(directory, "gemm.cubin")
    subprocess.run(["nvcc", "-std=c++17", "-O3", f"-arch={arch}", "-I", os.path.join(ROOT, "generated"), "-cubin",
                    "-o", out, KERNEL], check=True, capture_output=True, text=True)
    return out


def launch(fn, a, b, c, M, N, K, stream=None):
    grid = ((N + BN - 1) // BN, (M + BM - 1) // BM)
    fn(grid, (128,), (a, b, c, np.int32(M), np.int32(N), np.int32(K)), shared_mem=SMEM, stream=stream)


@pytest.fixture(scope="module")
def kernel():
    with tempfile.TemporaryDirectory() as d:
        mod = cupy.RawModule(path=build(d))
        yield mod.get_function("gemm_mma")


SIZES = [(128, 128, 32), (256, 384, 96), (200, 136, 72), (1000, 520, 264), (8, 8, 8), (130, 8, 40), (512, 512, 1024)]


@pytest.mark.parametrize("M,N,K", SIZES)
def test_gemm_exact(kernel, M, N, K):
    rng = np.random.default_rng(M * 7 + N * 3 + K)
    a = rng.integers(-3, 4, size=(M, K)).astype(np.float16)
    b = rng.integers(-3, 4, size=(K, N)).astype(np.float16)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    da, db = cupy.asarray(a), cupy.asarray(b)
    dc = cupy.full((M, N), np.nan, dtype=np.float32)       # poison: an unwritten element stays NaN
    launch(kernel, da, db, dc, M, N, K)
    got = dc.get()
    bad = np.argwhere(got != want)
    assert not len(bad), (f"{M}x{N}x{K}: {len(bad)} of {got.size} differ; first {tuple(bad[0])}: "
                          f"{got[tuple(bad[0])]} != {want[tuple(bad[0])]}")
