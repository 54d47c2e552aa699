"""``mma(acc, a, b, accumulate = 0)`` of a wgmma header: ``acc = A * B``, the accumulator's prior
contents ignored (the first k-step of every accumulator tile overwrites it, the later ones add).

The generated harness is rendered as ``llgen mma`` writes it, its one ``mma(...)`` call given
``accumulate = 0``, and run on the host SIMT runtime with the accumulator poisoned (every bit
set: a NaN of f32 and f16, -1 of i32); the accumulator must come back as ``A @ B`` (numpy,
exact: the corpus values keep every partial sum exact) in every element."""
from __future__ import annotations

import re

import numpy as np
import pytest

from ll_codegen.emit.render import file_names
from ll_codegen.operations import harness_of
from ll_codegen.plan.mma import plan_mma
from ll_codegen.run import host
from ll_codegen.testing.corpus import mma_cases
from ll_codegen.verify.emulate.reference import acc_bits, encode_small, mma_tensors

#: wgmma forms with two k-steps or more a tile: shared A and B (f32, i32 and f16 accumulators),
#: A from registers
PICKED = ("wgmma_f16_sw32_ak_bk_64x64x32_w4x1", "wgmma_i8_sw32_ak_bk_64x64x64_w4x1",
          "wgmma_f16_sw32_ak_bk_64x64x32_w4x1_f16acc", "wgmma_rs_f16")
POISON = np.uint32(0xFFFFFFFF)


def _plans():
    cases = {c.name: c for c in mma_cases()}
    return [(name, plan_mma(c.acc, c.a, c.b, c.a_space, c.b_space, c.version, c.dtype, c.acc_dtype, "cuda", c.arch))
            for name, c in ((n, cases[n]) for n in PICKED)]


def test_the_picked_plans_take_several_k_steps_a_tile():
    """``accumulate`` goes to the first k-step of each accumulator tile only: a form with one
    k-step could not tell it from every step taking it."""
    for name, p in _plans():
        assert p.kind == "wgmma", name
        tiles = [s.acc for s in p.steps]
        assert len(tiles) >= 2 * len(set(tiles)), name


@pytest.mark.compile
def test_accumulate_zero_ignores_the_poisoned_accumulator(tmp_path):
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    plans = _plans()
    host.write_sources(str(tmp_path), plans)
    for name, p in plans:
        path = tmp_path / file_names(p.target, name)["harness"]
        text, n = re.subn(r"(\n\s*mma\(acc, [^;]*)\);", r"\1, 0);", path.read_text())
        assert n == 1, name
        path.write_text(text)
    exe, log = host.build(str(tmp_path), plans, opt="-O0")
    assert exe, log
    inputs, wants = [], []
    for k, (name, p) in enumerate(plans):
        op = harness_of(p)
        assert op.variants(p) == ("",), name
        run = op.data(p, np.random.default_rng(k), "")
        a, b, _, _ = mma_tensors(p, np.random.default_rng(k))          # the draws op.data made
        assert np.array_equal(run.args[0], encode_small(a, p.dtype).reshape(-1)), name
        args = list(run.args)
        args[2] = np.full_like(args[2], POISON)                          # the accumulator's prior contents
        inputs += [np.ascontiguousarray(x).tobytes() for x in args]
        wants.append((name, acc_bits(a @ b, p.acc_dtype).reshape(-1), run.wants[3].shape))
    code, stderr, errors, data = host.run_driver(exe, inputs)
    assert code == 0 and not errors, (code, stderr[-500:], errors)
    pos = 0
    for name, want, regs_shape in wants:
        got = np.frombuffer(data[pos:pos + want.nbytes], dtype=np.uint32)
        pos += want.nbytes + 4 * int(np.prod(regs_shape))                # out, then every thread's registers
        bad = np.flatnonzero(got != want)
        assert not len(bad), (f"{name}: {len(bad)} of {want.size} accumulator elements differ, element {bad[0]}: "
                              f"got {int(got[bad[0]]):#x}, want {int(want[bad[0]]):#x} (A @ B)")
    assert pos == len(data)
