"""Bit-exact GPU checks of shared tile -> shared tile relayouts (``relayout``): the manifest's
relayouts (an f16 transpose, the e4m3 wgmma-B transpose, a re-swizzle) and a seeded random sample of
shared tile pairs (``corpus.random_memory_tile``), each harness run ``LLGEN_GPU_RUNS`` times (default
2) on fresh random bits through ``gpu.Batch``; the destination tile read back must be the tensor."""
import os
import random
import tempfile

import pytest

from ll_codegen.run import gpu

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

from ll_codegen.api import plan_conversion  # noqa: E402
from ll_codegen.testing.corpus import random_memory_tile  # noqa: E402

RUNS = int(os.environ.get("LLGEN_GPU_RUNS", "2"))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
S = os.path.join(ROOT, "examples")


def cases():
    out = [("rl_transpose_f16", plan_conversion(f"{S}/specs/nvmma_f16_64x64_t.yaml", f"{S}/nvmma_shared_64x64.yaml",
                                                "f16", arch=gpu.arch())),
           ("rl_wgmma_b_e4m3", plan_conversion(f"{S}/specs/nvmma_f8_128x128_t.yaml", f"{S}/specs/nvmma_f8_128x128.yaml",
                                               "f8e4m3", arch=gpu.arch())),
           ("rl_reswizzle_bf16", plan_conversion(f"{S}/swizzled_shared_64x64.yaml", f"{S}/nvmma_shared_64x64.yaml",
                                                 "bf16", arch=gpu.arch(), warps=2)),
           # FA3's e4m3 V at head dim 64 with the keys in their own order (its shuffle forms receive words
           # whose swap partners hold the same registers in another byte order)
           ("rl_v_e4m3_d64", plan_conversion(f"{S}/chains/fa3_v_tma_d64.yaml", f"{S}/chains/fa3_v_kmajor_d64.yaml",
                                             "f8e4m3", arch=gpu.arch()))]
    rng = random.Random(20261128)
    for i in range(24):
        dtype = rng.choice(["f16", "f8e4m3", "f32", "bf16", "i8"])
        w = {"f16": 2, "bf16": 2, "f32": 4}.get(dtype, 1)
        shape = rng.choice([{"dim0": 32, "dim1": 32}, {"dim0": 64, "dim1": 64}, {"dim0": 16, "dim1": 128}])
        kinds = ("shared_linear", "swizzled_shared", "nvmma_shared")
        _, a = random_memory_tile(rng, shape, w, rng.choice(kinds))
        _, b = random_memory_tile(rng, shape, w, rng.choice(kinds))
        out.append((f"rl_random_{i}_{dtype}", plan_conversion(a, b, dtype, arch=gpu.arch(), warps=rng.choice([1, 2, 4]))))
    return out


CASES = cases()


@pytest.fixture(scope="module")
def results():
    with tempfile.TemporaryDirectory(prefix="llgen_gpu_relayout_") as d:
        b = gpu.Batch(CASES, d).compile()
        return {name: b.run(name, RUNS) for name, _ in CASES}


@pytest.mark.parametrize("name", [n for n, _ in CASES])
def test_bit_exact(name, results):
    assert results[name].ok, results[name].message
