"""The host run's checks can fail: typical rendering mistakes, injected into
a rendered header, must make the host run fail.  Each mutation names the
conversion it is applied to, the one-line edit, and what must catch it:
``mismatch`` (a register or output element differs from numpy), ``race``
(the runtime's race check), ``mask`` (the shuffle member-mask check).
"""
import os
import re

import numpy as np
import pytest

from ll_codegen.run import host
from ll_codegen.api import plan_conversion
from ll_codegen.testing.corpus import NAMED
from ll_codegen.spec import spec_from_dict

pytestmark = pytest.mark.compile

if host.compiler() is None:
    if os.environ.get("LLGEN_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail("LLGEN_REQUIRE_TOOLCHAINS=1 but no clang++ for the host SIMT runtime", pytrace=False)
    pytest.skip("no clang++ for the host SIMT runtime (apt-get install clang)", allow_module_level=True)

PAIRS = {p.name: p for p in NAMED}


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC_PAIRS = {"examples/specs/blocked_wave64_2x2_64x64.yaml": ("examples/specs/blocked_wave64_64x64.yaml",
                                                               "examples/specs/blocked_wave64_2x2_64x64.yaml")}


def plan_of(pair: str, dtype: str, target: str, arch: str):
    """A named corpus pair, or a pair of spec files of the repository."""
    if pair in SPEC_PAIRS:
        src, dst = (os.path.join(ROOT, f) for f in SPEC_PAIRS[pair])
        return plan_conversion(src, dst, dtype, target, arch)
    p = PAIRS[pair]
    return plan_conversion(spec_from_dict(dict(p.src)).linear, spec_from_dict(dict(p.dst)).linear, dtype, target, arch)


# (id, (pair, dtype, target, arch), regex, replacement, what must catch it)
MUTATIONS = [
    ("shfl_member_mask", ("blocked_intra_warp_f16", "f32", "cuda", "sm_90"),
     r"__shfl_sync\(0xffffffff", "__shfl_sync(0xfffffffe", "member mask"),
    ("shfl_wrong_lane_xor", ("blocked_intra_warp_f16", "f32", "cuda", "sm_90"),
     r"src_lane \^ 0x4\)", "src_lane ^ 0x5)", "expected"),
    ("swapped_select", ("blocked_intra_warp_f16", "f32", "cuda", "sm_90"),
     r"sel0 \? s\[4\] : s\[0\]", "sel0 ? s[0] : s[4]", "expected"),
    ("swapped_lane_selector", ("flash_attention_acc_to_dot_a_f8", "f8e4m3", "cuda", "sm_90"),
     r"sel0 \? (0x[0-9a-f]+u) : (0x[0-9a-f]+u)", r"sel0 ? \2 : \1", "expected"),
    ("smem_store_offset", ("blocked_to_mma_v2_f16", "f16", "cuda", "sm_90"),
     r"st_shared_v4_b32<256>", "st_shared_v4_b32<272>", "expected|before any thread wrote|race"),
    ("smem_load_offset", ("mma_v2_to_blocked_f32", "f32", "cuda", "sm_80"),
     r"ld_shared_v4_b32<(\d+)>\(ld_addr", r"ld_shared_v4_b32<\1 + 16>(ld_addr", "expected|race"),
    ("missing_barrier", ("blocked_to_mma_v2_f16", "f16", "cuda", "sm_90"),
     r"__syncthreads\(\);  // stores visible", "", "race|before any thread wrote"),
    ("ldmatrix_swapped_outputs", ("blocked_transpose_f16", "f16", "cuda", "sm_90"),
     r"\(ld_addr, v0_0, v0_1,", "(ld_addr, v0_1, v0_0,", "expected"),
    ("hip_shfl_wrong_lane", ("examples/specs/blocked_wave64_2x2_64x64.yaml", "f16", "hip", "gfx90a"),
     r"__shfl\(out0, src_lane\)", "__shfl(out0, src_lane ^ 0x1)", "expected"),
    ("hip_missing_barrier", ("mfma_to_blocked_wave64", "f16", "hip", "gfx90a"),
     r"__syncthreads\(\);  // stores visible", "", "race|before any thread wrote"),
    ("hip_lds_store_offset", ("mfma_to_blocked_wave64", "f32", "hip", "gfx90a"),
     r"detail::st\(st_ptr \+ 0x80,", "detail::st(st_ptr + 0x88,", "expected|race|before any thread wrote"),
    ("hip_wave32_missing_barrier", ("blocked_transpose_f16", "f16", "hip", "gfx1030"),
     r"__syncthreads\(\);  // stores visible", "", "race|before any thread wrote"),
]


def run_mutated(d: str, plan, regex: str, repl: str):
    os.makedirs(d)
    name = "mut"
    host.write_sources(d, [(name, plan)])
    header = os.path.join(d, "mut.cuh" if plan.target == "cuda" else "mut.h")
    text = open(header).read()
    if regex:
        mutated, n = re.subn(regex, repl, text, count=1)
        assert n == 1, f"mutation {regex!r} found nothing to change in the rendered header"
        open(header, "w").write(mutated)
    exe, log = host.build(d, [(name, plan)])
    assert exe, log
    return host.run_cases(d, "driver", [(name, plan)], np.random.default_rng(3))[0]


@pytest.mark.parametrize("case", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_mutation_is_caught(case, tmp_path):
    _, (pair, dtype, target, arch), regex, repl, catch = case
    plan = plan_of(pair, dtype, target, arch)
    assert run_mutated(str(tmp_path / "plain"), plan, "", "").ok, "the unmutated conversion must pass"
    r = run_mutated(str(tmp_path / "mutated"), plan, regex, repl)
    assert not r.ok, "the mutated header still passes: this check cannot fail"
    assert re.search(catch, r.message), r.message
