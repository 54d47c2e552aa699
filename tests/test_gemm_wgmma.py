"""The Hopper GEMM example (examples/kernels/gemm_wgmma.cu, its control examples/kernels/gemm_hopper.h)
without a GPU.

* It compiles for sm_90a from the generated headers alone, without spills and without ptxas
  serialising the wgmma (messages C7514 / C7517 / C7519: a register a wgmma in flight writes was
  touched), and the PTX holds what the plans say per kernel: 4 wgmma m64n256k16 per k-step, 1 + 4
  TMA boxes per stage, 4 TMA store boxes for a 16-bit C.
* It runs on the host SIMT runtime (every generated line: TMA with its swizzle and zero fill, the
  mbarrier ring, wgmma through its descriptors, both epilogues) at one and at several ragged tiles,
  bit-exact against numpy: small-integer inputs make every f32 sum exact, and a 16-bit C is that sum
  rounded to nearest even.
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
                                                    "mma_bf16")), "gemm_hopper.h"])
KERNELS = {"gemm_wgmma_f16_f32": ("f16", False), "gemm_wgmma_f16_f16": ("f16", True),
           "gemm_wgmma_bf16_f32": ("bf16", False), "gemm_wgmma_bf16_bf16": ("bf16", True)}


def test_gemm_wgmma_compiles_from_generated_headers(tmp_path):
    nvcc = need("nvcc")
    with open(KERNEL) as f:
        src = f.read()
    assert sorted(re.findall(r'#include "([^"]+)"', src)) == HEADERS
    with open(os.path.join(os.path.dirname(KERNEL), "gemm_hopper.h")) as f:
        control = f.read()
    assert not re.search(r"\basm\s*(volatile\s*)?\(", src + control), "every instruction is a generated header's wrapper"
    flags = ["-std=c++17", "-O3", *arch_flags("sm_90a"), "-I", GENERATED]
    ptx_path = str(tmp_path / "g.ptx")
    rc, out = run([nvcc, *flags[:2], "-gencode", "arch=compute_90a,code=compute_90a", *flags[4:], "-ptx", "-o",
                   ptx_path, KERNEL], str(tmp_path))
    assert rc == 0 and not re.search(r"\bwarning\b", out, re.I), out
    rc, out = run([nvcc, *flags, "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "g.cubin"), KERNEL], str(tmp_path))
    assert rc == 0, out
    assert out.count("0 bytes spill stores, 0 bytes spill loads") == len(KERNELS), out
    assert not re.search(r"C75(14|17|19)", out), f"ptxas serialises the wgmma:\n{out}"
    with open(ptx_path) as f:
        ptx = f.read()
    parts = re.split(r"\.entry (\w+)\(", ptx)[1:]   # name, body, name, body, ...
    bodies = dict(zip(parts[::2], parts[1::2]))
    assert sorted(bodies) == sorted(KERNELS)
    for name, (t, out16) in KERNELS.items():
        body = bodies[name]
        assert len(re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n256k16\.f32\.{t}\.{t}\b", body)) == 4, name
        loads = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier::complete_tx::bytes", body)
        assert len(loads) == 5, name
        stores = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta", body)
        assert len(stores) == (4 if out16 else 0), name
        # f32 C: 64 8-byte stores in store() and again in store_masked()
        assert len(re.findall(r"st\.global\.v2\.(?:b32|f32)", body)) == (0 if out16 else 128), name
        assert "setmaxnreg.dec.sync.aligned.u32 40" in body and "setmaxnreg.inc.sync.aligned.u32 232" in body


DRIVER = r"""
#include "%(kernel)s"
#include <cstdio>
#include <vector>

__attribute__((aligned(1024))) unsigned char smem[gemm_hopper::MAX_SMEM];

// driver IN OUT: IN = int32 ab, out16, M, N, K, then A (M x K) and B (K x N) as 16-bit bits; OUT = C.
int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* in = std::fopen(argv[1], "rb");
    int h[5];
    if (!in || std::fread(h, 4, 5, in) != 5) return 3;
    const int ab = h[0], out16 = h[1], M = h[2], N = h[3], K = h[4];
    std::vector<uint16_t> A(size_t(M) * K), B(size_t(K) * N);
    if (std::fread(A.data(), 2, A.size(), in) != A.size() || std::fread(B.data(), 2, B.size(), in) != B.size()) return 3;
    std::vector<unsigned char> C(size_t(M) * N * (out16 ? 2 : 4), 0xff);  // NaN poison
    gemm_wgmma::Maps maps = {};
    if (int r = gemm_wgmma::encode(maps, ab, out16, A.data(), B.data(), C.data(), M, N, K)) {
        std::printf("ERR encode %%d\n", r);
        return 4;
    }
    const gemm_wgmma::Kernel kernel = gemm_wgmma::kernel_of(ab, out16);
    const int grid = gemm_hopper::grid_size(M, N, 0);  // one CTA per tile (tests/test_gemm_fp8.py: fewer)
    llgen_host::Dim3 dims;
    dims.x = unsigned(grid);
    for (int b = 0; b < grid; ++b) {
        llgen_host::Dim3 bid;
        bid.x = unsigned(b);
        auto errors = llgen_host::launch(gemm_wgmma::THREADS, 32, smem, gemm_wgmma::smem_bytes(ab, out16),
                                         [&] { kernel(maps.a, maps.b, maps.c, C.data(), M, N, K); }, bid, dims);
        for (auto& e : errors) std::printf("ERR block %%d: %%s\n", b, e.c_str());
        if (!errors.empty()) return 5;
    }
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
                           defines=["LLGEN_HOST_SIMT"])
    assert path, log
    return path, d


@pytest.mark.parametrize("M,N,K,bf16,out16", [(128, 256, 128, False, False), (128, 256, 64, True, True),
                                              (200, 264, 72, False, True), (136, 8, 40, True, False)])
def test_gemm_wgmma_on_host_simt(driver, M, N, K, bf16, out16):
    """One tile (two k-steps); and ragged sizes over 2 x 2 and 2 x 1 tiles (TMA zero fill, the
    masked f32 store, the clipped TMA store)."""
    path, d = driver
    rng = np.random.default_rng(M + N + K)
    a = rng.integers(-3, 4, size=(M, K)).astype(np.float32)
    b = rng.integers(-3, 4, size=(K, N)).astype(np.float32)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    bits = functools.partial(round16_bits, dtype="bf16" if bf16 else "f16")
    if out16:
        want = bits(want)
    inp, outp = os.path.join(d, "in.bin"), os.path.join(d, "out.bin")
    with open(inp, "wb") as f:
        f.write(np.array([int(bf16), int(out16), M, N, K], dtype=np.int32).tobytes() + bits(a).tobytes()
                + bits(b).tobytes())
    rc, out = run([path, inp, outp], d)
    assert rc == 0, out
    got = np.fromfile(outp, dtype=np.uint16 if out16 else np.float32).reshape(M, N)
    bad = np.argwhere(got != want)
    assert not len(bad), f"{len(bad)} of {got.size} differ; first {tuple(bad[0])}: {got[tuple(bad[0])]}"
