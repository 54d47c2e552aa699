"""The Hopper GEMM built from generated headers (``examples/kernels/gemm_wgmma.cu``):
exact against numpy at tile multiples and ragged sizes, f16 and bf16 inputs, f32 and 16-bit C, with
the tile and split of K the host chooses and with each forced (128 x 256, 128 x 192 and 128 x 128
tiles, K whole or split in 2 .. 8 ranges); split K deterministic (random-normal inputs, launches bit-identical, the
counters zero again after each launch) and clean under compute-sanitizer memcheck.

Inputs are small integers (-3 .. 3), so every product and every f32 partial sum is exact: an f32 C
must equal the float64 reference bit for bit, a 16-bit C that reference rounded to nearest even.
The example is built with nvcc into a shared library (``build``) and called through its host entry
points (``Library``: they choose the plan, encode the TMA tensor maps, allocate the split's
workspace and launch), on CuPy's arrays.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import weakref

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
    """The example's host entry points: ``llgen_gemm_wgmma`` (plan chosen, tensor maps encoded, then
    the launch), ``llgen_gemm_wgmma_prepare_with`` / ``_launch`` / ``_release`` (encoded once, launched
    often; the tile and split chosen, or forced by ``bn`` / ``splits``) and ``llgen_gemm_wgmma_plan``.
    Pointers are device addresses (ints); ``stream`` a function giving the stream to launch on."""

    def __init__(self, path: str):
        lib = ctypes.CDLL(path)
        ptrs, dims = [ctypes.c_void_p] * 3, [ctypes.c_int] * 3
        lib.llgen_gemm_wgmma.argtypes = [ctypes.c_int, ctypes.c_int, *ptrs, *dims, ctypes.c_void_p]
        lib.llgen_gemm_wgmma_prepare_with.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, *ptrs, *dims,
                                                      ctypes.c_int, ctypes.c_int]
        lib.llgen_gemm_wgmma_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.llgen_gemm_wgmma_release.argtypes = [ctypes.c_void_p]
        lib.llgen_gemm_wgmma_plan.argtypes = [*dims, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
        self.lib = lib

    def plan(self, M: int, N: int, K: int, bn: int = 0, splits: int = 0) -> dict:
        """The plan prepare() takes: the tile's columns, the splits, the tiles computed whole, the grid."""
        out = (ctypes.c_int * 4)()
        if r := self.lib.llgen_gemm_wgmma_plan(M, N, K, bn, splits, out):
            raise RuntimeError(f"llgen_gemm_wgmma_plan returned {r}")
        return dict(zip(("bn", "splits", "dp", "grid"), out))

    def status(self, bf16: bool, out16: bool, a: int, b: int, c: int, M: int, N: int, K: int) -> int:
        """C = A B on the default stream; the library's result (0, or a CUresult / cudaError_t)."""
        return self.lib.llgen_gemm_wgmma(int(bf16), int(out16), a, b, c, M, N, K, 0)

    def run(self, *args) -> None:
        if r := self.status(*args):
            raise RuntimeError(f"llgen_gemm_wgmma returned {r}")

    def prepared(self, bf16: bool, out16: bool, a: int, b: int, c: int, M: int, N: int, K: int,
                 stream=lambda: 0, bn: int = 0, splits: int = 0):
        """The plan chosen (or forced: ``bn``, ``splits``), the tensor maps encoded and the workspace
        allocated now; the returned function launches on ``stream()`` and frees the workspace when it
        is garbage (after a device synchronisation)."""
        params = ctypes.create_string_buffer(self.lib.llgen_gemm_wgmma_params_size())
        if r := self.lib.llgen_gemm_wgmma_prepare_with(params, int(bf16), int(out16), a, b, c, M, N, K, bn, splits):
            self.lib.llgen_gemm_wgmma_release(params)
            raise RuntimeError(f"llgen_gemm_wgmma_prepare returned {r}")

        def go() -> None:
            if r := self.lib.llgen_gemm_wgmma_launch(params, stream()):
                raise RuntimeError(f"llgen_gemm_wgmma_launch returned {r}")
        weakref.finalize(go, release, self.lib.llgen_gemm_wgmma_release, params)
        return go


def release(free, params) -> None:
    """Frees a prepared GEMM's workspace once the device has finished every launch using it."""
    import cupy as cp
    cp.cuda.runtime.deviceSynchronize()
    free(params)


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


# (M, N, K, bn, splits): K split in every tile, 128 x 256 and 128 x 128 tiles, tile multiples and
# ragged (TMA zero fill in K inside a range, the masked f32 store and clipped TMA store after the sum),
# uneven ranges (K 4000: 63 k-steps in 4 ranges of 15 or 16), a persistent walk (3000 x 5000 in 2
# ranges: 960 units of 128 x 256 on the SMs)
SPLIT = [(128, 256, 256, 256, 2), (256, 512, 1024, 128, 4), (200, 136, 1000, 128, 3), (1000, 520, 4000, 256, 4),
         (1, 264, 2048, 128, 8), (512, 512, 8192, 128, 8), (3000, 5000, 1024, 256, 2)]


# 128 x 192 tiles (two parts: 128 + 64 columns): one tile; ragged 2 x 2 tiles cut inside the second
# part (N - 192 = 136); the second part wholly past N (N 104, 8); uneven ranges; a persistent walk
# (3000 x 5000: 24 x 27 tiles in 2 ranges)
SPLIT_192 = [(128, 192, 256, 192, 2), (200, 328, 1000, 192, 3), (1000, 520, 4000, 192, 4), (3000, 5000, 1024, 192, 2)]
WHOLE_192 = [(M, N, K, 192, 1) for M, N, K, _, _ in SPLIT_192] + [(72, 104, 64, 192, 1), (1, 8, 8, 192, 1)]
# stream K (splits -1): the tail after all but the last full round of tiles dealt to one share a SM --
# the ragged 3000 x 5000 x 4000 (128 x 256: 264 tiles whole, 216 in 132 shares of 103 k-steps, each
# tile cut where two shares meet; 128 x 192 too), 16 tiles shared by 132 SMs (a tile in 8-9 pieces),
# ragged sizes with fewer tiles than SMs
STREAM = [(3000, 5000, 4000, 256, -1), (3000, 5000, 4000, 192, -1), (512, 512, 8192, 128, -1),
          (200, 136, 1000, 128, -1), (1000, 520, 4000, 256, -1)]


@pytest.mark.parametrize("bf16,out16", KINDS, ids=["f16-f32", "f16-f16", "bf16-f32", "bf16-bf16"])
@pytest.mark.parametrize("M,N,K,bn,splits", SPLIT + [(M, N, K, bn, 1) for M, N, K, bn, _ in SPLIT[:4]] + SPLIT_192
                         + WHOLE_192 + STREAM, ids=lambda v: str(v))
def test_gemm_wgmma_exact_forced_plan(gemm, M, N, K, bn, splits, bf16, out16):
    """Exact with the tile and split forced: split K on (splits >= 2), stream K (-1) and off (splits 1,
    the same sizes)."""
    a, b, want = operands(M, N, K, bf16, M * 5 + N + K)
    want = expected(want, bf16, out16)
    assert gemm.plan(M, N, K, bn, splits)["splits"] == splits
    da, db = cupy.asarray(a), cupy.asarray(b)
    dc = cupy.full((M, N), 0x7FC0 if out16 else np.nan, dtype=np.uint16 if out16 else np.float32)
    go = gemm.prepared(bf16, out16, da.data.ptr, db.data.ptr, dc.data.ptr, M, N, K, bn=bn, splits=splits)
    for launch in range(2):  # the second launch finds the counters the first one zeroed
        dc.fill(0x7FC0 if out16 else np.nan)
        go()
        got = dc.get()
        bad = np.argwhere(got != want)
        assert not len(bad), (f"{M}x{N}x{K} bn {bn} splits {splits}, launch {launch}: {len(bad)} of {got.size} "
                              f"differ; first {tuple(bad[0])}: {got[tuple(bad[0])]} != {want[tuple(bad[0])]}")


def sms() -> int:
    return cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["multiProcessorCount"]


@pytest.mark.parametrize("M,N,K,plan", [(512, 512, 8192, (128, 5, 0)), (3000, 5000, 4000, (192, 1, 648)),
                                        (4096, 4096, 4096, (256, 1, 512))])
def test_gemm_wgmma_chosen_plan_exact(gemm, M, N, K, plan):
    """The plan the host chooses (examples/kernels/gemm_hopper_plan.h; tests/test_gemm_hopper_plan.py
    holds its table for 132 SMs): on an H200 the table's, and exact with it (f16, 16-bit C)."""
    chosen = gemm.plan(M, N, K)
    if sms() == 132:
        assert (chosen["bn"], chosen["splits"], chosen["dp"]) == plan
    a, b, want = operands(M, N, K, False, M + N + K)
    want = expected(want, False, True)
    da, db = cupy.asarray(a), cupy.asarray(b)
    dc = cupy.full((M, N), 0x7FC0, dtype=np.uint16)
    gemm.run(False, True, da.data.ptr, db.data.ptr, dc.data.ptr, M, N, K)
    assert np.array_equal(dc.get(), want)


@pytest.mark.parametrize("M,N,K,bn,splits", [(512, 512, 8192, 0, 0), (3000, 5000, 4000, 256, 3),
                                             (384, 256, 4096, 128, 5), (1000, 1160, 4000, 192, 3)])
def test_gemm_wgmma_split_k_deterministic(gemm, M, N, K, bn, splits):
    """Random-normal f16 inputs (sums not exact): five launches of one prepared split-K GEMM and one of
    a freshly prepared one give bit-identical C (the ranges are summed in range order whichever CTA
    completes a tile), within f32 rounding of the float64 product."""
    rng = np.random.default_rng(K)
    a = cupy.asarray(rng.standard_normal((M, K)).astype(np.float16))
    b = cupy.asarray(rng.standard_normal((K, N)).astype(np.float16))
    assert gemm.plan(M, N, K, bn, splits)["splits"] > 1
    c = cupy.empty((M, N), dtype=np.float32)
    results = []
    go = gemm.prepared(False, False, a.data.ptr, b.data.ptr, c.data.ptr, M, N, K, bn=bn, splits=splits)
    for _ in range(5):
        c.fill(np.nan)
        go()
        results.append(c.get())
    c.fill(np.nan)
    gemm.prepared(False, False, a.data.ptr, b.data.ptr, c.data.ptr, M, N, K, bn=bn, splits=splits)()
    results.append(c.get())
    for r in results[1:]:
        assert np.array_equal(r.view(np.uint32), results[0].view(np.uint32))
    ad, bd = a.get().astype(np.float64), b.get().astype(np.float64)
    ref, mag = ad @ bd, np.abs(ad) @ np.abs(bd)
    assert np.all(np.abs(results[0] - ref) <= 2.0 ** -16 * mag)


SANITIZE = """
import sys, numpy as np, cupy
sys.path.insert(0, {here!r})
import test_gemm_wgmma as t
lib = t.Library({lib!r})
CASES = ((200, 136, 1000, 128, 3, True), (128, 256, 512, 256, 2, False), (300, 264, 2048, 0, 0, True),
         (200, 328, 1000, 192, 3, True), (72, 104, 512, 192, 2, False))
for M, N, K, bn, splits, out16 in CASES:
    a, b, want = t.operands(M, N, K, False, 1)
    da, db = cupy.asarray(a), cupy.asarray(b)
    dc = cupy.zeros((M, N), dtype=np.uint16 if out16 else np.float32)
    go = lib.prepared(False, out16, da.data.ptr, db.data.ptr, dc.data.ptr, M, N, K, bn=bn, splits=splits)
    go(); go()
    assert np.array_equal(dc.get(), t.expected(want, False, out16)), (M, N, K)
print("sanitized ok")
"""


@pytest.mark.parametrize("tool", ["memcheck", "initcheck", "racecheck", "synccheck"])
def test_gemm_wgmma_split_k_under_compute_sanitizer(tool, tmp_path):
    """compute-sanitizer --tool memcheck / initcheck / racecheck / synccheck on small split-K GEMMs
    (every tile split in 2 or 3 ranges, ragged, two launches each: the workspace slots and counters
    in bounds and written before read, the "last range" flag in shared memory ordered by the
    rendezvous, the mbarriers well formed): 0 errors (racecheck: 0 hazards), results exact.  The
    command it runs: compute-sanitizer --tool TOOL --error-exitcode 1 python SCRIPT (SCRIPT: SANITIZE)."""
    cs = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not os.path.exists(cs):
        pytest.skip("no compute-sanitizer")
    lib = build(str(tmp_path))
    script = tmp_path / "sanitize_gemm.py"
    script.write_text(SANITIZE.format(here=os.path.dirname(os.path.abspath(__file__)), lib=lib))
    r = subprocess.run([cs, "--tool", tool, "--error-exitcode", "1", sys.executable, str(script)], check=False,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and "sanitized ok" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    summary = "RACECHECK SUMMARY: 0 hazards" if tool == "racecheck" else "ERROR SUMMARY: 0 errors"
    assert summary in r.stdout + r.stderr, r.stdout[-3000:]
