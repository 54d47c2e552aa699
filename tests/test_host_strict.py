"""The host SIMT runtime is as strict as the hardware and the compilers.

* ``cp.async`` data lands at the ``cp.async.wait_group`` that covers its committed group: a tile
  read without the wait is reported as stale, a store into bytes still in flight as a race, and a
  copy never waited for at exit;
* CUDA's warp-level intrinsics (``__syncwarp``, ``__shfl_*_sync``) do not compile in HIP code;
* a TMA store reads its box until ``cp.async.bulk.wait_group.read``: writing the box before that
  is a race, and a store never waited for leaves the tensor unwritten and is reported.

Each check is shown to fire on a generated harness with the one-line edit that breaks it, and to
stay quiet on the unedited one.
"""
from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from ll_codegen.run import host

pytestmark = pytest.mark.compile

if host.compiler() is None:
    if os.environ.get("LLGEN_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail("LLGEN_REQUIRE_TOOLCHAINS=1 but no clang++ for the host SIMT runtime", pytrace=False)
    pytest.skip("no clang++ for the host SIMT runtime (apt-get install clang)", allow_module_level=True)


def copy_plan():
    from ll_codegen.layouts.memory import GlobalLayout, NVMMASharedLayout
    from ll_codegen.plan.planner import plan_copy
    return plan_copy(GlobalLayout(order=[1, 0]).to_linear([64, 64]), NVMMASharedLayout(128, 16).to_linear([64, 64]),
                     "f16", "cuda", "sm_90", num_warps=4)


def tma_plan():
    from ll_codegen.layouts.memory import GlobalLayout, NVMMASharedLayout
    from ll_codegen.plan.tma import plan_tma
    return plan_tma(GlobalLayout(order=[1, 0]).to_linear([64, 64]), NVMMASharedLayout(128, 16).to_linear([64, 64]),
                    "f16", "cuda", "sm_90a", num_warps=2)


def run_edited(tmp_path, plan, old: str, new: str, where: str = "harness"):
    """Render the plan's files, replace ``old`` by ``new`` once in its harness (or header), build
    and run on the host: the result (first failing variant)."""
    host.write_sources(str(tmp_path), [("m", plan)])
    path = tmp_path / ("m_harness.cu" if where == "harness" else "m.cuh")
    text = path.read_text()
    if old:
        assert text.count(old) >= 1, f"{old!r} is not in the rendered {where}"
        path.write_text(text.replace(old, new, 1))
    exe, log = host.build(str(tmp_path), [("m", plan)])
    assert exe, log
    return host.run_cases(str(tmp_path), "driver", [("m", plan)], np.random.default_rng(5))[0]


def test_cp_async_copy_runs_clean(tmp_path):
    r = run_edited(tmp_path, copy_plan(), "", "")
    assert r.ok, r.message


def test_cp_async_without_wait_reads_stale_bytes(tmp_path):
    r = run_edited(tmp_path, copy_plan(), "    wait<0>();\n    __syncthreads();", "    __syncthreads();")
    assert not r.ok and "before the cp.async of thread" in r.message and "stale data" in r.message, r.message


def test_cp_async_without_commit_never_lands(tmp_path):
    """wait_group waits for committed groups only: without commit() the copies are still in flight."""
    r = run_edited(tmp_path, copy_plan(), "    commit();\n    wait<0>();", "    wait<0>();")
    assert not r.ok and "stale data" in r.message, r.message


def test_cp_async_copy_overwritten_in_flight(tmp_path):
    r = run_edited(tmp_path, copy_plan(), "    commit();\n    wait<0>();",
                   "    commit();\n    if (threadIdx.x == 0) { unsigned char z = 0; LLGEN_SMEM_PUT(smem, z); }\n"
                   "    wait<0>();")
    assert not r.ok and "still copies into" in r.message, r.message


@pytest.mark.parametrize("call", ["__syncwarp();", "o[0] = __shfl_sync(0xffffffffu, o[0], 1);",
                                  "o[0] = __shfl_xor_sync(0xffffffffu, o[0], 1);"])
def test_hip_code_has_no_cuda_warp_intrinsics(tmp_path, call):
    """hipcc has none of them; neither has the runtime in a HIP translation unit (CUDA keeps them)."""
    for header, ok in (("hip/hip_runtime.h", False), ("cuda_runtime.h", True)):
        src = tmp_path / "k.cpp"
        src.write_text(f"#include <{header}>\n__global__ void k(int* o) {{ {call} }}\n")
        r = subprocess.run([host.compiler(), *host.flags(), *host.runtime_include(host.compiler(), host.flags()), "-c",
                            str(src), "-o", str(tmp_path / "k.o")], capture_output=True, text=True)
        assert (r.returncode == 0) == ok, (header, r.stderr[-500:])
        if not ok:
            assert "llgen_hip_has_no" in r.stderr


def test_tma_store_runs_clean(tmp_path):
    r = run_edited(tmp_path, tma_plan(), "", "")
    assert r.ok, r.message


def test_tma_store_without_wait_is_reported(tmp_path):
    """The tensor is written at cp.async.bulk.wait_group.read: without it, nothing arrives, and the
    runtime says why."""
    r = run_edited(tmp_path, tma_plan(), "        store_wait<0>();           // TMA has read the tile\n", "")
    assert not r.ok and "no cp.async.bulk.wait_group.read covered" in r.message, r.message


def test_tma_store_box_overwritten_before_the_wait(tmp_path):
    r = run_edited(tmp_path, tma_plan(), "        store_commit();\n",
                   "        store_commit();\n        { unsigned char z = 0; LLGEN_SMEM_PUT(smem, z); }\n")
    assert not r.ok and "still reads" in r.message, r.message


def test_tma_load_without_mbarrier_wait_is_a_race(tmp_path):
    r = run_edited(tmp_path, tma_plan(), "    mbar_wait(bar, 0);\n", "")
    assert not r.ok and "race" in r.message, r.message
