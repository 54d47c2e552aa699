"""The Hopper GEMM built from generated headers (``examples/kernels/gemm_wgmma.cu``, issue 25):
exact against numpy at tile multiples and ragged sizes, f16 and bf16 inputs, f32 and 16-bit C.

Inputs are small integers (-3 .. 3), so every product and every f32 partial sum is exact: an f32 C
must equal the float64 reference bit for bit, a 16-bit C that reference rounded to nearest even.
The example is built with nvcc into a shared library (``build``) and called through its host entry
``llgen_gemm_wgmma`` (which encodes the TMA tensor maps and launches), on CuPy's arrays.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile

import numpy as np
import pytest

from ll_codegen.verify import gpu

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

import cupy  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = os.path.join(ROOT, "examples", "kernels", "gemm_wgmma.cu")


def build(directory: str, extra: tuple[str, ...] = ()) -> str:
    """nvcc -O3 for sm_90a into a shared library; its path."""
    out = os.path.join(directory, "gemm_wgmma.so")
    subprocess.run(["nvcc", "-std=c++17", "-O3", "-gencode", "arch=compute_90a,code=sm_90a", "-I",
                    os.path.join(ROOT, "generated"), "-shared", "-Xcompiler", "-fPIC", *extra, "-o", out, KERNEL],
                   check=True, capture_output=True, text=True)
    return out


def load(path: str):
    """The library's ``llgen_gemm_wgmma(ab, out16, A, B, C, M, N, K, stream) -> int``."""
    fn = ctypes.CDLL(path).llgen_gemm_wgmma
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                   ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def launch(fn, bf16: bool, out16: bool, a_ptr: int, b_ptr: int, c_ptr: int, M: int, N: int, K: int,
           stream: int = 0) -> None:
    r = fn(int(bf16), int(out16), a_ptr, b_ptr, c_ptr, M, N, K, stream)
    if r:
        raise RuntimeError(f"llgen_gemm_wgmma returned {r}")


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float -> bf16 bit patterns, rounded to nearest even (as __float2bfloat16_rn)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def operands(M: int, N: int, K: int, bf16: bool, seed: int):
    """Small-integer A (M x K), B (K x N) as the kernel's 16-bit bits, and the exact f32 product."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, size=(M, K)).astype(np.float32)
    b = rng.integers(-3, 4, size=(K, N)).astype(np.float32)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    if bf16:
        return bf16_bits(a), bf16_bits(b), want
    return a.astype(np.float16).view(np.uint16), b.astype(np.float16).view(np.uint16), want


def expected(want: np.ndarray, bf16: bool, out16: bool) -> np.ndarray:
    """C as the kernel writes it: f32, or the f32 sum rounded to the inputs' 16-bit type (bits)."""
    if not out16:
        return want
    return bf16_bits(want) if bf16 else want.astype(np.float16).view(np.uint16)


@pytest.fixture(scope="module")
def gemm():
    with tempfile.TemporaryDirectory() as d:
        yield load(build(d))


SIZES = [(128, 256, 64), (256, 512, 192), (200, 136, 72), (1000, 520, 264), (8, 8, 8), (130, 8, 40),
         (1, 264, 8), (512, 512, 1024), (384, 768, 4096)]
KINDS = [(False, False), (False, True), (True, False), (True, True)]


@pytest.mark.parametrize("bf16,out16", KINDS, ids=["f16-f32", "f16-f16", "bf16-f32", "bf16-bf16"])
@pytest.mark.parametrize("M,N,K", SIZES)
def test_gemm_wgmma_exact(gemm, M, N, K, bf16, out16):
    a, b, want = operands(M, N, K, bf16, M * 7 + N * 3 + K)
    want = expected(want, bf16, out16)
    da, db = cupy.asarray(a), cupy.asarray(b)
    dc = cupy.full((M, N), 0x7FC0 if out16 else np.nan, dtype=np.uint16 if out16 else np.float32)  # NaN poison
    launch(gemm, bf16, out16, da.data.ptr, db.data.ptr, dc.data.ptr, M, N, K)
    got = dc.get()
    bad = np.argwhere(got != want)
    assert not len(bad), (f"{M}x{N}x{K}: {len(bad)} of {got.size} differ; first {tuple(bad[0])}: "
                          f"{got[tuple(bad[0])]} != {want[tuple(bad[0])]}")


def test_gemm_wgmma_refuses_misaligned(gemm):
    """N or K not a multiple of 8 (rows not 16-byte aligned, which TMA needs): an error, no launch."""
    d = cupy.zeros(64 * 64, dtype=np.float32)
    assert gemm(0, 0, d.data.ptr, d.data.ptr, d.data.ptr, 16, 12, 16, 0) != 0
    assert gemm(0, 0, d.data.ptr, d.data.ptr, d.data.ptr, 16, 16, 12, 0) != 0
