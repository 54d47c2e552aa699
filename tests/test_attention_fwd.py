"""The forward-attention example (examples/kernels/attention_fwd.cu) without a GPU.

* It compiles for sm_90a from the generated headers alone (its static_asserts check that the tiles
  TMA writes are the tiles wgmma reads, that pack_operand() and the row reductions take the S
  accumulators' registers and that every row vector has one layout), without spills, without ptxas
  serialising the wgmma (C7511 / C7512 / C7514 / C7515 / C7517 / C7519), and the PTX of every kernel
  holds what the plans and its tile (BM query rows: BM / 64 consumer warp groups; BN keys: 128, or
  192 = 128 + 64) say: D / 16 wgmma m64n128k16 (S = Q K^T, shared A and B; with D / 16 m64n64k16 more
  for a 192-key tile) and 8 wgmma m64nDk16 (O += P V, register A; 4 more for a 192-key tile) at each of
  their two call sites, 3-D TMA loads of the Q tiles (BM / 64 tiles of D / 64 boxes each), K and V (D / 64
  boxes each, twice for a 192-key tile) and the O store, the producer's and consumers' register
  budgets (setmaxnreg 24, then 240 with 2 consumer groups, 160 with 3), registers at entry within the
  64K-register file over the block's threads.  Built as shipped (all 16 kernels) and with the -D knobs of
  the other tiles (the 128 x 128 tile at d 64, 192-key tiles, P from shared memory at d 64), each of those
  with only the kernels its knobs change (LLGEN_ATTENTION_DISABLE_* for the rest: the PTX's entries are
  exactly the kernels built).
* It runs on the host SIMT runtime (every generated line: 3-D TMA with zero fill and clipping, the
  mbarrier ring, both wgmma through their descriptors and registers, the reductions' shuffles, the
  staged O tiles and their TMA stores, the masked LSE store) at one tile and at two key tiles with
  ragged lengths (not multiples of BM or BN), causal masks and grouped-query heads, as shipped (BM 192 at
  d 64 non-causal), with BM 192 causal at d 64, with 192-key tiles (d 64 with BM 128, d 128 non-causal and causal) and with the 192 x 192 tile
  at d 64 with P from shared memory (the staged P tiles and wgmma from shared A).  Two references: (a)
  the same online softmax in float64, key tiles of the kernel's BN, with P rounded to the inputs' type
  per key tile as the kernel rounds it -- the kernel may differ by its f32 arithmetic only: |O - ref| <=
  2 ulp of the 16-bit O (+ 2^-14 absolute), LSE within 1e-4; (b) exact softmax attention in float64 (no
  rounding of P): within 2^-9 (f16) and 2^-6 (bf16) absolute on O (the GPU tests' tolerances), LSE
  within 1e-4, inputs N(0, 1).  Each host driver is built with only the (type, head dim) of its cases
  (LLGEN_ATTENTION_DISABLE_* for the others): kernel_of() offers exactly those two kernels, and refuses
  the others (test_attention_fwd_disabled_kernels_refused_on_host_simt).
* fp8 (e4m3 Q, K, V, O bf16, head dims 64 and 128): compiled without spills in both builds (llgen chain's
  relabelled keys, and -D LLGEN_ATTENTION_FP8_IDENTITY=1), the PTX's e4m3 wgmma, TMA, cvt and setmaxnreg
  counts, and its shuffles: the row reductions' alone with the chain's S -> P, those plus the plain
  conversion's with the identity keys (d 128); run on the host SIMT runtime (one to four key tiles, ragged,
  causal, GQA, descales) against an online reference that rounds P to e4m3 as the kernel does (2 bf16 ulp)
  and exact attention within a per-row bound of P's e4m3 rounding (test_attention_fwd_fp8_on_host_simt).
"""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from ll_codegen.api import reduce_files
from ll_codegen.run import host
from ll_codegen.verify.emulate.reference import round16_bits
from toolchain import need, nvcc_cubin, run

pytestmark = pytest.mark.compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = os.path.join(ROOT, "examples", "kernels", "attention_fwd.cu")
GENERATED = os.path.join(ROOT, "generated")
HEADERS = sorted([f"attention_{k}_{t}_d{d}.cuh" for k in ("tma_q", "tma", "qk", "qk_n64", "pv", "pv_k64")
                  for t in ("f16", "bf16") for d in (64, 128)]
                 + [f"attention_{k}_{t}_d256.cuh" for k in ("tma_q", "qk_n64", "pv_k64") for t in ("f16", "bf16")]
                 + [f"attention_{k}_{t}_d64.cuh" for k in ("pv_ss", "pv_ss_k64") for t in ("f16", "bf16")]
                 + [f"attention_{k}.cuh" for k in ("row_max", "row_sum", "row_max_n64", "row_sum_n64", "store_lse",
                                                   "stage_p", "stage_p_n64")]
                 + [f"attention_{k}_d{d}.cuh" for k in ("o_rows", "stage_o") for d in (64, 128, 256)]
                 + [f"attention_{k}_e4m3_d{d}.cuh" for k in ("tma_q", "tma", "qk", "pv") for d in (64, 128)]
                 + ["attention_fp8_chain_0_S_to_P.cuh", "attention_fp8_chain_1_Vm_to_Vk.cuh",
                    "attention_fp8_chain_2_Vm64_to_Vk64.cuh", "attention_fp8_chain_indices.cuh",
                    "attention_p_e4m3_identity.cuh", "attention_v_e4m3_identity_d128.cuh"])
KERNELS16 = [(t, d, c) for t in ("f16", "bf16") for d in (64, 128, 256) for c in (False, True)]
KERNELS_FP8 = [("e4m3", d, c) for d in (64, 128) for c in (False, True)]
KERNELS = KERNELS16 + KERNELS_FP8
#: setmaxnreg of the fp8 kernels' warp groups: the producer transposes V (96), two consumer groups (200: the budgets add up to at most the 168 registers a thread holds at launch)
FP8_REGS = (96, 200)

# The tile (BM, BN) per (d, causal) of a build: as shipped, then the -D knobs of the other tiles.
SHIPPED = {(64, False): (192, 128), (64, True): (192, 128), (128, False): (128, 128), (128, True): (128, 128),
           (256, False): (128, 64), (256, True): (128, 64)}
BUILDS = {
    "shipped": ((), SHIPPED),
    # d 64 with 128 query rows: the 128 x 128 tile, causal or not (one build for both)
    "rows_swapped": (("LLGEN_ATTENTION_BM_D64=128", "LLGEN_ATTENTION_BM_CAUSAL_D64=128"),
                     {**SHIPPED, (64, False): (128, 128), (64, True): (128, 128)}),
    "keys_192": (("LLGEN_ATTENTION_BM_D64=128", "LLGEN_ATTENTION_BM_CAUSAL_D64=128", "LLGEN_ATTENTION_BN_D64=192",
                  "LLGEN_ATTENTION_BN_D128=192", "LLGEN_ATTENTION_BN_CAUSAL_D64=192", "LLGEN_ATTENTION_BN_CAUSAL_D128=192"),
                 {(d, c): (128, 192) for d in (64, 128) for c in (False, True)}),
    "p_smem": (("LLGEN_ATTENTION_P_SMEM_D64=1",), SHIPPED),
    # fp8 with the keys in their own order (the plain S -> P conversion, with shuffles)
    "fp8_identity": (("LLGEN_ATTENTION_FP8_IDENTITY=1",), SHIPPED),
    # FlashAttention-3's non-causal d 64 tile: ptxas spills there (not compiled by the test below)
    "p_smem_keys_192": (("LLGEN_ATTENTION_P_SMEM_D64=1", "LLGEN_ATTENTION_BN_D64=192"),
                        {**SHIPPED, (64, False): (192, 192)}),
}
SPILL_FREE = ["fp8_identity", "keys_192", "p_smem", "rows_swapped", "shipped"]
#: the (input types, head dims) of the kernels each nvcc build compiles: as shipped all, else those its knobs
#: change (rows_swapped, p_smem: d 64 16-bit; keys_192: 16-bit; fp8_identity: e4m3 d 128, its d 64 kernels
#: are the chain's as shipped)
COMPILED = {"shipped": (("f16", "bf16", "e4m3"), (64, 128, 256)), "rows_swapped": (("f16", "bf16"), (64,)),
            "keys_192": (("f16", "bf16"), (64, 128)), "p_smem": (("f16", "bf16"), (64,)),
            "fp8_identity": (("e4m3",), (128,))}
#: the type knob of LLGEN_ATTENTION_DISABLE_<knob> and the dtype argument of kernel_of() per input type
TYPE_KNOB = {"f16": "F16", "bf16": "BF16", "e4m3": "FP8"}
DTYPE_CODE = {"f16": 0, "bf16": 1, "e4m3": 2}
FP8_TILE = (128, 128)  # BM x BN of the fp8 kernels in every build


def disable_knobs(types: tuple[str, ...], dims: tuple[int, ...]) -> list[str]:
    """The -D knobs that leave out every kernel whose input type is not in ``types`` or head dim not in
    ``dims`` (the kernels built: types x dims x causal or not)."""
    return ([f"LLGEN_ATTENTION_DISABLE_{TYPE_KNOB[t]}=1" for t in TYPE_KNOB if t not in types]
            + [f"LLGEN_ATTENTION_DISABLE_D{d}=1" for d in (64, 128, 256) if d not in dims])


def kernel_name(t: str, d: int, causal: bool) -> str:
    return f"attention_fwd_{t}_d{d}{'_causal' if causal else ''}"


def wgmma(ptx: str, n: int, t: str) -> int:
    """The wgmma m64n{n}k16 with f32 accumulator and {t} inputs in a kernel's PTX."""
    return len(re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{n}k16\.f32\.{t}\.{t}\s", ptx))


@pytest.mark.parametrize("build", SPILL_FREE)
def test_attention_fwd_compiles_from_generated_headers(tmp_path, build, example_build):
    with open(KERNEL) as f:
        src = f.read()
    assert sorted(re.findall(r'#include "([^"]+)"', src)) == HEADERS
    assert not re.search(r"\basm\s*(volatile\s*)?\(", src), "every instruction is a generated header's wrapper"
    knobs, tiles = BUILDS[build]
    types, dims = COMPILED[build]
    built = [k for k in KERNELS if k[0] in types and k[1] in dims]
    # one compile: the sm_90a cubin with ptxas's report, and the compute_90a PTX it was assembled from kept;
    # as shipped, the users' build (nvcc -arch=sm_90a -c, shared with tests/test_nvcc_arch_flags.py)
    if build == "shipped":
        rc, out, keep = example_build(KERNEL)
        ptx_path = os.path.join(keep, "attention_fwd.compute_90a.ptx")
    else:
        cmd, ptx_path = nvcc_cubin(need("nvcc"), KERNEL, "sm_90a", str(tmp_path / "a"),
                                   ["-O3", "-I", GENERATED,
                                    *[f"-D{k}" for k in (*knobs, *disable_knobs(types, dims))], "-Xptxas", "-v"])
        rc, out = run(cmd, str(tmp_path))
    assert rc == 0 and not re.search(r"\bwarning\b", out, re.IGNORECASE), out
    assert out.count("0 bytes spill stores, 0 bytes spill loads") == len(built), out
    assert not re.search(r"C75(11|12|14|15|17|19)", out), f"ptxas serialises the wgmma:\n{out}"
    # registers at entry: 65536 / threads, rounded down to a multiple of 8 (168 with 384 threads, 128 with 512)
    for (t, d, c) in built:
        consumers = (FP8_TILE if t == "e4m3" else tiles[(d, c)])[0] // 64
        regs = re.search(rf"Compiling entry function '{kernel_name(t, d, c)}'.*?Used (\d+) registers", out, re.S)
        assert regs and int(regs.group(1)) <= 65536 // (128 * (1 + consumers)) // 8 * 8, out
    with open(ptx_path) as f:
        ptx = f.read()
    parts = re.split(r"\.entry (\w+)\(", ptx)[1:]   # name, body, name, body, ...
    bodies = dict(zip(parts[::2], parts[1::2]))
    assert sorted(bodies) == sorted(kernel_name(*k) for k in built)
    for (t, d, c) in (k for k in built if k in KERNELS16):
        name = kernel_name(t, d, c)
        body = bodies[name]
        bm, bn = tiles[(d, c)]
        split = bn == 192
        # each is issued at two places (the first round has no P V, the last no S)
        qk, qk1, pv, pv1 = 2 * d // 16, 2 * d // 16 if split else 0, 2 * 8, 2 * 4 if split else 0
        if d == 256:  # one 64-key part: S m64n64k16 (16 k-steps), O m64n256k16 (4)
            assert (wgmma(body, 64, t), wgmma(body, 256, t), wgmma(body, 128, t)) == (2 * 16, 2 * 4, 0), name
        elif d == 128:  # S and O are both m64n128k16; the 64-key parts m64n64k16 (S) and m64n128k16 (O)
            assert (wgmma(body, 128, t), wgmma(body, 64, t)) == (qk + pv + pv1, qk1), name
        else:         # O and the 64-key part of S are m64n64k16
            assert (wgmma(body, 128, t), wgmma(body, 64, t)) == (qk, qk1 + pv + pv1), name
        loads = re.findall(r"cp\.async\.bulk\.tensor\.3d\.shared::cluster\.global\.mbarrier::complete_tx::bytes", body)
        assert len(loads) == (d // 64) * (bm // 64 + 2 * (2 if split else 1)), name  # Q per group, K, V (+ 64-key parts)
        stores = re.findall(r"cp\.async\.bulk\.tensor\.3d\.global\.shared::cta", body)
        assert len(stores) == d // 64, name
        assert _exponentials(body) == (bn, 2 * 2), name
        consumer_regs = 240 if bm == 128 else 160
        assert ("setmaxnreg.dec.sync.aligned.u32 24" in body
                and f"setmaxnreg.inc.sync.aligned.u32 {consumer_regs}" in body), name
    # fp8: S = Q K^T as d / 32 wgmma m64n128k32 e4m3 and O += P V as 4 m64n{d}k32, at two call sites
    # each; TMA loads of the two Q tiles, and of K and V in the producer's issue() inlined at its two
    # call sites; the bf16 O store (d / 64 boxes of 64 columns); P rounded by 32 cvt e4m3x2 a tile (two
    # sites); the setmaxnreg budgets.  Shuffles: with the chain's relabelling S -> P has none, so the
    # kernel's are the row reductions' alone (the max and the sum of S at both softmax sites: their
    # plans' xor rounds x rows); with the keys in their own order (the identity build, head dim 128)
    # the plain conversion adds its shuffles at both P sites.
    reductions = 2 * sum(_reduce_shuffles(op) for op in ("max", "sum"))
    p_shuffles = 0 if build != "fp8_identity" else 2 * _header_shuffles("attention_p_e4m3_identity.cuh")
    for (t, d, c) in (k for k in built if k in KERNELS_FP8):
        name = kernel_name(t, d, c)
        body = bodies[name]
        def e4m3(n: int) -> int:
            return len(re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{n}k32\.f32\.e4m3\.e4m3\s", body))
        if d == 128:
            assert (e4m3(128), e4m3(64)) == (2 * 4 + 2 * 4, 0), name
        else:
            assert (e4m3(128), e4m3(64)) == (2 * 2, 2 * 4), name
        assert wgmma(body, 128, "bf16") == 0 and wgmma(body, 64, "bf16") == 0, name
        loads = re.findall(r"cp\.async\.bulk\.tensor\.3d\.shared::cluster\.global\.mbarrier::complete_tx::bytes", body)
        assert len(loads) == 2 + 2 * 2, name
        assert len(re.findall(r"cp\.async\.bulk\.tensor\.3d\.global\.shared::cta", body)) == d // 64, name
        assert body.count("cvt.rn.satfinite.e4m3x2.f32") == 2 * 32, name
        assert _exponentials(body) == (128, 2 * 2), name
        assert (f"setmaxnreg.dec.sync.aligned.u32 {FP8_REGS[0]}" in body
                and f"setmaxnreg.inc.sync.aligned.u32 {FP8_REGS[1]}" in body), name
        assert reductions > 0 and body.count("shfl.sync") == reductions + (p_shuffles if d == 128 else 0), name
    if build == "fp8_identity":
        assert p_shuffles > 0


def _exponentials(body: str) -> tuple[int, int]:
    """(ex2.approx.ftz, other ex2) in a kernel's PTX: the softmax's P = 2^(S c - m c) is the row max
    header's exp2_sub, one ex2.approx.ftz a score at both softmax sites (BN scores a thread in all:
    64 x BN over 128 threads, twice); only the two rows' O rescale factors take exp2f's ex2.approx.f32."""
    ftz = body.count("ex2.approx.ftz.f32")
    return ftz, body.count("ex2.approx") - ftz


def _reduce_shuffles(op: str) -> int:
    """The warp shuffles of one row reduction of S (attention_row_max / _sum), as its plan counts them."""
    plan = reduce_files("examples/attention/s_acc.yaml", (1,), op, "f32", "cuda", "sm_90a", root=ROOT).plan
    return len(plan.lane_xors) * plan.n_dst


def _header_shuffles(header: str) -> int:
    """The warp shuffles one call of a generated conversion issues (its __shfl_sync lines)."""
    with open(os.path.join(GENERATED, header)) as f:
        return f.read().count("__shfl_sync(")


DRIVER = r"""
#include "%(kernel)s"
#include <cstdio>
#include <vector>

__attribute__((aligned(1024))) unsigned char smem[attention_fwd::MAX_SMEM_BYTES];

// driver IN OUT: IN = int32 dtype (0 f16, 1 bf16, 2 e4m3), d, causal, B, H, Hkv, Sq, Sk, f32 scale,
// descale_q, descale_k, descale_v, then Q, K, V as bits (2 bytes, e4m3 1); OUT = O (16-bit bits), then
// LSE (f32).  The scales as llgen_attention_fwd_prepare_scaled computes them.
int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* in = std::fopen(argv[1], "rb");
    int h[8];
    float sc[4];
    if (!in || std::fread(h, 4, 8, in) != 8 || std::fread(sc, 4, 4, in) != 4) return 3;
    const int dtype = h[0], d = h[1], causal = h[2], B = h[3], H = h[4], Hkv = h[5], Sq = h[6], Sk = h[7];
    // the kernels this build offers: kernel_of's fn is nullptr for the ones it leaves out
    for (int t = 0; t < 3; ++t)
        for (int dd : {64, 96, 128, 256})
            for (int c = 0; c < 2; ++c)
                if (attention_fwd::kernel_of(t, dd, c).fn) std::printf("KERNEL %%d %%d %%d\n", t, dd, c);
    const attention_fwd::Kernel kernel = attention_fwd::kernel_of(dtype, d, causal);
    if (!kernel.fn) {
        std::printf("ERR no kernel\n");
        return 6;
    }
    const float scale_log2 = sc[0] * sc[1] * sc[2] * 1.4426950408889634f, o_scale = sc[3];
    const size_t nq = size_t(B) * H * Sq * d, nk = size_t(B) * Hkv * Sk * d, eb = dtype == 2 ? 1 : 2;
    std::vector<unsigned char> Q(nq * eb), K(nk * eb), V(nk * eb);
    std::vector<uint16_t> O(nq, 0xffff);  // NaN poison
    std::vector<float> L(size_t(B) * H * Sq, -1.0f);
    if (std::fread(Q.data(), eb, nq, in) != nq || std::fread(K.data(), eb, nk, in) != nk ||
        std::fread(V.data(), eb, nk, in) != nk) return 3;
    attention_fwd::Maps maps = {};
    if (int r = attention_fwd::encode(maps, dtype, d, Q.data(), K.data(), V.data(), O.data(), B * H, B * Hkv, Sq, Sk)) {
        std::printf("ERR encode %%d\n", r);
        return 4;
    }
    // the grid as llgen_attention_fwd_launch gives it
    const bool heads_first = attention_fwd::heads_first(causal, Sq, kernel.bm);
    const unsigned blocks = unsigned((Sq + kernel.bm - 1) / kernel.bm), bh = unsigned(B * H);
    llgen_host::Dim3 grid;
    grid.x = heads_first ? bh : blocks, grid.y = heads_first ? blocks : bh, grid.z = 1;
    for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
            llgen_host::Dim3 bid;
            bid.x = x, bid.y = y;
            auto errors = llgen_host::launch(kernel.threads, 32, smem, kernel.smem_bytes, [&] {
                kernel.fn(maps.q, maps.k, maps.v, maps.o, maps.k1, maps.v1, L.data(), H, H / Hkv, Sq, Sk,
                          scale_log2, o_scale, heads_first);
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


def reference_online(q, k, v, scale, causal, dtype, bn):
    """The kernel's algorithm in float64: per key tile of bn keys, m' = max(m, rowmax S), P = exp2((S - m') c)
    rounded to the inputs' type for P V (the row sum takes P unrounded), O and l rescaled by
    exp2((m - m') c); then O / l, and LSE = (m c + log2 l) ln 2."""
    c = scale * np.log2(np.e)
    s = _masked_scores(q, k, causal)
    rows = s.shape[:-1]
    m = np.full(rows, -np.inf)
    l = np.zeros(rows)
    o = np.zeros(rows + (v.shape[-1],))
    for n0 in range(0, s.shape[-1], bn):
        st = s[..., n0:n0 + bn]
        mn = np.maximum(m, st.max(axis=-1))
        shift = np.where(mn == -np.inf, 0.0, mn * c)
        alpha = np.exp2(m * c - shift)
        p = np.exp2(st * c - shift[..., None])
        l = alpha * l + p.sum(axis=-1)
        o = alpha[..., None] * o + _round16(p, dtype) @ v[..., n0:n0 + bn, :]
        m = mn
    return o / l[..., None], (m * c + np.log2(l)) * np.log(2.0)


def reference_exact(q, k, v, scale, causal):
    """softmax(Q K^T scale) V and logsumexp in float64."""
    s = _masked_scores(q, k, causal) * scale
    mx = s.max(axis=-1, keepdims=True)
    e = np.exp(s - mx)
    return (e / e.sum(axis=-1, keepdims=True)) @ v, (mx[..., 0] + np.log(e.sum(axis=-1)))


@pytest.fixture(scope="module")
def drivers(tmp_path_factory):
    """The host SIMT driver of (build, input type, head dim): the build's knobs with only that type's and
    head dim's two kernels (causal or not), compiled when a test first asks for it."""
    if host.compiler() is None:
        need("hipcc")  # Debian's hipcc brings clang++: skip (or fail under CI) with that reason
    built = {}

    def get(build: str, dtype: str, d: int) -> tuple[str, str]:
        key = (build, dtype, d)
        if key not in built:
            wd = str(tmp_path_factory.mktemp(f"attention_fwd_host_{build}_{dtype}_d{d}"))
            # the headers' element-by-element agreement asserts are evaluated by the nvcc builds of this
            # module (three quarters of a host compile): skipped here
            path, log = host.build(wd, [], exe="attention", sources=GENERATED, driver=DRIVER % {"kernel": KERNEL},
                                   defines=["LLGEN_HOST_SIMT", "LLGEN_ATTENTION_SKIP_AGREEMENT_CHECKS=1",
                                            *BUILDS[build][0], *disable_knobs((dtype,), (d,))],
                                   opt="-O0")  # -O0: compiles ~4x faster, runs as fast
            assert path, log
            built[key] = path, wd
        return built[key]
    return get


def run_driver(path: str, wd: str, inp: str, outp: str, dtype: str, d: int) -> None:
    """Run a driver of (dtype, d) on ``inp``: it succeeds, and kernel_of() offers exactly its two kernels."""
    rc, out = run([path, inp, outp], wd)
    assert rc == 0, out
    offered = {tuple(int(x) for x in m) for m in re.findall(r"^KERNEL (\d+) (\d+) (\d+)$", out, re.M)}
    assert offered == {(DTYPE_CODE[dtype], d, 0), (DTYPE_CODE[dtype], d, 1)}, out


# (build, dtype, d, causal, B, H, Hkv, Sq, Sk): one key tile; two key tiles (ragged: Sq and Sk not
# multiples of BM or BN), causal (a key tile wholly after the first consumer group's rows when BM >
# BN; the 192-key tile's 64-key part wholly masked), grouped heads; a consumer group wholly past Sq.
CASES = [("shipped", "f16", 64, False, 1, 1, 1, 128, 100),
         ("shipped", "bf16", 128, True, 1, 2, 1, 100, 200),
         ("shipped", "f16", 128, False, 1, 1, 1, 40, 250),
         ("rows_swapped", "bf16", 64, True, 1, 1, 1, 130, 130),
         ("keys_192", "f16", 64, False, 1, 1, 1, 200, 250),
         ("keys_192", "bf16", 128, True, 1, 2, 1, 200, 230),
         ("p_smem_keys_192", "bf16", 64, False, 1, 1, 1, 250, 300),
         ("shipped", "bf16", 256, True, 1, 2, 1, 100, 130)]


@pytest.mark.parametrize("build,dtype,d,causal,B,H,Hkv,Sq,Sk", CASES)
def test_attention_fwd_on_host_simt(drivers, build, dtype, d, causal, B, H, Hkv, Sq, Sk):
    path, wd = drivers(build, dtype, d)
    rng = np.random.default_rng(d + Sq + Sk + H)
    qb, kb, vb = (round16_bits(rng.standard_normal(shape).astype(np.float32), dtype=dtype)
                  for shape in ((B, H, Sq, d), (B, Hkv, Sk, d), (B, Hkv, Sk, d)))
    scale = 1.0 / np.sqrt(d)
    inp, outp = os.path.join(wd, "in.bin"), os.path.join(wd, "out.bin")
    with open(inp, "wb") as f:
        f.write(np.array([dtype == "bf16", d, causal, B, H, Hkv, Sq, Sk], dtype=np.int32).tobytes()
                + np.array([scale, 1, 1, 1], dtype=np.float32).tobytes() + qb.tobytes() + kb.tobytes() + vb.tobytes())
    run_driver(path, wd, inp, outp, dtype, d)
    raw = np.fromfile(outp, dtype=np.uint8)
    nq = B * H * Sq * d
    o = _bits_to_f64(raw[:2 * nq].view(np.uint16), dtype).reshape(B, H, Sq, d)
    lse = raw[2 * nq:].view(np.float32).astype(np.float64).reshape(B, H, Sq)

    q = _bits_to_f64(qb, dtype)
    k = np.repeat(_bits_to_f64(kb, dtype), H // Hkv, axis=1)
    v = np.repeat(_bits_to_f64(vb, dtype), H // Hkv, axis=1)
    want, want_lse = reference_online(q, k, v, scale, causal, dtype, BUILDS[build][1][(d, causal)][1])
    ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(want), 2.0 ** -14))) - (10 if dtype == "f16" else 7))
    err = np.abs(o - want)
    assert np.all(err <= 2 * ulp + 2.0 ** -14), f"O vs the online reference: max {err.max():.3g}"
    assert np.abs(lse - want_lse).max() <= 1e-4
    exact, exact_lse = reference_exact(q, k, v, scale, causal)
    assert np.abs(o - exact).max() <= (2.0 ** -9 if dtype == "f16" else 2.0 ** -6)
    assert np.abs(lse - exact_lse).max() <= 1e-4


@pytest.mark.parametrize("dtype,d,causal", [("bf16", 64, False), ("e4m3", 64, True), ("f16", 128, False),
                                            ("f16", 128, True), ("e4m3", 128, False)])
def test_attention_fwd_disabled_kernels_refused_on_host_simt(drivers, dtype, d, causal):
    """The driver built with only f16 d 64 (the first case's: LLGEN_ATTENTION_DISABLE_BF16, _FP8, _D128)
    has no kernel for another type or head dim: kernel_of()'s fn is nullptr, the driver stops before
    reading the tensors (exit 6), while its f16 d 64 kernels run (test_attention_fwd_on_host_simt)."""
    path, wd = drivers("shipped", "f16", 64)
    inp, outp = os.path.join(wd, "in_refused.bin"), os.path.join(wd, "out_refused.bin")
    with open(inp, "wb") as f:  # the header alone: a kernel that ran would fail reading Q
        f.write(np.array([DTYPE_CODE[dtype], d, causal, 1, 1, 1, 64, 64], dtype=np.int32).tobytes()
                + np.array([0.125, 1, 1, 1], dtype=np.float32).tobytes())
    rc, out = run([path, inp, outp], wd)
    assert rc == 6 and "ERR no kernel" in out, out
    assert set(re.findall(r"^KERNEL (\d+) (\d+) (\d+)$", out, re.M)) == {("0", "64", "0"), ("0", "64", "1")}, out
    assert not os.path.exists(outp)


# ---- fp8 (e4m3 Q, K, V; O bf16) ----

def e4m3_values() -> np.ndarray:
    """The float64 value of every e4m3 code 0 .. 255, from the format (1 sign bit, 4 exponent bits biased
    by 7, 3 mantissa bits; exponent 0 subnormal; S.1111.111 NaN, no infinity; 448 the largest)."""
    c = np.arange(256)
    e, m = (c >> 3) & 15, c & 7
    v = np.where(e == 0, m / 8 * 2.0 ** -6, (1 + m / 8) * 2.0 ** (e - 7.0))
    v = np.where(c & 0x80, -v, v)
    v[(c & 0x7F) == 0x7F] = np.nan
    return v


def round_e4m3(x: np.ndarray) -> np.ndarray:
    """The e4m3 codes of x rounded to nearest, ties to even, saturating at +-448 (cvt.rn.satfinite)."""
    vals = e4m3_values()[:127]                       # codes 0 .. 126: 0 .. 448 ascending
    a = np.minimum(np.abs(x), 448.0)
    i = np.clip(np.searchsorted(vals, a), 1, 126)    # vals[i - 1] < a <= vals[i] (a > 0)
    lo, hi = vals[i - 1], vals[i]
    code = np.where((hi - a < a - lo) | ((hi - a == a - lo) & (i % 2 == 0)), i, i - 1)
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def fp8_scale_log2(scale: float, dq: float, dk: float) -> np.float32:
    """scale descale_q descale_k log2(e) in f32, in llgen_attention_fwd_prepare_scaled's order."""
    f = np.float32
    return f(f(f(f(scale) * f(dq)) * f(dk)) * f(1.4426950408889634))


def reference_online_fp8(q, k, v, c32, dv, causal, bn):
    """The kernel's algorithm with its f32 steps where a rounding to e4m3 follows them: S exact (the
    inputs keep Q K^T exact in f32, see fp8_inputs), x = fma(S, c, -shift) rounded to f32 once,
    P = exp2(x) rounded to f32, then P rounded to e4m3 for P V (the row sum takes P unrounded); O / l
    times descale_v.  The rest in float64."""
    f32 = np.float32
    s = _masked_scores(q, k, causal)
    rows = s.shape[:-1]
    m = np.full(rows, -np.inf)
    l = np.zeros(rows)
    o = np.zeros(rows + (v.shape[-1],))
    for n0 in range(0, s.shape[-1], bn):
        st = s[..., n0:n0 + bn]
        mn = np.maximum(m, st.max(axis=-1))
        shift = np.where(mn == -np.inf, 0.0, (mn.astype(f32) * c32).astype(np.float64))
        alpha = np.exp2((m.astype(f32) * c32).astype(np.float64) - shift)
        with np.errstate(invalid="ignore"):
            x = (st * float(c32) - shift[..., None]).astype(f32)
        p = np.exp2(x.astype(np.float64)).astype(f32).astype(np.float64)
        l = alpha * l + p.sum(axis=-1)
        o = alpha[..., None] * o + e4m3_values()[round_e4m3(p)] @ v[..., n0:n0 + bn, :]
        m = mn
    return o / l[..., None] * dv, (m * float(c32) + np.log2(l)) * np.log(2.0)


def fp8_inputs(rng, shape):
    """e4m3 codes of N(0, 1.5^2) samples with |x| in [2^-3, 4]: every product of two is a multiple of
    2^-12 of magnitude <= 16, so a 128-term dot product is exact in f32 (<= 2^23 units) -- S = Q K^T is
    the same in the kernel's f32 wgmma and in float64."""
    x = rng.standard_normal(shape) * 1.5
    return round_e4m3(np.sign(x) * np.clip(np.abs(x), 0.125, 4.0))


def _bf16_to_f64(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


# (build, d, causal, B, H, Hkv, Sq, Sk, descale_q, descale_k, descale_v): one key tile; two key tiles,
# ragged, causal, grouped heads; four key tiles (the ring of 3 stages wraps); head dim 64 (the 64-byte
# swizzle, V's 64-byte rows); the identity build.
CASES_FP8 = [("shipped", 128, False, 1, 1, 1, 128, 100, 1.0, 1.0, 1.0),
             ("shipped", 128, True, 1, 2, 1, 100, 200, 0.75, 1.25, 0.5),
             ("shipped", 128, False, 1, 1, 1, 70, 400, 0.5, 0.5, 2.0),
             ("shipped", 64, False, 1, 1, 1, 128, 100, 1.0, 1.0, 1.0),
             ("shipped", 64, True, 1, 2, 1, 130, 250, 0.75, 1.25, 0.5),
             ("fp8_identity", 128, False, 1, 2, 1, 130, 250, 1.25, 0.75, 1.5)]


@pytest.mark.parametrize("build,d,causal,B,H,Hkv,Sq,Sk,dq,dk,dv", CASES_FP8)
def test_attention_fwd_fp8_on_host_simt(drivers, build, d, causal, B, H, Hkv, Sq, Sk, dq, dk, dv):
    """The e4m3 kernels (llgen chain's relabelled P and V, or with the keys in their own order) on the
    host runtime: every generated line -- e4m3 TMA tiles, wgmma m64n128k32 e4m3 with P from registers,
    S -> P (byte permutes, or shuffles), the producer warp group's V transpose and its mbarriers, the bf16
    O epilogue.  Against (a) the same online softmax with P rounded to e4m3 as the kernel rounds it
    (f32 where a rounding follows): |O - ref| <= 2 bf16 ulp + 2^-14, LSE within 1e-4; (b) exact
    attention in float64 of the e4m3 inputs (no rounding of P): |O - ref| per row within
    sum_k max(2^-4 p_k, 2^-10) |v_k| dv / l (P's e4m3 rounding: half an ulp, 2^-4 relative for normal
    values, 2^-10 absolute below 2^-6) + 2^-7 |ref| (bf16 O) + 2^-12, LSE within 1e-4."""
    path, wd = drivers(build, "e4m3", d)
    rng = np.random.default_rng(7 * d + Sq + Sk + H)
    qb, kb, vb = (fp8_inputs(rng, shape) for shape in ((B, H, Sq, d), (B, Hkv, Sk, d), (B, Hkv, Sk, d)))
    scale = 1.0 / np.sqrt(d)
    inp, outp = os.path.join(wd, "in_fp8.bin"), os.path.join(wd, "out_fp8.bin")
    with open(inp, "wb") as f:
        f.write(np.array([2, d, causal, B, H, Hkv, Sq, Sk], dtype=np.int32).tobytes()
                + np.array([scale, dq, dk, dv], dtype=np.float32).tobytes() + qb.tobytes() + kb.tobytes()
                + vb.tobytes())
    run_driver(path, wd, inp, outp, "e4m3", d)
    raw = np.fromfile(outp, dtype=np.uint8)
    nq = B * H * Sq * d
    o = _bf16_to_f64(raw[:2 * nq].view(np.uint16)).reshape(B, H, Sq, d)
    lse = raw[2 * nq:].view(np.float32).astype(np.float64).reshape(B, H, Sq)

    vals = e4m3_values()
    q = vals[qb]
    k = np.repeat(vals[kb], H // Hkv, axis=1)
    v = np.repeat(vals[vb], H // Hkv, axis=1)
    c32 = fp8_scale_log2(scale, dq, dk)
    want, want_lse = reference_online_fp8(q, k, v, c32, dv, causal, FP8_TILE[1])
    ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(want), 2.0 ** -14))) - 7)
    err = np.abs(o - want)
    assert np.all(err <= 2 * ulp + 2.0 ** -14), f"O vs the online reference: max {err.max():.3g}"
    assert np.abs(lse - want_lse).max() <= 1e-4
    # exact attention of the e4m3 values, scores scaled by scale dq dk, O by dv
    sc = _masked_scores(q, k, causal) * (scale * dq * dk)
    mx = sc.max(axis=-1, keepdims=True)
    pe = np.exp(sc - mx)
    le = pe.sum(axis=-1, keepdims=True)
    exact = pe / le @ v * dv
    bound = np.maximum(pe * 2.0 ** -4, 2.0 ** -10) @ np.abs(v) * dv / le + 2.0 ** -7 * np.abs(exact) + 2.0 ** -12
    assert np.all(np.abs(o - exact) <= bound), f"O vs exact attention: max {np.abs(o - exact).max():.3g}"
    assert np.abs(lse - (mx[..., 0] + np.log(le[..., 0]))).max() <= 1e-4
