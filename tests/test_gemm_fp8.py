"""The Hopper fp8 GEMM example (examples/kernels/gemm_fp8.cu, its control examples/kernels/gemm_hopper.h)
without a GPU.

* It compiles for sm_90a from the generated headers alone, without spills and without ptxas
  serialising the wgmma (messages C7514 / C7517 / C7519), and the PTX holds what the plans say per
  kernel: 4 wgmma m64n256k32 (128 x 256 tiles), m64n128k32 (128 x 128), or 4 m64n128k32 then 4
  m64n64k32 (128 x 192: its two parts) of its fp8 type per k-step, 2 TMA boxes per stage (one for A,
  one for B; 128 x 192: 1 + 3, B as three 64-column thirds), 4 (2, 3) TMA store boxes for a 16-bit C,
  64 (32, 48) 8-byte stores in each of store() and store_masked() for an f32 C, one atomic add for
  split K.  The kernels of B given K x N (128 x 256 and 128 x 128 tiles) read the same wgmma, load B as
  128 x 128 parts (2 or 1 TMA boxes beside A's), transpose each part in place with 16 8-byte loads
  and 16 8-byte stores a thread, and budget 88 registers for the producer warp group, 208 for the
  consumers.
* It runs on the host SIMT runtime (TMA with its swizzle and zero fill, the mbarrier ring running on
  across the tiles of a persistent CTA, wgmma on e4m3 / e5m2 through its descriptors, the scales,
  both epilogues and the C buffer reused tile after tile) at one tile and at ragged sizes whose tiles
  are shared by fewer CTAs than tiles, whole or with K split (the scales applied once, after the
  ranges are summed), 128 x 192 tiles too (the second part cut by N, or wholly past it), bit-exact
  against numpy: small integers are exact in e4m3
  (|x| <= 8) and e5m2 (|x| <= 4 here), powers of two as scales keep every f32 result exact, and a
  16-bit C is that result rounded to nearest even.  B given K x N the same way: one tile, ragged tiles
  walked by fewer CTAs, a split 128 x 128 tile (the transposing producer's ring across units and
  ranges, its loads running one step ahead of the transpose with 2 stages).  The runtime's race and
  deadlock checks catch each of three breaks of its control: the in-place transpose without its
  rendezvous, a stage reloaded before the consumers released it, the loads one step further ahead.
"""
from __future__ import annotations

import os
import re
import shutil

import numpy as np
import pytest

from ll_codegen.run import host
from ll_codegen.verify.emulate.reference import encode_small, round16_bits
from toolchain import need, run

pytestmark = pytest.mark.compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = os.path.join(ROOT, "examples", "kernels", "gemm_fp8.cu")
CONTROL = os.path.join(ROOT, "examples", "kernels", "gemm_hopper.h")
GENERATED = os.path.join(ROOT, "generated")
HEADERS = sorted(["gemm_fp8_mma_e4m3.cuh", "gemm_fp8_mma_e5m2.cuh", "gemm_fp8_tma_a.cuh", "gemm_fp8_tma_b.cuh",
                  "gemm_fp8_mma_e4m3_n128.cuh", "gemm_fp8_mma_e5m2_n128.cuh", "gemm_fp8_tma_b_n128.cuh",
                  "gemm_fp8_mma_e4m3_n64.cuh", "gemm_fp8_mma_e5m2_n64.cuh", "gemm_fp8_tma_b_n64.cuh",
                  "gemm_fp8_tma_b_kn.cuh", "gemm_fp8_b_kn_to_kmajor.cuh", "gemm_hopper.h"])
OUTS = {"f32": 0, "bf16": 1, "f16": 2}
#: kernel -> (fp8 type, C type, tile columns, B given K x N)
KERNELS = {f"gemm_fp8{'_kn' if kn else ''}{'' if bn == 256 else f'_n{bn}'}_{t}_{o}": (t, o, bn, kn)
           for kn in (False, True) for bn in ((256, 128) if kn else (256, 192, 128))
           for t in ("e4m3", "e5m2") for o in OUTS}
#: tile columns -> the wgmma widths of its parts, 4 instructions of each per k-step
PARTS = {256: (256,), 192: (128, 64), 128: (128,)}


def test_gemm_fp8_compiles_from_generated_headers(example_build):
    with open(KERNEL) as f:
        src = f.read()
    assert sorted(re.findall(r'#include "([^"]+)"', src)) == HEADERS
    for path in (KERNEL, CONTROL):
        with open(path) as f:
            assert not re.search(r"\basm\s*(volatile\s*)?\(", f.read()), f"{path}: every instruction is a wrapper"
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
    for name, (t, o, bn, kn) in KERNELS.items():
        body = bodies[name]
        assert re.findall(r"wgmma\.mma_async\.sync\.aligned\.m[\w.]+", body) == \
            [f"wgmma.mma_async.sync.aligned.m64n{n}k32.f32.{t}.{t}" for n in PARTS[bn] for _ in range(4)], name
        loads = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier::complete_tx::bytes", body)
        # K x N: A and B's 128-column parts, issued from two places (the ring's first steps, then one a step)
        assert len(loads) == (2 * (1 + bn // 128) if kn else 4 if bn == 192 else 2), name
        transpose = (len(re.findall(r"ld\.shared\.v2\.b32", body)), len(re.findall(r"st\.shared\.v2\.b32", body)))
        assert transpose == ((16, 16) if kn else (0, 0)), name
        stores = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta", body)
        assert len(stores) == (0 if o == "f32" else bn // 64), name
        assert len(re.findall(r"st\.global\.v2\.(?:b32|f32)", body)) == (bn // 2 if o == "f32" else 0), name
        assert len(re.findall(r"st\.global\.v4\.f32", body)) == bn // 8, name  # the split's partial
        assert len(re.findall(r"atom\.global\.add\.u32|atom\.global\.add\.s32", body)) == 1, name
        regs = (88, 208) if kn else (40, 232)
        assert f"setmaxnreg.dec.sync.aligned.u32 {regs[0]}" in body, name
        assert f"setmaxnreg.inc.sync.aligned.u32 {regs[1]}" in body, name


DRIVER = r"""
#include "%(kernel)s"
#include <cstdio>
#include <vector>

__attribute__((aligned(1024))) unsigned char smem[gemm_hopper::MAX_SMEM];

// driver IN OUT: IN = int32 ab, out, M, N, K, grid, bn, splits, b_kn, then f32 scale_a, scale_b, then A
// (M x K) and B (N x K; b_kn: K x N) as fp8 bytes; OUT = C.  Blocks 0 .. grid - 1 each walk their units (splits >
// 1: every tile in that many ranges of K; -1: stream K over grid shares; the workspace and counters are host
// memory).
int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* in = std::fopen(argv[1], "rb");
    int h[9];
    float scales[2];
    if (!in || std::fread(h, 4, 9, in) != 9 || std::fread(scales, 4, 2, in) != 2) return 3;
    const int ab = h[0], out = h[1], M = h[2], N = h[3], K = h[4], grid = h[5], bn = h[6], splits = h[7];
    const bool b_kn = h[8];
    std::vector<uint8_t> A(size_t(M) * K), B(size_t(N) * K);
    if (std::fread(A.data(), 1, A.size(), in) != A.size() || std::fread(B.data(), 1, B.size(), in) != B.size()) return 3;
    std::vector<unsigned char> C(size_t(M) * N * (out ? 2 : 4), 0xff);  // NaN poison
    const gemm_hopper::Plan plan = gemm_hopper::plan_fixed(M, N, K, gemm_fp8::K_STEP, splits < 0 ? grid : 0, false,
                                                           bn, splits, 0);
    std::vector<float> partial(size_t(plan.workspace) + 4, -1.0f);
    std::vector<int> count(size_t(plan.counters) + 1, 0);
    const gemm_hopper::Work work{plan.dp, plan.shares, partial.data(), count.data()};
    gemm_fp8::Maps maps = {};
    if (int r = gemm_fp8::encode(maps, out, bn, A.data(), B.data(), C.data(), M, N, K, b_kn)) {
        std::printf("ERR encode %%d\n", r);
        return 4;
    }
    if (gemm_fp8::smem_bytes(out, bn) > int(sizeof smem)) return 6;
    const gemm_fp8::Kernel kernel = gemm_fp8::kernel_of(ab, out, bn, b_kn);
    llgen_host::Dim3 dims;
    dims.x = unsigned(grid);
    for (int b = 0; b < grid; ++b) {
        llgen_host::Dim3 bid;
        bid.x = unsigned(b);
        auto errors = llgen_host::launch(gemm_hopper::THREADS, 32, smem, gemm_fp8::smem_bytes(out, bn),
                                         [&] { kernel(maps.a, maps.b, maps.c, C.data(), M, N, K, &scales[0], &scales[1],
                                                      work); },
                                         bid, dims);
        for (auto& e : errors) std::printf("ERR block %%d: %%s\n", b, e.c_str());
        if (!errors.empty()) return 5;
    }
    for (int t = 0; t < plan.counters; ++t)
        if (count[t]) return 7;  // a split tile's counter not zeroed by the CTA that completed it
    FILE* o = std::fopen(argv[2], "wb");
    std::fwrite(C.data(), 1, C.size(), o);
    std::fclose(o);
    return 0;
}
"""


def build_driver(d: str, kernel: str = KERNEL) -> str:
    """The host SIMT driver of ``kernel`` (2 stages, groups of 2 tile rows) built in ``d``; its path."""
    if host.compiler() is None:
        need("hipcc")  # Debian's hipcc brings clang++: skip (or fail under CI) with that reason
    path, log = host.build(d, [], exe="gemm", sources=GENERATED, driver=DRIVER % {"kernel": kernel},
                           defines=["LLGEN_HOST_SIMT", "LLGEN_GEMM_GROUP_M=2", "LLGEN_GEMM_STAGES=2",
                                    "LLGEN_GEMM_SKIP_AGREEMENT_CHECKS=1"])
    assert path, log
    return path


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("gemm_fp8_host"))
    return build_driver(d), d


def fp8_values(bits: np.ndarray, dtype: str) -> np.ndarray:
    """The values of fp8 bit patterns without NaN or infinity, from the formats' definitions (OCP
    FP8: e4m3 bias 7, 3 mantissa bits; e5m2 bias 15, 2 mantissa bits; exponent field 0 subnormal)."""
    e_bits, bias = (4, 7) if dtype == "f8e4m3" else (5, 15)
    m_bits = 7 - e_bits
    b = bits.astype(np.int64)
    e, m = (b >> m_bits) & ((1 << e_bits) - 1), b & ((1 << m_bits) - 1)
    mag = np.where(e == 0, m * 2.0 ** (1 - bias - m_bits), (1 + m / 2.0 ** m_bits) * 2.0 ** (e - bias))
    return np.where(b & 0x80, -mag, mag)


# (M, N, K, fp8 type, C, grid, bn, splits[, B given K x N]), built with 2 stages and groups of 2 tile
# rows: one tile over two k-steps; ragged M, N, K (TMA zero fill, the masked f32 store, the clipped TMA store) over
# 2 x 2 tiles walked by 3 CTAs (CTA 0 takes tiles 0 and 3: the ring runs on across its tiles); 3 x 1
# tiles (a last group of one row) and 2 x 1 tiles walked by one CTA (the ring wraps, the C buffer is
# reused, the epilogue's rendezvous change phase); split K: one 128 x 256 tile in 2 ranges, by 2
# CTAs; 2 x 1 ragged 128 x 128 tiles in 2 ranges walked by 3 CTAs.  128 x 192 tiles: one tile; 2 x 2
# ragged tiles by 3 CTAs (the second column of tiles cut inside its second part: N - 192 = 136); one
# tile whose second part lies wholly past N (104 columns); 2 x 2 ragged tiles in 2 ranges by 2 CTAs.
CASES = [(128, 256, 256, "f8e4m3", "bf16", 1, 256, 1), (200, 264, 144, "f8e4m3", "f32", 3, 256, 1),
         (300, 8, 176, "f8e5m2", "f16", 1, 256, 1), (136, 40, 32, "f8e5m2", "bf16", 1, 256, 1),
         (128, 256, 512, "f8e4m3", "f32", 2, 256, 2), (200, 120, 384, "f8e5m2", "bf16", 3, 128, 2),
         (128, 192, 256, "f8e4m3", "bf16", 1, 192, 1), (200, 328, 144, "f8e5m2", "f32", 3, 192, 1),
         (72, 104, 128, "f8e4m3", "f16", 1, 192, 1), (136, 376, 512, "f8e4m3", "bf16", 2, 192, 2)]
# B given K x N (N a multiple of 16: B's rows): one 128 x 256 tile over two k-steps (both parts of B
# transposed); 2 x 2 ragged tiles by 3 CTAs (CTA 0's ring runs on from tile 0 to tile 3; the second
# column of tiles cut inside its first part: N - 256 = 16); 2 x 1 ragged 128 x 128 tiles in 2 ranges by
# 3 CTAs (a K tail of 16)
CASES += [(128, 256, 256, "f8e4m3", "bf16", 1, 256, 1, True), (200, 272, 144, "f8e5m2", "f32", 3, 256, 1, True),
          (200, 112, 400, "f8e4m3", "f16", 3, 128, 2, True)]
# stream K (splits -1; grid: the shares): 2 x 1 ragged 128 x 128 tiles of 3 k-steps dealt to 3 shares (each
# tile cut where two shares meet), B given N x K, then K x N with 4 k-steps (the transposing producer counts
# its steps over its pieces)
CASES += [(200, 120, 384, "f8e5m2", "bf16", 3, 128, -1), (200, 112, 400, "f8e4m3", "f16", 3, 128, -1, True)]


@pytest.mark.parametrize("M,N,K,ab,out,grid,bn,splits,kn", [c if len(c) == 9 else (*c, False) for c in CASES],
                         ids=[f"{c[0]}x{c[1]}x{c[2]}-{c[3]}-{c[4]}-bn{c[6]}-s{c[7]}{'-kn' if len(c) == 9 else ''}"
                              for c in CASES])
def test_gemm_fp8_on_host_simt(driver, M, N, K, ab, out, grid, bn, splits, kn):
    rc, log, got, want = run_case(*driver, M, N, K, ab, out, grid, bn, splits, kn)
    assert rc == 0, log
    bad = np.argwhere(got != want)
    assert not len(bad), f"{len(bad)} of {got.size} differ; first {tuple(bad[0])}: {got[tuple(bad[0])]}"


def run_case(path: str, d: str, M: int, N: int, K: int, ab: str, out: str, grid: int, bn: int, splits: int,
             kn: bool) -> tuple:
    """One GEMM of small integers on the driver at ``path``: (exit status, log, C or None, the exact C)."""
    rng = np.random.default_rng(M + N + K)
    lim = 8 if ab == "f8e4m3" else 4
    a = rng.integers(-lim, lim + 1, size=(M, K)).astype(np.float64)
    b = rng.integers(-lim, lim + 1, size=(K, N) if kn else (N, K)).astype(np.float64)
    bits_a, bits_b = encode_small(a, ab), encode_small(b, ab)
    assert np.array_equal(fp8_values(bits_a, ab), a) and np.array_equal(fp8_values(bits_b, ab), b)
    scale_a, scale_b = 0.5, 4.0
    want = ((a @ (b if kn else b.T)) * (scale_a * scale_b)).astype(np.float32)   # exact: integers times 2^n
    if out != "f32":
        want = round16_bits(want, out)
    inp, outp = os.path.join(d, "in.bin"), os.path.join(d, "out.bin")
    with open(inp, "wb") as f:
        f.write(np.array([int(ab == "f8e5m2"), OUTS[out], M, N, K, grid, bn, splits, kn], dtype=np.int32).tobytes()
                + np.array([scale_a, scale_b], dtype=np.float32).tobytes() + bits_a.tobytes() + bits_b.tobytes())
    rc, log = run([path, inp, outp], d)
    got = np.fromfile(outp, dtype=np.float32 if out == "f32" else np.uint16).reshape(M, N) if rc == 0 else None
    return rc, log, got, want


#: breaks of the transposing producer's control (gemm_hopper.h: old text -> new) and what the host runtime
#: reports: the in-place transpose's stores without the rendezvous after every thread's loads; step g's
#: loads issued without waiting for the consumers to release its stage; the loads issued S steps ahead
#: of the transpose (the stage to reload waits for the consumers, which wait for the transpose)
MUTATIONS = {
    "no-rendezvous": ("                rendezvous();", "                /* no rendezvous */", "race"),
    "no-release": ("        if (g >= S) sync::mbar_wait(&empty[s], ((g / S) - 1) & 1);  // its last readers are done\n"
                   "        sync::mbar_arrive_expect_tx(&full[s], Op::kTxBytesA);",
                   "        sync::mbar_arrive_expect_tx(&full[s], Op::kTxBytesA);", "race"),
    "ahead-S": ("constexpr int AHEAD = S - IN_FLIGHT;", "constexpr int AHEAD = S;", "deadlock"),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_gemm_fp8_b_kn_breaks_caught(tmp_path, mutation):
    """The host runtime's race and deadlock checks see each break of the K x N control (3 k-steps of
    one 128 x 128 tile, 2 stages): what makes the bit-exact runs above a check of the control too."""
    old, new, report = MUTATIONS[mutation]
    d = str(tmp_path)
    for name in ("gemm_fp8.cu", "gemm_hopper.h", "gemm_hopper_plan.h"):
        shutil.copy(os.path.join(os.path.dirname(KERNEL), name), d)
    with open(os.path.join(d, "gemm_hopper.h")) as f:
        src = f.read()
    assert src.count(old) == 1, mutation
    with open(os.path.join(d, "gemm_hopper.h"), "w") as f:
        f.write(src.replace(old, new))
    rc, log, _, _ = run_case(build_driver(d, os.path.join(d, "gemm_fp8.cu")), d, 128, 128, 384, "f8e4m3", "bf16",
                             1, 128, 1, True)
    assert rc != 0 and report in log, log
