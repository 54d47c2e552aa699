"""The forward-attention example built from generated headers (``examples/kernels/attention_fwd.cu``)
against softmax attention in float64 on the same inputs.

The reference is ``torch.nn.functional.scaled_dot_product_attention`` in float64 (K and V repeated
for grouped-query heads; ``is_causal`` is top-left aligned, as the kernel's mask) and the row
log-sum-exp of the scaled, masked scores in float64.  Inputs are N(0, 1) rounded to the kernel's type;
the kernel rounds P to that type before P V and O at the end, so the tolerances are per dtype:
|O - ref| <= 2^-9 (f16) and 2^-6 (bf16) absolute (|O| < ~1), |LSE - ref| <= 1e-3.  Variants: head dims
64, 128 and 256 (128 x 64 tiles), f16 and bf16, causal and not, sequence lengths that are and are not multiples of the tile
(queries and keys apart), grouped-query heads, several batches; the tiles as shipped (d 64: 192 query
rows, three consumer warp groups, 128 keys; d 128: 128 x 128) and the -D knobs' other tiles (128 x 128 at
d 64; 192-key tiles, a 128-key and a 64-key part, at d 64 and d 128, causal and not; P V with P from
shared memory at d 64, 192 x 192 non-causal).  The example is built with nvcc into
a shared library and called through its host entry points with ctypes (``Library``) on torch tensors.

fp8 (e4m3 Q, K, V at head dims 64 and 128, O bf16, FA3's descale_q/k/v): the example (P and V's keys
relabelled by llgen chain) and the build with the keys in their own order at d 128 (-D
LLGEN_ATTENTION_FP8_IDENTITY=1; its d 64 kernels are the chain's)
against (a) the online softmax in float64 with 128-key tiles and P rounded to e4m3 by torch as the kernel
rounds it, on the same e4m3 inputs: |O - ref| <= 2^-6 (bf16's tolerance) for all but FP8_FLIPS (0.1%) of
O's elements -- a P value whose f32 score (the fp8 wgmma's accumulation) and exp2 land it on the other
side of an e4m3 rounding boundary than float64 does moves its row of O by one e4m3 ulp of P, which (b)
bounds; (b) exact attention in float64 of the e4m3 values: |O - ref| per row within
sum_k max(2^-3 p_k, 2^-9) |v_k| dv / l (one e4m3 ulp of every P: its rounding, either way) + 2^-7 |ref|
(bf16 O) + 2^-10, every element; LSE within 1e-3.
"""
from __future__ import annotations

import ctypes
import math
import os
import shutil
import subprocess
import sys
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
E4M3 = torch.float8_e4m3fn
DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1, E4M3: 2}  # the library's dtype argument
LSE_TOL = 1e-3


def build(directory: str, extra: tuple[str, ...] = (), kernel: str = KERNEL) -> str:
    """nvcc -O3 -arch=sm_90a (the kernel's own build line) of ``kernel`` (the example) into a shared
    library; its path."""
    os.makedirs(directory, exist_ok=True)
    out = os.path.join(directory, "attention_fwd.so")
    subprocess.run(["nvcc", "-std=c++17", "-O3", "-arch=sm_90a", "-I", os.path.join(ROOT, "generated"), "-shared",
                    "-Xcompiler", "-fPIC", *extra, "-o", out, kernel], check=True, capture_output=True, text=True)
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
        lib.llgen_attention_fwd_prepare_scaled.argtypes = ([ctypes.c_void_p] + [ctypes.c_int] * 3 + ptrs + ints
                                                           + [ctypes.c_float] * 4)
        self.lib = lib

    @staticmethod
    def _args(q, k, v, o, lse, causal, scale):
        B, H, Sq, d = q.shape
        Hkv, Sk = k.shape[1], k.shape[2]
        scale = 1.0 / math.sqrt(d) if scale is None else scale
        return (DTYPE_CODE[q.dtype], d, int(causal), q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                None if lse is None else lse.data_ptr(), B, H, Hkv, Sq, Sk, scale)

    def status(self, q, k, v, o, lse=None, causal=False, scale=None) -> int:
        """O (and LSE) of q, k, v on the default stream; the library's result (0, or an error code)."""
        return self.lib.llgen_attention_fwd(*self._args(q, k, v, o, lse, causal, scale), None)

    def run(self, *args, **kw) -> None:
        if r := self.status(*args, **kw):
            raise RuntimeError(f"llgen_attention_fwd returned {r}")

    def prepared(self, q, k, v, o, lse=None, causal=False, scale=None, stream=lambda: 0, descales=None):
        """The tensor maps encoded now; the returned function launches on ``stream()``.  ``descales``:
        (descale_q, descale_k, descale_v) through llgen_attention_fwd_prepare_scaled (fp8)."""
        params = ctypes.create_string_buffer(self.lib.llgen_attention_fwd_params_size())
        args = self._args(q, k, v, o, lse, causal, scale)
        r = (self.lib.llgen_attention_fwd_prepare(params, *args) if descales is None
             else self.lib.llgen_attention_fwd_prepare_scaled(params, *args, *descales))
        if r:
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
    builds = {"example": (), **VARIANTS, **FP8_VARIANTS}
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
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("B,H,Hkv,Sq,Sk", SHAPES)
def test_attention_fwd_against_float64(attn, B, H, Hkv, Sq, Sk, d, causal, dtype):
    check(attn, B, H, Hkv, Sq, Sk, d, dtype, causal, seed=B * 1000 + H * 100 + Sq + Sk + d)


# Builds of the hand-written control's -D knobs other than the defaults: the same attention within the
# same tolerances.
VARIANTS = {"no_overlap_2_stages_slack0": ("-DLLGEN_ATTENTION_OVERLAP=0", "-DLLGEN_ATTENTION_STAGES_D64=2",
                                           "-DLLGEN_ATTENTION_RESCALE_SLACK=0"),
            "slack8": ("-DLLGEN_ATTENTION_RESCALE_SLACK=8",),
            "tile_128x128": ("-DLLGEN_ATTENTION_BM_D64=128",),
            "causal_128": ("-DLLGEN_ATTENTION_BM_CAUSAL_D64=128",),
            "keys_192": ("-DLLGEN_ATTENTION_BM_D64=128", "-DLLGEN_ATTENTION_BM_CAUSAL_D64=128", "-DLLGEN_ATTENTION_BN_D64=192",
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
    """Head dims other than 64/128/256 (fp8: 64/128), heads not a multiple of the K/V heads, empty sequences, a
    non-positive scale: an error code, no launch."""
    q, k, v = inputs(1, 3, 2, 64, 64, 64, torch.float16, 1)
    o = torch.empty_like(q)
    assert attn.status(q, k, v, o) != 0                      # 3 heads over 2 K/V heads
    q, k, v = inputs(1, 2, 1, 64, 64, 32, torch.float16, 1)
    assert attn.status(q, k, v, torch.empty_like(q)) != 0    # d = 32
    q, k, v = inputs(1, 2, 1, 64, 64, 64, torch.float16, 1)
    assert attn.status(q, k, v, torch.empty_like(q), scale=0.0) != 0


# ---- fp8: e4m3 Q, K, V at head dims 64 and 128, O bf16 ----

FP8_VARIANTS = {"fp8_identity": ("-DLLGEN_ATTENTION_FP8_IDENTITY=1",)}
FP8_DESCALES = (0.5, 0.25, 2.0)  # descale_q, descale_k, descale_v
FP8_KEYS = 128                   # the fp8 kernels' key tile
FP8_FLIPS = 1e-3                 # the fraction of O's elements allowed past 2^-6 from the online reference


def fp8_inputs(B: int, H: int, Hkv: int, Sq: int, Sk: int, seed: int, descales=FP8_DESCALES, d: int = 128):
    """N(0, 1) q, k, v divided by their descales and rounded to e4m3 (torch's round-to-nearest-even;
    |x| / descale stays far below 448): the stored tensors, [B, H, Sq, d] and [B, Hkv, Sk, d]."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    return tuple((torch.randn(shape, device="cuda", generator=g) / ds).to(E4M3)
                 for shape, ds in (((B, H, Sq, d), descales[0]), ((B, Hkv, Sk, d), descales[1]),
                                   ((B, Hkv, Sk, d), descales[2])))


def fp8_references(q8, k8, v8, causal: bool, descales=FP8_DESCALES, scale: float | None = None, rows=None):
    """(online O, exact O, the exact O's error bound, LSE) in float64 for the stored e4m3 tensors: the
    online softmax with FP8_KEYS-key tiles and P rounded to e4m3 per tile (the kernel's algorithm); exact
    softmax attention of the e4m3 values; the bound of the docstring above.  ``rows``: the query rows
    (a tensor of indices; default every row) -- the results are of those rows only."""
    dq, dk, dv = descales
    group = q8.shape[1] // k8.shape[1]
    rows = torch.arange(q8.shape[2], device=q8.device) if rows is None else rows
    q = q8[:, :, rows].double() * dq
    k = k8.double().repeat_interleave(group, 1) * dk
    v = v8.double().repeat_interleave(group, 1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(torch.arange(k.shape[2], device=s.device)[None, :] > rows[:, None], float("-inf"))
    mx = s.amax(dim=-1, keepdim=True)
    pe = torch.exp(s - mx)
    le = pe.sum(dim=-1, keepdim=True)
    exact = pe / le @ v * dv
    bound = (torch.clamp(pe * 2.0 ** -3, min=2.0 ** -9) @ v.abs()) * dv / le + 2.0 ** -7 * exact.abs() + 2.0 ** -10
    m = torch.full(s.shape[:-1], float("-inf"), dtype=torch.float64, device=s.device)
    l = torch.zeros_like(m)
    o = torch.zeros(s.shape[:-1] + (v.shape[-1],), dtype=torch.float64, device=s.device)
    for n0 in range(0, s.shape[-1], FP8_KEYS):
        st = s[..., n0:n0 + FP8_KEYS]
        mn = torch.maximum(m, st.amax(dim=-1))
        safe = torch.where(mn == float("-inf"), torch.zeros_like(mn), mn)
        alpha = torch.exp(m - safe)
        p = torch.exp(st - safe[..., None])
        l = alpha * l + p.sum(dim=-1)
        o = alpha[..., None] * o + p.to(E4M3).double() @ v[..., n0:n0 + FP8_KEYS, :]
        m = mn
    return o / l[..., None] * dv, exact, bound, (mx[..., 0] + torch.log(le[..., 0]))


def check_fp8(lib, B, H, Hkv, Sq, Sk, d, causal, seed, descales=FP8_DESCALES):
    q8, k8, v8 = fp8_inputs(B, H, Hkv, Sq, Sk, seed, descales, d)
    o = torch.full((B, H, Sq, d), float("nan"), dtype=torch.bfloat16, device="cuda")
    lse = torch.full((B, H, Sq), float("nan"), device="cuda")
    lib.prepared(q8, k8, v8, o, lse, causal, descales=descales)()
    torch.cuda.synchronize()
    online, exact, bound, want_lse = fp8_references(q8, k8, v8, causal, descales)
    far = ((o.double() - online).abs() > TOL[torch.bfloat16]).double().mean().item()
    assert far <= FP8_FLIPS, f"O vs the e4m3-rounded online reference: {far:.3g} of O past 2^-6"
    over = ((o.double() - exact).abs() - bound).max().item()
    assert over <= 0.0, f"O vs exact attention: {over:.3g} past the bound"
    lerr = (lse.double() - want_lse).abs().max().item()
    assert lerr <= LSE_TOL, f"LSE: max |err| {lerr:.3g}"


def check_rows_fp8(q8, k8, v8, o, lse, causal: bool, descales=FP8_DESCALES) -> tuple[float, float, float]:
    """On the first and last 128 query rows of (batch, head) (0, 0) and of the last pair (the bench's
    sample): the fraction of O past 2^-6 from the online reference (<= FP8_FLIPS passes), the largest
    excess of |O - exact ref| over its bound (<= 0 passes) and max |LSE - ref|."""
    S = q8.shape[2]
    rows = torch.unique(torch.cat([torch.arange(0, min(128, S)), torch.arange(max(S - 128, 0), S)])).to(q8.device)
    far, over, lerr = [], float("-inf"), float("-inf")
    for b, h in ((0, 0), (q8.shape[0] - 1, q8.shape[1] - 1)):
        hk = h // (q8.shape[1] // k8.shape[1])
        sl = (slice(b, b + 1), slice(h, h + 1))
        kv = (slice(b, b + 1), slice(hk, hk + 1))
        online, exact, bound, want_lse = fp8_references(q8[sl], k8[kv], v8[kv], causal, descales, rows=rows)
        got = o[sl][:, :, rows].double()
        far.append(((got - online).abs() > TOL[torch.bfloat16]).double().mean().item())
        over = max(over, ((got - exact).abs() - bound).max().item())
        lerr = max(lerr, (lse[sl][:, :, rows].double() - want_lse).abs().max().item())
    return sum(far) / len(far), over, lerr


@pytest.fixture(scope="module", params=["example", *sorted(FP8_VARIANTS)])
def attn_fp8(request, builds):
    return Library(builds[request.param])


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("B,H,Hkv,Sq,Sk", SHAPES)
def test_attention_fwd_fp8_against_float64(attn_fp8, B, H, Hkv, Sq, Sk, d, causal):
    """The chain's relabelled keys and the keys in their own order: ragged lengths, grouped heads, causal."""
    check_fp8(attn_fp8, B, H, Hkv, Sq, Sk, d, causal, seed=B * 1000 + H * 100 + Sq + Sk + d + 11)


def test_attention_fwd_fp8_descales_and_refusals(attn):
    """Descales 1 through llgen_attention_fwd (dtype 2); an fp8 head dim other than 64 and 128 and a
    non-positive descale refused (an error code, no launch)."""
    q8, k8, v8 = fp8_inputs(1, 2, 1, 300, 400, 5, (1.0, 1.0, 1.0))
    o = torch.full((1, 2, 300, 128), float("nan"), dtype=torch.bfloat16, device="cuda")
    attn.run(q8, k8, v8, o, None, True)
    torch.cuda.synchronize()
    online, exact, bound, _ = fp8_references(q8, k8, v8, True, (1.0, 1.0, 1.0))
    assert ((o.double() - online).abs() > TOL[torch.bfloat16]).double().mean().item() <= FP8_FLIPS
    assert ((o.double() - exact).abs() - bound).max().item() <= 0.0
    q32 = torch.zeros((1, 1, 64, 32), device="cuda").to(E4M3)
    assert attn.status(q32, q32, q32, torch.empty((1, 1, 64, 32), dtype=torch.bfloat16, device="cuda")) != 0
    params = ctypes.create_string_buffer(attn.lib.llgen_attention_fwd_params_size())
    assert attn.lib.llgen_attention_fwd_prepare_scaled(params, *attn._args(q8, k8, v8, o, None, False, None),
                                                       1.0, 0.0, 1.0) != 0


SANITIZE = """
import ctypes, sys, numpy as np, cupy
lib = ctypes.CDLL({lib!r})
lib.llgen_attention_fwd.argtypes = [ctypes.c_int] * 3 + [ctypes.c_void_p] * 5 + [ctypes.c_int] * 5 + [ctypes.c_float,
                                                                                                   ctypes.c_void_p]
rng = np.random.default_rng(3)
CASES = ((0, 64, 1, 1, 2, 1, 200, 333), (1, 128, 0, 1, 1, 1, 128, 300), (0, 64, 0, 2, 2, 2, 256, 256),
         (2, 128, 1, 1, 2, 1, 300, 400), (2, 64, 0, 1, 2, 2, 129, 257), (1, 256, 1, 1, 2, 1, 200, 333))  # dtype, d, causal, B, H, Hkv, Sq, Sk
for dt, d, causal, B, H, Hkv, Sq, Sk in CASES:
    def tensor(heads, S):
        if dt == 2:  # e4m3 codes of magnitude below 16 (no NaN), either sign
            return cupy.asarray((rng.integers(0, 0x50, (B, heads, S, d)) | (rng.integers(0, 2, (B, heads, S, d)) << 7)).astype(np.uint8))
        x = rng.standard_normal((B, heads, S, d)).astype(np.float32)
        return cupy.asarray(x.astype(np.float16) if dt == 0 else (x.view(np.uint32) >> 16).astype(np.uint16))
    q, k, v = tensor(H, Sq), tensor(Hkv, Sk), tensor(Hkv, Sk)
    o = cupy.zeros((B, H, Sq, d), dtype=np.uint16)
    lse = cupy.zeros((B, H, Sq), dtype=np.float32)
    for _ in range(2):
        r = lib.llgen_attention_fwd(dt, d, causal, q.data.ptr, k.data.ptr, v.data.ptr, o.data.ptr, lse.data.ptr,
                                    B, H, Hkv, Sq, Sk, d ** -0.5, None)
        assert r == 0, r
    cupy.cuda.runtime.deviceSynchronize()
    assert np.isfinite(lse.get()).all(), (dt, d, causal)
print("sanitized ok")
"""


@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_attention_fwd_under_compute_sanitizer(tool, tmp_path):
    """compute-sanitizer --tool memcheck / racecheck / synccheck on small launches of every input type
    (f16, bf16, e4m3 with the chain's V transpose by the producer warp group), causal or not, ragged
    lengths, grouped heads, two launches each: 0 errors (racecheck: 0 hazards).  The command:
    compute-sanitizer --tool TOOL --error-exitcode 1 python SCRIPT (SCRIPT: SANITIZE, CuPy and ctypes);
    LLGEN_ATTENTION_LIB names a library built already (the example, `build`'s command line)."""
    cs = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not os.path.exists(cs):
        pytest.skip("no compute-sanitizer")
    path = os.environ.get("LLGEN_ATTENTION_LIB") or build(str(tmp_path))
    script = tmp_path / "sanitize_attention.py"
    script.write_text(SANITIZE.format(lib=path))
    r = subprocess.run([cs, "--tool", tool, "--error-exitcode", "1", sys.executable, str(script)], check=False,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and "sanitized ok" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    summary = "RACECHECK SUMMARY: 0 hazards" if tool == "racecheck" else "ERROR SUMMARY: 0 errors"
    assert summary in r.stdout + r.stderr, r.stdout[-3000:]
