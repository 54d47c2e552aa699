"""Our bases equal Triton's on seeded random specs of every legacy kind.

Triton (the ``crosscheck`` extra, CPU only) computes its own bases in a worker
process that survives Triton aborting; see ``tests/parity.py``.  The old CTA
triple (``ctas_per_cga``/``cta_split_num``/``cta_order``) no longer exists in
the pinned Triton: ``triton_oracle.cga_from_triple`` converts it to
``cga_layout`` as older Triton's ``makeCgaLayout`` did.  Skipped without
Triton unless ``LLGEN_REQUIRE_TRITON=1``.
"""
import os

import pytest

from parity import compare, documented, table
from parity_specs import KINDS, specs
from triton_oracle import TritonOracle, triton_available

pytestmark = pytest.mark.crosscheck

#: random specs compared (the default sized for CI on 2 cores; LLGEN_PARITY_SPECS=5000 for a deeper run)
N = int(os.environ.get("LLGEN_PARITY_SPECS", "800"))

if not triton_available():
    if os.environ.get("LLGEN_REQUIRE_TRITON") == "1":
        pytest.fail("LLGEN_REQUIRE_TRITON=1 but triton is not importable (pip install '.[crosscheck]')",
                    pytrace=False)
    pytest.skip("triton is not installed (pip install '.[crosscheck]' to compare with Triton)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def results():
    oracle = TritonOracle()
    try:
        yield compare(specs(N, seed=11), oracle)
    finally:
        oracle.close()


def test_every_kind_compared(results):
    equal = {k: 0 for k in KINDS}
    for spec, verdict, _ in results:
        equal[spec["kind"]] += verdict == "equal"
    assert all(n >= N // len(KINDS) // 4 for n in equal.values()), table(results)


def test_no_mismatch(results):
    bad = [(s, d) for s, v, d in results if v == "mismatch"]
    assert not bad, f"{len(bad)} mismatches, first: {bad[0]}"


def test_only_documented_disagreements(results):
    bad = [(v, s, d) for s, v, d in results if v in ("we reject", "Triton rejects") and not documented(v, s, d)]
    assert not bad, f"{len(bad)} undocumented accept/reject disagreements, first: {bad[0]}"


def test_oracle_survives_abort():
    """A spec that kills Triton's process is reported, and the next one still works."""
    oracle = TritonOracle()
    try:
        dead = oracle.bases({"kind": "amd_wmma", "version": 3, "transposed": False, "warps_per_cta": [1, 1],
                             "instr_shape": [16, 16, 16], "shape": [16, 16]})
        alive = oracle.bases({"kind": "blocked", "size_per_thread": [4], "threads_per_warp": [32],
                              "warps_per_cta": [1], "order": [0], "shape": [2]})
    finally:
        oracle.close()
    assert dead["error"].startswith("abort")
    assert alive == {"ok": {"register": [[1]], "lane": [[0]] * 5, "warp": [], "block": []}}
