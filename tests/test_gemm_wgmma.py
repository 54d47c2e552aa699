"""The Hopper GEMM example (examples/kernels/gemm_wgmma.cu, its control examples/kernels/gemm_hopper.h)
without a GPU.

* It compiles for sm_90a from the generated headers alone, without spills and without ptxas
  serialising the wgmma (messages C7514 / C7517 / C7519: a register a wgmma in flight writes was
  touched), and the PTX holds what the plans say per kernel: 4 wgmma m64n256k16 (128 x 256 tiles),
  m64n128k16 (128 x 128), or m64n128k16 and m64n64k16 (128 x 192: its two parts) per k-step, 1 + 4
  (1 + 2, 1 + 3) TMA boxes per stage, 4 (2, 3) TMA store boxes for a 16-bit C, and the split-K path:
  one atomic add, 16-byte partial stores and loads, one per four accumulator registers.
* It runs on the host SIMT runtime (every generated line: TMA with its swizzle and zero fill, the
  mbarrier ring, wgmma through its descriptors, both epilogues, the split-K workspace and counters)
  at one and at several ragged tiles of each width (128 x 192: the second part cut by N, or wholly
  past it), whole or with K split in 2 or 3 ranges (every tile split, or only the tiles after the
  whole ones), bit-exact against numpy: small-integer inputs make every f32
  sum exact, and a 16-bit C is that sum rounded to nearest even.  The split's counters are zero again
  after the launch.
* Split K is deterministic: with random-normal f16 inputs (inexact sums) the CTAs run first to last
  and last to first -- a different CTA completes each tile and sums its ranges -- give the same bits.
"""
from __future__ import annotations

import functools
import os
import re

import numpy as np
import pytest

from ll_codegen.run import host
from ll_codegen.verify.emulate.reference import round16_bits
from toolchain import arch_flags, need, run

pytestmark = pytest.mark.compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = os.path.join(ROOT, "examples", "kernels", "gemm_wgmma.cu")
GENERATED = os.path.join(ROOT, "generated")
HEADERS = sorted([*(f"gemm_wgmma_{p}.cuh" for p in ("tma_a_f16", "tma_b_f16", "mma_f16", "tma_a_bf16", "tma_b_bf16",
                                                    "mma_bf16", "tma_b_f16_n128", "mma_f16_n128", "tma_b_bf16_n128",
                                                    "mma_bf16_n128", "tma_b_f16_n64", "mma_f16_n64",
                                                    "tma_b_bf16_n64", "mma_bf16_n64")), "gemm_hopper.h"])
#: kernel -> (input type, 16-bit C, tile columns)
KERNELS = {f"gemm_wgmma{'' if bn == 256 else f'_n{bn}'}_{t}_{o}": (t, o != "f32", bn)
           for bn in (256, 192, 128) for t in ("f16", "bf16") for o in ("f32", t)}
#: tile columns -> the wgmma widths of its parts, one instruction of each per k-step and warp group's 16 rows
PARTS = {256: (256,), 192: (128, 64), 128: (128,)}
STREAM_K = -1  # gemm_hopper::STREAM_K


def test_gemm_wgmma_compiles_from_generated_headers(example_build):
    with open(KERNEL) as f:
        src = f.read()
    assert sorted(re.findall(r'#include "([^"]+)"', src)) == HEADERS
    with open(os.path.join(os.path.dirname(KERNEL), "gemm_hopper.h")) as f:
        control = f.read()
    assert not re.search(r"\basm\s*(volatile\s*)?\(", src + control), "every instruction is a generated header's wrapper"
    rc, out, keep = example_build(KERNEL)   # nvcc -arch=sm_90a -c, as users build it (and test_nvcc_arch_flags)
    assert rc == 0 and not re.search(r"\bwarning\b", out, re.I), out
    assert out.count("0 bytes spill stores, 0 bytes spill loads") == len(KERNELS), out
    assert not re.search(r"C75(14|17|19)", out), f"ptxas serialises the wgmma:\n{out}"
    ptx_path = os.path.join(keep, os.path.basename(KERNEL)[:-3] + ".compute_90a.ptx")
    with open(ptx_path) as f:
        ptx = f.read()
    parts = re.split(r"\.entry (\w+)\(", ptx)[1:]   # name, body, name, body, ...
    bodies = dict(zip(parts[::2], parts[1::2]))
    assert sorted(bodies) == sorted(KERNELS)
    for name, (t, out16, bn) in KERNELS.items():
        body = bodies[name]
        for n in PARTS[bn]:
            assert len(re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{n}k16\.f32\.{t}\.{t}\b", body)) == 4, name
        assert len(re.findall(r"wgmma\.mma_async", body)) == 4 * len(PARTS[bn]), name
        loads = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier::complete_tx::bytes", body)
        assert len(loads) == 1 + bn // 64, name
        stores = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta", body)
        assert len(stores) == (bn // 64 if out16 else 0), name
        # f32 C: 8-byte stores of the accumulator's register pairs in store() and again in store_masked()
        assert len(re.findall(r"st\.global\.v2\.(?:b32|f32)", body)) == (0 if out16 else bn // 2), name
        # split K: the partial (one 16-byte store per 4 registers), read back as slot 0 and in the loop
        regs = bn // 2
        assert len(re.findall(r"st\.global\.v4\.f32", body)) == regs // 4, name
        assert len(re.findall(r"ld\.global\.v4\.(?:f32|u32|b32)", body)) == 2 * regs // 4, name
        assert len(re.findall(r"atom\.global\.add\.u32|atom\.global\.add\.s32", body)) == 1, name
        assert "setmaxnreg.dec.sync.aligned.u32 40" in body and "setmaxnreg.inc.sync.aligned.u32 232" in body


@pytest.mark.parametrize("flag", ["-DLLGEN_GEMM_PERSISTENT=0", "-DLLGEN_GEMM_STAGES=2", "-DLLGEN_GEMM_IN_FLIGHT=0"])
def test_gemm_wgmma_control_variants_compile_without_spills(tmp_path, flag):
    """The hand-written control's variants bench/bench_gemm.py builds (one CTA per unit, 2 stages, no
    wgmma group left in flight): every kernel compiles without spills or wgmma serialisation.  The
    headers' agreement checks do not depend on these knobs: the shipped build checks them."""
    nvcc = need("nvcc")
    rc, out = run([nvcc, "-std=c++17", "-O3", *arch_flags("sm_90a"), "-I", GENERATED, flag,
                   "-DLLGEN_GEMM_SKIP_AGREEMENT_CHECKS=1", "-cubin", "-Xptxas", "-v",
                   "-o", str(tmp_path / "g.cubin"), KERNEL], str(tmp_path))
    assert rc == 0, out
    assert out.count("0 bytes spill stores, 0 bytes spill loads") == len(KERNELS), out
    assert not re.search(r"C75(14|17|19)", out), out


DRIVER = r"""
#include "%(kernel)s"
#include <cstdio>
#include <vector>

__attribute__((aligned(1024))) unsigned char smem[gemm_hopper::MAX_SMEM];

// driver IN OUT: IN = int32 ab, out16, M, N, K, bn, splits, dp, grid, reverse, shares (stream K: the
// shares of the tail), then A (M x K) and B (K x N) as 16-bit bits; OUT = C.  Blocks 0 .. grid - 1
// (reverse: grid - 1 .. 0) run one after another, each walking its units; the tail's workspace and
// counters are host memory.
int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* in = std::fopen(argv[1], "rb");
    int h[11];
    if (!in || std::fread(h, 4, 11, in) != 11) return 3;
    const int ab = h[0], out16 = h[1], M = h[2], N = h[3], K = h[4], bn = h[5], splits = h[6], dp = h[7],
              grid = h[8], reverse = h[9], shares = h[10];
    std::vector<uint16_t> A(size_t(M) * K), B(size_t(K) * N);
    if (std::fread(A.data(), 2, A.size(), in) != A.size() || std::fread(B.data(), 2, B.size(), in) != B.size()) return 3;
    std::vector<unsigned char> C(size_t(M) * N * (out16 ? 2 : 4), 0xff);  // NaN poison
    const gemm_hopper::Plan plan = gemm_hopper::plan_fixed(M, N, K, gemm_wgmma::K_STEP, shares, false, bn, splits,
                                                                     dp);
    std::vector<float> partial(size_t(plan.workspace) + 4, -1.0f);
    std::vector<int> count(size_t(plan.counters) + 1, 0);
    const gemm_hopper::Work work{plan.dp, plan.shares, partial.data(), count.data()};
    gemm_wgmma::Maps maps = {};
    if (int r = gemm_wgmma::encode(maps, ab, out16, bn, A.data(), B.data(), C.data(), M, N, K)) {
        std::printf("ERR encode %%d\n", r);
        return 4;
    }
    const int bytes = gemm_wgmma::smem_bytes(ab, out16, bn);
    if (bytes > int(sizeof smem)) return 6;
    const gemm_wgmma::Kernel kernel = gemm_wgmma::kernel_of(ab, out16, bn);
    llgen_host::Dim3 dims;
    dims.x = unsigned(grid);
    for (int i = 0; i < grid; ++i) {
        const int b = reverse ? grid - 1 - i : i;
        llgen_host::Dim3 bid;
        bid.x = unsigned(b);
        auto errors = llgen_host::launch(gemm_wgmma::THREADS, 32, smem, bytes,
                                         [&] { kernel(maps.a, maps.b, maps.c, C.data(), M, N, K, work); }, bid, dims);
        for (auto& e : errors) std::printf("ERR block %%d: %%s\n", b, e.c_str());
        if (!errors.empty()) return 5;
    }
    for (int t = 0; t < plan.counters; ++t)
        if (count[t]) {
            std::printf("ERR counter %%d is %%d after the launch\n", t, count[t]);
            return 7;
        }
    std::printf("units %%d\n", plan.units);
    FILE* out = std::fopen(argv[2], "wb");
    std::fwrite(C.data(), 1, C.size(), out);
    std::fclose(out);
    return 0;
}
"""


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    if host.compiler() is None:
        need("hipcc")  # Debian's hipcc brings clang++: skip (or fail under CI) with that reason
    d = str(tmp_path_factory.mktemp("gemm_wgmma_host"))
    path, log = host.build(d, [], exe="gemm", sources=GENERATED, driver=DRIVER % {"kernel": KERNEL},
                           defines=["LLGEN_HOST_SIMT", "LLGEN_GEMM_SKIP_AGREEMENT_CHECKS=1"])
    assert path, log
    return path, d


@pytest.fixture(scope="module")
def driver_one_cta_per_unit(tmp_path_factory):
    """The driver built with LLGEN_GEMM_PERSISTENT=0: a 16-bit C staged in the idle operand stages."""
    if host.compiler() is None:
        need("hipcc")
    d = str(tmp_path_factory.mktemp("gemm_wgmma_host_1cta"))
    path, log = host.build(d, [], exe="gemm", sources=GENERATED, driver=DRIVER % {"kernel": KERNEL},
                           defines=["LLGEN_HOST_SIMT", "LLGEN_GEMM_PERSISTENT=0", "LLGEN_GEMM_SKIP_AGREEMENT_CHECKS=1"])
    assert path, log
    return path, d


def launch(driver, a_bits, b_bits, M, N, K, bf16, out16, bn=256, splits=1, dp=-1, grid=None, reverse=False):
    """C from the host SIMT run (uint16 bits or f32), and the units the plan has.  splits: 1, S >= 2
    or STREAM_K with ``grid`` shares; dp -1: every tile whole (splits 1) or in the tail; grid None: one
    CTA per unit."""
    path, d = driver
    tiles = -(-M // 128) * -(-N // bn)
    dp = (tiles if splits == 1 else 0) if dp < 0 else dp
    shares = grid if splits == STREAM_K else 0
    units = dp + (min(shares, (tiles - dp) * -(-K // 64)) if splits == STREAM_K else (tiles - dp) * splits)
    inp, outp = os.path.join(d, "in.bin"), os.path.join(d, "out.bin")
    with open(inp, "wb") as f:
        f.write(np.array([int(bf16), int(out16), M, N, K, bn, splits, dp, grid or units, int(reverse), shares],
                         dtype=np.int32).tobytes() + a_bits.tobytes() + b_bits.tobytes())
    rc, out = run([path, inp, outp], d)
    assert rc == 0, out
    assert f"units {units}" in out, out
    return np.fromfile(outp, dtype=np.uint16 if out16 else np.float32).reshape(M, N)


# (M, N, K, bf16, out16, bn, splits, dp, grid): one tile over two k-steps and ragged sizes over 2 x 2
# and 2 x 1 tiles (TMA zero fill, the masked f32 store, the clipped TMA store), whole; then split K:
# one 128 x 256 tile in 2 ranges of 2 k-steps; 2 x 1 ragged 128 x 128 tiles in 3 uneven ranges (5
# k-steps: 1, 2, 2) walked by 2 CTAs (the ring and the rendezvous run on across units); 1 x 2 tiles,
# the first whole and the second in 2 ranges (dp 1).
CASES = [(128, 256, 128, False, False, 256, 1, -1, None), (128, 256, 64, True, True, 256, 1, -1, None),
         (200, 264, 72, False, True, 256, 1, -1, None), (136, 8, 40, True, False, 256, 1, -1, None),
         (128, 256, 256, False, False, 256, 2, -1, None), (200, 120, 320, True, True, 128, 3, -1, 2),
         (128, 256, 192, False, True, 128, 2, 1, None)]
# 128 x 192 tiles (its 128- and 64-column parts): one tile over two k-steps; 2 x 2 ragged tiles (the
# second column of tiles cut inside its second part: N - 192 = 136); one tile whose second part lies
# wholly past N (104 columns: TMA loads zeros there and the store clips the whole box; f32: masked);
# split K: 1 x 2 ragged tiles in 3 uneven ranges walked by 2 CTAs, and the first tile whole, the
# second in 2 ranges (dp 1).
CASES_192 = [(128, 192, 128, False, False, 192, 1, -1, None), (200, 328, 72, True, True, 192, 1, -1, None),
             (72, 104, 64, False, True, 192, 1, -1, None), (72, 104, 64, True, False, 192, 1, -1, None),
             (136, 376, 320, False, False, 192, 3, -1, 2), (128, 384, 192, True, True, 192, 2, 1, None)]
CASES += CASES_192
# stream K (grid: the shares, one a CTA): 2 x 2 ragged 128 x 128 tiles of 5 k-steps dealt to 3 shares
# (6, 7, 7 k-steps: tile 0 whole in share 0, tiles 1 and 2 each cut where two shares meet -- a share's
# last piece in slot shares + c --, tile 3 whole in share 2); 1 x 2 tiles, the first whole (dp 1), the
# second in 4 pieces of 4 shares (4 CTAs: CTA 0 walks the whole tile, then share 3); 1 x 2 ragged
# 128 x 192 tiles of 5 k-steps in 3 shares.
CASES_STREAM_K = [(200, 200, 320, False, True, 128, STREAM_K, 0, 3), (128, 256, 320, True, False, 128, STREAM_K, 1, 4),
                  (136, 376, 320, True, True, 192, STREAM_K, 0, 3)]
CASES += CASES_STREAM_K


@pytest.mark.parametrize("M,N,K,bf16,out16,bn,splits,dp,grid", CASES,
                         ids=[f"{c[0]}x{c[1]}x{c[2]}-bn{c[5]}-s{c[6]}" for c in CASES])
def test_gemm_wgmma_on_host_simt(driver, M, N, K, bf16, out16, bn, splits, dp, grid):
    rng = np.random.default_rng(M + N + K)
    a = rng.integers(-3, 4, size=(M, K)).astype(np.float32)
    b = rng.integers(-3, 4, size=(K, N)).astype(np.float32)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    bits = functools.partial(round16_bits, dtype="bf16" if bf16 else "f16")
    if out16:
        want = bits(want)
    got = launch(driver, bits(a), bits(b), M, N, K, bf16, out16, bn, splits, dp, grid)
    bad = np.argwhere(got != want)
    assert not len(bad), f"{len(bad)} of {got.size} differ; first {tuple(bad[0])}: {got[tuple(bad[0])]}"


@pytest.mark.parametrize("splits,grid", [(3, None), (STREAM_K, 3)], ids=["split", "stream"])
def test_gemm_wgmma_split_k_is_deterministic(driver, splits, grid):
    """Random-normal f16 inputs, one 128 x 128 tile in 3 ranges (split K, or stream K's 3 shares): CTAs
    run first to last (the last piece completes the tile and reads every slot back) and last to first
    (piece 0 completes it and keeps its own registers) give the same bits, within f32 rounding of the
    float64 product."""
    M, N, K = 128, 128, 768
    rng = np.random.default_rng(41)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    fwd = launch(driver, a.view(np.uint16), b.view(np.uint16), M, N, K, False, False, 128, splits, grid=grid)
    rev = launch(driver, a.view(np.uint16), b.view(np.uint16), M, N, K, False, False, 128, splits, grid=grid,
                 reverse=True)
    assert np.array_equal(fwd.view(np.uint32), rev.view(np.uint32))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert np.all(np.abs(fwd - ref) <= 2.0 ** -20 * mag + 1e-30)
    # the sum of the ranges differs from one accumulation over all of K in the low bits: the split is real
    whole = launch(driver, a.view(np.uint16), b.view(np.uint16), M, N, K, False, False, 128, 1)
    assert not np.array_equal(whole.view(np.uint32), fwd.view(np.uint32))


def test_gemm_wgmma_split_k_one_cta_per_unit_on_host_simt(driver_one_cta_per_unit):
    """One CTA per unit (LLGEN_GEMM_PERSISTENT=0): 2 x 2 ragged 128 x 128 tiles in 2 ranges, bf16 C
    staged in the operand stages after the sum, the CTAs last to first; bit-exact."""
    M, N, K = 136, 200, 192
    rng = np.random.default_rng(5)
    a = rng.integers(-3, 4, size=(M, K)).astype(np.float32)
    b = rng.integers(-3, 4, size=(K, N)).astype(np.float32)
    want = round16_bits((a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32), "bf16")
    got = launch(driver_one_cta_per_unit, round16_bits(a, "bf16"), round16_bits(b, "bf16"), M, N, K, True, True, 128,
                 2, reverse=True)
    assert np.array_equal(got, want)
