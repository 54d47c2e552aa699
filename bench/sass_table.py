"""SASS of the benchmarked plans against the plans' own counts:

    python bench/sass_table.py bench/results_h100.json

For every pair of a ``bench_convert.py`` run, the plans its ``auto`` kernel used (the planner's candidates
whose description is the run's forward and reverse plan, ``bench.describe``): their counts per round trip of
shared-memory instructions (STS/LDS: ld/st.shared, STSM/LDSM: stmatrix/ldmatrix), shuffles (SHFL) and block
barriers (BAR; ``__syncwarp()`` is no BAR), against the SASS loop body of that kernel (``results.json`` keeps
``bench.sass_counts`` of every kernel).  ptxas may unroll the loop k times: a row matches when every SASS
count is k times the plan's, one integer k for the row.  Prints a markdown table and the number of rows that
match; then, for runs that recorded SEL, the selects of every shuffle variant against its SASS.
"""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from llgen_bench.jobs import alternatives, as_linear, describe  # noqa: E402

KINDS = ("STS", "LDS", "STSM", "LDSM", "SHFL", "BAR")


def plan_counts(plan) -> dict[str, int]:
    """Per-call instruction counts of one plan (per thread = per warp-wide instruction)."""
    c = dict.fromkeys(KINDS, 0)
    if plan.smem is not None:
        m = plan.smem
        c["STS" if m.store_instr == "vector" else "STSM"] += m.store.instructions
        c["LDS" if m.load_instr == "vector" else "LDSM"] += m.load.instructions
        c["BAR"] += m.block_barriers
    if plan.shuffle is not None:
        c["SHFL"] += plan.shuffle.shuffles
    return c


def unroll(plan: dict[str, int], sass: dict[str, int]) -> int | None:
    """The k with sass == k * plan for every kind (None: no such k)."""
    ks = {sass.get(k, 0) // v for k, v in plan.items() if v}
    if len(ks) != 1:
        return None if ks or any(sass.get(k, 0) for k in plan) else 1
    k = ks.pop()
    return k if k > 0 and all(sass.get(x, 0) == k * v for x, v in plan.items()) else None


def fmt(c: dict[str, int]) -> str:
    return " ".join(f"{k} {c[k]}" for k in KINDS if c.get(k)) or "-"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    from bench_convert import CORPUS     # noqa: E402  (the run's pairs, by name)
    specs = {name: (s, d, dt) for name, s, d, dt, _, _ in CORPUS}
    rows = json.load(open(argv[0]))["rows"]
    print("| pair | plan (forward + reverse) | SASS loop body | |\n| --- | --- | --- | --- |")
    matched = total = 0
    for r in rows:
        if r["name"] not in specs:
            continue
        s, d, dt = specs[r["name"]]
        src, dst = as_linear(s), as_linear(d)
        auto = r["variants"]["auto"]
        fwd = next((p for p in alternatives(src, dst, dt) if describe(p) == auto["plan"]), None)
        back = next((p for p in alternatives(dst, src, dt) if describe(p) == r["back_plan"]), None)
        total += 1
        if fwd is None or back is None or "sass" not in auto:
            print(f"| {r['name']} | {auto['plan']} / {r['back_plan']}: not among today's candidates | - | - |")
            continue
        want = {k: a + b for (k, a), b in zip(plan_counts(fwd).items(), plan_counts(back).values())}
        got = {k: auto["sass"]["loop"].get(k, 0) for k in KINDS}
        k = unroll(want, got)
        matched += k is not None
        print(f"| {r['name']} | {fmt(want)} | {fmt(got)} | {f'x{k}' if k else 'differs'} |")
    print(f"\n{matched} of {total} pairs: SASS loop = the plans' counts times the unroll factor")
    selects_table(rows, specs)
    return 0


def selects_table(rows: list[dict], specs: dict) -> None:
    """Every timed variant whose forward plan is a shuffle: the selects of its forward and reverse plans
    (``ShufflePlan.selects``) against the loop body's SEL, at the unroll factor of its shuffles (runs whose
    ``bench.sass_counts`` recorded SEL)."""
    lines, matched, total = [], 0, 0
    for r in rows:
        if r["name"] not in specs or not any("SEL" in v.get("sass", {}).get("loop", {}) for v in r["variants"].values()):
            continue
        s, d, dt = specs[r["name"]]
        src, dst = as_linear(s), as_linear(d)
        cands = alternatives(src, dst, dt)
        back = next((p for p in alternatives(dst, src, dt) if describe(p) == r["back_plan"]), None)
        for label, v in r["variants"].items():
            fwd = next((p for p in cands if describe(p) == v.get("plan")), None) if label == "auto" else \
                cands[int(label[4:])] if label.startswith("cand") else None
            if fwd is None or fwd.shuffle is None or back is None or "sass" not in v:
                continue
            sh = fwd.shuffle
            want = sh.selects + (back.shuffle.selects if back.shuffle is not None else 0)
            shfl = sh.shuffles + (back.shuffle.shuffles if back.shuffle is not None else 0)
            got, got_shfl = v["sass"]["loop"]["SEL"], v["sass"]["loop"]["SHFL"]
            k = got_shfl // shfl if shfl and got_shfl % shfl == 0 else 0
            ok = k > 0 and got == k * want
            matched, total = matched + ok, total + 1
            form = "swap stages" if sh.send_swaps or sh.recv_swaps else "select trees"
            lines.append(f"| {r['name']} | {label} | {form} | {want} | {got} / x{k} | {'yes' if ok else 'no'} |")
    if total:
        print("\n| pair | variant | forward selects | plan selects (forward + reverse) | SASS SEL / unroll | equal |\n"
              "| --- | --- | --- | ---: | ---: | --- |")
        print("\n".join(lines))
        print(f"\n{matched} of {total} shuffle variants: SASS SEL = the plans' selects times the unroll factor")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
