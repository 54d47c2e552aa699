"""Registers <-> a given shared layout, and global tile streaming: llgen's headers against Gluon.

    python bench/bench_memory.py --out DIR [--iters 64]

One device call.  For each pair of ``SHARED`` and each layout of ``STREAM`` the same work is written twice, with the same
layouts (Gluon gets our exact bases: ``DistributedLinearLayout`` and ``SharedLinearLayout``):

* shared round trips: every CTA keeps its tile in registers (source layout), then ``iters`` times
  stores it into the given shared layout, barrier, loads it in the destination layout, xors it into an
  accumulator, barrier; llgen: the generated ``store()``/``load()``; Gluon: ``smem.store`` /
  ``smem.load``.  Reported: SM clocks per store + load per CTA tile, the slope between ``iters`` and
  ``5 x iters`` round trips so that the kernels' one-time tile load and store cancel (clock measured
  under load: ``llgen.bench.measure_clock_mhz``), and the bound -- 2 x tile bytes at 128 B per clock;
* global streaming: every CTA loads one tile in a distributed layout and stores it to another buffer
  (256 MiB each way); llgen: the generated global ``load()``/``store()``; Gluon: ``ttgl.load`` /
  ``ttgl.store`` with the same layout.  Reported: TB/s (read + written bytes) and a device copy.

Every kernel's output is checked (a wrong one fails the bench, exit 1).  Times are medians
(``llgen.bench.time_launches``).  Every timed kernel gets an integrity record (``llgen_bench.integrity``:
registers, spill bytes from ptxas ``-v``, stack and local bytes, STL/LDL; Gluon's from the compiled
kernel); a row where either side spills or uses local memory is flagged in the table.  No kernel here
has a base loop (the shared round trips are timed by a slope, which cancels the one-time work).
Writes DIR/memory.json and DIR/memory_table.md; prints the table.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from llgen_bench.gluon import MAXNREG, compiled_integrity  # noqa: E402
from llgen_bench.integrity import describe, kernel_record, parse_ptxas, problems, res_usage, spills  # noqa: E402
from llgen_bench.jobs import MAXRREG  # noqa: E402
from llgen_bench.sass import functions, sass_counts, sass_text  # noqa: E402
from llgen_bench.timing import measure_clock_mhz, time_launches, torch_events  # noqa: E402
from ll_codegen.api import load_layout, plan_conversion  # noqa: E402
from ll_codegen.testing.corpus import COL, MMA, ROW, blocked, dot  # noqa: E402

SW8 = {"kind": "swizzled_shared", "vec": 8, "per_phase": 1, "max_phase": 8, "order": [1, 0], "shape": [64, 64]}
SW4 = dict(SW8, vec=4)
PLAIN = dict(SW8, vec=1, max_phase=1)
NVMMA = {"kind": "nvmma_shared", "swizzle_byte_width": 128, "element_bitwidth": 16, "rank": 2, "shape": [64, 64]}
GLOBAL = {"kind": "global", "order": [1, 0], "alignment": 16, "shape": [64, 64]}
ROW4 = blocked([1, 4], [4, 8], [4, 1], [1, 0], [64, 64])

# (name, registers before, shared layout, registers after, dtype, Triton 3.6 clocks: Gluon on an H100 at
#  1980 MHz, 64 round trips, SM clocks per store + load, recorded before llgen had memory endpoints)
SHARED = [
    ("blocked_nvmma128_dotA_f16", ROW, NVMMA, dot(MMA, 0, 2, [64, 64]), "f16", 137),
    ("mma_swizzled4_blocked_f32", MMA, SW4, ROW4, "f32", 514),
    ("blocked_swizzled8_dotB_f16", ROW, SW8, dot(MMA, 1, 2, [64, 64]), "f16", 328),
    ("blocked_rowmajor_colblocked_f16", ROW, PLAIN, COL, "f16", 1103),
]
# (name, register layout, dtype)
STREAM = [("blocked_f16", ROW, "f16"), ("blocked_f32", ROW4, "f32"), ("mma_acc_f32", MMA, "f32")]
RAW = {"f16": "uint16_t", "f32": "uint32_t"}
TORCH = {"f16": "int16", "f32": "int32"}


def shared_kernel(name: str, raw: str) -> str:
    """The round-trip kernel on packed 32-bit words (``store_words``/``load_words``, the fast path
    for 8/16-bit data; for 32-bit data the words are the elements)."""
    words = raw != "uint32_t"
    st_w = f"{name}_st::kWords" if words else f"{name}_st::kRegs"
    ld_w = f"{name}_ld::kWords" if words else f"{name}_ld::kRegs"
    store = f"{name}_st::store_words(xw, smem)" if words else f"{name}_st::store(xw, smem)"
    load = f"{name}_ld::load_words(smem, y)" if words else f"{name}_ld::load(smem, y)"
    return f"""#include "{name}_st.cuh"
#include "{name}_ld.cuh"
extern "C" __global__ void __launch_bounds__({name}_st::kThreads) {name}(const {raw}* in, {raw}* out, int iters) {{
    extern __shared__ __align__(128) unsigned char smem[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long tile = (long long)blockIdx.x * {name}_st::kTileBytes / sizeof({raw});
    {raw} x[{name}_st::kRegs], out_regs[{name}_ld::kRegs];
#pragma unroll
    for (int r = 0; r < {name}_st::kRegs; ++r) x[r] = in[tile + {name}_st::src_index(r, lane, warp)];
    uint32_t xw[{st_w}], acc[{ld_w}];
    memcpy(xw, x, sizeof xw);
#pragma unroll
    for (int r = 0; r < {ld_w}; ++r) acc[r] = 0;
    for (int i = 0; i < iters; ++i) {{
        {store};
        __syncthreads();
        uint32_t y[{ld_w}];
        {load};
#pragma unroll
        for (int r = 0; r < {ld_w}; ++r) acc[r] ^= y[r];
        __syncthreads();
    }}
    memcpy(out_regs, acc, sizeof acc);
#pragma unroll
    for (int r = 0; r < {name}_ld::kRegs; ++r) out[tile + {name}_ld::dst_index(r, lane, warp)] = out_regs[r];
}}
"""


def stream_kernel(name: str, raw: str) -> str:
    return f"""#include "{name}_ld.cuh"
#include "{name}_st.cuh"
extern "C" __global__ void __launch_bounds__({name}_ld::kThreads) {name}(const {raw}* in, {raw}* out, int cols) {{
    const long long strides[2] = {{cols, 1}};
    const int tiles_n = cols / {name}_ld::kShape[1];
    const long long origin = (long long)(blockIdx.x / tiles_n) * {name}_ld::kShape[0] * cols
                             + (blockIdx.x % tiles_n) * {name}_ld::kShape[1];
    static_assert({name}_ld::kSmemBytes == 0 && {name}_st::kSmemBytes == 0, "direct plans: no scratch");
    {raw} x[{name}_ld::kRegs];
    {name}_ld::load(in + origin, strides, x, nullptr);
    {name}_st::store(x, out + origin, strides, nullptr);
}}
"""


def gluon():
    from triton.experimental import gluon as g
    from triton.experimental.gluon import language as ttgl

    @g.jit(do_not_specialize=["iters"])     # the kernel checked with 1 round trip is the one timed
    def shared_rt(in_ptr, out_ptr, iters, SRC: ttgl.constexpr, DST: ttgl.constexpr, SMEM: ttgl.constexpr,
                  M: ttgl.constexpr, N: ttgl.constexpr):
        base = ttgl.program_id(0) * (M * N)
        rm = ttgl.arange(0, M, layout=ttgl.SliceLayout(1, SRC))[:, None]
        rn = ttgl.arange(0, N, layout=ttgl.SliceLayout(0, SRC))[None, :]
        x = ttgl.load(in_ptr + base + rm * N + rn)
        smem = ttgl.allocate_shared_memory(in_ptr.dtype.element_ty, [M, N], SMEM)
        acc = ttgl.zeros([M, N], in_ptr.dtype.element_ty, DST)
        for i in range(iters):          # Triton's membar pass puts the two barriers llgen's kernel writes
            smem.store(x)
            acc = acc ^ smem.load(DST)
        dm = ttgl.arange(0, M, layout=ttgl.SliceLayout(1, DST))[:, None]
        dn = ttgl.arange(0, N, layout=ttgl.SliceLayout(0, DST))[None, :]
        ttgl.store(out_ptr + base + dm * N + dn, acc)

    @g.jit
    def stream(in_ptr, out_ptr, cols, L: ttgl.constexpr, M: ttgl.constexpr, N: ttgl.constexpr):
        tiles_n = cols // N
        pid = ttgl.program_id(0)
        origin = (pid // tiles_n) * M * cols + (pid % tiles_n) * N
        rm = ttgl.arange(0, M, layout=ttgl.SliceLayout(1, L))[:, None]
        rn = ttgl.arange(0, N, layout=ttgl.SliceLayout(0, L))[None, :]
        offs = origin + rm * cols + rn
        ttgl.store(out_ptr + offs, ttgl.load(in_ptr + offs))

    return ttgl, shared_rt, stream


def gl_dist(ttgl, L):
    b = L.bases
    return ttgl.DistributedLinearLayout(reg_bases=b["register"], lane_bases=b["lane"], warp_bases=b["warp"],
                                        block_bases=[], shape=list(L.out_dim_sizes.values()))


def header(d: str, src, dst, dtype: str, arch: str, name: str):
    """Plan src -> dst, write ``d/<name>.cuh``; the plan."""
    plan = plan_conversion(src, dst, dtype=dtype, arch=arch)
    with open(os.path.join(d, f"{name}.cuh"), "w") as f:
        f.write(plan.render("header", name=name))
    return plan


BUILT: dict[str, dict] = {}     # cubin -> its integrity record (ptxas -v, res-usage, SASS), by build()


def build(d: str, name: str, text: str, arch: str) -> str:
    """nvcc ``-cubin`` of one kernel (``-Xptxas -v``; again with ``-maxrregcount=255`` if the default
    build spills, the rule of every bench); its integrity record goes to ``BUILT[cubin]``."""
    src = os.path.join(d, name + ".cu")
    with open(src, "w") as f:
        f.write(text)
    out = os.path.join(d, name + ".cubin")
    cmd = ["nvcc", "-std=c++17", "-O3", f"-arch={arch}", "-I", d, "-cubin", "-Xptxas", "-v", "-o", out, src]
    r = subprocess.run(cmd, check=True, capture_output=True, text=True)
    cap = None
    if spills(parse_ptxas(r.stderr)):
        cap = MAXRREG
        r = subprocess.run(cmd[:-3] + [f"-maxrregcount={cap}"] + cmd[-3:], check=True, capture_output=True, text=True)
    text = sass_text(out)
    BUILT[out] = kernel_record(ptxas=parse_ptxas(r.stderr).get(name), res=res_usage(out).get(name), cap=cap,
                               sass=sass_counts(functions(text)[name]) if name in functions(text) else None)
    return out


def ours_record(cubin: str, fn) -> dict:
    """``BUILT[cubin]`` with the loaded function's registers and local bytes (CuPy)."""
    rec = dict(BUILT.get(cubin) or {})
    rec["regs"] = rec.get("regs") or fn.num_regs
    local = getattr(fn, "local_size_bytes", None)
    rec["local"] = max(x for x in (rec.get("local"), local, 0) if x is not None)
    return rec


def gluon_record(launch, d: str, name: str) -> tuple[dict, bool]:
    """Compile (launch once) a Gluon kernel, again with ``maxnreg=255`` if it spills; (its
    integrity record, whether the cap is needed).  ``launch(**opts)`` launches it."""
    compiled = launch()
    cap = bool(getattr(compiled, "n_spills", 0))
    if cap:
        compiled = launch(maxnreg=MAXNREG)
    return compiled_integrity(compiled, os.path.join(d, f"{name}_gluon.cubin"), MAXNREG if cap else None)["integrity"], cap


def slope(launch, iters: int) -> float:
    """Milliseconds per round trip: the median time of ``5 * iters`` round trips minus that of
    ``iters``, over ``4 * iters`` -- the tile's one-time global load and store (the kernel's prologue
    and epilogue, written differently on the two sides) cancel out."""
    t1 = time_launches(lambda: launch(iters), torch_events)
    t5 = time_launches(lambda: launch(5 * iters), torch_events)
    return (t5 - t1) / (4 * iters)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    ap.add_argument("--iters", type=int, default=64)
    ap.add_argument("--compile-only", metavar="ARCH", default=None, help="plan and nvcc every kernel; run nothing")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    if a.compile_only:
        d = tempfile.mkdtemp(prefix="llgen_mem_")
        for name, src, mem, dst, dtype, _ in SHARED:
            header(d, src, dict(mem), dtype, a.compile_only, f"{name}_st")
            header(d, dict(mem), dst, dtype, a.compile_only, f"{name}_ld")
            build(d, name, shared_kernel(name, RAW[dtype]), a.compile_only)
        for name, lay, dtype in STREAM:
            header(d, dict(GLOBAL), lay, dtype, a.compile_only, f"{name}_ld")
            header(d, lay, dict(GLOBAL), dtype, a.compile_only, f"{name}_st")
            build(d, name, stream_kernel(name, RAW[dtype]), a.compile_only)
        for cubin, rec in BUILT.items():
            print(f"{os.path.basename(cubin):<40} {describe(rec)}{'  FLAG ' + '; '.join(problems(rec)) if problems(rec) else ''}")
        print(f"compiled {len(SHARED) + len(STREAM)} kernels in {d}")
        return 0
    import cupy
    import torch
    ttgl, shared_rt, stream = gluon()
    arch = "sm_" + cupy.cuda.Device().compute_capability
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    clock = measure_clock_mhz(sms)["clock_mhz"]
    d = tempfile.mkdtemp(prefix="llgen_mem_")
    rows, failures = [], []
    ctas = 48 * sms
    for name, src, mem, dst, dtype, triton36 in SHARED:
        st = header(d, src, dict(mem), dtype, arch, f"{name}_st")
        ld = header(d, dict(mem), dst, dtype, arch, f"{name}_ld")
        cubin = build(d, name, shared_kernel(name, RAW[dtype]), arch)
        fn = cupy.RawModule(path=cubin).get_function(name)
        tile_bytes = st.memory.bytes
        n = tile_bytes // st.elem_bytes
        inp = torch.randint(-2 ** 15, 2 ** 15, (ctas * n,), device="cuda", dtype=getattr(torch, TORCH[dtype]))
        out = torch.empty_like(inp)
        cin, cout = cupy.asarray(inp), cupy.asarray(out)
        launch = lambda k=a.iters: fn((ctas,), (st.threads,), (cin, cout, k), shared_mem=tile_bytes)  # noqa
        launch(1)
        torch.cuda.synchronize()
        ok = bool(torch.equal(out, inp))
        ms = slope(launch, a.iters)
        s_lay, d_lay = load_layout(src)[0], load_layout(dst)[0]
        smem_l = ttgl.SharedLinearLayout(offset_bases=st.memory.layout["offset"])
        opts = {"num_warps": st.num_warps}
        tl_launch = lambda k=a.iters: shared_rt[(ctas,)](inp, out, k, gl_dist(ttgl, s_lay), gl_dist(ttgl, d_lay),  # noqa
                                                          smem_l, 64, 64, **opts)
        grec = None
        try:
            grec, cap = gluon_record(lambda **o: shared_rt[(ctas,)](inp, out, 1, gl_dist(ttgl, s_lay), gl_dist(ttgl, d_lay),
                                                                    smem_l, 64, 64, **opts, **o), d, name)
            if cap:
                opts["maxnreg"] = MAXNREG
            out.zero_()
            tl_launch(1)
            torch.cuda.synchronize()
            tok = bool(torch.equal(out, inp))
            tms = slope(tl_launch, a.iters)
        except Exception as e:  # noqa: BLE001
            tok, tms = False, None
            failures.append(f"gluon {name}: {type(e).__name__}: {' | '.join(str(e).splitlines()[:12])}")
        per = lambda t: None if t is None else t * 1e-3 * clock * 1e6 * sms / ctas  # noqa: E731
        # the plans' wavefronts per CTA tile: one per clock is the shared-memory bound of this pair
        # (above 2 x tile / 128 B when a layout reads an element twice, e.g. an operand both warps share)
        waves = (st.memory.cost.total_wavefronts * sum(1 for w in range(st.num_warps) if not w & st.memory.warp_skip)
                 + ld.memory.cost.total_wavefronts * ld.num_warps)
        rows.append({"kind": "shared", "name": name, "dtype": dtype, "ok": ok, "gluon_ok": tok, "ms": ms,
                     "integrity": ours_record(cubin, fn), "gluon_integrity": grec,
                     "gluon_ms": tms, "clocks": per(ms), "gluon_clocks": per(tms), "bound": 2 * tile_bytes / 128,
                     "plan_wavefronts": waves,
                     "triton36": triton36, "plan": f"{st.memory.instr} st {st.memory.cost.bank_conflicts} / "
                                                    f"{ld.memory.instr} ld {ld.memory.cost.bank_conflicts} conflicts"})
        if not ok:
            failures.append(f"{name}: wrong output")
    cols = 4096
    for name, lay, dtype in STREAM:
        L = load_layout(lay)[0]
        ld = header(d, dict(GLOBAL), lay, dtype, arch, f"{name}_ld")
        st = header(d, lay, dict(GLOBAL), dtype, arch, f"{name}_st")
        cubin = build(d, name, stream_kernel(name, RAW[dtype]), arch)
        fn = cupy.RawModule(path=cubin).get_function(name)
        elem = ld.elem_bytes
        rows_n = (256 << 20) // (cols * elem)           # 256 MiB each way: launch overheads vanish
        inp = torch.randint(-2 ** 15, 2 ** 15, (rows_n * cols,), device="cuda", dtype=getattr(torch, TORCH[dtype]))
        out = torch.empty_like(inp)
        cin, cout = cupy.asarray(inp), cupy.asarray(out)
        grid = (rows_n // 64) * (cols // 64)
        launch = lambda: fn((grid,), (ld.threads,), (cin, cout, cols))  # noqa: E731
        launch()
        torch.cuda.synchronize()
        ok = bool(torch.equal(out, inp))
        ms = time_launches(launch, torch_events)
        opts = {"num_warps": ld.num_warps}
        grec, cap = gluon_record(lambda **o: stream[(grid,)](inp, out, cols, gl_dist(ttgl, L), 64, 64, **opts, **o),
                                 d, name)
        if cap:
            opts["maxnreg"] = MAXNREG
        tl_launch = lambda: stream[(grid,)](inp, out, cols, gl_dist(ttgl, L), 64, 64, **opts)  # noqa
        out.zero_()
        tl_launch()
        torch.cuda.synchronize()
        tok = bool(torch.equal(out, inp))
        tms = time_launches(tl_launch, torch_events)
        cms = time_launches(lambda: out.copy_(inp), torch_events)
        tbs = lambda t: 2 * inp.numel() * elem / (t * 1e-3) / 1e12  # noqa: E731
        rows.append({"kind": "global", "name": name, "dtype": dtype, "ok": ok, "gluon_ok": tok, "ms": ms,
                     "integrity": ours_record(cubin, fn), "gluon_integrity": grec,
                     "gluon_ms": tms, "tbs": tbs(ms), "gluon_tbs": tbs(tms), "copy_tbs": tbs(cms),
                     "plan": f"{ld.memory.vector_bytes} B loads, {st.memory.vector_bytes} B stores"})
        if not ok:
            failures.append(f"{name}: wrong output")
    dev = torch.cuda.get_device_name()
    lines = [f"Memory endpoints on {dev} (clock {clock:.0f} MHz under load; {a.iters} round trips per CTA)"
             if clock else f"Memory endpoints on {dev}", "",
             "| registers -> given shared layout -> registers | dtype | plan | llgen clk | Gluon clk | llgen / Gluon "
             "| plan wavefronts | 2 x tile / 128 B | Triton 3.6 (H100, recorded) | llgen kernel | Gluon kernel | flag |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    f1 = lambda x: "—" if x is None else f"{x:.0f}"  # noqa: E731
    for r in rows:   # flagged: either side spills or uses local memory (its time is not the code's)
        r["flags"] = [f"{side}: {x}" for side, k in (("llgen", "integrity"), ("Gluon", "gluon_integrity"))
                      for x in problems(r.get(k))]
    integ = lambda r: f"{describe(r.get('integrity'))} | {describe(r.get('gluon_integrity'))} | {'; '.join(r['flags'])}"  # noqa: E731
    for r in rows:
        if r["kind"] == "shared":
            ratio = f"{r['ms'] / r['gluon_ms']:.2f}" if r["gluon_ms"] else "—"
            lines.append(f"| {r['name']} | {r['dtype']} | {r['plan']} | {f1(r['clocks'])} | {f1(r['gluon_clocks'])} "
                         f"| {ratio} | {r['plan_wavefronts']} | {r['bound']:.0f} | {r['triton36']} | {integ(r)} |")
    lines += ["", "| global tile streaming (load + store) | dtype | plan | llgen TB/s | Gluon TB/s | llgen / Gluon time "
              "| device copy TB/s | llgen kernel | Gluon kernel | flag |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r["kind"] == "global":
            lines.append(f"| {r['name']} | {r['dtype']} | {r['plan']} | {r['tbs']:.2f} | {r['gluon_tbs']:.2f} "
                         f"| {r['ms'] / r['gluon_ms']:.2f} | {r['copy_tbs']:.2f} | {integ(r)} |")
    table = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "memory.json"), "w") as f:
        json.dump({"device": dev, "clock_mhz": clock, "rows": rows, "failures": failures}, f, indent=1)
    with open(os.path.join(a.out, "memory_table.md"), "w") as f:
        f.write(table)
    for x in failures:
        print("FAILED", x)
    print(table)
    return 1 if any(not r["ok"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
