"""Bit-exact GPU checks of the packed conversions (``emit/instructions.cvt_pack``: cvt.rn.f16x2.f32,
cvt.rn.bf16x2.f32, cvt.rn.satfinite.e4m3x2.f32 / e5m2x2.f32) and of ``pack_operand`` of ``llgen mma``
headers with A in registers.

* Every wrapper's device branch, over a large sample of f32 bit patterns (every fp8 value, the midpoints
  between neighbours and one ulp either side, subnormals, overflow thresholds, +-0, +-inf, NaNs, random
  patterns) as both the hi and the lo operand, equals the host SIMT stand-ins (``simt/cuda_fp8.h``,
  ``cuda_fp16.h``, ``cuda_bf16.h``, built with the host compiler when there is one) and the references
  written from the formats' definitions (``tests/test_fp8_host_types.py``) -- operand order included.
* ``pack_operand`` of the wgmma f16 / bf16 register-A headers, run on the device: every A word is the
  accumulator's elements of the same thread, converted, bit for bit.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from ll_codegen.run import gpu

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from test_fp8_host_types import bf16_reference, encode, f16_reference, sample_bits  # noqa: E402

from ll_codegen.core.layout import layout_of  # noqa: E402
from ll_codegen.emit.env import environment  # noqa: E402
from ll_codegen.emit.instructions import CVT_PACK_TYPES, cvt_pack  # noqa: E402
from ll_codegen.operations import render_files  # noqa: E402
from ll_codegen.plan.mma import pack_source, plan_mma  # noqa: E402
from ll_codegen.run import host  # noqa: E402
from ll_codegen.testing.corpus import mma_cases  # noqa: E402

SIMT = os.path.join(ROOT, "ll_codegen", "simt")
TYPES = {"f16": "uint32_t", "bf16": "uint32_t", "f8e4m3": "uint16_t", "f8e5m2": "uint16_t"}


def wrappers() -> str:
    body = environment().from_string('{% import "instructions.j2" as i %}{{ i.define(records) }}').render(
        records=[cvt_pack(t) for t in CVT_PACK_TYPES])
    return ("#include <cuda_runtime.h>\ntypedef unsigned short uint16_t;\ntypedef unsigned int uint32_t;\n"
            f"namespace cvt {{\n{body}\n}}\n")


def kernels() -> str:
    out = [wrappers()]
    for t, r in TYPES.items():
        out.append(f'extern "C" __global__ void k_{t}(const float* hi, const float* lo, {r}* d, int n) {{\n'
                   f"    const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   f"    if (i < n) d[i] = cvt::cvt_pack_{t}(hi[i], lo[i]);\n}}\n")
    return "".join(out)


def reference(t: str, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    if t in ("f16", "bf16"):
        ref = f16_reference if t == "f16" else bf16_reference
        return ref(hi) << 16 | ref(lo)
    fmt = t[2:]
    return encode(hi.view(np.float32), fmt, True) << 8 | encode(lo.view(np.float32), fmt, True)


HOST_DRIVER = r"""
#include <cuda_fp8.h>
#include <cstdio>
int main() {
    unsigned a, b;
    while (std::scanf("%x %x", &a, &b) == 2) {
        float hi, lo;
        std::memcpy(&hi, &a, 4); std::memcpy(&lo, &b, 4);
        __half2 h = __floats2half2_rn(lo, hi);
        __nv_bfloat162 g = __floats2bfloat162_rn(lo, hi);
        unsigned hw, gw;
        std::memcpy(&hw, &h, 4); std::memcpy(&gw, &g, 4);
        std::printf("%x %x %x %x\n", hw, gw, __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3),
                    __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E5M2));
    }
}
"""


@pytest.fixture(scope="module")
def pairs():
    bits = sample_bits()
    rng = np.random.default_rng(11)
    hi = np.concatenate([bits, rng.permutation(bits)]).astype(np.uint32)
    lo = np.concatenate([rng.permutation(bits), bits]).astype(np.uint32)
    return hi, lo


def test_cvt_wrappers_equal_the_host_stand_ins_and_the_definitions(pairs):
    import cupy as cp
    hi, lo = pairs
    opts = ("-std=c++17", f"-arch={gpu.arch()}", *[f"-I{d}" for d in gpu.cuda_include_dirs()])
    mod = cp.RawModule(code=kernels(), options=opts)
    n = hi.size
    dh, dl = cp.asarray(hi.view(np.float32)), cp.asarray(lo.view(np.float32))
    got = {}
    for t, r in TYPES.items():
        d = cp.zeros(n, dtype=np.uint32 if r == "uint32_t" else np.uint16)
        mod.get_function(f"k_{t}")(((n + 255) // 256,), (256,), (dh, dl, d, np.int32(n)))
        got[t] = cp.asnumpy(d).astype(np.int64)
    for t in TYPES:
        want = reference(t, hi, lo)
        bad = np.nonzero(got[t] != want)[0]
        assert bad.size == 0, (t, [(hex(int(hi[i])), hex(int(lo[i])), hex(int(got[t][i])), hex(int(want[i])))
                                   for i in bad[:8]])
    cxx = host.compiler()
    if cxx is None:
        return                                           # the references stand in for the stand-ins' build
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "h.cpp"), os.path.join(d, "h")
        with open(src, "w") as f:
            f.write(HOST_DRIVER)
        r = subprocess.run([cxx, "-std=c++17", "-O1", "-I", SIMT, src, "-o", exe], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        r = subprocess.run([exe], input="\n".join(f"{a:x} {b:x}" for a, b in zip(hi.tolist(), lo.tolist())),
                           capture_output=True, text=True, timeout=600)
    rows = np.array([[int(x, 16) for x in line.split()] for line in r.stdout.splitlines()], dtype=np.int64)
    for j, t in enumerate(TYPES):
        assert (rows[:, j] == got[t]).all(), t


@pytest.mark.parametrize("name", ["wgmma_rs_f16", "wgmma_rs_bf16"])
def test_pack_operand_on_the_device(name):
    import cupy as cp
    c = next(c for c in mma_cases() if c.name == name)
    p = plan_mma(c.acc, c.a, c.b, c.a_space, c.b_space, c.version, c.dtype, c.acc_dtype, "cuda", c.arch)
    header = next(iter(render_files(p, "pk", ["header"], "").values()))
    code = header + (
        '\nextern "C" __global__ void k(const float* vals, uint32_t* words) {\n'
        "    const int t = threadIdx.x, lane = t % 32, warp = t / 32;\n"
        "    float p[pk::kPackRegs];\n"
        "    for (int r = 0; r < pk::kPackRegs; ++r) p[r] = vals[pk::p_index(r, lane, warp)];\n"
        "    uint32_t a[pk::kAWords];\n    pk::pack_operand(p, a);\n"
        "    for (int w = 0; w < pk::kAWords; ++w) words[t * pk::kAWords + w] = a[w];\n}\n")
    opts = ("-std=c++17", f"-arch={gpu.compile_arch([p])}", *[f"-I{d}" for d in gpu.cuda_include_dirs()])
    mod = cp.RawModule(code=code, options=opts)
    M, _, K = p.shape
    rng = np.random.default_rng(5)
    vals = rng.normal(0, 300, M * K).astype(np.float32).view(np.uint32)
    vals[:5] = [0x7f800000, 0xff800000, 0x7fc00000, 0x80000000, 0x477ff000]
    words = cp.zeros(p.threads * p.a.regs, dtype=np.uint32)
    mod.get_function("k")((1,), (p.threads,), (cp.asarray(vals.view(np.float32)), words))
    got = cp.asnumpy(words).reshape(p.threads, p.a.regs).astype(np.int64)
    a = layout_of(p.a.layout)
    ref = f16_reference if p.dtype == "f16" else bf16_reference
    assert pack_source(p).in_dim_size("register") == 2 * p.a.regs
    for t in range(p.threads):
        for w in range(p.a.regs):
            for h in range(2):
                co = a.apply(register=2 * w + h, lane=t % 32, warp=t // 32)
                x = vals[co["dim0"] * K + co["dim1"]]
                assert (got[t, w] >> (16 * h)) & 0xffff == ref(np.array([x], dtype=np.uint32))[0], (t, w, h)
