"""The Hopper fp8 GEMM built from generated headers (``examples/kernels/gemm_fp8.cu``): C = (A B^T) *
scale_a * scale_b with A M x K and B N x K row-major e4m3 / e5m2, C f32, bf16 or f16; or C = A B *
scale_a * scale_b with B given K x N row-major (``b_kn``: the kernel transposes B's tiles in shared memory).

* Exact: small-integer inputs (|x| <= 8 in e4m3, <= 4 in e5m2, each exactly representable) and
  powers of two as scales make every product, every f32 partial sum and the scaled result exact, so
  an f32 C must equal the float64 reference of the same fp8 inputs bit for bit and a 16-bit C that
  reference rounded to nearest even -- at tile multiples, ragged sizes and sizes of several tiles per
  SM (the persistent scheduler's walk).
* Realistic: random-normal inputs rounded to e4m3 by torch, scales 0.37 and 1.9, against the float64
  product of the same rounded inputs: |C - ref| <= 2^-9 * sum_k |a_ik b_jk| * scale (+ half a bf16
  ulp for a bf16 C).  The bound is loose on purpose: Hopper's fp8 wgmma adds its products with fewer
  than f32's bits (DeepSeek-V3 reports about 14), so the f32 rounding of an exact sum is no bound
  (measured on an H200 at 4096^3: up to 2^-10.7 of the magnitude sum); a wrong k-step (128 terms) or
  tile misses it by orders of magnitude.
* Split K and the 128 x 128 tile: exact with the tile and split forced (K whole and in 2 .. 6
  ranges), the host's chosen plan exact, split-K launches bit-identical on random-normal inputs.
* Refusals: N not a multiple of 8 or K not of 16 (TMA's 16-byte rows) return an error, no launch.
* B given K x N: exact at tile multiples and ragged sizes (N a multiple of 16) for every type and
  output, with the plan chosen (128 x 256 or 128 x 128 tiles) and forced (K whole and split); on
  random-normal e4m3 inputs bit-identical to the N x K kernel given B^T with the same plan (the same
  wgmma over the same tiles); N not a multiple of 16 and the 128 x 192 tile refused.

The example is built with nvcc into a shared library and called through its host entry points
(``Library``), on CuPy / torch device buffers.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
import weakref

import numpy as np
import pytest

from ll_codegen.run import gpu
from ll_codegen.verify.emulate.reference import encode_small, round16_bits

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

import cupy  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = os.path.join(ROOT, "examples", "kernels", "gemm_fp8.cu")
OUTS = {"f32": 0, "bf16": 1, "f16": 2}
TYPES = {"e4m3": 0, "e5m2": 1}


def build(directory: str, extra: tuple[str, ...] = ()) -> str:
    """nvcc -O3 -arch=sm_90a (the kernel's own build line) into a shared library; its path."""
    out = os.path.join(directory, "gemm_fp8.so")
    subprocess.run(["nvcc", "-std=c++17", "-O3", "-arch=sm_90a", "-I", os.path.join(ROOT, "generated"), "-shared",
                    "-Xcompiler", "-fPIC", *extra, "-o", out, KERNEL], check=True, capture_output=True, text=True)
    return out


class Library:
    """The example's host entry points: ``llgen_gemm_fp8`` (plan chosen, tensor maps encoded, then the
    launch), ``llgen_gemm_fp8_prepare_with`` / ``_launch`` / ``_release`` (encoded once, launched often;
    the tile and split chosen, or forced by ``bn`` / ``splits``; B given K x N with ``kn``) and
    ``llgen_gemm_fp8_plan``.  Pointers are device addresses (ints); ``stream`` a function giving the
    stream to launch on."""

    def __init__(self, path: str):
        lib = ctypes.CDLL(path)
        ptrs, dims = [ctypes.c_void_p] * 5, [ctypes.c_int] * 3
        lib.llgen_gemm_fp8.argtypes = [ctypes.c_int, ctypes.c_int, *ptrs, *dims, ctypes.c_void_p]
        lib.llgen_gemm_fp8_prepare_with.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, *ptrs, *dims,
                                                    ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.llgen_gemm_fp8_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.llgen_gemm_fp8_release.argtypes = [ctypes.c_void_p]
        lib.llgen_gemm_fp8_plan.argtypes = [*dims, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
        self.lib = lib

    def plan(self, M: int, N: int, K: int, bn: int = 0, splits: int = 0, kn: bool = False) -> dict:
        """The plan prepare() takes: the tile's columns, the splits, the tiles computed whole, the grid."""
        out = (ctypes.c_int * 4)()
        if r := self.lib.llgen_gemm_fp8_plan(M, N, K, bn, splits, int(kn), out):
            raise RuntimeError(f"llgen_gemm_fp8_plan returned {r}")
        return dict(zip(("bn", "splits", "dp", "grid"), out))

    def status(self, ab: str, out: str, a: int, b: int, c: int, sa: int, sb: int, M: int, N: int, K: int) -> int:
        """C = (A B^T) * *sa * *sb on the default stream; the library's result (0, or a CUresult / cudaError_t)."""
        return self.lib.llgen_gemm_fp8(TYPES[ab], OUTS[out], a, b, c, sa, sb, M, N, K, 0)

    def run(self, *args) -> None:
        if r := self.status(*args):
            raise RuntimeError(f"llgen_gemm_fp8 returned {r}")

    def prepared(self, ab: str, out: str, a: int, b: int, c: int, sa: int, sb: int, M: int, N: int, K: int,
                 stream=lambda: 0, bn: int = 0, splits: int = 0, kn: bool = False):
        """The plan chosen (or forced: ``bn``, ``splits``), the tensor maps encoded and the workspace
        allocated now (``kn``: B given K x N, C = A B * ..); the returned function launches on
        ``stream()`` and frees the workspace when it is garbage (after a device synchronisation)."""
        params = ctypes.create_string_buffer(self.lib.llgen_gemm_fp8_params_size())
        if r := self.lib.llgen_gemm_fp8_prepare_with(params, TYPES[ab], OUTS[out], a, b, c, sa, sb, M, N, K, bn,
                                                     splits, int(kn)):
            self.lib.llgen_gemm_fp8_release(params)
            raise RuntimeError(f"llgen_gemm_fp8_prepare returned {r}")

        def go() -> None:
            if r := self.lib.llgen_gemm_fp8_launch(params, stream()):
                raise RuntimeError(f"llgen_gemm_fp8_launch returned {r}")
        weakref.finalize(go, release, self.lib.llgen_gemm_fp8_release, params)
        return go


def release(free, params) -> None:
    """Frees a prepared GEMM's workspace once the device has finished every launch using it."""
    cupy.cuda.runtime.deviceSynchronize()
    free(params)


def small_operands(M: int, N: int, K: int, ab: str, seed: int, kn: bool = False):
    """Small-integer A (M x K), B (N x K; ``kn``: K x N) as fp8 bytes, and their float64 values."""
    rng = np.random.default_rng(seed)
    lim = 8 if ab == "e4m3" else 4
    a = rng.integers(-lim, lim + 1, size=(M, K)).astype(np.float64)
    b = rng.integers(-lim, lim + 1, size=(K, N) if kn else (N, K)).astype(np.float64)
    t = "f8e4m3" if ab == "e4m3" else "f8e5m2"
    return encode_small(a, t), encode_small(b, t), a, b


def expected(ref: np.ndarray, out: str) -> np.ndarray:
    """C as the kernel writes it from an exact f32 result: f32, or rounded to a 16-bit type (bits)."""
    ref = ref.astype(np.float32)
    return ref if out == "f32" else round16_bits(ref, out)


@pytest.fixture(scope="module")
def gemm():
    with tempfile.TemporaryDirectory() as d:
        yield Library(build(d))


SIZES = [(128, 256, 128), (256, 512, 384), (200, 136, 80), (1000, 520, 272), (8, 8, 16), (130, 8, 48),
         (1, 264, 16), (512, 512, 1024), (384, 768, 4096), (3000, 5000, 512), (4096, 4096, 256)]
KINDS = [(ab, out) for ab in TYPES for out in OUTS]


@pytest.mark.parametrize("ab,out", KINDS, ids=[f"{ab}-{out}" for ab, out in KINDS])
@pytest.mark.parametrize("M,N,K", SIZES)
def test_gemm_fp8_exact(gemm, M, N, K, ab, out):
    bits_a, bits_b, a, b = small_operands(M, N, K, ab, M * 7 + N * 3 + K)
    scale_a, scale_b = 0.5, 4.0
    want = expected((a @ b.T) * (scale_a * scale_b), out)
    da, db = cupy.asarray(bits_a), cupy.asarray(bits_b)
    scales = cupy.asarray(np.array([scale_a, scale_b], dtype=np.float32))
    dc = cupy.full((M, N), 0x7FC0 if out != "f32" else np.nan, dtype=np.uint16 if out != "f32" else np.float32)
    gemm.run(ab, out, da.data.ptr, db.data.ptr, dc.data.ptr, scales.data.ptr, scales.data.ptr + 4, M, N, K)
    got = dc.get()
    bad = np.argwhere(got != want)
    assert not len(bad), (f"{M}x{N}x{K}: {len(bad)} of {got.size} differ; first {tuple(bad[0])}: "
                          f"{got[tuple(bad[0])]} != {want[tuple(bad[0])]}")


@pytest.mark.parametrize("M,N,K", [(4096, 4096, 4096), (3000, 5000, 4000)])
def test_gemm_fp8_random_normal(gemm, M, N, K):
    """Random-normal e4m3 inputs, bf16 and f32 C, against float64 of the same rounded inputs: the
    f32 C within 2^-9 of the sum of |terms| (times the scales), the bf16 C within that plus half a
    bf16 ulp of the result (2^-9 relative).  The plans chosen on 132 SMs: 128 x 256 tiles for 4096^3,
    128 x 192 for 3000 x 5000 x 4000 (tests/test_gemm_hopper_plan.py's table)."""
    if cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"] == 132:
        plan = gemm.plan(M, N, K)
        assert (plan["bn"], plan["splits"]) == ((256, 1) if M == 4096 else (192, 1))
    torch = pytest.importorskip("torch")
    g = torch.Generator(device="cuda").manual_seed(M + N + K)
    A = torch.randn((M, K), device="cuda", generator=g).to(torch.float8_e4m3fn)
    B = torch.randn((N, K), device="cuda", generator=g).to(torch.float8_e4m3fn)
    scales = torch.tensor([0.37, 1.9], device="cuda", dtype=torch.float32)
    s = float(scales[0]) * float(scales[1])
    ref = (A.double() @ B.double().T) * s
    mag = (A.double().abs() @ B.double().abs().T) * s
    for out, t in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        C = torch.full((M, N), float("nan"), device="cuda", dtype=t)
        gemm.run("e4m3", out, A.data_ptr(), B.data_ptr(), C.data_ptr(), scales.data_ptr(), scales.data_ptr() + 4,
                 M, N, K)
        torch.cuda.synchronize()
        bound = 2.0 ** -9 * mag + (2.0 ** -9 * ref.abs() if out == "bf16" else 0)
        err = (C.double() - ref).abs()
        assert bool((err <= bound).all()), f"{out}: max error {float(err.max())}, worst excess {float((err - bound).max())}"


def test_gemm_fp8_refuses_misaligned(gemm):
    """N not a multiple of 8 or K not of 16 (rows not 16-byte aligned, which TMA needs): an error, no launch."""
    d = cupy.zeros(64 * 64, dtype=np.float32)
    p = d.data.ptr
    assert gemm.status("e4m3", "f32", p, p, p, p, p, 16, 12, 16) != 0
    assert gemm.status("e4m3", "f32", p, p, p, p, p, 16, 16, 24) != 0
    assert gemm.status("e4m3", "f32", p, p, p, 0, p, 16, 16, 16) != 0


# (M, N, K, bn, splits): K split in every tile (tile multiples, ragged, uneven ranges) and whole
SPLIT = [(128, 256, 512, 256, 2), (200, 136, 1008, 128, 3), (1000, 520, 4000, 256, 4), (512, 512, 8192, 128, 6),
         (200, 136, 1008, 128, 1), (1000, 520, 4000, 256, 1)]
# 128 x 192 tiles (two parts: 128 + 64 columns): one tile; ragged tiles cut inside the second part
# (N - 192 = 136); the second part wholly past N (N 104); uneven ranges; a persistent walk
SPLIT += [(128, 192, 512, 192, 2), (200, 328, 1008, 192, 3), (1000, 520, 4000, 192, 4), (3000, 5000, 1024, 192, 2),
          (128, 192, 512, 192, 1), (200, 328, 1008, 192, 1), (72, 104, 128, 192, 1), (3000, 5000, 1024, 192, 1)]
# stream K (splits -1): a persistent walk with the tail cut where shares meet (3000 x 5000 x 4000), 16 tiles
# shared by every SM, ragged sizes with fewer tiles than SMs
SPLIT += [(3000, 5000, 4000, 256, -1), (3000, 5000, 4000, 192, -1), (512, 512, 8192, 128, -1), (200, 136, 1008, 128, -1)]


@pytest.mark.parametrize("ab,out", [("e4m3", "bf16"), ("e5m2", "f32")])
@pytest.mark.parametrize("M,N,K,bn,splits", SPLIT, ids=lambda v: str(v))
def test_gemm_fp8_exact_forced_plan(gemm, M, N, K, bn, splits, ab, out):
    """Exact with the tile and split forced, two launches of one prepared GEMM (the second finds the
    counters the first zeroed); the scales applied once, after the ranges are summed."""
    bits_a, bits_b, a, b = small_operands(M, N, K, ab, M + 3 * N + K)
    want = expected((a @ b.T) * 2.0, out)
    assert gemm.plan(M, N, K, bn, splits)["splits"] == splits
    da, db = cupy.asarray(bits_a), cupy.asarray(bits_b)
    scales = cupy.asarray(np.array([0.5, 4.0], dtype=np.float32))
    dc = cupy.empty((M, N), dtype=np.uint16 if out != "f32" else np.float32)
    go = gemm.prepared(ab, out, da.data.ptr, db.data.ptr, dc.data.ptr, scales.data.ptr, scales.data.ptr + 4, M, N, K,
                       bn=bn, splits=splits)
    for launch in range(2):
        dc.fill(0x7FC0 if out != "f32" else np.nan)
        go()
        got = dc.get()
        bad = np.argwhere(got != want)
        assert not len(bad), (f"{M}x{N}x{K} bn {bn} splits {splits}, launch {launch}: {len(bad)} of {got.size} "
                              f"differ; first {tuple(bad[0])}")


def test_gemm_fp8_split_k_deterministic_and_chosen(gemm):
    """512 x 512 x 8192, the plan chosen (on 132 SMs: 128 x 128 tiles, K in 4 ranges): random-normal
    e4m3 inputs, five launches bit-identical, within the fp8 bound of the float64 product."""
    torch = pytest.importorskip("torch")
    M, N, K = 512, 512, 8192
    plan = gemm.plan(M, N, K)
    if cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"] == 132:
        assert (plan["bn"], plan["splits"], plan["dp"]) == (128, 4, 0)  # tests/test_gemm_hopper_plan.py's table
    g = torch.Generator(device="cuda").manual_seed(8)
    A = torch.randn((M, K), device="cuda", generator=g).to(torch.float8_e4m3fn)
    B = torch.randn((N, K), device="cuda", generator=g).to(torch.float8_e4m3fn)
    scales = torch.tensor([0.37, 1.9], device="cuda", dtype=torch.float32)
    C = torch.empty((M, N), device="cuda", dtype=torch.float32)
    go = gemm.prepared("e4m3", "f32", A.data_ptr(), B.data_ptr(), C.data_ptr(), scales.data_ptr(),
                       scales.data_ptr() + 4, M, N, K)
    runs = []
    for _ in range(5):
        C.fill_(float("nan"))
        go()
        torch.cuda.synchronize()
        runs.append(C.clone())
    assert all(torch.equal(r.view(torch.int32), runs[0].view(torch.int32)) for r in runs[1:])
    s = float(scales[0]) * float(scales[1])
    ref = (A.double() @ B.double().T) * s
    mag = (A.double().abs() @ B.double().abs().T) * s
    assert bool(((runs[0].double() - ref).abs() <= 2.0 ** -9 * mag).all())


# B given K x N (N a multiple of 16, B's rows): tile multiples of 128 x 256 and 128 x 128 tiles, ragged
# M, N, K (TMA's zero fill of A and of B's parts; a second 128-column part wholly or partly past N),
# tiny sizes, several tiles per CTA (the persistent walk: the transposing producer's ring across tiles)
SIZES_KN = [(128, 256, 128), (256, 512, 384), (200, 144, 80), (1000, 528, 272), (8, 16, 16), (130, 16, 48),
            (1, 272, 16), (512, 512, 1024), (384, 768, 4096), (3000, 5008, 512), (4096, 4096, 256)]


def run_exact(gemm, M: int, N: int, K: int, ab: str, out: str, kn: bool, bn: int = 0, splits: int = 0,
              launches: int = 1) -> None:
    """C of small-integer operands (scales 0.5 and 4) equal to the float64 reference, bit for bit, on each
    of ``launches`` launches of one prepared GEMM."""
    bits_a, bits_b, a, b = small_operands(M, N, K, ab, M * 7 + N * 3 + K + kn, kn)
    want = expected((a @ (b if kn else b.T)) * 2.0, out)
    da, db = cupy.asarray(bits_a), cupy.asarray(bits_b)
    scales = cupy.asarray(np.array([0.5, 4.0], dtype=np.float32))
    dc = cupy.empty((M, N), dtype=np.uint16 if out != "f32" else np.float32)
    go = gemm.prepared(ab, out, da.data.ptr, db.data.ptr, dc.data.ptr, scales.data.ptr, scales.data.ptr + 4, M, N, K,
                       bn=bn, splits=splits, kn=kn)
    for launch in range(launches):
        dc.fill(0x7FC0 if out != "f32" else np.nan)
        go()
        got = dc.get()
        bad = np.argwhere(got != want)
        assert not len(bad), (f"{M}x{N}x{K} bn {bn} splits {splits} kn {kn}, launch {launch}: {len(bad)} of "
                              f"{got.size} differ; first {tuple(bad[0])}: {got[tuple(bad[0])]} != {want[tuple(bad[0])]}")


@pytest.mark.parametrize("ab,out", KINDS, ids=[f"{ab}-{out}" for ab, out in KINDS])
@pytest.mark.parametrize("M,N,K", SIZES_KN)
def test_gemm_fp8_b_kn_exact(gemm, M, N, K, ab, out):
    """B given K x N, the plan chosen: C = A B * 2 exactly."""
    assert gemm.plan(M, N, K, kn=True)["bn"] in (256, 128)
    run_exact(gemm, M, N, K, ab, out, True)


# (M, N, K, bn, splits): K split in every tile (tile multiples, ragged, uneven ranges) and whole, both tiles
SPLIT_KN = [(128, 256, 512, 256, 2), (200, 144, 1008, 128, 3), (1000, 528, 4000, 256, 4), (512, 512, 8192, 128, 6),
            (200, 144, 1008, 128, 1), (1000, 528, 4000, 256, 1), (3000, 5008, 1024, 128, 1), (3000, 5008, 1024, 256, 2),
            (3000, 5008, 4000, 256, -1), (200, 144, 1008, 128, -1)]


@pytest.mark.parametrize("ab,out", [("e4m3", "bf16"), ("e5m2", "f32")])
@pytest.mark.parametrize("M,N,K,bn,splits", SPLIT_KN, ids=lambda v: str(v))
def test_gemm_fp8_b_kn_forced_plan(gemm, M, N, K, bn, splits, ab, out):
    """B given K x N with the tile and split forced: exact on two launches of one prepared GEMM (the
    second finds the counters the first zeroed)."""
    assert gemm.plan(M, N, K, bn, splits, kn=True)["splits"] == splits
    run_exact(gemm, M, N, K, ab, out, True, bn, splits, launches=2)


@pytest.mark.parametrize("M,N,K,bn", [(4096, 4096, 4096, 256), (3000, 5008, 4000, 128), (512, 512, 8192, 128)])
def test_gemm_fp8_b_kn_equals_nk(gemm, M, N, K, bn):
    """Random-normal e4m3 inputs: B given K x N gives the bits the N x K kernel gives for B^T (bf16 and
    f32 C) under the same plan -- the same wgmma over the same tiles, only B's path into shared memory
    differs -- and that C is within the fp8 bound of the float64 product."""
    torch = pytest.importorskip("torch")
    g = torch.Generator(device="cuda").manual_seed(M + N + K)
    A = torch.randn((M, K), device="cuda", generator=g).to(torch.float8_e4m3fn)
    B = torch.randn((K, N), device="cuda", generator=g).to(torch.float8_e4m3fn)
    Bt = B.t().contiguous()  # N x K
    scales = torch.tensor([0.37, 1.9], device="cuda", dtype=torch.float32)
    s = float(scales[0]) * float(scales[1])
    for out, t in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        got = {}
        for kn, b in ((True, B), (False, Bt)):
            C = torch.full((M, N), float("nan"), device="cuda", dtype=t)
            gemm.prepared("e4m3", out, A.data_ptr(), b.data_ptr(), C.data_ptr(), scales.data_ptr(),
                          scales.data_ptr() + 4, M, N, K, bn=bn, kn=kn)()
            torch.cuda.synchronize()
            got[kn] = C
        assert torch.equal(got[True].view(torch.int16 if out == "bf16" else torch.int32),
                           got[False].view(torch.int16 if out == "bf16" else torch.int32)), out
    ref = (A.double() @ B.double()) * s
    mag = (A.double().abs() @ B.double().abs()) * s
    assert bool(((got[True].double() - ref).abs() <= 2.0 ** -9 * mag + 2.0 ** -9 * ref.abs()).all())


def test_gemm_fp8_b_kn_refuses(gemm):
    """B given K x N: N not a multiple of 16 (B's rows not 16-byte aligned) and the 128 x 192 tile (no
    kernel) are refused, no launch."""
    d = cupy.zeros(64 * 64, dtype=np.float32)
    p = d.data.ptr
    with pytest.raises(RuntimeError):
        gemm.prepared("e4m3", "f32", p, p, p, p, p, 16, 24, 16, kn=True)
    with pytest.raises(RuntimeError):
        gemm.prepared("e4m3", "f32", p, p, p, p, p, 16, 16, 16, bn=192, kn=True)
    with pytest.raises(RuntimeError):
        gemm.plan(16, 16, 16, 192, kn=True)
    assert gemm.plan(3000, 5008, 4000, kn=True)["bn"] in (256, 128)
