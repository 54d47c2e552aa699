"""The auto plans of the bench's many-elements-a-thread and rank-3 pairs reach the wavefront bound.

For a conversion through shared memory the bench's bound (``llgen_bench.jobs.bounds``) is
(tile bytes stored once + the bytes every warp must load into its registers) / 128 B a clock, i.e.
a count of wavefronts summed over warps.  The auto plan of each pair below, in both directions (the
bench times round trips), is replayed by the brute-force bank counter (``measure_smem``): its
store wavefronts times the warps that store (broadcast warps skip the store) plus its load
wavefronts times all warps equal that bound exactly, with no bank conflict, and the numpy emulator
moves random bits to the right registers.  So on these pairs a slower time than the bound is the
kernel's (registers, latency, integer work), not the plan's: blocked -> dot operand B 64 x 128 f16
forward is 4 x (32 stores + 128 ldmatrix.trans loads) = 640 wavefronts, back one stored copy and
4 x 32 loads = 256.
"""
from __future__ import annotations

import pathlib
import sys

import pytest

from ll_codegen.api import plan_conversion
from ll_codegen.core.dtypes import DTYPE_BYTES
from ll_codegen.core.target import get_target
from ll_codegen.plan.plans import without_via
from ll_codegen.verify.emulate.banks import measure_smem
from ll_codegen.verify.emulate.convert import check_plan
from llgen_bench.jobs import as_linear, bounds

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from bench_convert import CORPUS  # noqa: E402

#: pairs of bench/bench_convert.py's CORPUS with 64-256 elements a thread or rank 3
PAIRS = ["blocked_to_dotB_64x128_f16", "blocked_to_dotB_64x128_f16_2x2", "T_row_col_64x128_f32_2w",
         "T3_batch_row_col_2x64x64_f16", "T3_batch_row_col_4x32x64_f32_8w", "T3_dims_021_8x16x32_f16",
         "mma2_3d_to_blocked_2x64x64_f16"]


@pytest.mark.parametrize("name", PAIRS)
def test_auto_plan_moves_exactly_the_bound_in_both_directions(name):
    _, s, d, dt, *_ = next(c for c in CORPUS if c[0] == name)
    tgt = get_target("cuda", "sm_90")
    src, dst = as_linear(s), as_linear(d)
    for a, b in ((src, dst), (dst, src)):
        plan = plan_conversion(a, b, dt, "cuda", "sm_90")
        check_plan(plan, a, b)
        smem = without_via(plan)                  # a staged plan's shared-memory step
        store, load = measure_smem(smem, tgt)
        assert (store.bank_conflicts, load.bank_conflicts) == (0, 0), name
        warps = a.in_dim_size("warp")
        storing = warps >> bin(smem.smem.store_warp_skip).count("1")
        waves = store.total_wavefronts * storing + load.total_wavefronts * warps
        assert waves == bounds(a, b, DTYPE_BYTES[dt])["smem_clk"], (name, waves)


def test_dot_b_forward_loads_with_ldmatrix_trans_at_16_bytes():
    """blocked -> dot operand B 64 x 128 f16 (mma warps [4, 1]: every warp holds all of B): 16-byte
    stores of the blocked rows, ldmatrix.trans loads of B's k-pairs -- 8 + 32 instructions a warp."""
    _, s, d, dt, *_ = next(c for c in CORPUS if c[0] == "blocked_to_dotB_64x128_f16")
    m = without_via(plan_conversion(as_linear(s), as_linear(d), dt, "cuda", "sm_90")).smem
    assert (m.store_instr, m.store_vec, m.load_instr, m.load_vec) == ("vector", 8, "matrix.trans", 8)
    assert (m.store.instructions, m.load.instructions, m.block_barriers) == (8, 32, 2)
