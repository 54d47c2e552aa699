"""The host SIMT runtime's model of ``setmaxnreg`` (``simt/hopper.h``), from the PTX ISA: a CTA holds at
launch what ``__launch_bounds__(threads, 1)`` allows, 65536 / threads rounded down to 8 registers a
thread; ``setmaxnreg.dec`` returns registers to the CTA's pool and ``setmaxnreg.inc`` waits until the
pool covers it.  Warp-specialised budgets that add up to more than the launch's allocation never get
their registers: on an H200 such a kernel hung (an fp8 attention build with a 96-register producer and
two 208-register consumer warp groups: 96 x 128 + 208 x 256 = 65,536 > 168 x 384 = 64,512); the host
run reports the deadlock in one line, and the budgets that fit run to the end.

The kernel below is a generated mma header's ``regs_dec`` / ``regs_inc`` (the wrappers every Hopper
example uses) in a block of one producer and two or three consumer warp groups.
"""
from __future__ import annotations

import os
import subprocess

import pytest

from ll_codegen.api import plan_mma
from ll_codegen.operations import write_files
from ll_codegen.run import host

pytestmark = pytest.mark.compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOPPER = os.path.join(ROOT, "examples", "hopper")

if host.compiler() is None:
    pytest.skip("no clang++ for the host SIMT runtime (apt-get install clang)", allow_module_level=True)

DRIVER = r"""
#include <cstdio>
#include <cstdlib>
#include "wg.cuh"

static int out[512];

template <int P, int C>
__global__ void k_budgets() {
    const int group = threadIdx.x / 128;
    if (group == 0) wg::regs_dec<P>();
    else wg::regs_inc<C>();
    __syncthreads();
    out[threadIdx.x] = group;
}

int main(int argc, char** argv) {
    const int mode = std::atoi(argv[1]);
    std::vector<std::string> errors;
    auto go = [&](int threads, auto kernel) { errors = llgen_host::launch(threads, 32, nullptr, 0, kernel); };
    switch (mode) {
        case 0: go(384, [] { k_budgets<24, 240>(); }); break;   // 24 x 128 + 240 x 256 = 64,512: fits
        case 1: go(384, [] { k_budgets<96, 200>(); }); break;   // 63,488: fits
        case 2: go(384, [] { k_budgets<96, 208>(); }); break;   // 65,536 > 168 x 384
        case 3: go(512, [] { k_budgets<24, 160>(); }); break;   // 24 x 128 + 160 x 384 = 64,512 = 128 x 512
        case 4: go(384, [] { k_budgets<104, 200>(); }); break;  // 64,512: exactly the launch's allocation
        case 5: go(384, [] { k_budgets<24, 160>(); }); break;   // .inc to 160, below the 168 held: an error
    }
    for (const auto& e : errors) std::printf("ERR %s\n", e.c_str());
    int sum = 0;
    for (int t = 0; t < 512; ++t) sum += out[t];
    std::printf("SUM %d\n", sum);
    return 0;
}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("setmaxnreg"))
    plan = plan_mma(os.path.join(HOPPER, "wgmma_acc_128x128.yaml"), os.path.join(HOPPER, "a_smem_128x64.yaml"),
                    os.path.join(HOPPER, "b_smem_64x128.yaml"), "f16", "f32", "cuda", "sm_90a")
    write_files(plan, directory, "wg", emit=("header",))
    exe, log = host.build(directory, [], "budgets", driver=DRIVER)
    assert exe is not None, log

    def go(mode: int) -> tuple[list[str], int]:
        proc = subprocess.run([exe, str(mode)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        return [ln[4:] for ln in lines if ln.startswith("ERR ")], int(lines[-1].split()[1])
    return go


@pytest.mark.parametrize("mode", [0, 1, 3, 4])
def test_budgets_within_the_launch_allocation_run(run, mode):
    errors, total = run(mode)
    assert errors == [], errors
    assert total == (128 * 2 + 128 * 1 if mode != 3 else 128 * (1 + 2 + 3))   # every thread wrote its group


def test_budgets_above_the_launch_allocation_deadlock_in_one_line(run):
    errors, _ = run(2)
    assert len(errors) == 1, errors
    assert "deadlock" in errors[0] and "setmaxnreg.inc" in errors[0] and "168" in errors[0], errors[0]


def test_inc_below_the_current_count_is_one_error(run):
    errors, _ = run(5)
    assert errors and "setmaxnreg.inc to 160" in errors[0] and "holds 168" in errors[0], errors
