"""The bench kernels (``templates/bench.cu.j2``) run on the host SIMT runtime: for a conversion of
each strategy and element width, ``<name>_bench`` (convert, xor key ^ k, convert back) and
``<name>_base`` (the same loop without the conversions) write exactly ``bench.expected_output`` --
for an odd number of round trips that output depends on where every element went, so a forward
conversion that misplaces elements fails even when the back conversion undoes it."""
import os
import re
import subprocess

import numpy as np
import pytest

from ll_codegen.run import host
from ll_codegen.api import back_plan, plan_conversion
from llgen_bench.jobs import latency_floor_specs
from llgen_bench.timing import expected_output
from ll_codegen.testing.corpus import COL, MMA, ROW
from ll_codegen.core.dtypes import C_RAW
from ll_codegen.operations import write_files
from ll_codegen.spec import spec_from_dict

pytestmark = pytest.mark.compile

if host.compiler() is None:
    if os.environ.get("LLGEN_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail("LLGEN_REQUIRE_TOOLCHAINS=1 but no clang++ for the host SIMT runtime", pytrace=False)
    pytest.skip("no clang++ for the host SIMT runtime (apt-get install clang)", allow_module_level=True)

SHUFFLE_SRC = {"kind": "blocked", "size_per_thread": [1, 2], "threads_per_warp": [4, 8], "warps_per_cta": [1, 1],
               "order": [1, 0], "shape": [16, 16]}
SHUFFLE_DST = dict(SHUFFLE_SRC, threads_per_warp=[8, 4])
# (name, src, dst, dtype, target, arch): smem words path (8/16-bit), smem elements, shuffles, wave64
PAIRS = [("row_col_f16", ROW, COL, "f16", "cuda", "sm_90"),
         ("mma_row_i8", MMA, ROW, "i8", "cuda", "sm_90"),
         ("row_col_f32", ROW, COL, "f32", "cuda", "sm_80"),
         ("shuffle_f64", SHUFFLE_SRC, SHUFFLE_DST, "f64", "cuda", "sm_90"),
         ("shuffle_f16_wave64", dict(SHUFFLE_SRC, threads_per_warp=[8, 8]), dict(SHUFFLE_SRC, threads_per_warp=[8, 8],
                                                                                 order=[0, 1]), "f16", "hip", "gfx90a")]
WARP_T_SRC = {"kind": "blocked", "size_per_thread": [1, 8], "threads_per_warp": [8, 4], "warps_per_cta": [8, 1],
              "order": [1, 0], "shape": [64, 32]}
WARP_T_DST = dict(WARP_T_SRC, size_per_thread=[8, 1], threads_per_warp=[1, 32])
# warp-local smem plans (warp barriers) whose forward and back conversions use different bytes
PAIRS += [("warp_t_f32", WARP_T_SRC, WARP_T_DST, "f32", "cuda", "sm_90"),
          ("warp_t_f16", WARP_T_SRC, WARP_T_DST, "f16", "cuda", "sm_90")]
# lanes that hold copies (lane bits 0..2 of the 8x16x32 destination, bit 4 of the source): the staged
# plans select by lane first, so that every lane stores distinct bytes
T3_SRC = {"kind": "blocked", "size_per_thread": [1, 1, 8], "threads_per_warp": [1, 4, 8], "warps_per_cta": [4, 1, 1],
          "order": [2, 1, 0], "shape": [8, 16, 32]}
T3_DST = dict(T3_SRC, size_per_thread=[8, 1, 1], threads_per_warp=[8, 4, 1], warps_per_cta=[1, 1, 4], order=[0, 1, 2])
PAIRS += [("t3_dims_021_f16", T3_SRC, T3_DST, "f16", "cuda", "sm_90"),
          ("latency_floor_4w", *latency_floor_specs(4), "f32", "cuda", "sm_90")]
ITERS = (3, 4)


def _driver(name: str, plan, bench_file: str) -> str:
    raw = C_RAW[plan.elem_bytes]
    n = int(np.prod(plan.shape))
    calls = "\n".join(f"    run(\"{k}\", {it}, [&] {{ {name}_{k}(in.data(), out.data(), {it}); }});"
                      for k in ("bench", "base") for it in ITERS)
    return f'''#include "{bench_file}"
#include <cstdio>
#include <functional>
#include <vector>
__attribute__((aligned(16))) unsigned char smem[{max(16, 2 * plan.smem_bytes + 16)}];
int main(int argc, char** argv) {{
    std::vector<{raw}> in({n}), out({n});
    FILE* f = std::fopen(argv[1], "rb");
    if (!f || std::fread(in.data(), sizeof({raw}), in.size(), f) != in.size()) return 3;
    FILE* o = std::fopen(argv[2], "wb");
    auto run = [&](const char* kind, int iters, std::function<void()> k) {{
        auto errors = llgen_host::launch({plan.threads}, {plan.warp_size}, smem, sizeof smem, k);
        for (auto& e : errors) std::printf("ERR %s %d %s\\n", kind, iters, e.c_str());
        std::fwrite(out.data(), sizeof({raw}), out.size(), o);
    }};
{calls}
    std::fclose(o);
    return 0;
}}
'''


def _run_bench(tmp_path, name: str, src, dst, dtype: str, target: str, arch: str, buffers: int = 1,
               edit=None, per_warp: bool = False, mutate=None) -> tuple[str, list[str]]:
    """Render (header + bench), build and run the bench kernels on the host runtime: (stdout, the
    mismatches against ``expected_output``).  ``edit`` may rewrite the bench source first, ``mutate``
    the forward and back plans."""
    s, d = spec_from_dict(dict(src)).linear, spec_from_dict(dict(dst)).linear
    plan = plan_conversion(s, d, dtype, target, arch, scratch_buffers=buffers, scratch_per_warp=per_warp)
    back = back_plan(plan, s, d, scratch_buffers=buffers, scratch_per_warp=per_warp)
    if mutate is not None:
        plan, back = mutate(plan), mutate(back)
    paths = write_files(plan, str(tmp_path), name, emit=("header", "bench"), back_plan=back)
    if edit is not None:
        with open(paths[-1]) as f:
            text = f.read()
        with open(paths[-1], "w") as f:
            f.write(edit(text))
    drv = tmp_path / "driver.cpp"
    drv.write_text(_driver(name, plan, os.path.basename(paths[-1])))
    exe = tmp_path / "driver"
    r = subprocess.run([host.compiler(), *host.flags(), *host.runtime_include(host.compiler(), host.flags()),
                        "-I", str(tmp_path), str(drv), "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    dt = np.dtype(f"u{plan.elem_bytes}")
    inp = np.random.default_rng(7).integers(0, np.iinfo(dt).max, size=int(np.prod(plan.shape)), dtype=dt,
                                            endpoint=True)
    (tmp_path / "in.bin").write_bytes(inp.tobytes())
    r = subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    outs = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=dt).reshape(2 * len(ITERS), -1)
    bad = []
    for got, (kind, iters) in zip(outs, [(k, it) for k in ("bench", "base") for it in ITERS]):
        want = expected_output(inp, inp.size, iters)
        if not np.array_equal(got, want):
            bad.append(f"{kind} after {iters} round trips: {int((got != want).sum())} differ")
    return r.stdout, bad


@pytest.mark.parametrize("name,src,dst,dtype,target,arch", PAIRS, ids=[p[0] for p in PAIRS])
def test_bench_kernels_write_the_expected_output(tmp_path, name, src, dst, dtype, target, arch):
    out, bad = _run_bench(tmp_path, name, src, dst, dtype, target, arch)
    assert "ERR" not in out and not bad, out[-3000:] + "; ".join(bad)


DOUBLE = [p for p in PAIRS if p[0] in ("row_col_f16", "row_col_f32", "mma_row_i8", "warp_t_f32")]


@pytest.mark.parametrize("name,src,dst,dtype,target,arch", DOUBLE, ids=[p[0] for p in DOUBLE])
def test_double_buffered_bench_kernels(tmp_path, name, src, dst, dtype, target, arch):
    """--scratch-buffers 2: no barrier before the stores; the bench alternates two buffers (forward
    in the first, reverse in the second) and the host runtime's race checker finds no hazard."""
    out, bad = _run_bench(tmp_path, name, src, dst, dtype, target, arch, buffers=2)
    assert "ERR" not in out and not bad, out[-3000:] + "; ".join(bad)


def test_double_buffered_plans_race_on_one_buffer(tmp_path):
    """The same kernel with both conversions on one buffer: the missing barrier is a race (warp_t:
    forward and reverse lay the scratch out differently; where they mirror each other, as in
    row_col, each thread stores exactly the bytes it loaded and one buffer would not race)."""
    def one_buffer(text: str) -> str:
        edited = re.sub(r"smem \+ \d+\)", "smem)", text)
        assert edited != text
        return edited
    name, src, dst, dtype, target, arch = DOUBLE[-1]     # forward and reverse lay the scratch out differently
    out, _ = _run_bench(tmp_path, name, src, dst, dtype, target, arch, buffers=2, edit=one_buffer)
    assert "race:" in out, out[-2000:]


WARP_LOCAL = [p for p in PAIRS if p[0].startswith("warp_t")]


@pytest.mark.parametrize("name,src,dst,dtype,target,arch", WARP_LOCAL, ids=[p[0] for p in WARP_LOCAL])
def test_per_warp_scratch_bench_kernels(tmp_path, name, src, dst, dtype, target, arch):
    """--scratch-per-warp: both barriers of each warp-local conversion are __syncwarp(); forward and
    reverse keep warp w in the same slice, so the round trips on one buffer are race-free."""
    out, bad = _run_bench(tmp_path, name, src, dst, dtype, target, arch, per_warp=True)
    assert "ERR" not in out and not bad, out[-3000:] + "; ".join(bad)


def test_warp_barriers_without_per_warp_slices_race(tmp_path):
    """Warp barriers only, but the reverse conversion in the default swizzle (warp bits not the top
    offset bits): it gives warp w bytes that another warp used in the forward one, and the host race
    checker sees it."""
    from dataclasses import replace
    name, src, dst, dtype, target, arch = WARP_LOCAL[1]
    s, d = spec_from_dict(dict(src)).linear, spec_from_dict(dict(dst)).linear
    default_back = back_plan(plan_conversion(s, d, dtype, target, arch), s, d)

    def reverse_in_default_layout(p):
        if p.src_bases == default_back.src_bases:            # the reverse plan
            return replace(default_back, smem=replace(default_back.smem, per_warp=True))
        return p
    out, _ = _run_bench(tmp_path, name, src, dst, dtype, target, arch, per_warp=True,
                        mutate=reverse_in_default_layout)
    assert "race:" in out, out[-2000:]


def test_expected_output_sees_placement():
    """An odd round-trip count applies key(e) once: two elements swapped by a wrong forward
    conversion (and swapped back) carry each other's key."""
    inp = np.arange(64, dtype=np.uint16)
    want = expected_output(inp, 64, 3)
    swapped = inp.copy()
    k = expected_output(np.zeros(64, dtype=np.uint16), 64, 3)    # the change applied to each element
    swapped ^= k[[1, 0] + list(range(2, 64))]
    assert not np.array_equal(swapped, want)
    assert np.array_equal(expected_output(inp, 64, 4), inp ^ np.uint16(0 ^ 1 ^ 2 ^ 3))
