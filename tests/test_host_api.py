"""The host SIMT runtime as a public driver for an author's own kernel:
``ll_codegen/simt/llgen_host.h`` (device_malloc, launch_grid, LLGEN_HOST_SHARED) and the example
``examples/host/epilogue_on_host.cu`` -- a hand-written kernel on a generated store, a grid of
blocks with blockIdx real, run for leading dimensions that take each run-time alignment path.
Bugs are reported, not crashes: a plain out-of-bounds store of the kernel's own names the address,
the buffer and the thread (guard page); the generated code's out-of-bounds stores are errors with
the thread and address; a race is one report per conflicting access, not one per byte."""
from __future__ import annotations

import os
import subprocess

import pytest

from ll_codegen.run import host
from toolchain import need

pytestmark = pytest.mark.compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "host", "epilogue_on_host.cu")
SIMT = os.path.join(ROOT, "ll_codegen", "simt")


def build(tmp_path, source: str, *defines: str, opt: str = "-O1") -> str:
    """``source`` built with the runtime's public header at ``opt``: the example at -O1, as users build it;
    the programs that only show a report at the suite's host level (``host.default_opt``: a quarter of
    -O1's compile time, the reports are the runtime's whatever the level)."""
    cxx = host.compiler()
    if cxx is None:
        need("hipcc")          # Debian's hipcc brings clang++: skip (or fail under CI) with that reason
    exe = str(tmp_path / ("prog" + "".join(d.lower() for d in defines)))
    r = subprocess.run([cxx, "-std=c++17", "-x", "c++", opt, *[f"-D{d}" for d in defines], "-I", SIMT, "-I",
                        os.path.join(ROOT, "generated"), "-include", "llgen_host.h", source, "-o", exe],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return exe


def run(exe: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    return build(tmp_path_factory.mktemp("host_api"), EXAMPLE)


@pytest.mark.parametrize("ldc", [264, 999, 266, 1028])     # 16-, 2-, 4-, 8-byte rows
def test_example_runs_for_every_leading_dimension(example, ldc):
    r = run(example, ldc)
    assert r.returncode == 0 and r.stdout.startswith("ok: 0 of 52800"), r.stdout + r.stderr


def test_own_out_of_bounds_store_is_reported(tmp_path):
    r = run(build(tmp_path, EXAMPLE, "LLGEN_EXAMPLE_OOB", opt=host.default_opt()), 264)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "out-of-bounds global access at 0x" in r.stderr and "by thread 5 (warp 0, lane 5, block (0, 0, 0))" in r.stderr
    assert "byte offset 105600 of the 105600-byte buffer" in r.stderr, r.stderr


def test_generated_out_of_bounds_store_is_an_error(example):
    r = run(example, 264, 200, 264, 8)               # C 8 elements short: the last tile's stores overrun
    assert r.returncode == 1, r.stdout + r.stderr
    errs = [ln for ln in r.stdout.splitlines() if ln.startswith("ERR ")]
    assert errs and all("outside every allocated global buffer" in e for e in errs), r.stdout
    assert "block (2, 1, 0)" in errs[0] and "st.global" in errs[0], errs[0]


RACE = r"""
#include <cstdio>
extern "C" __global__ void racy(int* out) {
    extern __shared__ __align__(16) unsigned char smem[];
    out[blockIdx.x * 32 + threadIdx.x] = gridDim.x * 100 + blockIdx.x;
    if (threadIdx.x < 2) {                         // two threads write the same 16 bytes, no barrier
        const uint4 v = {threadIdx.x, 1u, 2u, 3u};
        llgen_host::st_lds(smem, &v, sizeof v);    // a shared store as generated code makes it
    }
    __syncthreads();
}
LLGEN_HOST_SHARED(smem, 64);
int main() {
    int* out = static_cast<int*>(llgen_host::device_malloc(3 * 32 * sizeof(int)));
    llgen_host::Dim3 grid;
    grid.x = 3;
    const auto errors = llgen_host::launch_grid(grid, 32, smem, 64, [&] { racy(out); });
    for (const auto& e : errors) std::printf("ERR %s\n", e.c_str());
    std::printf("first %d %d %d\n", out[0], out[32], out[64]);
    return 0;
}
"""


def test_a_race_is_one_report_per_access(tmp_path):
    """Two threads store the same 16 shared bytes in one barrier interval: one report per block
    (each naming its block: gridDim and blockIdx are real), not one per byte."""
    src = tmp_path / "race.cu"
    src.write_text(RACE)
    r = run(build(tmp_path, str(src), opt=host.default_opt()))
    errs = [ln for ln in r.stdout.splitlines() if ln.startswith("ERR ")]
    assert len(errs) == 3, r.stdout
    assert all("race: thread 1" in e and "writes shared byte 0" in e for e in errs), errs
    assert [f"block ({b}, 0, 0)" in e for b, e in enumerate(errs)] == [True] * 3, errs
    assert "first 300 301 302" in r.stdout, r.stdout
