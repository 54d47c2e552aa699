"""``pack_operand(p, a)`` of ``llgen mma`` headers with A in registers, and the packed-conversion
wrappers (``emit/instructions.cvt_pack``): the register map against the layouts (every A element the
accumulator element of the same thread and coordinate, the accumulator built from another instruction
N), the refusal where the layouts put an element in another thread (8-bit A, warps along N), and the
host SIMT build of a kernel that packs an accumulator and converts pairs with every wrapper, its words
compared with numpy's float16, a bit-level bfloat16 and the fp8 reference of test_fp8_host_types."""
from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from ll_codegen.core.layout import layout_of
from ll_codegen.emit.env import environment
from ll_codegen.emit.instructions import CVT_PACK_TYPES, cvt_pack
from ll_codegen.layouts.nvidia import NVMMADistributedLayout
from ll_codegen.operations import render_files
from ll_codegen.plan.mma import MmaError, pack_map, pack_source, plan_mma
from ll_codegen.plan.mma_fragments import operand_from_accumulator
from ll_codegen.run import host
from ll_codegen.testing.corpus import mma_cases
from test_fp8_host_types import bf16_reference, encode, f16_reference
from toolchain import need

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIMT = os.path.join(ROOT, "ll_codegen", "simt")
CASES = {c.name: c for c in mma_cases() if c.a_space == "registers"}


def plan_of(name: str):
    c = CASES[name]
    return plan_mma(c.acc, c.a, c.b, c.a_space, c.b_space, c.version, c.dtype, c.acc_dtype, "cuda", c.arch)


@pytest.mark.parametrize("name", ["wgmma_rs_f16", "wgmma_rs_bf16", "wgmma_rs_f16_f16acc"])
def test_every_a_element_is_the_accumulator_element_of_its_thread(name):
    """For every thread and A word/part: the A layout's coordinate of that element equals the
    accumulator's coordinate of the register the map names (LinearLayout.apply, element by element)."""
    p = plan_of(name)
    pack, a, src = pack_map(p), layout_of(p.a.layout), pack_source(p)
    word = 4 // p.elem_bytes
    assert len(pack) == p.a.regs and all(len(w) == word for w in pack)
    for t in range(p.threads):
        lane, warp = t % 32, t // 32
        for w, regs in enumerate(pack):
            for h, r in enumerate(regs):
                assert a.apply(register=w * word + h, lane=lane, warp=warp) == \
                    src.apply(register=r, lane=lane, warp=warp), (t, w, h)


def test_the_accumulator_register_order_does_not_depend_on_the_instruction_n():
    """P computed by m64n32 or m64n64 instructions over the same 64 x 64 tile: one map."""
    p = plan_of("wgmma_rs_f16")
    a = layout_of(p.a.layout)
    M, _, K = p.shape
    maps = {operand_from_accumulator(NVMMADistributedLayout(version=(3, 0), warps_per_cta=(4, 1),
                                                            instr_shape=(16, n, 16)).to_linear([M, K]), a, 2, "x")
            for n in (8, 16, K)}
    assert maps == {pack_map(p)}


@pytest.mark.parametrize("name, message", [
    ("wgmma_rs_f8e4m3", "operand element 2 of lane 0, warp 0 is (0, 2), which the accumulator keeps in another "
                        "thread"),
    ("mma_sync_f16", "which the accumulator keeps in another thread"),        # A's warps 2 x 2: rows shared
    ("wgmma_rs_tf32", "tf32 is none of f16, bf16, f8e4m3, f8e5m2"),
])
def test_refusals_are_one_line_and_the_header_says_why(name, message):
    p = plan_of(name)
    with pytest.raises(MmaError) as ei:
        pack_map(p)
    assert message in str(ei.value) and "\n" not in str(ei.value)
    text = next(iter(render_files(p, "x", ["header"], "").values()))
    assert "No pack_operand(): " in text and "void pack_operand(" not in text and "cvt_pack" not in text


def test_a_wrong_map_is_caught():
    """The layout check can fail: A against an accumulator whose rows are shifted by one."""
    p = plan_of("wgmma_rs_f16")
    src = pack_source(p)
    bad = NVMMADistributedLayout(version=(3, 0), warps_per_cta=(4, 1), instr_shape=(16, 64, 16))
    moved = bad.to_linear([64, p.shape[2]])
    b = {k: [list(v) for v in vs] for k, vs in moved.bases.items()}
    b["lane"][2], b["lane"][3] = b["lane"][3], b["lane"][2]           # lanes' rows permuted
    from ll_codegen.core.layout import LinearLayout
    with pytest.raises(MmaError):
        operand_from_accumulator(LinearLayout(b, src.out_dim_sizes), layout_of(p.a.layout), 2, "x")


KERNEL = r"""
#include "pk.cuh"
#include "cvt8.cuh"
#include <cstdio>

LLGEN_HOST_SHARED(smem, 16);

// Every thread: p from the M x K values by p_index, packed into A; and each pair (p[2i], p[2i+1])
// through the e4m3 and e5m2 wrappers.
__global__ void pack_kernel(const float* vals, uint32_t* words, uint16_t* e4, uint16_t* e5) {
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    float p[pk::kPackRegs];
    for (int r = 0; r < pk::kPackRegs; ++r) p[r] = vals[pk::p_index(r, lane, warp)];
    uint32_t a[pk::kAWords];
    pk::pack_operand(p, a);
    for (int w = 0; w < pk::kAWords; ++w) words[t * pk::kAWords + w] = a[w];
    for (int i = 0; i < pk::kPackRegs / 2; ++i) {
        e4[t * pk::kPackRegs / 2 + i] = cvt8::cvt_pack_f8e4m3(p[2 * i + 1], p[2 * i]);
        e5[t * pk::kPackRegs / 2 + i] = cvt8::cvt_pack_f8e5m2(p[2 * i + 1], p[2 * i]);
    }
}

int main() {
    const int n = pk::kM * pk::kK, regs = pk::kPackRegs;
    float* vals = static_cast<float*>(llgen_host::device_malloc(n * 4));
    uint32_t* words = static_cast<uint32_t*>(llgen_host::device_malloc(pk::kThreads * pk::kAWords * 4));
    uint16_t* e4 = static_cast<uint16_t*>(llgen_host::device_malloc(pk::kThreads * regs));
    uint16_t* e5 = static_cast<uint16_t*>(llgen_host::device_malloc(pk::kThreads * regs));
    for (int i = 0; i < n; ++i) {
        unsigned x;
        if (std::scanf("%x", &x) != 1) return 2;
        std::memcpy(&vals[i], &x, 4);
    }
    llgen_host::Dim3 grid;
    grid.x = grid.y = grid.z = 1;
    for (const auto& e : llgen_host::launch_grid(grid, pk::kThreads, smem, 16, [&] { pack_kernel(vals, words, e4, e5); }))
        std::printf("ERR %s\n", e.c_str());
    for (int t = 0; t < pk::kThreads; ++t) {
        for (int w = 0; w < pk::kAWords; ++w) std::printf("%08x ", words[t * pk::kAWords + w]);
        for (int i = 0; i < regs / 2; ++i) std::printf("%04x %04x ", e4[t * regs / 2 + i], e5[t * regs / 2 + i]);
        std::printf("\n");
    }
}
"""


def wrappers_header() -> str:
    """The fp8 wrappers alone, rendered by instructions.j2 as every header renders them."""
    body = environment().from_string('{% import "instructions.j2" as i %}{{ i.define(records) }}').render(
        records=[cvt_pack(t) for t in CVT_PACK_TYPES if t.startswith("f8")])
    return ("#pragma once\n#include <cstdint>\n#include <cstring>\n#include <cuda_fp8.h>\n"
            f"namespace cvt8 {{\n{body}\n}}\n")


@pytest.mark.compile
@pytest.mark.parametrize("name", ["wgmma_rs_f16", "wgmma_rs_bf16"])
def test_host_simt_kernel_packs_bit_exactly(tmp_path, name):
    cxx = host.compiler()
    if cxx is None:
        need("hipcc")
    p = plan_of(name)
    (tmp_path / "pk.cuh").write_text(next(iter(render_files(p, "pk", ["header"], "").values())))
    (tmp_path / "cvt8.cuh").write_text(wrappers_header())
    (tmp_path / "main.cpp").write_text(KERNEL)
    exe = str(tmp_path / "pack")
    r = subprocess.run([cxx, "-std=c++17", "-x", "c++", host.default_opt(), "-I", SIMT, "-I", str(tmp_path), "-include",
                        "llgen_host.h", str(tmp_path / "main.cpp"), "-o", exe], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    M, _, K = p.shape
    rng = np.random.default_rng(3)
    vals = rng.normal(0, 300, M * K).astype(np.float32).view(np.uint32)
    specials = np.array([0x7f800000, 0xff800000, 0x7fc00000, 0x80000000, 0x43e80000, 0x477ff000, 0x38000001],
                        dtype=np.uint32)                         # inf, -inf, NaN, -0, 464, f16 overflow, tiny
    vals[:specials.size] = specials
    r = subprocess.run([exe], input="\n".join(f"{v:x}" for v in vals.tolist()), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "ERR" not in r.stdout, r.stdout[-2000:] + r.stderr
    rows = [[int(x, 16) for x in line.split()] for line in r.stdout.splitlines()]
    a, src = layout_of(p.a.layout), pack_source(p)
    ref = f16_reference if p.dtype == "f16" else bf16_reference
    nw, regs = p.a.regs, src.in_dim_size("register")
    for t, row in enumerate(rows):
        lane, warp = t % 32, t // 32
        for w in range(nw):
            for h in range(2):
                c = a.apply(register=2 * w + h, lane=lane, warp=warp)
                x = vals[c["dim0"] * K + c["dim1"]]
                assert (row[w] >> (16 * h)) & 0xffff == ref(np.array([x], dtype=np.uint32))[0], (t, w, h)
        pv = np.array([vals[(lambda c: c["dim0"] * K + c["dim1"])(src.apply(register=i, lane=lane, warp=warp))]
                       for i in range(regs)], dtype=np.uint32).view(np.float32)
        for i in range(regs // 2):
            e4, e5 = row[nw + 2 * i], row[nw + 2 * i + 1]
            for fmt, got in (("e4m3", e4), ("e5m2", e5)):
                lo, hi = encode(pv[2 * i:2 * i + 2], fmt, True)
                assert got == (hi << 8 | lo), (t, i, fmt)


@pytest.mark.compile
def test_device_branches_compile_for_sm_90a(tmp_path):
    """The pack header and the fp8 wrappers through nvcc (sm_90a): the asm's operand constraints and
    the arch guards compile, and the PTX holds each cvt."""
    nvcc = need("nvcc")
    p = plan_of("wgmma_rs_bf16")
    (tmp_path / "pk.cuh").write_text(next(iter(render_files(p, "pk", ["header"], "").values())))
    (tmp_path / "cvt8.cuh").write_text(wrappers_header())
    (tmp_path / "k.cu").write_text(
        '#include "pk.cuh"\n#include "cvt8.cuh"\n'
        "__global__ void k(const float* v, uint32_t* o) {\n"
        "    float p[pk::kPackRegs];\n    for (int r = 0; r < pk::kPackRegs; ++r) p[r] = v[r * 128 + threadIdx.x];\n"
        "    uint32_t a[pk::kAWords];\n    pk::pack_operand(p, a);\n"
        "    for (int w = 0; w < pk::kAWords; ++w) o[w * 128 + threadIdx.x] = a[w];\n"
        "    o[9999] = cvt8::cvt_pack_f8e4m3(p[1], p[0]) | uint32_t(cvt8::cvt_pack_f8e5m2(p[3], p[2])) << 16;\n}\n")
    r = subprocess.run([nvcc, "-arch=sm_90a", "--ptx", "-o", str(tmp_path / "k.ptx"), str(tmp_path / "k.cu")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    ptx = (tmp_path / "k.ptx").read_text()
    assert ptx.count("cvt.rn.bf16x2.f32") == p.a.regs
    assert "cvt.rn.satfinite.e4m3x2.f32" in ptx and "cvt.rn.satfinite.e5m2x2.f32" in ptx
