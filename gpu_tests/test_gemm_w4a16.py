"""The W4A16 GEMM example (examples/kernels/gemm_w4a16.cu) on the GPU, bit for bit.

Y (M x N, bf16) = X (M x K, bf16) W^T with W = q * s: q int4 (-8 .. 7), one bf16 scale per 128 K of a
row; or mxfp4: W = e2m1 value * 2^(e - 127), one e8m0 exponent per 32 K of a row.  The weights are packed
offline by the generated numpy module of llgen chain's pre-shuffle (generated/w4a16_preshuffle_W_reorder.py),
the scales stored as S^T.  Exact inputs: X small integers,
scales powers of two, so every product and every f32 sum is exact and Y must equal the exact result
rounded to nearest even, bit for bit, whatever the order of the sums (the decode tile's two warp groups,
K split among CTAs).  Random-normal inputs: within the f32-accumulation bound of the float64 product
of the same bf16 operands; the weights RNE_bf16(q * s) (the upcast's one rounding), or at the decode
tile (M <= 16), whose int4 scales multiply each group's f32 sums, q * s exactly.  Built as users build
it (nvcc -O3 -arch=sm_90a) into a shared library called through its host entry points.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import subprocess
import weakref

import numpy as np
import pytest

from ll_codegen.verify.emulate.reference import round16_bits
from ll_codegen.verify.emulate.upcast import decode, half_values

cupy = pytest.importorskip("cupy")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = os.path.join(ROOT, "examples", "kernels", "gemm_w4a16.cu")
GROUP = 128


def reorder_module():
    """The generated offline reorder of the weights (llgen chain's pre-shuffle)."""
    path = os.path.join(ROOT, "generated", "w4a16_preshuffle_W_reorder.py")
    spec = importlib.util.spec_from_file_location("w4a16_reorder", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def pack(q: np.ndarray, s_bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """q (N x K, int -8 .. 7) and the scales' bf16 bits (N x K / 128) -> the kernel's weight buffer (the
    pre-shuffled packed bytes, tile (n / 64, k / 64) after tile) and S^T (K / 128 x N, uint16)."""
    codes = (np.asarray(q) & 0xF).astype(np.uint8)
    packed = reorder_module().reorder(codes).reshape(-1)
    return packed, np.ascontiguousarray(np.asarray(s_bits, dtype=np.uint16).T)


def natural(codes: np.ndarray) -> np.ndarray:
    """4-bit codes (N x K) row-major, two a byte (k even in the low nibble): what llgen_w4a16_pack and the
    -D LLGEN_W4A16_ROW_MAJOR=1 build read."""
    return np.ascontiguousarray(codes[:, 0::2] | codes[:, 1::2] << 4)


def row_major(q: np.ndarray) -> np.ndarray:
    """q (N x K, -8 .. 7) as the -D LLGEN_W4A16_ROW_MAJOR=1 build reads it."""
    return natural((np.asarray(q) & 0xF).astype(np.uint8))


def bound(ref: np.ndarray, mag: np.ndarray) -> np.ndarray:
    """The error a random-normal result may have: f32 sums (2^-16 of sum_k |x w|), then Y's rounding to
    bf16 (2^-8 |ref|)."""
    return 2.0 ** -16 * mag + np.abs(ref) * 2.0 ** -8


#: the decode tile's tokens at most: its int4 scales multiply each group's f32 sums, not the upcast's elements
DECODE_M = 16


def weights(q: np.ndarray, s_bits: np.ndarray, M: int = DECODE_M + 1) -> np.ndarray:
    """The weights Y = X W^T is computed with at M tokens, as float64: q * s exactly at the decode tile;
    otherwise the bf16 the upcast feeds wgmma, RNE_bf16(q * s) (q * s has up to 12 significant bits, so one
    rounding; exact for power-of-two scales)."""
    w = q * np.repeat(half_values(s_bits, "bf16"), GROUP, axis=1)
    return w if M <= DECODE_M else half_values(round16_bits(w, "bf16"), "bf16")


def build(directory: str, extra: tuple[str, ...] = ()) -> str:
    """nvcc -O3 -arch=sm_90a (the kernel's own build line) into a shared library; its path."""
    out = os.path.join(directory, "gemm_w4a16.so")
    subprocess.run(["nvcc", "-std=c++17", "-O3", "-arch=sm_90a", "-I", os.path.join(ROOT, "generated"), "-shared",
                    "-Xcompiler", "-fPIC", *extra, "-o", out, KERNEL], check=True, capture_output=True, text=True)
    return out


class Library:
    """The example's host entry points: ``llgen_w4a16_prepare`` / ``_launch`` / ``_release``."""

    def __init__(self, path: str):
        lib = ctypes.CDLL(path)
        lib.llgen_w4a16_prepare.argtypes = [ctypes.c_void_p, ctypes.c_int] + [ctypes.c_void_p] * 4 + [ctypes.c_int] * 4
        lib.llgen_w4a16_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.llgen_w4a16_release.argtypes = [ctypes.c_void_p]
        lib.llgen_w4a16_pack.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
        lib.llgen_w4a16_overlap.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.lib = lib

    def prepared(self, x: int, w: int, s: int, y: int, M: int, N: int, K: int, splits: int = 0,
                 stream=lambda: 0, mxfp4: bool = False, overlap: bool = False):
        """Tensor maps encoded and the workspace allocated now; the returned function launches on
        ``stream()`` (the workspace is freed when it is garbage, after a device synchronisation);
        ``overlap``: each launch may start under the kernel before it (llgen_w4a16_overlap)."""
        params = ctypes.create_string_buffer(self.lib.llgen_w4a16_params_size())
        if r := self.lib.llgen_w4a16_prepare(params, int(mxfp4), x, w, s, y, M, N, K, splits):
            self.lib.llgen_w4a16_release(params)
            raise RuntimeError(f"llgen_w4a16_prepare returned {r}")
        self.lib.llgen_w4a16_overlap(params, int(overlap))

        def go() -> None:
            if r := self.lib.llgen_w4a16_launch(params, stream()):
                raise RuntimeError(f"llgen_w4a16_launch returned {r}")
        weakref.finalize(go, release, self.lib.llgen_w4a16_release, params)
        return go


def release(free, params) -> None:
    cupy.cuda.runtime.deviceSynchronize()
    free(params)


def mxfp4_weights(codes: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The bf16 weights the mxfp4 upcast feeds wgmma: RNE_bf16(v * 2^(e - 127)), exact (v has 2 significant
    bits; the exponents here keep it normal), as float64."""
    return decode(codes, "e2m1") * np.repeat(2.0 ** (e.astype(np.float64) - 127), 32, axis=1)


def operands(M: int, N: int, K: int, exact: bool, seed: int, mxfp4: bool = False):
    """(X bf16 bits, the weights' 4-bit codes (N x K), the scales as the kernel reads them (S^T), the float64
    reference Y, the magnitudes sum_k |x w|).  int4: exact -- X in -4 .. 4, scales 2^-1 .. 2^2; else X
    random normal, q uniform, scales ~ 0.01 as a quantiser would give.  mxfp4: e2m1 codes uniform,
    exponents 2^-2 .. 2^2 (exact) or 2^-8 .. 2^0."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, size=(M, K)).astype(np.float64) if exact else rng.standard_normal((M, K))
    xb = round16_bits(x, "bf16")
    if mxfp4:
        codes = rng.integers(0, 16, size=(N, K)).astype(np.uint8)
        e = rng.integers(125, 130, size=(N, K // 32)) if exact else rng.integers(119, 128, size=(N, K // 32))
        e = e.astype(np.uint8)
        w, st = mxfp4_weights(codes, e), np.ascontiguousarray(e.T)
    else:
        q = rng.integers(-8, 8, size=(N, K))
        s = 2.0 ** rng.integers(-1, 3, size=(N, K // GROUP)) if exact else \
            np.abs(rng.standard_normal((N, K // GROUP))) * 0.01 + 0.001
        sb = round16_bits(s, "bf16")
        codes, w, st = (q & 0xF).astype(np.uint8), weights(q, sb, M), np.ascontiguousarray(sb.T)
    ref = half_values(xb, "bf16") @ w.T
    return xb, codes, st, ref, np.abs(half_values(xb, "bf16")) @ np.abs(w).T


def run(lib: Library, M: int, N: int, K: int, exact: bool, seed: int = 0, splits: int = 0,
        rm: bool = False, mxfp4: bool = False):
    """Y on the GPU, the reference and the magnitudes (sum_k |x w|); ``rm``: the row-major build's weights."""
    xb, codes, st, ref, mag = operands(M, N, K, exact, seed, mxfp4)
    packed = natural(codes) if rm else reorder_module().reorder(codes).reshape(-1)
    X, W, S = cupy.asarray(xb), cupy.asarray(packed), cupy.asarray(st)
    Y = cupy.full((M, N), 0xFFFF, dtype=cupy.uint16)      # NaN poison
    go = lib.prepared(X.data.ptr, W.data.ptr, S.data.ptr, Y.data.ptr, M, N, K, splits, mxfp4=mxfp4)
    go()
    cupy.cuda.runtime.deviceSynchronize()
    return cupy.asnumpy(Y), ref, mag


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return Library(build(str(tmp_path_factory.mktemp("w4a16"))))


SHAPES = [(1, 128, 256), (16, 128, 1024), (5, 256, 2048), (64, 512, 4096), (1, 8192, 8192), (16, 4096, 14336),
          (65, 256, 512), (300, 384, 1024), (256, 256, 256), (512, 1024, 2048)]


@pytest.mark.parametrize("M,N,K", SHAPES)
def test_gemm_w4a16_exact(lib, M, N, K):
    y, ref, _ = run(lib, M, N, K, exact=True)
    assert np.array_equal(y, round16_bits(ref, "bf16")), (M, N, K)


@pytest.mark.parametrize("splits", [1, 2, 3, 8])
def test_gemm_w4a16_split_k_exact_and_deterministic(lib, splits):
    M, N, K = 16, 256, 4096
    y, ref, _ = run(lib, M, N, K, exact=True, splits=splits)
    assert np.array_equal(y, round16_bits(ref, "bf16"))
    a, _, _ = run(lib, M, N, K, exact=False, seed=3, splits=splits)
    b, _, _ = run(lib, M, N, K, exact=False, seed=3, splits=splits)
    assert np.array_equal(a, b)


@pytest.mark.parametrize("M,N,K", [(1, 128, 256), (5, 256, 2048), (64, 512, 4096), (16, 4096, 14336),
                                   (300, 384, 1024), (512, 1024, 2048)])
def test_gemm_mxfp4_exact(lib, M, N, K):
    y, ref, _ = run(lib, M, N, K, exact=True, mxfp4=True)
    assert np.array_equal(y, round16_bits(ref, "bf16")), (M, N, K)


@pytest.mark.parametrize("mxfp4", [False, True], ids=["int4", "mxfp4"])
@pytest.mark.parametrize("M,N,K", [(1, 8192, 8192), (16, 4096, 14336), (4096, 1024, 4096)])
def test_gemm_w4a16_random_normal(lib, M, N, K, mxfp4):
    y, ref, mag = run(lib, M, N, K, exact=False, seed=1, mxfp4=mxfp4)
    err = np.abs(half_values(y, "bf16") - ref)
    b = bound(ref, mag)
    assert np.all(err <= b), float(np.max(err / b))


@pytest.mark.parametrize("M,splits", [(1, 0), (16, 3), (40, 0)])
def test_gemm_w4a16_overlapped_chain(lib, M, splits):
    """Overlapped launches (programmatic dependent launch) in a chain: each layer's X is the layer before's Y
    (NaN-poisoned until written), so a launch that read X, or wrote Y or the split-K workspace, before the
    kernel before it completed would give NaN or a wrong sum.  Four layers of the same square weights;
    each layer's Y within the f32 bound of the float64 product of the Y the GPU gave the layer before."""
    N = K = 1024
    xb, codes, st, _, _ = operands(M, N, K, exact=True, seed=11)
    W, S = cupy.asarray(reorder_module().reorder(codes).reshape(-1)), cupy.asarray(st)
    w = weights(codes.astype(np.int64) - 16 * (codes >= 8), st.T, M)
    ys = [cupy.asarray(xb)] + [cupy.full((M, N), 0xFFFF, dtype=cupy.uint16) for _ in range(4)]
    gos = [lib.prepared(ys[i].data.ptr, W.data.ptr, S.data.ptr, ys[i + 1].data.ptr, M, N, K, splits, overlap=True)
           for i in range(4)]
    for go in gos:
        go()
    cupy.cuda.runtime.deviceSynchronize()
    for i in range(4):
        x = half_values(cupy.asnumpy(ys[i]), "bf16")
        ref = x @ w.T
        err = np.abs(half_values(cupy.asnumpy(ys[i + 1]), "bf16") - ref)
        assert np.all(err <= bound(ref, np.abs(x) @ np.abs(w).T)), i


def test_gemm_w4a16_pack_on_device_equals_numpy_reorder(lib):
    """llgen_w4a16_pack (the chain's generated CUDA reorder) packs as the generated numpy module does."""
    N, K = 256, 512
    q = np.random.default_rng(5).integers(-8, 8, size=(N, K))
    codes = (q & 0xF).astype(np.uint8)
    src = cupy.asarray(natural(codes))
    out = cupy.zeros(N * K // 2, dtype=cupy.uint8)
    assert lib.lib.llgen_w4a16_pack(src.data.ptr, out.data.ptr, N, K, 0) == 0
    cupy.cuda.runtime.deviceSynchronize()
    assert np.array_equal(cupy.asnumpy(out), pack(q, np.zeros((N, K // GROUP), np.uint16))[0])


@pytest.fixture(scope="module")
def lib_row_major(tmp_path_factory):
    return Library(build(str(tmp_path_factory.mktemp("w4a16_rm")), ("-DLLGEN_W4A16_ROW_MAJOR=1",)))


@pytest.mark.parametrize("mxfp4", [False, True], ids=["int4", "mxfp4"])
@pytest.mark.parametrize("M,N,K", [(1, 128, 256), (16, 256, 2048), (64, 512, 4096), (300, 384, 1024)])
def test_gemm_w4a16_row_major_weights_exact(lib_row_major, M, N, K, mxfp4):
    """The -D LLGEN_W4A16_ROW_MAJOR=1 build (the identity choice bench_mixed.py times the pre-shuffle against)."""
    y, ref, _ = run(lib_row_major, M, N, K, exact=True, rm=True, mxfp4=mxfp4)
    assert np.array_equal(y, round16_bits(ref, "bf16")), (M, N, K)


def test_gemm_w4a16_refuses_bad_shapes(lib):
    params = ctypes.create_string_buffer(lib.lib.llgen_w4a16_params_size())
    for M, N, K in [(0, 128, 256), (1, 64, 256), (1, 128, 128)]:
        assert lib.lib.llgen_w4a16_prepare(params, 0, 0, 0, 0, 0, M, N, K, 0) != 0
    assert lib.lib.llgen_w4a16_prepare(params, 2, 0, 0, 0, 0, 16, 128, 256, 0) != 0   # no format 2
