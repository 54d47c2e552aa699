"""The conversion bench's headline, recomputed from result rows alone (no GPU, no timing code).

``bench_convert.py`` prints it last and stores it in ``results.json``; ``tests/test_bench_results.py``
recomputes it from a recorded file, so the numbers quoted in ``bench/RESULTS.md`` cannot drift from
the file they come from.

Flag rule (``pair_flags``): a pair is flagged -- left out of every headline figure and listed apart
with its numbers -- when any kernel its ratios are made of (ours' ``auto`` round trip and its base
loop, Triton's round trip and its base loop) spills or uses local memory
(``integrity.problems``: spill bytes, stack frame, local bytes, ``STL``/``LDL`` instructions), has
no integrity record, is wrong, or failed.  Over the unflagged pairs with a ratio:

* geomean ours/Triton by loop minus base (``ours_over_triton``: the conversions alone) and by whole
  loops (``loop_ours_over_triton``: conversions + data change, the same work on both sides);
* the pairs slower than ``SLOWER`` x Triton by whole loops;
* the pairs near their floor, of those with a bound: within ``NEAR_BOUND`` x the throughput bound
  (``ours_over_bound``), or within ``NEAR_FLOOR`` x a measured floor (``ours_over_floor``: where the
  data crosses warps, max(bound, latency floor), the latency floor being the time of the minimal
  round trip through shared memory with the pair's warps, timed in the same run --
  ``convert.with_floor``); ``near_floor_only`` names the pairs that only their floor counts.
Base loops whose SASS ALU work differs by more than ``integrity.base_work``'s tolerance are listed
(the loop-minus-base ratio of such a pair subtracts unequal work) but not excluded.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from llgen_bench.integrity import problems

SLOWER = 1.05          # "no pair slower than 1.05x Triton by whole loops"
NEAR_BOUND = 1.15      # "within 1.15x of the bound"
NEAR_FLOOR = 1.05      # "... or within 1.05x of a measured floor"


def geomean(xs: Sequence[float]) -> float:
    """Geometric mean of the non-zero values of ``xs`` (nan if none)."""
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def pair_flags(row: dict) -> list[str]:
    """Why a conversion pair is left out of the headline ([] when it is not); see the module docstring."""
    out = []
    sides = (("ours", row.get("variants", {}).get("auto") or {}), ("Triton", row.get("triton")))
    for side, entry in sides:
        if entry is None:
            out.append(f"{side}: not run")
            continue
        if "error" in entry:
            out.append(f"{side}: {entry['error'][:80]}")
            continue
        if entry.get("ok") is False:
            out.append(f"{side}: wrong output")
        integ = entry.get("integrity") or {}
        for kind in ("bench", "base"):
            out += [f"{side} {kind}: {p}" for p in problems(integ.get(kind))]
    return out


def headline(rows: Sequence[dict]) -> dict[str, Any]:
    """Flags, geomeans and counts over ``rows`` (``run_job`` result dicts); see the module docstring."""
    flagged, clean = [], []
    for r in rows:
        reasons = pair_flags(r)
        if reasons:
            flagged.append({"name": r["name"], "reasons": reasons,
                            **{k: r.get(k) for k in ("ours_over_triton", "loop_ours_over_triton", "ours_over_bound",
                                                     "triton_over_bound")}})
        else:
            clean.append(r)
    conv = [r["ours_over_triton"] for r in clean if r.get("ours_over_triton")]
    loop = [r["loop_ours_over_triton"] for r in clean if r.get("loop_ours_over_triton")]
    bound = [r for r in clean if r.get("ours_over_bound")]
    by_floor = [r for r in bound if r.get("ours_over_floor") is not None]
    near_floor_only = [r["name"] for r in by_floor
                       if r["ours_over_floor"] <= NEAR_FLOOR and r["ours_over_bound"] > NEAR_BOUND]
    return {
        "pairs": len(rows), "flagged": flagged, "unflagged": len(clean),
        "with_ratio": len(conv), "with_loop_ratio": len(loop),
        "geomean_conv": geomean(conv), "geomean_loop": geomean(loop),
        "slower_loop": [r["name"] for r in clean if (r.get("loop_ours_over_triton") or 0) > SLOWER],
        "with_bound": len(bound),
        "near_bound": sum(r["ours_over_bound"] <= NEAR_BOUND for r in bound) + len(near_floor_only),
        "with_floor": len(by_floor), "near_floor_only": near_floor_only,
        "base_work_off": [r["name"] for r in clean if (r.get("base_work") or {}).get("ok") is False],
        "rule": {"slower": SLOWER, "near_bound": NEAR_BOUND, "near_floor": NEAR_FLOOR},
    }


def headline_line(h: dict) -> str:
    """The one-line headline (what RESULTS.md quotes verbatim; the CPU test looks for it there).  The
    floor rule is stated when some pair has a measured floor (a run without one reads as before)."""
    floor = (f" or {h['rule']['near_floor']:.2f}x of a measured floor ({h['with_floor']} with a floor)"
             if h.get("with_floor") else "")
    return (f"HEADLINE over {h['unflagged']} unflagged pairs ({len(h['flagged'])} flagged of {h['pairs']}): "
            f"geomean ours/Triton {h['geomean_conv']:.3f} by loop minus base ({h['with_ratio']} pairs), "
            f"{h['geomean_loop']:.3f} by whole loops ({h['with_loop_ratio']}); "
            f"{len(h['slower_loop'])} slower than {h['rule']['slower']:.2f}x by whole loops; "
            f"{h['near_bound']}/{h['with_bound']} within {h['rule']['near_bound']:.2f}x of the bound{floor}")


def format_headline(h: dict) -> str:
    """The flagged pairs with their numbers, the base-work misses, then ``headline_line`` (last)."""
    f = lambda x: "—" if x is None else f"{x:.2f}"  # noqa: E731
    lines = [f"flagged (left out of the headline): {len(h['flagged'])}"]
    for x in h["flagged"]:
        lines.append(f"  {x['name']:<34} o/T {f(x['ours_over_triton'])} loop {f(x['loop_ours_over_triton'])} "
                     f"o/b {f(x['ours_over_bound'])} T/b {f(x['triton_over_bound'])}: {'; '.join(x['reasons'][:4])}")
    if h["slower_loop"]:
        lines.append(f"slower than {h['rule']['slower']:.2f}x Triton by whole loops: {', '.join(h['slower_loop'])}")
    if h.get("near_floor_only"):
        lines.append(f"near their measured floor only (not the bound): {', '.join(h['near_floor_only'])}")
    if h["base_work_off"]:
        lines.append(f"base loops' ALU work differs > tolerance (kept): {', '.join(h['base_work_off'])}")
    lines.append(headline_line(h))
    return "\n".join(lines)
