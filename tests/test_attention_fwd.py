"""The forward-attention example (examples/kernels/attention_fwd.cu) without a GPU.

* It compiles for sm_90a from the generated headers alone (its static_asserts check that the tiles
  TMA writes are the tiles wgmma reads, that pack_operand() and the row reductions take the S
  accumulator's registers and that every row vector has one layout), without spills, without ptxas
  serialising the wgmma (C7514 / C7515 / C7517 / C7519), and the PTX of every kernel holds what the
  plans say: D / 16 wgmma m64n128k16 (S = Q K^T, shared A and B) and 8 wgmma m64nDk16 (O += P V,
  register A) at each of their two call sites, 3-D TMA loads of Q, K, V (D / 64 boxes each) and the O store, the producer's and consumers'
  register budgets.
* It runs on the host SIMT runtime (every generated line: 3-D TMA with zero fill and clipping, the
  mbarrier ring, both wgmma through their descriptors and registers, the reductions' shuffles, the
  staged O tile and its TMA store, the masked LSE store) at one tile and at two key tiles with ragged
  lengths, causal masks and grouped-query heads.  Two references: (a) the same online softmax in
  float64 with P rounded to the inputs' type per key tile as the kernel rounds it -- the kernel may
  differ by its f32 arithmetic only: |O - ref| <= 2 ulp of the 16-bit O (+ 2^-14 absolute), LSE within
  1e-4; (b) exact softmax attention in float64 (no rounding of P): within 2^-9 (f16) and 2^-6 (bf16)
  absolute on O (the GPU tests' tolerances; measured here 2.4e-4 and 6.5e-3), LSE within 1e-4, inputs
  N(0, 1).
"""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from ll_codegen.run import host
from ll_codegen.verify.emulate.reference import round16_bits
from toolchain import arch_flags, need, run

pytestmark = pytest.mark.compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = os.path.join(ROOT, "examples", "kernels", "attention_fwd.cu")
GENERATED = os.path.join(ROOT, "generated")
HEADERS = sorted([f"attention_{k}_{t}_d{d}.cuh" for k in ("tma", "qk", "pv") for t in ("f16", "bf16") for d in (64, 128)]
                 + ["attention_row_max.cuh", "attention_row_sum.cuh", "attention_store_lse.cuh"]
                 + [f"attention_{k}_d{d}.cuh" for k in ("o_rows", "stage_o") for d in (64, 128)])
KERNELS = {f"attention_fwd_{t}_d{d}{c}": (t, d) for t in ("f16", "bf16") for d in (64, 128) for c in ("", "_causal")}


def test_attention_fwd_compiles_from_generated_headers(tmp_path):
    nvcc = need("nvcc")
    with open(KERNEL) as f:
        src = f.read()
    assert sorted(re.findall(r'#include "([^"]+)"', src)) == HEADERS
    assert not re.search(r"\basm\s*(volatile\s*)?\(", src), "every instruction is a generated header's wrapper"
    flags = ["-std=c++17", "-O3", *arch_flags("sm_90a"), "-I", GENERATED]
    ptx_path = str(tmp_path / "a.ptx")
    rc, out = run([nvcc, *flags[:2], "-gencode", "arch=compute_90a,code=compute_90a", *flags[4:], "-ptx", "-o",
                   ptx_path, KERNEL], str(tmp_path))
    assert rc == 0 and not re.search(r"\bwarning\b", out, re.IGNORECASE), out
    rc, out = run([nvcc, *flags, "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "a.cubin"), KERNEL], str(tmp_path))
    assert rc == 0, out
    assert out.count("0 bytes spill stores, 0 bytes spill loads") == len(KERNELS), out
    assert not re.search(r"C75(14|15|17|19)", out), f"ptxas serialises the wgmma:\n{out}"
    with open(ptx_path) as f:
        ptx = f.read()
    parts = re.split(r"\.entry (\w+)\(", ptx)[1:]   # name, body, name, body, ...
    bodies = dict(zip(parts[::2], parts[1::2]))
    assert sorted(bodies) == sorted(KERNELS)
    for name, (t, d) in KERNELS.items():
        body = bodies[name]
        qk = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.{t}\.{t}\s", body)
        pv = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{d}k16\.f32\.{t}\.{t}\s", body)
        # each is issued at two places (the first round has no P V, the last no S)
        if d == 128:  # both are m64n128k16
            assert len(qk) == 2 * (d // 16 + 8), name
        else:
            assert (len(qk), len(pv)) == (2 * d // 16, 2 * 8), name
        loads = re.findall(r"cp\.async\.bulk\.tensor\.3d\.shared::cluster\.global\.mbarrier::complete_tx::bytes", body)
        assert len(loads) == 3 * (d // 64), name   # Q, K, V
        stores = re.findall(r"cp\.async\.bulk\.tensor\.3d\.global\.shared::cta", body)
        assert len(stores) == d // 64, name
        assert "setmaxnreg.dec.sync.aligned.u32 24" in body and "setmaxnreg.inc.sync.aligned.u32 240" in body


DRIVER = r"""
#include "%(kernel)s"
#include <cstdio>
#include <vector>

__attribute__((aligned(1024))) unsigned char smem[attention_fwd::smem_bytes(128)];

// driver IN OUT: IN = int32 dtype, d, causal, B, H, Hkv, Sq, Sk, f32 scale, then Q, K, V as 16-bit bits;
// OUT = O (16-bit bits), then LSE (f32).
int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* in = std::fopen(argv[1], "rb");
    int h[8];
    float scale;
    if (!in || std::fread(h, 4, 8, in) != 8 || std::fread(&scale, 4, 1, in) != 1) return 3;
    const int dtype = h[0], d = h[1], causal = h[2], B = h[3], H = h[4], Hkv = h[5], Sq = h[6], Sk = h[7];
    const size_t nq = size_t(B) * H * Sq * d, nk = size_t(B) * Hkv * Sk * d;
    std::vector<uint16_t> Q(nq), K(nk), V(nk), O(nq, 0xffff);  // NaN poison
    std::vector<float> L(size_t(B) * H * Sq, -1.0f);
    if (std::fread(Q.data(), 2, nq, in) != nq || std::fread(K.data(), 2, nk, in) != nk ||
        std::fread(V.data(), 2, nk, in) != nk) return 3;
    attention_fwd::Maps maps = {};
    if (int r = attention_fwd::encode(maps, dtype, d, Q.data(), K.data(), V.data(), O.data(), B * H, B * Hkv, Sq, Sk)) {
        std::printf("ERR encode %%d\n", r);
        return 4;
    }
    const attention_fwd::Kernel kernel = attention_fwd::kernel_of(dtype, d, causal);
    llgen_host::Dim3 grid;
    grid.x = unsigned((Sq + attention_fwd::BM - 1) / attention_fwd::BM), grid.y = unsigned(B * H), grid.z = 1;
    for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
            llgen_host::Dim3 bid;
            bid.x = x, bid.y = y;
            auto errors = llgen_host::launch(attention_fwd::THREADS, 32, smem, attention_fwd::smem_bytes(d), [&] {
                kernel(maps.q, maps.k, maps.v, maps.o, L.data(), H, H / Hkv, Sq, Sk, scale * 1.4426950408889634f);
            }, bid, grid);
            for (auto& e : errors) std::printf("ERR block (%%u, %%u): %%s\n", x, y, e.c_str());
            if (!errors.empty()) return 5;
        }
    FILE* out = std::fopen(argv[2], "wb");
    std::fwrite(O.data(), 2, O.size(), out);
    std::fwrite(L.data(), 4, L.size(), out);
    std::fclose(out);
    return 0;
}
"""

BN = 128


def _bits_to_f64(bits: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "f16":
        return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _round16(x: np.ndarray, dtype: str) -> np.ndarray:
    return _bits_to_f64(round16_bits(x.astype(np.float32), dtype=dtype), dtype)


def _masked_scores(q, k, causal):
    """Q K^T per (batch*head) with -inf where the key is masked (causal: key j > query i)."""
    s = q @ np.swapaxes(k, -1, -2)
    if causal:
        i = np.arange(s.shape[-2])[:, None]
        j = np.arange(s.shape[-1])[None, :]
        s = np.where(j > i, -np.inf, s)
    return s


def reference_online(q, k, v, scale, causal, dtype):
    """The kernel's algorithm in float64: per key tile of 128, m' = max(m, rowmax S), P = exp2((S - m') c)
    rounded to the inputs' type for P V (the row sum takes P unrounded), O and l rescaled by
    exp2((m - m') c); then O / l, and LSE = (m c + log2 l) ln 2."""
    c = scale * np.log2(np.e)
    s = _masked_scores(q, k, causal)
    rows = s.shape[:-1]
    m = np.full(rows, -np.inf)
    l = np.zeros(rows)
    o = np.zeros(rows + (v.shape[-1],))
    for n0 in range(0, s.shape[-1], BN):
        st = s[..., n0:n0 + BN]
        mn = np.maximum(m, st.max(axis=-1))
        shift = np.where(mn == -np.inf, 0.0, mn * c)
        alpha = np.exp2(m * c - shift)
        p = np.exp2(st * c - shift[..., None])
        l = alpha * l + p.sum(axis=-1)
        o = alpha[..., None] * o + _round16(p, dtype) @ v[..., n0:n0 + BN, :]
        m = mn
    return o / l[..., None], (m * c + np.log2(l)) * np.log(2.0)


def reference_exact(q, k, v, scale, causal):
    """softmax(Q K^T scale) V and logsumexp in float64."""
    s = _masked_scores(q, k, causal) * scale
    mx = s.max(axis=-1, keepdims=True)
    e = np.exp(s - mx)
    return (e / e.sum(axis=-1, keepdims=True)) @ v, (mx[..., 0] + np.log(e.sum(axis=-1)))


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    if host.compiler() is None:
        need("hipcc")  # Debian's hipcc brings clang++: skip (or fail under CI) with that reason
    d = str(tmp_path_factory.mktemp("attention_fwd_host"))
    path, log = host.build(d, [], exe="attention", sources=GENERATED, driver=DRIVER % {"kernel": KERNEL},
                           defines=["LLGEN_HOST_SIMT"], opt="-O0")  # -O0: compiles ~4x faster, runs as fast
    assert path, log
    return path, d


# (dtype, d, causal, B, H, Hkv, Sq, Sk): one tile; two key tiles (ragged), causal, grouped heads
CASES = [("f16", 64, False, 1, 1, 1, 128, 128),
         ("bf16", 128, True, 1, 2, 1, 100, 200),
         ("f16", 128, False, 1, 1, 1, 40, 250),
         ("bf16", 64, True, 1, 1, 1, 130, 130)]


@pytest.mark.parametrize("dtype,d,causal,B,H,Hkv,Sq,Sk", CASES)
def test_attention_fwd_on_host_simt(driver, dtype, d, causal, B, H, Hkv, Sq, Sk):
    path, wd = driver
    rng = np.random.default_rng(d + Sq + Sk + H)
    qb, kb, vb = (round16_bits(rng.standard_normal(shape).astype(np.float32), dtype=dtype)
                  for shape in ((B, H, Sq, d), (B, Hkv, Sk, d), (B, Hkv, Sk, d)))
    scale = 1.0 / np.sqrt(d)
    inp, outp = os.path.join(wd, "in.bin"), os.path.join(wd, "out.bin")
    with open(inp, "wb") as f:
        f.write(np.array([dtype == "bf16", d, causal, B, H, Hkv, Sq, Sk], dtype=np.int32).tobytes()
                + np.float32(scale).tobytes() + qb.tobytes() + kb.tobytes() + vb.tobytes())
    rc, out = run([path, inp, outp], wd)
    assert rc == 0, out
    raw = np.fromfile(outp, dtype=np.uint8)
    nq = B * H * Sq * d
    o = _bits_to_f64(raw[:2 * nq].view(np.uint16), dtype).reshape(B, H, Sq, d)
    lse = raw[2 * nq:].view(np.float32).astype(np.float64).reshape(B, H, Sq)

    q = _bits_to_f64(qb, dtype)
    k = np.repeat(_bits_to_f64(kb, dtype), H // Hkv, axis=1)
    v = np.repeat(_bits_to_f64(vb, dtype), H // Hkv, axis=1)
    want, want_lse = reference_online(q, k, v, scale, causal, dtype)
    ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(want), 2.0 ** -14))) - (10 if dtype == "f16" else 7))
    err = np.abs(o - want)
    assert np.all(err <= 2 * ulp + 2.0 ** -14), f"O vs the online reference: max {err.max():.3g}"
    assert np.abs(lse - want_lse).max() <= 1e-4
    exact, exact_lse = reference_exact(q, k, v, scale, causal)
    assert np.abs(o - exact).max() <= (2.0 ** -9 if dtype == "f16" else 2.0 ** -6)
    assert np.abs(lse - exact_lse).max() <= 1e-4
