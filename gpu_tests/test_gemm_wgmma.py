"""The Hopper GEMM built from generated headers (``examples/kernels/gemm_wgmma.cu``):
exact against numpy at tile multiples and ragged sizes, f16 and bf16 inputs, f32 and 16-bit C.

Inputs are small integers (-3 .. 3), so every product and every f32 partial sum is exact: an f32 C
must equal the float64 reference bit for bit, a 16-bit C that reference rounded to nearest even.
The example is built with nvcc into a shared library (``build``) and called through its host entry
points (``Library``: they encode the TMA tensor maps and launch), on CuPy's arrays.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile

import numpy as np
import pytest

from ll_codegen.run import gpu
from ll_codegen.verify.emulate.reference import round16_bits

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

import cupy  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = os.path.join(ROOT, "examples", "kernels", "gemm_wgmma.cu")


def build(directory: str, extra: tuple[str, ...] = ()) -> str:
    """nvcc -O3 -arch=sm_90a (the kernel's own build line) into a shared library; its path."""
    out = os.path.join(directory, "gemm_wgmma.so")
    subprocess.run(["nvcc", "-std=c++17", "-O3", "-arch=sm_90a", "-I",
                    os.path.join(ROOT, "generated"), "-shared", "-Xcompiler", "-fPIC", *extra, "-o", out, KERNEL],
                   check=True, capture_output=True, text=True)
    return out


class Library:
    """The example's host entry points: ``llgen_gemm_wgmma`` (tensor maps encoded, then the launch)
    and ``llgen_gemm_wgmma_prepare`` / ``_launch`` (the maps encoded once, launched often).
    Pointers are device addresses (ints); ``stream`` a function giving the stream to launch on."""

    def __init__(self, path: str):
        lib = ctypes.CDLL(path)
        ptrs, dims = [ctypes.c_void_p] * 3, [ctypes.c_int] * 3
        lib.llgen_gemm_wgmma.argtypes = [ctypes.c_int, ctypes.c_int, *ptrs, *dims, ctypes.c_void_p]
        lib.llgen_gemm_wgmma_prepare.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, *ptrs, *dims]
        lib.llgen_gemm_wgmma_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.lib = lib

    def status(self, bf16: bool, out16: bool, a: int, b: int, c: int, M: int, N: int, K: int) -> int:
        """C = A B on the default stream; the library's result (0, or a CUresult / cudaError_t)."""
        return self.lib.llgen_gemm_wgmma(int(bf16), int(out16), a, b, c, M, N, K, 0)

    def run(self, *args) -> None:
        if r := self.status(*args):
            raise RuntimeError(f"llgen_gemm_wgmma returned {r}")

    def prepared(self, bf16: bool, out16: bool, a: int, b: int, c: int, M: int, N: int, K: int,
                 stream=lambda: 0):
        """The tensor maps encoded now; the returned function launches on ``stream()``."""
        params = ctypes.create_string_buffer(self.lib.llgen_gemm_wgmma_params_size())
        if r := self.lib.llgen_gemm_wgmma_prepare(params, int(bf16), int(out16), a, b, c, M, N, K):
            raise RuntimeError(f"llgen_gemm_wgmma_prepare returned {r}")

        def go() -> None:
            if r := self.lib.llgen_gemm_wgmma_launch(params, stream()):
                raise RuntimeError(f"llgen_gemm_wgmma_launch returned {r}")
        return go


def operands(M: int, N: int, K: int, bf16: bool, seed: int):
    """Small-integer A (M x K), B (K x N) as the kernel's 16-bit bits, and the exact f32 product."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, size=(M, K))
    b = rng.integers(-3, 4, size=(K, N))
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    t = "bf16" if bf16 else "f16"
    return round16_bits(a, t), round16_bits(b, t), want


def expected(want: np.ndarray, bf16: bool, out16: bool) -> np.ndarray:
    """C as the kernel writes it: f32, or the f32 sum rounded to the inputs' 16-bit type (bits)."""
    return round16_bits(want, "bf16" if bf16 else "f16") if out16 else want


@pytest.fixture(scope="module")
def gemm():
    with tempfile.TemporaryDirectory() as d:
        yield Library(build(d))


# the last two: more tiles than SMs, so each persistent CTA walks several (examples/kernels/gemm_hopper.h)
SIZES = [(128, 256, 64), (256, 512, 192), (200, 136, 72), (1000, 520, 264), (8, 8, 8), (130, 8, 40),
         (1, 264, 8), (512, 512, 1024), (384, 768, 4096), (3000, 5000, 512), (4096, 4096, 256)]
KINDS = [(False, False), (False, True), (True, False), (True, True)]


@pytest.mark.parametrize("bf16,out16", KINDS, ids=["f16-f32", "f16-f16", "bf16-f32", "bf16-bf16"])
@pytest.mark.parametrize("M,N,K", SIZES)
def test_gemm_wgmma_exact(gemm, M, N, K, bf16, out16):
    a, b, want = operands(M, N, K, bf16, M * 7 + N * 3 + K)
    want = expected(want, bf16, out16)
    da, db = cupy.asarray(a), cupy.asarray(b)
    dc = cupy.full((M, N), 0x7FC0 if out16 else np.nan, dtype=np.uint16 if out16 else np.float32)  # NaN poison
    gemm.run(bf16, out16, da.data.ptr, db.data.ptr, dc.data.ptr, M, N, K)
    got = dc.get()
    bad = np.argwhere(got != want)
    assert not len(bad), (f"{M}x{N}x{K}: {len(bad)} of {got.size} differ; first {tuple(bad[0])}: "
                          f"{got[tuple(bad[0])]} != {want[tuple(bad[0])]}")


def test_gemm_wgmma_refuses_misaligned(gemm):
    """N or K not a multiple of 8 (rows not 16-byte aligned, which TMA needs): an error, no launch."""
    d = cupy.zeros(64 * 64, dtype=np.float32)
    assert gemm.status(False, False, d.data.ptr, d.data.ptr, d.data.ptr, 16, 12, 16) != 0
    assert gemm.status(False, False, d.data.ptr, d.data.ptr, d.data.ptr, 16, 16, 12) != 0
