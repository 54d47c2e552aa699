"""Compare our bases with Triton's for many seeded random specs.

``compare(specs)`` classifies each spec as ``equal``, ``mismatch``, ``we
reject``, ``Triton rejects`` or ``both reject``; ``DOCUMENTED`` lists every
accept/reject disagreement we keep on purpose (docs/specs.md, "Parity with
Triton"), each as a predicate on (spec, message) and its reason.  Used by
``tests/test_triton_parity.py`` (a CI sample) and by
``python tests/parity.py N`` (the on-demand sweep, a table per kind).
"""
from __future__ import annotations

import collections
import os
import sys
import time
from typing import Callable, Iterable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # a checkout, run directly
from parity_specs import KINDS, specs  # noqa: E402
from triton_oracle import TritonOracle, triton_version  # noqa: E402


def ours(spec: dict) -> dict:
    """``{"ok": bases}`` or ``{"error": message}`` from ll_codegen."""
    from ll_codegen.spec import SpecError, spec_from_dict
    try:
        L = spec_from_dict(spec).linear
    except SpecError as e:
        return {"error": str(e)}
    return {"ok": {k: [list(b) for b in v] for k, v in L.bases.items()}}


def _no_empty_block(bases: dict) -> dict:
    return {k: v for k, v in bases.items() if not (k == "block" and not v)}


# (side that rejects, predicate(spec, message), reason) -- docs/specs.md lists the same
DOCUMENTED: list[tuple[str, Callable[[dict, str], bool], str]] = [
    ("we reject", lambda s, m: "whole warp groups" in m,
     "wgmma accumulators come from whole warp groups (4 warps along M); Triton's to_linear_layout does not check it"),
    ("we reject", lambda s, m: "unswizzled transposed nvmma_shared layout of rank > 2" in m,
     "Triton pads rank > 2 unswizzled transposed layouts to TMA blocks; not modelled, use shared_linear"),
    ("we reject", lambda s, m: "registers per thread; at most" in m,
     "a hostile-input cap (ll_codegen/core/limits.py): more elements per thread than any register file holds"),
    ("Triton rejects", lambda s, m: "offset_bases must not be empty" in m,
     "one element per CTA: Gluon's Python wrapper asserts on empty offset bases (a wrapper limit, not a layout rule)"),
]


def documented(side: str, spec: dict, message: str) -> str | None:
    """The reason of a documented disagreement, or None."""
    for s, pred, reason in DOCUMENTED:
        if s == side and pred(spec, message):
            return reason
    return None


def compare(spec_list: Iterable[dict], oracle: TritonOracle) -> list[tuple[dict, str, str]]:
    """(spec, verdict, detail) for each spec."""
    out = []
    for spec in spec_list:
        t, p = oracle.bases(spec), ours(spec)
        if "ok" in t and "ok" in p:
            same = _no_empty_block(t["ok"]) == _no_empty_block(p["ok"])
            out.append((spec, "equal" if same else "mismatch", "" if same else f"Triton {t['ok']} ours {p['ok']}"))
        elif "ok" in t:
            out.append((spec, "we reject", p["error"]))
        elif "ok" in p:
            out.append((spec, "Triton rejects", t["error"]))
        else:
            out.append((spec, "both reject", ""))
    return out


def table(results: list[tuple[dict, str, str]]) -> str:
    cols = ["tried", "equal", "mismatch", "we reject", "Triton rejects", "both reject", "undocumented"]
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for spec, verdict, detail in results:
        for key in (spec["kind"], "all"):
            counts[key]["tried"] += 1
            counts[key][verdict] += 1
            if verdict in ("we reject", "Triton rejects") and not documented(verdict, spec, detail):
                counts[key]["undocumented"] += 1
    lines = ["| kind | " + " | ".join(cols) + " |", "|" + " --- |" * (len(cols) + 1)]
    for kind in list(KINDS) + ["all"]:
        lines.append(f"| {kind} | " + " | ".join(str(counts[kind][c]) for c in cols) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    n = int(argv[1]) if len(argv) > 1 else 50_000
    seed = int(argv[2]) if len(argv) > 2 else 2026
    t0 = time.time()
    oracle = TritonOracle()
    try:
        results = compare(specs(n, seed), oracle)
    finally:
        oracle.close()
    print(f"Triton {triton_version()}, {n} specs, seed {seed}, {time.time() - t0:.0f} s")
    print(table(results))
    bad = [(s, v, d) for s, v, d in results
           if v == "mismatch" or (v in ("we reject", "Triton rejects") and not documented(v, s, d))]
    for s, v, d in bad[:20]:
        print(v, s, d[:300])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
