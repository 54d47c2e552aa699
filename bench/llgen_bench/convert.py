"""Time generated conversions on a GPU against a naive plan, Triton's own
``convert_layout`` (a Gluon kernel with the same layouts) and a throughput bound.

Every measured kernel does the same work (``templates/bench.cu.j2``): each CTA
loads one tile in the source layout, then ``iters`` times converts it to the
destination layout, xors every element e with ``key(e) ^ k`` (``bench_key``:
F2-linear in e's row-major index in the tile, ``emit.convert.BENCH_KEY_COLUMNS``;
k the iteration, as raw bits of the element width) and converts it back, and
stores it once: ``out[e] = in[e] ^ (key(e) if iters is odd) ^ XOR_{k<iters} k``.
The key depends on where an element is, so an odd ``iters`` check sees a forward
conversion that misplaces elements even when the back conversion undoes it.
Linear, the key of register r of a thread is an immediate (the key of
``e(r, 0, 0)``) xored with one value per thread (the key of ``e(0, lane, warp)``),
xored with k once per iteration: no key array lives in registers, so a pair with
128 elements a thread does not spill for the harness's sake.  The Triton kernel
(``gluon.gluon_kernels``, rank 1 to 3) does ``y = convert_layout(x, dst);
y ^= key ^ k; x = convert_layout(y, src)`` with the key computed the same way
from the tile's row-major offsets in the destination layout (its LLVM folds the
register part into the same immediates: ``tests/test_bench_key.py`` compares the
``LOP3`` immediates of both loops) -- the same operation at the same place, on
32-bit words where ours works on words (``jobs.xor_pack``).

Each side is also timed without its conversions (``<name>_base``; Gluon's
``base_words``: the same words, xored the same way), and a conversion costs the
difference.  ``base_work`` checks that the two base loops do the same work: SASS
ALU instructions per iteration within 10% (or 2).  Every timed kernel (both
sides, round trip and base) gets an integrity record (``integrity``: registers,
spill bytes, stack/local bytes, STL/LDL); ``row["flags"]`` says why a pair is
left out of the headline (``headline.pair_flags``).

Numbers: the median over ``repeats`` timed groups (after ``warmup`` launches)
of the kernel time measured with CUDA events, each group ``n`` back-to-back
launches sized to last >= ``group_ms``; *per conversion per SM* is
``(time - base time) / (ctas * 2 * iters / SMs)`` -- the throughput figure,
independent of how many CTAs fit on an SM -- reported in nanoseconds and in SM
clocks at the measured clock.  The bound of each direction is the smaller of
the shared-memory bound (the tile's bytes stored once and loaded once by every
warp that holds them, at 128 B per clock per SM) and, for conversions inside
warps, the shuffle bound (one 32-bit warp shuffle per clock per SM for every word
that has to leave its thread); a pair's bound is the mean of its forward and back
bounds (``jobs.round_trip_bound``), as its time is the mean of the two.  A
warp loads at least its lanes' register bytes / 256 wavefronts, / 128 where a
quad of lanes holds more than two places (``jobs.bounds``: lanes that hold the
same elements each fill their registers).  Small tiles are
bound by latency instead -- barriers and shared memory, which no bandwidth bound
sees: ``bench_convert.py`` times the minimal round trip across warps
(``jobs.latency_floor_specs``: one 4-byte store and one load a thread, the two
barriers) in the same run for each warp count, and a pair whose data crosses
warps gets ``floor_clk`` = max(bound, that latency floor) (``with_floor``).

Public entry points: ``bench_pair`` (one pair: plan, render, compile, check,
time; returns a dict) and ``format_table`` (rows of such dicts as Markdown).
``jobs.prepare``/``jobs.compile_jobs``/``run_job`` are the same steps for a batch
(``bench/bench_convert.py`` compiles a whole corpus in parallel); ``preflight_job``
compiles both sides without a GPU and reports their integrity and base work.
GPU imports (CuPy, torch, Triton) happen inside the functions only.
"""
from __future__ import annotations

import shutil
import tempfile
from typing import Any, Callable, Sequence

from llgen_bench.gluon import compile_offline, gluon_legacy, run_triton
from llgen_bench.headline import geomean, pair_flags
from llgen_bench.integrity import base_work, kernel_record
from llgen_bench.jobs import Job, Variant, compile_jobs, describe, ident, plan_features, prepare, score, xor_pack
from llgen_bench.timing import make_buffers, measure_clock_mhz, run_ours

__all__ = ["bench_pair", "format_table", "geomean", "preflight_job", "run_job", "with_floor"]


def ours_integrity(v: Variant, entry: dict) -> dict:
    """Integrity records of a variant's ``_bench`` and ``_base`` kernels: ptxas ``-v``, res-usage and
    SASS (``jobs.inspect_cubin``), the loaded functions' registers and local bytes (``run_ours``)."""
    out = {}
    for kind, regs, local in (("bench", "regs", "local_bytes"), ("base", "base_regs", "base_local_bytes")):
        fn = f"{v.kernel}_{kind}"
        out[kind] = kernel_record(regs=entry.get(regs), ptxas=v.ptxas.get(fn), res=v.res.get(fn),
                                  local_bytes=entry.get(local), sass=v.sass.get(fn), cap=v.maxrreg)
    return out


# ------------------------------------------------------------ one pair
def run_job(job: Job, iters: int = 64, ctas: int = 132 * 48, triton: bool = True, sms: int = 132,
            clock_mhz: float | None = None, sass: bool = False, sass_dir: str | None = None,
            log: Callable[[str], None] = print, **tk) -> dict:
    """Check and time every compiled variant of ``job`` (and Triton); one result dict, with every
    timed kernel's integrity record, the base loops' work (``base_work``) and the pair's ``flags``.
    ``sass`` is kept for callers: the SASS is read at compile time (``jobs.inspect_cubin``)."""
    buf = make_buffers(job, ctas)
    convs_per_sm = ctas * 2 * iters / sms
    b = job.bound
    row: dict[str, Any] = {
        "name": job.name, "dtype": job.dtype, "shape": list(job.shape), "warps": job.warps,
        "elem_bytes": job.elem_bytes, "level": b["level"], "bound_clk": b["bound_clk"],
        "bound_kind": b["bound_kind"], "smem_bound_clk": b["smem_clk"], "shuffle_bound_clk": b["shuffle_clk"],
        "fwd_bound_clk": b.get("fwd_clk"), "back_bound_clk": b.get("back_clk"),
        "iters": iters, "ctas": ctas, "note": job.note, "variants": {}}
    auto = job.variants[0]
    row["strategy"] = auto.fwd.strategy
    row["plan"] = describe(auto.fwd)
    row["back_plan"] = describe(auto.back)

    def finish(res: dict) -> dict:
        if "ms" in res:
            res["ns_per_conv_sm"] = res["ms"] * 1e6 / convs_per_sm
            if clock_mhz:
                res["clk_per_conv_sm"] = res["ns_per_conv_sm"] * clock_mhz / 1e3
        return res

    for v in job.variants:
        entry: dict[str, Any] = {"plan": describe(v.fwd), "features": plan_features(v.fwd), "score": score(plan_features(v.fwd))}
        if v.same_as:
            entry["same_as"] = v.same_as
        elif v.error or not v.cubin:
            entry["error"] = v.error or "not compiled"
        else:
            try:
                entry.update(finish(run_ours(job, v, buf, iters, ctas, **tk)))
            except Exception as e:  # noqa: BLE001
                entry["error"] = f"{type(e).__name__}: {e}"[:300]
            entry["integrity"] = ours_integrity(v, entry)
            for key, kind in (("sass", "bench"), ("base_sass", "base")):
                if f"{v.kernel}_{kind}" in v.sass:
                    entry[key] = v.sass[f"{v.kernel}_{kind}"]
        row["variants"][v.label] = entry
    for v in row["variants"].values():
        if "same_as" in v:
            src = row["variants"][v["same_as"]]
            v.update({k: src[k] for k in ("ms", "ns_per_conv_sm", "clk_per_conv_sm", "ok") if k in src})
    if triton:
        tests = [("triton", None, None)]
        if job.legacy_specs is not None:
            tests.append(("triton_legacy",) + tuple(job.legacy_specs))
        for tag, s, d in tests:
            try:
                if s is not None:
                    s, d = gluon_legacy(s), gluon_legacy(d)
                res = run_triton(job, buf, iters, ctas, s, d, work=sass_dir, tag=tag, pack=xor_pack(job.variants[0]),
                                 **tk)
                row[tag] = finish(res)
            except Exception as e:  # noqa: BLE001
                msg = f"{type(e).__name__}: {e}"
                row[tag] = {"error": msg.splitlines()[0][:300] if msg else "error"}
                log(f"{job.name} {tag}: {msg[:1500]}")
    auto_v = job.variants[0]
    if auto_v.cubin and "ms" in row["variants"]["auto"]:
        try:   # the same kernel once more, after everything else: run-to-run spread
            again = finish(run_ours(job, auto_v, buf, iters, ctas, **tk))
            row["variants"]["auto"]["ns_again"] = again["ns_per_conv_sm"]
        except Exception:  # noqa: BLE001
            pass
    _ratios(row)
    # equal work: the SASS ALU instructions per iteration of the two base loops the ratios subtract
    row["base_work"] = base_work(row["variants"]["auto"].get("base_sass"), row.get("triton", {}).get("base_sass"))
    row["flags"] = pair_flags(row) if triton else []
    del buf
    return row


def preflight_job(job: Job, arch: int = 90, work: str | None = None) -> dict:
    """No GPU: what ``run_job`` records about the kernels of ``job``'s ``auto`` variant and Triton's
    (compiled with ``triton.compile`` for sm_<arch>): integrity records, base-loop work, flags.
    ``job`` must have been through ``compile_jobs``."""
    v = job.variants[0]
    row: dict[str, Any] = {"name": job.name, "dtype": job.dtype, "pack": xor_pack(v),
                           "variants": {"auto": {"plan": describe(v.fwd)}}}
    auto = row["variants"]["auto"]
    if v.error or not v.cubin:
        auto["error"] = v.error or "not compiled"
    else:
        auto.update(integrity=ours_integrity(v, {}), sass=v.sass.get(f"{v.kernel}_bench"),
                    base_sass=v.sass.get(f"{v.kernel}_base"))
    try:
        tri = compile_offline(job, row["pack"], arch, work)
        row["triton"] = {"integrity": {k: x["integrity"] for k, x in tri.items()}, "sass": tri["bench"]["sass"],
                         "base_sass": tri["base"]["sass"]}
    except Exception as e:  # noqa: BLE001
        row["triton"] = {"error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
    row["base_work"] = base_work(auto.get("base_sass"), row["triton"].get("base_sass"))
    row["flags"] = pair_flags(row)
    return row


RESOLUTION_NS = 0.5     # conversion times below this (per conversion per SM, ~1 clock) are not compared


def _ratios(row: dict) -> None:
    """Ratios of conversion times (loop minus base); a side below ``RESOLUTION_NS`` -- a noop, or a
    register permutation the compiler folds into the xor -- gives no ratio."""
    def conv(entry: dict) -> float | None:
        t = entry.get("ns_per_conv_sm")
        return t if t is not None and t >= RESOLUTION_NS else None
    ours = row["variants"]["auto"].get("clk_per_conv_sm")
    ours_ns = conv(row["variants"]["auto"])
    tri = conv(row.get("triton", {}))
    naive = conv(row["variants"].get("naive", {}))
    b = row["bound_clk"]
    row["ours_over_triton"] = ours_ns / tri if ours_ns and tri else None
    # the whole loop (conversions + the keyed xor), the end-to-end view: where a side's xor is heavy
    # (Triton's element-wise 8/16-bit code), it overlaps the conversion and the difference above
    # understates that side's conversion -- even below the shared-memory bound
    loops = (row["variants"]["auto"].get("ms_loop"), row.get("triton", {}).get("ms_loop"))
    row["loop_ours_over_triton"] = loops[0] / loops[1] if ours_ns and tri and all(loops) else None
    row["naive_over_ours"] = naive / ours_ns if ours_ns and naive else None
    row["ours_over_bound"] = ours / b if ours and b else None
    tclk = row.get("triton", {}).get("clk_per_conv_sm")
    row["triton_over_bound"] = tclk / b if tclk and b else None
    timed = {k: v["ns_per_conv_sm"] for k, v in row["variants"].items()
             if k.startswith("cand") and v.get("ns_per_conv_sm") and v.get("ok")}
    if timed:
        best = min(timed, key=timed.get)
        row["fastest_candidate"] = best
        row["fastest_candidate_plan"] = row["variants"][best]["plan"]
        auto_ns = ours_ns or float("inf")
        row["auto_is_fastest"] = auto_ns <= timed[best] * 1.05
        row["auto_over_fastest"] = auto_ns / timed[best]


def with_floor(row: dict, latency_clk: float | None) -> None:
    """Give a pair its floor: where its data crosses warps (``level`` smem), ``latency_floor_clk`` is
    the time of the minimal round trip with its warps (``jobs.latency_floor_specs``, timed in the
    same run; clocks per conversion per SM), ``floor_clk`` = max(bound, that) and ``ours_over_floor``
    ours over it.  A pair whose data stays in warps, or a run without the floor, gets none."""
    for k in ("latency_floor_clk", "floor_clk", "ours_over_floor"):
        row.pop(k, None)
    if latency_clk is None or row.get("level") != "smem":
        return
    row["latency_floor_clk"] = latency_clk
    row["floor_clk"] = max(row["bound_clk"], latency_clk)
    ours = row["variants"]["auto"].get("clk_per_conv_sm")
    row["ours_over_floor"] = ours / row["floor_clk"] if ours and row["floor_clk"] else None


def bench_pair(src_layout: Any, dst_layout: Any, dtype: str = "f16", *, iters: int = 64,
               ctas: int | None = None, name: str = "cvt", triton: bool = True, naive: bool = True,
               candidates: bool = False, repeats: int = 7, warmup: int = 2, sass: bool = False,
               workdir: str | None = None, clock_mhz: float | None = None) -> dict:
    """Plan, render, compile (nvcc), check and time one conversion on the GPU.

    ``src_layout``/``dst_layout``: LinearLayouts, spec dicts or Specs.
    Returns the result dict of ``run_job`` (see ``format_table``)."""
    import cupy
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    ctas = ctas or sms * 48
    if clock_mhz is None:
        clock_mhz = measure_clock_mhz(sms)["clock_mhz"]
    tmp = workdir or tempfile.mkdtemp(prefix="llgen_bench_")
    try:
        job = prepare(ident(name), src_layout, dst_layout, dtype, tmp, naive=naive, candidates=candidates)
        compile_jobs([job])
        return run_job(job, iters=iters, ctas=ctas, triton=triton, sms=sms, clock_mhz=clock_mhz, sass=sass,
                       sass_dir=tmp, repeats=repeats, warmup=warmup)
    finally:
        if workdir is None:
            shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------ table
def fmt(x: float | None, spec: str = "{:.2f}") -> str:
    """``x`` formatted with ``spec``, or a dash for None."""
    return "—" if x is None else spec.format(x)


def regs_cell(entry: dict) -> str:
    """``'bench/base'`` registers of one side, with ``!`` after a kernel that spills or uses local memory."""
    integ = entry.get("integrity") or {}
    out = []
    for kind in ("bench", "base"):
        rec = integ.get(kind) or {}
        bad = any(rec.get(k) for k in ("spill_stores", "spill_loads", "stack", "local", "stl", "ldl"))
        out.append(f"{rec.get('regs', '?')}{'!' if bad else ''}")
    return "/".join(out)


def format_table(rows: Sequence[dict]) -> str:
    """Markdown table: per pair, time per conversion per SM (clocks), ours/Triton (conversions),
    ours/Triton (whole loop), ours/bound, the latency floor and ours over max(bound, it) (``with_floor``),
    Triton/bound, naive/ours; then the integrity columns:
    registers of the round trip/base kernel of each side (``!``: spills or local memory), the base
    loops' SASS ALU instructions per iteration (ours/Triton) and why a pair is flagged."""
    head = ("| pair | dtype | warps | tile | auto plan | bound clk | ours clk | Triton clk | naive clk "
            "| ours/Triton | loop ours/Triton | ours/bound | latency floor clk | ours/floor | Triton/bound | naive/ours "
            "| ours regs | Triton regs | base ALU/iter | flag |")
    lines = [head, "|" + " --- |" * 5 + " ---: |" * 14 + " --- |"]
    for r in rows:
        v = r["variants"]["auto"]
        t = r.get("triton", {})
        nv = r["variants"].get("naive", {})
        tri = fmt(t.get("clk_per_conv_sm"), "{:.0f}") if "error" not in t else "n/a"
        if v.get("ok") is False or t.get("ok") is False:
            tri += " (WRONG)" if t.get("ok") is False else ""
        plan = r["plan"] + ("" if r["plan"] == r.get("back_plan") else f" / back {r.get('back_plan')}")
        bw = r.get("base_work") or {}
        base = f"{fmt(bw.get('ours'), '{:.1f}')}/{fmt(bw.get('triton'), '{:.1f}')}" + (" (off)" if bw.get("ok") is False else "")
        flags = r.get("flags") or []
        lines.append(
            f"| {r['name']} | {r['dtype']} | {r['warps']} | {'x'.join(map(str, r['shape']))} | {plan} "
            f"| {fmt(r['bound_clk'], '{:.0f}')} | {fmt(v.get('clk_per_conv_sm'), '{:.0f}')}"
            f"{'' if v.get('ok', True) else ' (WRONG)'} | {tri} | {fmt(nv.get('clk_per_conv_sm'), '{:.0f}')} "
            f"| {fmt(r.get('ours_over_triton'))} | {fmt(r.get('loop_ours_over_triton'))} | {fmt(r.get('ours_over_bound'))} "
            f"| {fmt(r.get('latency_floor_clk'), '{:.0f}')} | {fmt(r.get('ours_over_floor'))} "
            f"| {fmt(r.get('triton_over_bound'))} | {fmt(r.get('naive_over_ours'))} | {regs_cell(v)} | {regs_cell(t)} | {base} "
            f"| {'; '.join(flags[:2]) + (' …' if len(flags) > 2 else '') if flags else ''} |")
    return "\n".join(lines)
