"""Fit the planner's cost-model weights to measured candidate timings (CPU).

    python bench/calibrate.py RESULTS.json [MORE.json ...] [--tol 0.03]

``bench_convert.py`` times, for every pair, each candidate plan the planner
scores for ``auto`` (forward candidate + the auto reverse plan, so the
reverse part is common to a pair's candidates).  This script grid-searches
``WAVEFRONT`` (fixed at 1: the unit), ``SHUFFLE``, ``ALU``, ``BARRIER``,
``WARP_BARRIER`` and ``SELECT`` and reports, for the current and the best weights, on how
many pairs the cheapest-scored candidate (ties: the first, as
``plan_conversion``) is within ``--tol`` of the fastest measured one, both per
candidate and per strategy (register / shuffle / smem).  Held out: the weights
are also fitted on every other pair (sorted by name) and scored on the rest,
so a fit tuned to the corpus shows as a gap between the two halves.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ll_codegen.plan import planner  # noqa: E402
from llgen_bench.jobs import score  # noqa: E402


def pairs_of(rows):
    out = []
    for r in rows:
        cands = [(k, v) for k, v in r["variants"].items() if k.startswith("cand")]
        timed = [(k, v) for k, v in cands if v.get("ns_per_conv_sm") and v.get("ok")]
        if len(timed) < 2 or len(timed) != len(cands):
            continue
        out.append((r["name"], timed))
    return out


def evaluate(pairs, w, tol):
    hits, strat_hits, misses = 0, 0, []
    for name, timed in pairs:
        sc = [score(v["features"], *w) for _, v in timed]
        pick = min(range(len(timed)), key=lambda i: sc[i])
        t = [v["ns_per_conv_sm"] for _, v in timed]
        best = min(t)
        ok = t[pick] <= best * (1 + tol)
        hits += ok
        fastest_strat = {timed[i][1]["features"]["strategy"] for i in range(len(t)) if t[i] <= best * (1 + tol)}
        strat_hits += timed[pick][1]["features"]["strategy"] in fastest_strat
        if not ok:
            misses.append((name, timed[pick][1]["plan"], t[pick] / best, timed[t.index(best)][1]["plan"]))
    return hits, strat_hits, misses


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="results.json files; a later file's row replaces an earlier "
                                                 "one of the same pair")
    ap.add_argument("--tol", type=float, default=0.03)
    args = ap.parse_args(argv)
    rows = list({r["name"]: r for path in args.results for r in json.load(open(path))["rows"]}.values())
    pairs = pairs_of(rows)
    cur = (planner.WAVEFRONT, planner.SHUFFLE, planner.ALU, planner.BARRIER, planner.WARP_BARRIER, planner.SELECT)
    grid = list(itertools.product([1.0], [0.5, 1.0, 1.5, 2.0, 3.0], [0.0, 0.25, 0.5, 0.75, 1.0, 1.5],
                                  [0.0, 2.0, 4.0, 8.0, 16.0], [0.0, 1.0, 2.0, 4.0], [0.25, 0.5, 0.75, 1.0]))

    def fit(subset):
        results = []
        for w in grid:
            h, s, m = evaluate(subset, w, args.tol)
            # prefer: most candidate hits, then strategy hits, then closeness to the current weights
            results.append(((h, s, -sum(abs(a - b) for a, b in zip(w, cur))), w, m))
        results.sort(key=lambda x: x[0], reverse=True)
        return results

    results = fit(pairs)
    print(f"{len(pairs)} pairs with >= 2 timed candidates; tolerance {args.tol:.0%}")
    for label, w in (("current", cur), ("best", results[0][1])):
        h, s, m = evaluate(pairs, w, args.tol)
        print(f"{label} WAVEFRONT, SHUFFLE, ALU, BARRIER, WARP_BARRIER, SELECT = {w}: fastest candidate on {h}/{len(pairs)}, "
              f"fastest strategy on {s}/{len(pairs)}")
        for name, plan, ratio, best in m:
            print(f"   miss {name}: picks {plan} at {ratio:.2f}x the fastest ({best})")
    print("top weight sets:", [(r[0][:2], r[1]) for r in results[:8]])
    ordered = sorted(pairs, key=lambda p: p[0])
    fit_half, held = ordered[0::2], ordered[1::2]
    w = fit(fit_half)[0][1]
    hf, sf, _ = evaluate(fit_half, w, args.tol)
    hh, sh, mh = evaluate(held, w, args.tol)
    print(f"held out: weights {w} fitted on {len(fit_half)} pairs (fastest candidate {hf}/{len(fit_half)}, "
          f"strategy {sf}/{len(fit_half)}); on the other {len(held)}: candidate {hh}/{len(held)}, "
          f"strategy {sh}/{len(held)}" + "".join(f"; miss {n} {r:.2f}x" for n, _, r, _ in mh))
    return 0


if __name__ == "__main__":
    sys.exit(main())
