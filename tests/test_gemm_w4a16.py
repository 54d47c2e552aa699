"""The W4A16 GEMM example (examples/kernels/gemm_w4a16.cu) without a GPU.

* It compiles for sm_90a from the generated headers alone (nvcc as users type it), without spills and
  without ptxas serialising the wgmma, and each kernel's PTX holds what its plans say: per chunk of K,
  4 wgmma m64nBNk16 bf16 with A from registers per 64-K slice (decode BN 16, mid 64, large 256), one
  16-byte ld.shared a thread per slice (the pre-shuffled weights), at least the chunk's 2-D TMA boxes
  twice (X a slice, the weights two tiles and the scales two groups a row block), one atomic add (split K), the setmaxnreg
  budgets, the grid-dependency wait and trigger of overlapped launches; the row-major weights, 128- and 64-row decode and read-ahead builds without spills.
* It runs on the host SIMT runtime (TMA, the mbarrier ring wrapping its stages, the consumer warp groups
  owning a row block each (decode: four, large: two) or taking alternate chunks and handing their sums
  over (mid), split K's partials summed in range order, the store masked at the last tokens and rows,
  wgmma from registers) at the three tile shapes, for int4
  weights with bf16 scales per 128 and mxfp4 weights (e2m1, e8m0 exponents per 32), bit-exact against
  numpy: X small integers and power-of-two scales keep every product and sum exact, and Y is the exact
  result rounded to nearest even.  The weights are packed by the generated reorder module of
  llgen chain's pre-shuffle (generated/w4a16_preshuffle_W_reorder.py), as a user packs them; the
  -D LLGEN_W4A16_ROW_MAJOR=1 build (the weights row-major, the layout the pre-shuffle is timed against)
  at the decode and large tiles.
"""
from __future__ import annotations

import importlib.util
import os
import re

import numpy as np
import pytest

from ll_codegen.run import host
from ll_codegen.verify.emulate.reference import round16_bits
from ll_codegen.verify.emulate.upcast import decode
from toolchain import arch_flags, need, run

pytestmark = pytest.mark.compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = os.path.join(ROOT, "examples", "kernels", "gemm_w4a16.cu")
GENERATED = os.path.join(ROOT, "generated")
#: kernel -> (wgmma N, 64-K slices a chunk, TMA boxes a chunk: X a slice, weights two tiles a row block,
#: scales a row block: int4 two groups of 128 a box, mxfp4 four groups of 32; decode tiles have four row
#: blocks, large two, mid one; the consumers' setmaxnreg budget: decode's five warp groups share 96
#: registers a thread at launch, the others' three 168, the producer keeps 24)
KERNELS = {"gemm_w4a16_decode": (16, 4, 4 + 4 * 2 + 4 * 1, 112), "gemm_w4a16_mid": (64, 4, 4 + 2 + 1, 240),
           "gemm_w4a16_large": (256, 2, 2 + 2 * 1 + 2 * 1, 240),
           "gemm_mxfp4_decode": (16, 4, 4 + 4 * 2 + 4 * 2, 112), "gemm_mxfp4_mid": (64, 4, 4 + 2 + 2, 240),
           "gemm_mxfp4_large": (256, 2, 2 + 2 * 1 + 2 * 1, 240)}


def test_gemm_w4a16_compiles_from_generated_headers(example_build):
    with open(KERNEL) as f:
        src = f.read()
    assert all(h.startswith("w4a16_") for h in re.findall(r'#include "([^"]+)"', src))
    assert not re.search(r"\basm\s*(volatile\s*)?\(", src), "every instruction is a wrapper"
    rc, out, keep = example_build(KERNEL)
    assert rc == 0 and not re.search(r"\bwarning\b", out, re.I), out
    assert not re.search(r"C75(12|13|14|17|19)", out), f"ptxas serialises the wgmma:\n{out}"
    with open(os.path.join(keep, "gemm_w4a16.compute_90a.ptx")) as f:
        ptx = f.read()
    parts = re.split(r"\.entry (\w+)\(", ptx)[1:]
    bodies = dict(zip(parts[::2], parts[1::2]))
    # the GEMMs and the generated reorder / restore kernels (llgen_w4a16_pack), none spilling
    assert sorted(k for k in bodies if k in KERNELS) == sorted(KERNELS) and len(bodies) == len(KERNELS) + 2
    assert out.count("0 bytes spill stores, 0 bytes spill loads") == len(bodies), out
    for name, (n, slices, boxes, regs) in KERNELS.items():
        body = bodies[name]
        assert re.findall(r"wgmma\.mma_async\.sync\.aligned\.m[\w.]+", body) == \
            [f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16"] * (4 * slices), name
        assert len(re.findall(r"ld\.shared\.v4\.b32", body)) >= slices, name
        # a chunk's boxes in the overlapped first round (weights before grid_wait, X after) and in the loop,
        # which the compiler may unroll or version (the host SIMT runs check which boxes land where)
        tma = len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global", body))
        assert tma >= 2 * boxes, (name, tma)
        assert "griddepcontrol.wait" in body and "griddepcontrol.launch_dependents" in body, name
        assert len(re.findall(r"atom\.global\.add\.u32|atom\.global\.add\.s32", body)) == 1, name
        assert "setmaxnreg.dec.sync.aligned.u32 24" in body and f"setmaxnreg.inc.sync.aligned.u32 {regs}" in body


@pytest.mark.parametrize("flag", ["-DLLGEN_W4A16_ROW_MAJOR=1", "-DLLGEN_W4A16_DECODE_ROWS=128",
                                  "-DLLGEN_W4A16_DECODE_ROWS=64", "-DLLGEN_W4A16_PREFETCH=1"])
def test_gemm_w4a16_build_variants_compile_without_spills(tmp_path, flag):
    """The row-major weights build (its own weight TMA and upcast headers, their agreement with the wgmma
    header evaluated), the 128- and 64-row decode tiles and the slices read ahead: no spills, no wgmma
    serialisation."""
    nvcc = need("nvcc")
    rc, out = run([nvcc, "-std=c++17", "-O3", *arch_flags("sm_90a"), "-I", GENERATED, flag,
                   "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "g.cubin"), KERNEL], str(tmp_path))
    assert rc == 0, out
    assert out.count("0 bytes spill stores, 0 bytes spill loads") == len(KERNELS) + 2, out
    assert not re.search(r"C75(12|13|14|17|19)", out), out


DRIVER = r"""
#include "%(kernel)s"
#include <cstdio>
#include <vector>

__attribute__((aligned(1024))) unsigned char smem[gemm_w4a16::MAX_SMEM];

// driver IN OUT: IN = int32 M, N, K, splits, format, overlap, then X (M x K bf16 bits), the packed weights (N K / 2
// bytes), S^T (int4: K / 128 x N bf16 bits; mxfp4: K / 32 x N e8m0 bytes); OUT = Y.  Every CTA of the
// plan's grid, one after another.
int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* in = std::fopen(argv[1], "rb");
    int h[6];
    if (!in || std::fread(h, 4, 6, in) != 6) return 3;
    const int M = h[0], N = h[1], K = h[2];
    const auto format = gemm_w4a16::Format(h[4]);
    std::vector<uint16_t> X(size_t(M) * K);
    std::vector<uint8_t> W(size_t(N) * K / 2);
    std::vector<uint8_t> S(format == gemm_w4a16::INT4 ? size_t(K / 128) * N * 2 : size_t(K / 32) * N);
    if (std::fread(X.data(), 2, X.size(), in) != X.size() || std::fread(W.data(), 1, W.size(), in) != W.size() ||
        std::fread(S.data(), 1, S.size(), in) != S.size()) return 3;
    std::vector<uint16_t> Y(size_t(M) * N, 0xffff);  // NaN poison
    const gemm_w4a16::Plan plan = gemm_w4a16::plan(format, M, N, K, 132, h[3]);
    std::vector<float> partial(size_t(plan.workspace) + 4, -1.0f);
    std::vector<int> count(size_t(plan.counters) + 1, 0);
    const gemm_w4a16::Work work{plan.splits, partial.data(), count.data(), h[5]};
    gemm_w4a16::Maps maps = {};
    if (int r = gemm_w4a16::encode(maps, format, plan.shape, X.data(), W.data(), S.data(), M, N, K)) {
        std::printf("ERR encode %%d\n", r);
        return 4;
    }
    const gemm_w4a16::Kernel kernel = gemm_w4a16::kernel_of(format, plan.shape);
    llgen_host::Dim3 dims;
    dims.x = unsigned(plan.grid);
    for (int b = 0; b < plan.grid; ++b) {
        llgen_host::Dim3 bid;
        bid.x = unsigned(b);
        auto errors = llgen_host::launch(plan.threads, 32, smem, plan.smem,
                                         [&] { kernel(maps.w, maps.s, maps.x, Y.data(), M, N, K, work); }, bid, dims);
        for (auto& e : errors) std::printf("ERR block %%d: %%s\n", b, e.c_str());
        if (!errors.empty()) return 5;
    }
    for (int t = 0; t < plan.counters; ++t)
        if (count[t]) return 7;  // a split tile's counter not zeroed by the CTA that completed it
    FILE* o = std::fopen(argv[2], "wb");
    std::fwrite(Y.data(), 2, Y.size(), o);
    std::fclose(o);
    std::printf("grid %%d splits %%d shape %%d\n", plan.grid, plan.splits, int(plan.shape));
    return 0;
}
"""


def build_driver(tmp_path_factory, variant: bool):
    """The host driver of the default build, or (variant) of the build with the weights row-major and each
    chunk's slices read from shared memory when its stage lands (LLGEN_W4A16_PREFETCH): two of the
    bench ladder's variants in one build."""
    if host.compiler() is None:
        need("hipcc")  # Debian's hipcc brings clang++: skip (or fail under CI) with that reason
    d = str(tmp_path_factory.mktemp("gemm_w4a16_host"))
    path, log = host.build(d, [], exe="gemm", sources=GENERATED, driver=DRIVER % {"kernel": KERNEL},
                           defines=["LLGEN_HOST_SIMT", "LLGEN_W4A16_SKIP_AGREEMENT_CHECKS=1",
                                    f"LLGEN_W4A16_ROW_MAJOR={int(variant)}", f"LLGEN_W4A16_PREFETCH={int(variant)}"])
    assert path, log
    return path, d


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    return build_driver(tmp_path_factory, False)


@pytest.fixture(scope="module")
def driver_variant(tmp_path_factory):
    return build_driver(tmp_path_factory, True)


def reorder_module():
    """The generated numpy reorder of llgen chain's pre-shuffle, as a user imports it."""
    path = os.path.join(GENERATED, "w4a16_preshuffle_W_reorder.py")
    spec = importlib.util.spec_from_file_location("w4a16_reorder", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# (M, N, K, splits, the tile shape chosen), the stages as the GPU build has them (decode 5, mid 4,
# large 3), the rings wrapping: decode over 14 chunks of 256 with 5 tokens and 128 of the tile's 256 rows
# (the store masked both ways); decode with K split in 2 ranges; mid (40 tokens) over 6 chunks; large (65
# tokens: a tile of 256 cut at 65, two 64-row blocks) over 6 chunks of 128; decode, two whole 256-row tiles.
CASES = [(5, 128, 3584, 1, 0), (16, 64 * 2, 1024, 2, 0), (40, 128, 1536, 1, 1), (65, 128, 768, 1, 2),
         (3, 512, 1536, 1, 0)]


@pytest.mark.parametrize("M,N,K,splits,shape", CASES, ids=[f"{c[0]}x{c[1]}x{c[2]}-s{c[3]}" for c in CASES])
def test_gemm_w4a16_on_host_simt(driver, M, N, K, splits, shape):
    run_case(driver, M, N, K, splits, shape, row_major=False, mxfp4=False)


# mxfp4 weights (e2m1, an e8m0 exponent per 32 along K): decode with K split, mid, large.
@pytest.mark.parametrize("M,N,K,splits,shape", CASES[1:4], ids=["decode-s2", "mid", "large"])
def test_gemm_mxfp4_on_host_simt(driver, M, N, K, splits, shape):
    run_case(driver, M, N, K, splits, shape, row_major=False, mxfp4=True)


# The -D LLGEN_W4A16_ROW_MAJOR=1 -D LLGEN_W4A16_PREFETCH=1 build (weights row-major, the chain's reference
# layout; slices read ahead): decode, mid (the warp groups on alternate chunks) and large.
@pytest.mark.parametrize("M,N,K,splits,shape,mxfp4", [(*CASES[1], False), (*CASES[2], True), (*CASES[3], False),
                                                       (*CASES[3], True)],
                         ids=["decode", "mid-mxfp4", "large", "large-mxfp4"])
def test_gemm_w4a16_row_major_prefetched_on_host_simt(driver_variant, M, N, K, splits, shape, mxfp4):
    run_case(driver_variant, M, N, K, splits, shape, row_major=True, mxfp4=mxfp4)


# The producer's order of an overlapped launch (llgen_w4a16_overlap: the first round of stages' weights and
# scales, then X's boxes): decode wrapping its ring, mid (the warp groups on alternate chunks).
@pytest.mark.parametrize("M,N,K,splits,shape", [CASES[0], CASES[2]], ids=["decode", "mid"])
def test_gemm_w4a16_overlapped_order_on_host_simt(driver, M, N, K, splits, shape):
    run_case(driver, M, N, K, splits, shape, row_major=False, mxfp4=False, overlap=True)


def run_case(driver, M: int, N: int, K: int, splits: int, shape: int, row_major: bool, mxfp4: bool,
             overlap: bool = False) -> None:
    path, d = driver
    rng = np.random.default_rng(M + N + K)
    x = rng.integers(-4, 5, size=(M, K)).astype(np.float32)
    xb = round16_bits(x, "bf16")
    if mxfp4:      # every product and sum exact: e2m1 values times 2^-2 .. 2^2 times small integers
        codes = rng.integers(0, 16, size=(N, K)).astype(np.uint8)
        e = rng.integers(125, 130, size=(N, K // 32)).astype(np.uint8)
        w = decode(codes, "e2m1") * np.repeat(2.0 ** (e.astype(np.float64) - 127), 32, axis=1)
        st = np.ascontiguousarray(e.T)
    else:
        q = rng.integers(-8, 8, size=(N, K))
        s = (2.0 ** rng.integers(-1, 3, size=(N, K // 128))).astype(np.float32)
        codes = (q & 0xF).astype(np.uint8)
        w = q * np.repeat(s, 128, axis=1)
        st = np.ascontiguousarray(round16_bits(s, "bf16").T)
    packed = (codes[:, 0::2] | codes[:, 1::2] << 4) if row_major else reorder_module().reorder(codes).reshape(-1)
    want = round16_bits((x.astype(np.float64) @ w.T).astype(np.float32), "bf16")
    inp, outp = os.path.join(d, "in.bin"), os.path.join(d, "out.bin")
    with open(inp, "wb") as f:
        f.write(np.array([M, N, K, splits, int(mxfp4), int(overlap)], dtype=np.int32).tobytes() + xb.tobytes() + packed.tobytes()
                + st.tobytes())
    rc, log = run([path, inp, outp], d)
    assert rc == 0, log
    assert f"shape {shape}" in log and f"splits {splits}" in log, log
    got = np.fromfile(outp, dtype=np.uint16).reshape(M, N)
    bad = np.argwhere(got != want)
    assert not len(bad), f"{len(bad)} of {got.size} differ; first {tuple(bad[0])}: {got[tuple(bad[0])]:#x}"


def test_weight_tile_is_the_chains_preshuffle():
    """The shared tile the upcast reads (examples/w4a16/w_smem.yaml, written from llgen chain's choice) is the
    layout the generated reorder packs: packed offset bit i holds the element offset[i] in both."""
    import yaml
    with open(os.path.join(ROOT, "examples", "w4a16", "w_smem.yaml")) as f:
        tile = yaml.safe_load(f)
    mod = reorder_module()
    assert [tuple(v) for v in tile["offset"]] == [tuple(v) for v in mod.OFFSET]
    assert tuple(tile["shape"]) == tuple(mod.SHAPE)
