"""The forward-attention example built from generated headers (``examples/kernels/attention_fwd.cu``)
against softmax attention in float64 on the same inputs.

The reference is ``torch.nn.functional.scaled_dot_product_attention`` in float64 (K and V repeated
for grouped-query heads; ``is_causal`` is top-left aligned, as the kernel's mask) and the row
log-sum-exp of the scaled, masked scores in float64.  Inputs are N(0, 1) rounded to the kernel's type;
the kernel rounds P to that type before P V and O at the end, so the tolerances are per dtype:
|O - ref| <= 2^-9 (f16) and 2^-6 (bf16) absolute (|O| < ~1), |LSE - ref| <= 1e-3.  Variants: head dims
64 and 128, f16 and bf16, causal and not, sequence lengths that are and are not multiples of the tile
(queries and keys apart), grouped-query heads, several batches; the tiles as shipped (d 64: 192 query
rows, three consumer warp groups, 128 keys; d 128: 128 x 128) and the -D knobs' other tiles (128 x 128 at
d 64; 192-key tiles, a 128-key and a 64-key part, at d 64 and d 128, causal and not; P V with P from
shared memory at d 64, 192 x 192 non-causal).  The example is built with nvcc into
a shared library and called through its host entry points with ctypes (``Library``) on torch tensors.
"""
from __future__ import annotations

import ctypes
import math
import os
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from ll_codegen.run import gpu

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = os.path.join(ROOT, "examples", "kernels", "attention_fwd.cu")
TOL = {torch.float16: 2.0 ** -9, torch.bfloat16: 2.0 ** -6}
LSE_TOL = 1e-3


def build(directory: str, extra: tuple[str, ...] = ()) -> str:
    """nvcc -O3 -arch=sm_90a (the kernel's own build line) into a shared library; its path."""
    os.makedirs(directory, exist_ok=True)
    out = os.path.join(directory, "attention_fwd.so")
    subprocess.run(["nvcc", "-std=c++17", "-O3", "-arch=sm_90a", "-I", os.path.join(ROOT, "generated"), "-shared",
                    "-Xcompiler", "-fPIC", *extra, "-o", out, KERNEL], check=True, capture_output=True, text=True)
    return out


class Library:
    """The example's host entry points: ``llgen_attention_fwd`` (tensor maps encoded, then the launch)
    and ``llgen_attention_fwd_prepare`` / ``_launch`` (encoded once, launched often).  Tensors are
    contiguous torch CUDA tensors [B, H, S, d]; ``lse`` a float32 [B, H, Sq] tensor or None."""

    def __init__(self, path: str):
        lib = ctypes.CDLL(path)
        ptrs = [ctypes.c_void_p] * 5
        ints = [ctypes.c_int] * 5
        lib.llgen_attention_fwd.argtypes = [ctypes.c_int] * 3 + ptrs + ints + [ctypes.c_float, ctypes.c_void_p]
        lib.llgen_attention_fwd_prepare.argtypes = [ctypes.c_void_p] + [ctypes.c_int] * 3 + ptrs + ints + [ctypes.c_float]
        lib.llgen_attention_fwd_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.lib = lib

    @staticmethod
    def _args(q, k, v, o, lse, causal, scale):
        B, H, Sq, d = q.shape
        Hkv, Sk = k.shape[1], k.shape[2]
        scale = 1.0 / math.sqrt(d) if scale is None else scale
        return (int(q.dtype == torch.bfloat16), d, int(causal), q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                None if lse is None else lse.data_ptr(), B, H, Hkv, Sq, Sk, scale)

    def status(self, q, k, v, o, lse=None, causal=False, scale=None) -> int:
        """O (and LSE) of q, k, v on the default stream; the library's result (0, or an error code)."""
        return self.lib.llgen_attention_fwd(*self._args(q, k, v, o, lse, causal, scale), None)

    def run(self, *args, **kw) -> None:
        if r := self.status(*args, **kw):
            raise RuntimeError(f"llgen_attention_fwd returned {r}")

    def prepared(self, q, k, v, o, lse=None, causal=False, scale=None, stream=lambda: 0):
        """The tensor maps encoded now; the returned function launches on ``stream()``."""
        params = ctypes.create_string_buffer(self.lib.llgen_attention_fwd_params_size())
        if r := self.lib.llgen_attention_fwd_prepare(params, *self._args(q, k, v, o, lse, causal, scale)):
            raise RuntimeError(f"llgen_attention_fwd_prepare returned {r}")

        def go() -> None:
            if r := self.lib.llgen_attention_fwd_launch(params, stream()):
                raise RuntimeError(f"llgen_attention_fwd_launch returned {r}")
        return go


def inputs(B: int, H: int, Hkv: int, Sq: int, Sk: int, d: int, dtype, seed: int):
    """N(0, 1) q [B, H, Sq, d], k and v [B, Hkv, Sk, d] of ``dtype``, on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn((B, H, Sq, d), device="cuda", generator=g).to(dtype)
    k = torch.randn((B, Hkv, Sk, d), device="cuda", generator=g).to(dtype)
    v = torch.randn((B, Hkv, Sk, d), device="cuda", generator=g).to(dtype)
    return q, k, v


def reference(q, k, v, causal: bool, scale: float | None = None):
    """(O, LSE) in float64: SDPA on the same inputs (K/V heads repeated for grouped queries) and the
    log-sum-exp of the scaled scores with the same (top-left) causal mask."""
    group = q.shape[1] // k.shape[1]
    q64, k64, v64 = q.double(), k.double().repeat_interleave(group, 1), v.double().repeat_interleave(group, 1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    o = torch.nn.functional.scaled_dot_product_attention(q64, k64, v64, is_causal=causal, scale=scale)
    s = (q64 @ k64.transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return o, torch.logsumexp(s, dim=-1)


def check(lib, B, H, Hkv, Sq, Sk, d, dtype, causal, seed, scale=None):
    q, k, v = inputs(B, H, Hkv, Sq, Sk, d, dtype, seed)
    o = torch.full_like(q, float("nan"))
    lse = torch.full((B, H, Sq), float("nan"), device="cuda")
    lib.run(q, k, v, o, lse, causal, scale)
    torch.cuda.synchronize()
    want, want_lse = reference(q, k, v, causal, scale)
    err = (o.double() - want).abs().max().item()
    lerr = (lse.double() - want_lse).abs().max().item()
    assert err <= TOL[dtype], f"O: max |err| {err:.3g} > {TOL[dtype]:.3g}"
    assert lerr <= LSE_TOL, f"LSE: max |err| {lerr:.3g}"


@pytest.fixture(scope="module")
def builds():
    """The example and every variant of VARIANTS, built at once (nvcc runs in parallel): name -> .so path."""
    builds = {"example": (), **VARIANTS}
    with tempfile.TemporaryDirectory() as d, ThreadPoolExecutor(len(builds)) as pool:
        paths = pool.map(lambda item: build(os.path.join(d, item[0]), item[1]), builds.items())
        yield dict(zip(builds, paths))


@pytest.fixture(scope="module")
def attn(builds):
    return Library(builds["example"])


DTYPES = [torch.float16, torch.bfloat16]
SHAPES = [  # B, H, Hkv, Sq, Sk
    (1, 1, 1, 128, 128), (2, 3, 3, 256, 256), (1, 2, 2, 1024, 1024), (1, 1, 1, 100, 100), (2, 2, 2, 200, 333),
    (1, 2, 2, 333, 129), (1, 1, 1, 1, 1), (1, 1, 1, 1, 700), (1, 1, 1, 513, 17), (2, 8, 2, 300, 300),
    (1, 6, 1, 640, 640), (1, 4, 4, 2048, 2048), (1, 2, 1, 576, 577)]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("B,H,Hkv,Sq,Sk", SHAPES)
def test_attention_fwd_against_float64(attn, B, H, Hkv, Sq, Sk, d, causal, dtype):
    check(attn, B, H, Hkv, Sq, Sk, d, dtype, causal, seed=B * 1000 + H * 100 + Sq + Sk + d)


# Builds of the hand-written control's -D knobs other than the defaults: the same attention within the
# same tolerances (the exp2 polynomial's relative error, < 8.8e-5, is below P's 16-bit rounding).
VARIANTS = {"no_overlap_2_stages_slack0": ("-DLLGEN_ATTENTION_OVERLAP=0", "-DLLGEN_ATTENTION_STAGES_D64=2",
                                           "-DLLGEN_ATTENTION_RESCALE_SLACK=0"),
            "exp2_fma_slack8": ("-DLLGEN_ATTENTION_EXP2_FMA_D64=3", "-DLLGEN_ATTENTION_EXP2_FMA_D128=8",
                                "-DLLGEN_ATTENTION_RESCALE_SLACK=8"),
            "tile_128x128": ("-DLLGEN_ATTENTION_BM_D64=128",),
            "causal_192": ("-DLLGEN_ATTENTION_BM_CAUSAL_D64=192",),
            "keys_192": ("-DLLGEN_ATTENTION_BM_D64=128", "-DLLGEN_ATTENTION_BN_D64=192",
                         "-DLLGEN_ATTENTION_BN_D128=192", "-DLLGEN_ATTENTION_BN_CAUSAL_D64=192",
                         "-DLLGEN_ATTENTION_BN_CAUSAL_D128=192"),
            "d128_keys_192_no_overlap": ("-DLLGEN_ATTENTION_BN_D128=192", "-DLLGEN_ATTENTION_BN_CAUSAL_D128=192",
                                         "-DLLGEN_ATTENTION_OVERLAP=0"),
            "p_smem_keys_192": ("-DLLGEN_ATTENTION_P_SMEM_D64=1", "-DLLGEN_ATTENTION_BN_D64=192")}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def attn_variant(request, builds):
    return Library(builds[request.param])


@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("B,H,Hkv,Sq,Sk", [(2, 2, 2, 200, 333), (1, 1, 1, 1, 700), (2, 8, 2, 300, 300),
                                         (1, 4, 4, 2048, 2048)])
def test_attention_fwd_control_variants_against_float64(attn_variant, B, H, Hkv, Sq, Sk, d, causal, dtype):
    check(attn_variant, B, H, Hkv, Sq, Sk, d, dtype, causal, seed=B * 1000 + H * 100 + Sq + Sk + d + 1)


def test_attention_fwd_scale_and_prepared_launch(attn):
    """A scale other than 1/sqrt(d), through prepare + launch on torch's stream, launched twice."""
    q, k, v = inputs(1, 2, 1, 384, 500, 128, torch.bfloat16, 7)
    o = torch.empty_like(q)
    lse = torch.empty((1, 2, 384), device="cuda")
    go = attn.prepared(q, k, v, o, lse, True, 0.3, stream=lambda: torch.cuda.current_stream().cuda_stream)
    go()
    go()
    torch.cuda.synchronize()
    want, want_lse = reference(q, k, v, True, 0.3)
    assert (o.double() - want).abs().max().item() <= TOL[torch.bfloat16]
    assert (lse.double() - want_lse).abs().max().item() <= LSE_TOL


def test_attention_fwd_without_lse(attn):
    q, k, v = inputs(1, 1, 1, 130, 130, 64, torch.float16, 3)
    o = torch.empty_like(q)
    attn.run(q, k, v, o, None, False)
    torch.cuda.synchronize()
    assert (o.double() - reference(q, k, v, False)[0]).abs().max().item() <= TOL[torch.float16]


def test_attention_fwd_refuses_bad_arguments(attn):
    """Head dims other than 64/128, heads not a multiple of the K/V heads, empty sequences, a
    non-positive scale: an error code, no launch."""
    q, k, v = inputs(1, 3, 2, 64, 64, 64, torch.float16, 1)
    o = torch.empty_like(q)
    assert attn.status(q, k, v, o) != 0                      # 3 heads over 2 K/V heads
    q, k, v = inputs(1, 2, 1, 64, 64, 32, torch.float16, 1)
    assert attn.status(q, k, v, torch.empty_like(q)) != 0    # d = 32
    q, k, v = inputs(1, 2, 1, 64, 64, 64, torch.float16, 1)
    assert attn.status(q, k, v, torch.empty_like(q), scale=0.0) != 0
