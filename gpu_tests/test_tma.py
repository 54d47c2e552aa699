"""TMA harnesses on the GPU (sm_90a): every nvmma_shared tile TMA can write (swizzle 128/64/32/none,
8/16/32-bit, transposed or not, one or several boxes) and the same bases given as swizzled_shared,
CuTe and shared_linear tiles.  Each harness loads the tile in bounds, loads it with part of the box
beyond the tensor (zero fill), and stores it clipped at the tensor; the tile read back and the whole
tensor must equal numpy bit for bit.  The tensor map is encoded by the driver
(``run/tensor_map.py``, ctypes on libcuda) with the header's parameters; NVRTC compiles for
sm_90a (``gpu.compile_arch``).  ``test_make_tensor_map`` builds a host program with nvcc that
encodes the map with the header's own ``make_tensor_map()`` instead.  Needs an sm_90 GPU.
"""
import os
import shutil
import subprocess
import tempfile

import pytest

from ll_codegen.run import gpu

REASON = gpu.available()
if REASON is None and gpu.arch() != "sm_90":
    REASON = f"TMA harnesses need an sm_90 GPU, this one is {gpu.arch()}"
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

from ll_codegen.layouts.memory import (CuteLayout, GlobalLayout, NVMMASharedLayout, SharedLinearLayout,  # noqa: E402
                                       SwizzledSharedLayout)
from ll_codegen.plan.tma import plan_tma  # noqa: E402

DTYPE = {8: "i8", 16: "f16", 32: "f32"}
SHAPES = ([64, 64], [128, 256], [16, 128], [256, 32], [8, 64], [32, 512])
RUNS = int(os.environ.get("LLGEN_GPU_RUNS", "2"))


def cases():
    out = []
    for sw in (128, 64, 32, 0):
        for bits in (8, 16, 32):
            for tr in (False, True):
                for shape in SHAPES:
                    try:
                        L = NVMMASharedLayout(sw, bits, transposed=tr).to_linear(shape)
                        g = GlobalLayout(order=[0, 1] if tr else [1, 0]).to_linear(shape)
                        p = plan_tma(g, L, DTYPE[bits], "cuda", "sm_90a", num_warps=2)
                    except Exception:           # no such nvmma tile, or rows under 16 bytes
                        continue
                    out.append((f"tma_sw{sw}_b{bits}_{'t' if tr else 'n'}_{shape[0]}x{shape[1]}", p))
    g = GlobalLayout(order=[1, 0]).to_linear([64, 64])
    nv = NVMMASharedLayout(128, 16).to_linear([64, 64])
    for name, L in (("swizzled", SwizzledSharedLayout(8, 1, 8, [1, 0]).to_linear([64, 64])),
                    ("cute", CuteLayout("<(64,64),(64,1),swizzle<3,4,3>,elem=f16>").to_linear([64, 64])),
                    ("linear", SharedLinearLayout(offset=nv.bases["offset"]).to_linear([64, 64]))):
        out.append((f"tma_{name}_f16_64x64", plan_tma(g, L, "f16", "cuda", "sm_90a")))
    return out


CASES = cases()


@pytest.fixture(scope="module")
def batch():
    with tempfile.TemporaryDirectory(prefix="llgen_tma_") as d:
        yield gpu.Batch(CASES, d).compile()


@pytest.mark.parametrize("name,plan", CASES, ids=[n for n, _ in CASES])
def test_tma_bit_exact(batch, name, plan):
    r = batch.run(name, RUNS)
    assert r.ok, r.message


def test_coverage():
    assert {p.tma.swizzle_bytes for _, p in CASES} == {0, 32, 64, 128}
    assert {p.elem_bytes for _, p in CASES} == {1, 2, 4}
    assert max(len(p.tma.boxes) for _, p in CASES) > 4 and {p.tma.dims for _, p in CASES} == {(1, 0), (0, 1)}


DRIVER = r"""
#include <cstdio>
#include <vector>
#include "t_harness.cu"
int main() {
    using T = %(raw)s;
    const int d0 = %(d0)d, d1 = %(d1)d, o0 = %(o0)d;                // o0: the contiguous dim
    const long long row = (o0 == 1 ? d1 : d0) + 16 / sizeof(T);      // padded by 16 bytes
    std::vector<T> in(d0 * d1), tensor(row * (o0 == 1 ? d0 : d1)), out(d0 * d1);
    for (int i = 0; i < d0 * d1; ++i) in[i] = T(i * 2654435761u);
    for (int i = 0; i < d0; ++i)
        for (int j = 0; j < d1; ++j) tensor[o0 == 1 ? i * row + j : j * row + i] = in[i * d1 + j];
    T *din, *dout, *dt; void* dmap;
    cudaMalloc(&din, in.size() * sizeof(T)); cudaMalloc(&dout, out.size() * sizeof(T));
    cudaMalloc(&dt, tensor.size() * sizeof(T)); cudaMalloc(&dmap, 128);
    cudaMemcpy(din, in.data(), in.size() * sizeof(T), cudaMemcpyHostToDevice);
    cudaMemcpy(dt, tensor.data(), tensor.size() * sizeof(T), cudaMemcpyHostToDevice);
    CUtensorMap map;
    using U = unsigned long long;
    const U dims[2] = {U(d0), U(d1)}, strides[2] = {U(o0 == 1 ? row : 1), U(o0 == 1 ? 1 : row)};
    if (CUresult r = t::make_tensor_map(&map, dt, dims, strides)) { std::printf("make_tensor_map: %%d\n", int(r)); return 1; }
    cudaMemcpy(dmap, &map, 128, cudaMemcpyHostToDevice);
    cudaFuncSetAttribute(t_harness, cudaFuncAttributeMaxDynamicSharedMemorySize, t::kTileBytes + 8);
    t_harness<<<1, t::kThreads, t::kTileBytes + 8>>>(din, dout, dt, static_cast<const uint64_t*>(dmap));
    if (cudaError_t e = cudaDeviceSynchronize()) { std::printf("%%s\n", cudaGetErrorString(e)); return 1; }
    cudaMemcpy(out.data(), dout, out.size() * sizeof(T), cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < d0 * d1; ++i) bad += out[i] != in[i];
    std::printf("%%d of %%d differ\n", bad, d0 * d1);
    return bad != 0;
}
"""


@pytest.mark.parametrize("name", ["tma_sw128_b16_n_128x256", "tma_sw64_b32_t_256x32", "tma_sw32_b8_n_16x128"])
def test_make_tensor_map(name, tmp_path):
    """The header's own make_tensor_map() (host code, the real <cuda.h>, -lcuda) encodes a map the
    in-bounds harness loads with, bit for bit."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    plan = dict(CASES)[name]
    plan.write(str(tmp_path), "t")
    raw = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t"}[plan.elem_bytes]
    (tmp_path / "main.cu").write_text(DRIVER % dict(raw=raw, d0=plan.shape[0], d1=plan.shape[1], o0=plan.tma.order[0]))
    exe = str(tmp_path / "main")
    b = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90a", "-o", exe, str(tmp_path / "main.cu"), "-lcuda"],
                       capture_output=True, text=True)
    assert b.returncode == 0, b.stderr[-2000:]
    r = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("0 of "), r.stdout + r.stderr
