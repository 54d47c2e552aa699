"""Time the shared -> shared transposes of ``llgen convert`` (``relayout``) against the wavefront bound.

Cases: the f16 transpose of a 64x64 128-byte swizzled nvmma tile, the e4m3 wgmma-B transpose of a
128x128 one (MN-major -> K-major), and FA3's e4m3 V transpose as written and with the keys relabelled
as ``llgen chain examples/chains/fa3_fp8.yaml`` chooses (the same run).  Each CTA loads its tile of
random-normal values into shared memory once, then relayouts source -> destination ``iters`` times
(``__syncthreads()`` between, as the header's contract asks); the time per relayout is the slope
between ``iters`` and ``5 * iters`` (median of ``--repeats`` launches each, CUDA events through
CuPy), in SM clocks per CTA relayout (the SM's CTAs amortised).  Shared memory serves one wavefront
per clock per SM, so a CTA relayout needs at least its wavefronts (both sides, every warp) in
clocks: the plan's prediction and the bound (``relayout.wavefront_bound``) are printed beside it.

    python bench/bench_relayout.py [--repeats 7] [--iters 200] [--ctas 528]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ll_codegen.api import plan_conversion
from ll_codegen.chain.description import load_chain
from ll_codegen.chain.search import plan_chain
from ll_codegen.plan.relayout import wavefront_bound

S = os.path.join(ROOT, "examples")
CASES = [("transpose_f16", f"{S}/specs/nvmma_f16_64x64_t.yaml", f"{S}/nvmma_shared_64x64.yaml", "f16", "uint16_t"),
         ("wgmma_b_e4m3", f"{S}/specs/nvmma_f8_128x128_t.yaml", f"{S}/specs/nvmma_f8_128x128.yaml", "f8e4m3", "uint8_t")]


def plans(arch: str) -> list[tuple[str, object, str]]:
    """(name, plan, raw C type) of every case: the spec pairs, then FA3's V transpose as written and
    relabelled by the chain."""
    out = [(name, plan_conversion(src, dst, dtype, arch=arch), raw) for name, src, dst, dtype, raw in CASES]
    chain = plan_chain(load_chain(os.path.join(S, "chains", "fa3_fp8.yaml")))
    out += [("fa3_v_as_written", chain.identity_plans[1], "uint8_t"), ("fa3_v_chain", chain.plans[1], "uint8_t")]
    return out


def kernel(name: str, raw: str) -> str:
    return f"""#include "{name}.cuh"
extern "C" __global__ void __launch_bounds__({name}::kThreads) {name}_loop(const {raw}* in, {raw}* out, int iters) {{
    using namespace {name};
    extern __shared__ __align__(1024) unsigned char smem[];
    const long long base = (long long)blockIdx.x * (kSrcTileBytes / kElemBytes);
    for (int o = threadIdx.x; o < kSrcTileBytes / kElemBytes; o += kThreads)
        reinterpret_cast<{raw}*>(smem)[o] = in[base + src_tile_index(o)];
    __syncthreads();
    for (int i = 0; i < iters; ++i) {{
        relayout<{raw}>(i & 1 ? smem + kDstOffset : smem, i & 1 ? smem : smem + kDstOffset);
        __syncthreads();
    }}
    for (int o = threadIdx.x; o < kDstTileBytes / kElemBytes; o += kThreads)
        out[base + o] = reinterpret_cast<const {raw}*>(smem + (iters & 1 ? kDstOffset : 0))[o];
}}
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--ctas", type=int, default=528)
    a = ap.parse_args(argv)
    import cupy
    arch = "sm_" + cupy.cuda.Device().compute_capability
    clock_khz = cupy.cuda.runtime.getDeviceProperties(0)["clockRate"]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name, plan, raw in plans(arch):
            # the loop alternates the two buffers: from the second call on the data is permuted again
            # (not checked here; gpu_tests/test_shared_relayout.py is), the access pattern is the plan's
            with open(os.path.join(d, f"{name}.cuh"), "w") as f:
                f.write(plan.render("header", name=name))
            cu = os.path.join(d, f"{name}.cu")
            with open(cu, "w") as f:
                f.write(kernel(name, raw))
            cubin = os.path.join(d, f"{name}.cubin")
            subprocess.run(["nvcc", "-std=c++17", "-O3", f"-arch={arch}", "-I", d, "-cubin", "-o", cubin, cu],
                           check=True)
            fn = cupy.RawModule(path=cubin).get_function(f"{name}_loop")
            fn.max_dynamic_shared_size_bytes = plan.smem_bytes
            n = plan.load.memory.bytes // plan.elem_bytes
            host = np.random.default_rng(0).standard_normal(n * a.ctas).astype(np.float16).view(np.uint16)
            host = host if raw == "uint16_t" else (host >> 8).astype(np.uint8)
            cin, cout = cupy.asarray(host), cupy.zeros_like(cupy.asarray(host))

            def launch(iters: int) -> float:
                times = []
                for _ in range(a.repeats):
                    s, e = cupy.cuda.Event(), cupy.cuda.Event()
                    s.record()
                    fn((a.ctas,), (plan.threads,), (cin, cout, np.int32(iters)), shared_mem=plan.smem_bytes)
                    e.record()
                    e.synchronize()
                    times.append(cupy.cuda.get_elapsed_time(s, e))
                return float(np.median(times))
            launch(a.iters)
            ms = (launch(5 * a.iters) - launch(a.iters)) / (4 * a.iters)
            sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
            clocks = ms * clock_khz * sms / a.ctas                        # per CTA relayout, an SM's CTAs amortised
            m1, m2 = plan.load.memory.cost, plan.store.memory.cost
            predicted = (m1.total_wavefronts + m2.total_wavefronts) * plan.num_warps
            bound = (wavefront_bound(plan, "load") + wavefront_bound(plan, "store")) * plan.num_warps
            rows.append((name, m1.total_wavefronts, m2.total_wavefronts, plan.convert.strategy, clocks, predicted,
                         bound))
    print(f"{'case':18s} {'ld wf/warp':>10s} {'st wf/warp':>10s} {'conversion':>10s} {'clk/relayout':>12s} "
          f"{'predicted wf':>12s} {'bound wf':>8s}")
    for r in rows:
        print(f"{r[0]:18s} {r[1]:10d} {r[2]:10d} {r[3]:>10s} {r[4]:12.1f} {r[5]:12d} {r[6]:8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
