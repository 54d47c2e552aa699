"""The PTX interpreter's wgmma (``verify/ptx/warp.py: wgmma_instr``): PTX ISA "wgmma.wait_group" --
a wgmma.mma_async's accumulator registers are in flight from its issue until the thread's
``wgmma.wait_group N`` leaves at most N newer committed groups; touching them in between is an error.
Hand-written PTX, one thread (the interpreter records wgmma per thread; D is not computed)."""
from __future__ import annotations

import numpy as np
import pytest

from ll_codegen.verify.ptx.ops import PtxError
from ll_codegen.verify.ptx.sim import parse, run

HEAD = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_param_0)
{
.reg .pred p;
.reg .f32 %f<9>;
.reg .b64 %rd<4>;
ld.param.u64 %rd3, [k_param_0];
mov.f32 %f1, 0f3F800000;
mov.f32 %f2, 0f40000000;
mov.f32 %f3, 0f40400000;
mov.f32 %f4, 0f40800000;
mov.u64 %rd1, 0;
mov.u64 %rd2, 0;
setp.ne.b32 p, 1, 0;
wgmma.fence.sync.aligned;
wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, p, 1, 1, 0, 0;
"""
ISSUE_LINE = 13                     # the wgmma.mma_async's line in HEAD (the body counts from '{')
COMMIT, WAIT = "wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned {};"
STORE_F2 = "st.global.f32 [%rd3], %f2;"


def execute(*body: str) -> np.ndarray:
    kernel = parse(HEAD + "\n".join(body) + "\nret;\n}\n")["k"]
    return run(kernel, [np.zeros(4, np.float32)], 1, 16).args[0]


def test_registers_are_back_after_the_covering_wait():
    assert execute(COMMIT, WAIT.format(0), STORE_F2)[0] == 2.0


def test_a_second_wgmma_chains_on_registers_in_flight():
    """Same-shape accumulator chaining: the second wgmma names the registers of the first, in flight."""
    second = HEAD.strip().splitlines()[-1]
    assert execute(second, COMMIT, WAIT.format(0), STORE_F2)[0] == 2.0


@pytest.mark.parametrize("body, message", [
    ((COMMIT, WAIT.format(1), STORE_F2),
     f"register %f2 read while the wgmma.mma_async of PTX line {ISSUE_LINE} writing it is in flight"),
    ((COMMIT, "mov.f32 %f3, 0f00000000;", WAIT.format(0)),
     f"register %f3 written while the wgmma.mma_async of PTX line {ISSUE_LINE} writing it was in flight"),
    ((WAIT.format(0),), f"wgmma.wait_group 0 (PTX line {ISSUE_LINE + 1}) with the wgmma.mma_async of PTX line "
                        f"{ISSUE_LINE} not committed"),
    ((COMMIT,), f"exits with the wgmma.mma_async of PTX line {ISSUE_LINE} in flight"),
])
def test_touching_a_wgmma_in_flight_is_an_error(body, message):
    with pytest.raises(PtxError, match=message.replace("(", r"\(").replace(")", r"\)")):
        execute(*body)
