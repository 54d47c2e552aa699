"""Bit-exact GPU checks of ``llgen mma`` harnesses.

Every case of ``corpus.mma_cases()`` -- wgmma with both operands in shared memory (swizzle
128/64/32, K- and MN-major A and B, f16, bf16, tf32, f8e4m3, i8, one or two warp groups), wgmma
with A in registers, mma.sync for each operand type, and the f16-accumulator forms (``_f16acc``:
wgmma .f16 D for f16 / e4m3 / e5m2 operands, mma.sync .f16 for f16 and e4m3) -- compiles in NVRTC
batches (sm_90a for wgmma) and runs on small random integers: every thread's accumulator registers and the output
tensor must equal C + A @ B bit for bit.  The harness writes A and B into shared memory with
ordinary stores, so the descriptors read exactly the bytes the layouts say.
"""
import os
import tempfile

import pytest

from ll_codegen.plan.mma import plan_mma
from ll_codegen.run import gpu
from ll_codegen.testing.corpus import mma_cases

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

CASES = mma_cases()
RUNS = int(os.environ.get("LLGEN_GPU_RUNS", "2"))


@pytest.fixture(scope="module")
def batch():
    with tempfile.TemporaryDirectory(prefix="llgen_mma_gpu_") as d:
        plans = [(c.name, plan_mma(c.acc, c.a, c.b, c.a_space, c.b_space, c.version, c.dtype, c.acc_dtype,
                                   "cuda", c.arch)) for c in CASES]
        # wgmma needs sm_90a; mma.sync compiles there too
        yield gpu.Batch(plans, d).compile(batch_size=16)


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_mma_bit_exact(batch, name):
    res = batch.run(name, runs=RUNS)
    assert res.ok, res.message
