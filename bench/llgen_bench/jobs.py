"""Bench jobs for conversions: the pairs' plan variants, their bench sources and nvcc builds.

``prepare`` plans one pair's variants (``auto``, ``buf2``, ``perwarp``,
``naive``, optionally every candidate of ``alternatives``) and writes each
variant's header and round-trip bench kernel (``templates/bench.cu.j2``);
``compile_jobs`` builds them with nvcc in parallel and, in the same workers, reads what
each cubin is (ptxas ``-v``, ``cuobjdump -res-usage``, per-kernel SASS counts: the integrity
records of ``integrity.kernel_record``).  ``bounds`` is the
throughput bound a conversion is compared with (shared-memory bytes at
128 B per clock per SM, or for conversions inside warps one 32-bit shuffle
per clock per SM), ``plan_features``/``score`` the planner's cost-model
inputs and score of a plan (``bench/calibrate.py`` refits the weights).
No GPU is needed here.
"""
from __future__ import annotations

import math
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from ll_codegen.core.dtypes import DTYPE_BYTES
from ll_codegen.core.layout import LinearLayout
from ll_codegen.core.target import get_target
from ll_codegen.operations import write_files
from ll_codegen.plan.model import word_view
from ll_codegen.plan.plans import ConvertPlan, steps
from ll_codegen.plan.planner import (ALU, BARRIER, SELECT, SHUFFLE, STMATRIX, WARP_BARRIER, WAVEFRONT, classify,
                                     normalise, plan_conversion, shuffle_forms, staged_plans)
from ll_codegen.plan.shuffle import plan_shuffle, shuffle_plans
from ll_codegen.plan.swizzle import plan_smem
from llgen_bench.integrity import parse_ptxas, res_usage, spills
from llgen_bench.sass import functions, sass_counts, sass_text

SMEM_BYTES_PER_CLK = 128       # per SM
LANE_BYTES_PER_WAVEFRONT = 256  # register bytes one load wavefront fills, at most (16 lanes x 16 B, merged phases)
SHFL_PER_CLK = 1               # warp instructions per clock per SM
MAXRREG = 255                  # register cap of a kernel whose default build spills (nvcc, Gluon)


# ------------------------------------------------------------------ layouts
def as_linear(x: Any) -> LinearLayout:
    """A ``LinearLayout`` from a LinearLayout, a spec dict or a ``Spec``."""
    if isinstance(x, LinearLayout):
        return x
    if isinstance(x, dict):
        from ll_codegen.spec import spec_from_dict
        return spec_from_dict(x).linear
    lin = getattr(x, "linear", None)
    if isinstance(lin, LinearLayout):
        return lin
    raise TypeError(f"expected a LinearLayout, a spec dict or a Spec, got {type(x).__name__}")


def sizes(L: LinearLayout) -> list[int]:
    """The tensor shape of ``L`` (its out-dim sizes, in order)."""
    return list(L.out_dim_sizes.values())


def hardware_points(L: LinearLayout) -> np.ndarray:
    """(warps, lanes, registers) array of row-major element indices."""
    coords = L.apply_all()
    idx = np.zeros(len(coords), dtype=np.int64)
    for k, s in enumerate(sizes(L)):
        idx = idx * s + coords[:, k]
    return idx.reshape(L.in_dim_size("warp"), L.in_dim_size("lane"), L.in_dim_size("register"))


def bounds(src: LinearLayout, dst: LinearLayout, elem_bytes: int) -> dict:
    """Lower bounds, in SM clocks per conversion of one CTA's tile.

    ``smem``: the tile's unique bytes stored once, and loaded once by every warp
    that holds them in ``dst``, at 128 B/clk/SM.  A destination replicated over
    warps (dot operand B with warps along M) is loaded once per copy: each warp
    fills its own registers, only lanes of one warp share a wavefront.  A
    destination replicated over lanes is loaded by every lane: a load wavefront
    fills at most 128 bytes of registers (8 lanes x 16 B, 16 x 8 B, 32 x 4 B),
    or ``LANE_BYTES_PER_WAVEFRONT`` = 256 where the destination's lane bits 0
    and 1 hold at most two places (rank <= 1: an 8/16-byte load whose quads read
    at most two addresses is served in double phases, ``Target.load_quad_merge``;
    lanes that hold different elements read different addresses), so a warp
    loads at least max(its unique bytes / 128, its lanes' bytes / that)
    wavefronts -- T3 dims 021 f16 (lane bits 0..2 broadcast, 512 B a lane): 64
    a warp, not the 16 its 2 KB of unique bytes need; back (lane bit 4
    broadcast, 128 B a lane, quads of 4 places): 32, not 16.
    ``shuffle`` (only when no data crosses warps): per warp, the 32-bit words a
    thread must receive from other lanes (max over lanes), one warp
    instruction per clock per SM, summed over warps.  ``bound`` is the
    smaller legal one; 0 when no data crosses lanes."""
    src, dst = normalise(src), normalise(dst)
    level = classify(src, dst)
    tile = 1
    for s in sizes(src):
        tile *= s
    b = hardware_points(dst)
    quad = [v for v in dst.flat_bases("lane")[:2] if v]
    ratio = LANE_BYTES_PER_WAVEFRONT / SMEM_BYTES_PER_CLK if len(quad) < 2 or quad[0] == quad[1] else 1
    loaded = sum(max(len(np.unique(b[w])), sum(len(np.unique(b[w, lane])) for lane in range(b.shape[1])) / ratio)
                 for w in range(b.shape[0]))
    smem = (tile + loaded) * elem_bytes / SMEM_BYTES_PER_CLK
    out = {"level": level, "smem_clk": smem, "shuffle_clk": None, "bound_clk": smem, "bound_kind": "smem"}
    if level in ("noop", "register"):
        out.update(bound_clk=0.0, bound_kind="none")
    elif level == "shuffle":
        a = hardware_points(src)
        words = 0
        for w in range(a.shape[0]):
            worst = 0
            for lane in range(a.shape[1]):
                need = set(b[w, lane].tolist()) - set(a[w, lane].tolist())
                worst = max(worst, math.ceil(len(need) * elem_bytes / 4))
            words += worst
        out["shuffle_clk"] = words / SHFL_PER_CLK
        if out["shuffle_clk"] < smem:
            out.update(bound_clk=out["shuffle_clk"], bound_kind="shuffle")
    return out


def latency_floor_specs(warps: int, warp_size: int = 32) -> tuple[dict, dict]:
    """The spec dicts of the pair whose round trip is the latency floor of conversions across ``warps`` warps: a tile of
    ``warps * warp_size`` elements, one a thread; the source holds element e on lane e % warp_size
    of warp e // warp_size, the destination on warp e % warps, lane e // warps (lanes and warps
    exchanged, so the data crosses warps).  In f32 its plan is what every shared-memory round trip
    does at least, per conversion: the barrier before the stores (the buffer is reused), one 4-byte
    store a thread, the barrier, one 4-byte load -- no bank conflict.  Timed in the same harness
    as the pairs, it is the time no bandwidth bound sees: barriers and shared-memory latency."""
    lanes = warp_size.bit_length() - 1
    wbits = warps.bit_length() - 1
    if 1 << wbits != warps or 1 << lanes != warp_size or warps < 2:
        raise ValueError(f"latency floor: warps {warps} and warp size {warp_size} must be powers of two, warps >= 2")
    n = warps * warp_size
    src = {"kind": "linear", "register": [], "lane": [[1 << i] for i in range(lanes)],
           "warp": [[warp_size << i] for i in range(wbits)], "block": [], "shape": [n]}
    return src, dict(src, lane=[[warps << i] for i in range(lanes)], warp=[[1 << i] for i in range(wbits)])


def round_trip_bound(fwd: dict, back: dict) -> dict:
    """The bound of one conversion of a round trip (what the bench times: ``(time of a round trip) / 2``):
    the mean of the forward and the back bound.  They differ where one side is replicated over warps
    (dot operand B with warps along M: every warp loads the whole tile forward, one copy is stored
    back) -- the forward bound alone is no lower bound there (blocked -> dot B 64 x 128 f16: 640
    forward, 256 back, 448 per conversion).  ``fwd_clk``/``back_clk`` keep both."""
    out = dict(fwd, fwd_clk=fwd["bound_clk"], back_clk=back["bound_clk"])
    for k in ("bound_clk", "smem_clk", "shuffle_clk"):
        if fwd[k] is not None and back[k] is not None:
            out[k] = (fwd[k] + back[k]) / 2
    if fwd["bound_kind"] != back["bound_kind"]:
        out["bound_kind"] = f"{fwd['bound_kind']}/{back['bound_kind']}"
    return out


# --------------------------------------------------------------- features
def plan_features(plan: ConvertPlan) -> dict:
    """The cost model's inputs for one plan (per warp, as in planner._score)."""
    f = {"strategy": plan.strategy, "waves": 0, "instrs": 0, "barriers": 0, "shfl": 0, "selects": 0, "packs": 0,
         "moves": 0}
    if plan.smem is not None:
        m = plan.smem
        f.update(waves=m.store.total_wavefronts + m.load.total_wavefronts,
                 stmatrix_waves=m.store.total_wavefronts if m.store_instr != "vector" else 0,
                 instrs=m.store.instructions + m.load.instructions, barriers=m.block_barriers,
                 warp_barriers=m.warp_barriers,
                 store=f"{m.store_instr}/{m.store_vec}", load=f"{m.load_instr}/{m.load_vec}",
                 conflicts=[m.store.bank_conflicts, m.load.bank_conflicts], swizzle=m.swizzle,
                 smem_bytes=m.bytes, rounds=len(m.rounds))
    shuffled = [q for q in steps(plan) if q.shuffle is not None]     # a staged plan's via step, a butterfly's every step
    if shuffled:
        f.update(shfl=sum(q.shuffle.shuffles for q in shuffled), selects=sum(q.shuffle.selects for q in shuffled),
                 packs=sum(q.shuffle.pack_ops(word_view(q), q.dst_copies) for q in shuffled))
    elif plan.register is not None:
        f["moves"] = plan.n_dst
    return f


def score(f: dict, wavefront=None, shuffle=None, alu=None, barrier=None, warp_barrier=None, select=None) -> float:
    """planner._score from features, with optional replacement weights."""
    wavefront = WAVEFRONT if wavefront is None else wavefront
    shuffle = SHUFFLE if shuffle is None else shuffle
    alu = ALU if alu is None else alu
    barrier = BARRIER if barrier is None else barrier
    warp_barrier = WARP_BARRIER if warp_barrier is None else warp_barrier
    select = SELECT if select is None else select
    if f["strategy"] in ("noop", "register"):
        return 0.0
    shuffles = shuffle * f["shfl"] + select * f["selects"] + alu * f["packs"]      # staged: both terms
    if f["strategy"] in ("shuffle", "butterfly"):
        return shuffles
    stmatrix_extra = (STMATRIX - 1) * f.get("stmatrix_waves", 0)
    return (shuffles + wavefront * (f["waves"] + stmatrix_extra) + alu * f["instrs"] + barrier * f["barriers"]
            + warp_barrier * f.get("warp_barriers", 0))


def describe(plan: ConvertPlan) -> str:
    f = plan_features(plan)
    if plan.smem is not None:
        names = {"vector": "v", "matrix": "stmatrix", "matrix.trans": "stmatrix.trans"}
        st = f["store"].split("/")
        ld = f["load"].split("/")
        w = plan.elem_bytes
        s = (f"st{int(st[1]) * w}B" if st[0] == "vector" else names[st[0]])
        lo = (f"ld{int(ld[1]) * w}B" if ld[0] == "vector" else names[ld[0]].replace("stmatrix", "ldmatrix"))
        tag = f"smem {s}+{lo}"
        if plan.smem.swizzle == "none":
            tag += " noswz"
        return f"{describe(plan.via)} + {tag}" if plan.via is not None else tag
    if plan.shuffle is not None:
        fused = any(q.shuffle.send_fused or q.shuffle.recv_fused for q in steps(plan))
        head = f"butterfly {len(steps(plan))} steps, shuffle" if plan.strategy == "butterfly" else "shuffle"
        return f"{head} x{f['shfl']}" + (" fused" if fused else "")
    return plan.strategy


# ------------------------------------------------------------------ jobs
@dataclass
class Variant:
    label: str                 # auto | naive | cand<i>
    fwd: ConvertPlan
    back: ConvertPlan
    kernel: str                # C identifier of the generated conversion namespace
    source: str = ""           # path of the bench .cu
    cubin: str = ""
    same_as: str | None = None  # label of an identical variant (not compiled again)
    error: str | None = None
    ptxas: dict = field(default_factory=dict)   # ptxas -v per kernel (integrity.parse_ptxas)
    res: dict = field(default_factory=dict)     # cuobjdump -res-usage per kernel
    sass: dict = field(default_factory=dict)    # sass_counts per kernel (<kernel>_bench, <kernel>_base)
    maxrreg: int | None = None                  # -maxrregcount, when the default build spilled


@dataclass
class Job:
    name: str
    src: LinearLayout
    dst: LinearLayout
    dtype: str
    elem_bytes: int
    warps: int
    shape: tuple[int, ...]
    variants: list[Variant] = field(default_factory=list)
    bound: dict = field(default_factory=dict)
    legacy_specs: tuple[dict, dict] | None = None  # (src, dst) spec dicts, also timed as Gluon legacy classes
    note: str = ""


def xor_pack(v: Variant) -> int:
    """Elements per word the round-trip bench xors (``emit.convert.bench``: packed 32-bit words when
    both plans move words, else 1: element by element)."""
    per = word_view(v.fwd)
    return per if per and word_view(v.back) else 1


def ident(text: str) -> str:
    """``text`` as a C identifier."""
    s = re.sub(r"\W", "_", text)
    return s if s[:1].isalpha() else "k_" + s


def _same_plan(a: ConvertPlan, b: ConvertPlan) -> bool:
    return (a.strategy, a.register, a.shuffle, a.smem, a.via) == (b.strategy, b.register, b.shuffle, b.smem, b.via)


def alternatives(src: LinearLayout, dst: LinearLayout, dtype: str, target: str = "cuda",
                 arch: str | None = None) -> list[ConvertPlan]:
    """Every candidate plan the planner scores for ``auto`` (register,
    shuffle, each smem instruction pairing, each staged plan), as full plans.
    The order keeps recorded runs' ``cand<k>`` labels: the shuffle forms added
    after those runs (swap stages with no fewer selects, fused words) come last."""
    out: list[ConvertPlan] = []
    later: list[ConvertPlan] = []
    tgt = get_target(target, arch)
    for strategy in ("register", "shuffle", "smem", "shuffle+smem", "butterfly"):
        try:
            p = plan_conversion(src, dst, dtype, tgt, strategy=strategy)
        except ValueError:
            continue
        if strategy == "butterfly":               # added after the recorded runs: last
            later.append(replace(p, candidates=()))
            continue
        if strategy == "shuffle+smem":            # one per layout in between, not only the cheapest
            base = replace(p, via=None, smem=None, dst_copies=(), candidates=())
            out += [replace(q, candidates=()) for q in staged_plans(base, normalise(src), normalise(dst), tgt)]
            continue
        if strategy == "shuffle" and normalise(src).bases["warp"] != normalise(dst).bases["warp"]:
            # per warp (shuffle.per_warp), added after the recorded runs: every plan in every form, last
            later += [q for sp in shuffle_plans(normalise(src), normalise(dst), DTYPE_BYTES[dtype])
                      for q in shuffle_forms(replace(p, shuffle=None, candidates=()), sp)]
            continue
        if strategy == "shuffle":          # swap stages when they need fewer selects, then select trees
            trees, *forms = shuffle_forms(replace(p, shuffle=None, candidates=()),
                                          plan_shuffle(normalise(src), normalise(dst), DTYPE_BYTES[dtype]))
            swaps = [q for q in forms if not (q.shuffle.send_fused or q.shuffle.recv_fused)
                     and q.shuffle.selects < trees.shuffle.selects]
            out += swaps + [trees]
            later += [q for q in forms if q not in swaps]
            continue
        if strategy != "smem":
            out.append(p)
            continue
        try:
            smem = plan_smem(normalise(src), normalise(dst), DTYPE_BYTES[dtype], tgt, "optimal")
        except ValueError:
            smem = [p.smem]
        out += [replace(p, smem=m, candidates=()) for m in smem]
    return out + later


def prepare(name: str, src: Any, dst: Any, dtype: str, directory: str, *, naive: bool = True,
            candidates: bool = False, target: str = "cuda", arch: str | None = None,
            legacy_specs: tuple[dict, dict] | None = None, note: str = "") -> Job:
    """Plan the variants of one pair and write their bench sources into ``directory``."""
    src, dst = as_linear(src), as_linear(dst)
    w = DTYPE_BYTES[dtype]
    job = Job(name, src, dst, dtype, w, src.in_dim_size("warp"), tuple(sizes(src)), legacy_specs=legacy_specs,
              note=note)
    job.bound = round_trip_bound(bounds(src, dst, w), bounds(dst, src, w))

    def round_trip(label: str, **kw) -> Variant:
        """The forward and the reverse plan with the same options."""
        return Variant(label, plan_conversion(src, dst, dtype, target, arch, **kw),
                       plan_conversion(dst, src, dtype, target, arch, **kw), ident(f"{name}_{label}"))
    job.variants.append(round_trip("auto"))
    auto, back = job.variants[0].fwd, job.variants[0].back
    if auto.smem is not None or back.smem is not None:
        # the same plans with two alternating scratch buffers: no barrier before the stores
        job.variants.append(round_trip("buf2", scratch_buffers=2))
    if any(p.smem is not None and p.smem.barrier == "warp" for p in (auto, back)):
        # warp-local: each warp in its own slice of the scratch, warp barriers only (--scratch-per-warp)
        job.variants.append(round_trip("perwarp", scratch_per_warp=True))
    if naive:
        try:
            job.variants.append(round_trip("naive", strategy="smem", swizzle="none", max_vector_bytes=w))
        except ValueError as e:
            job.variants.append(Variant("naive", auto, back, "", error=f"no naive plan: {e}"))
    if candidates:
        for i, p in enumerate(alternatives(src, dst, dtype, target, arch)):
            v = Variant(f"cand{i}", p, back, ident(f"{name}_cand{i}"))
            if _same_plan(p, auto):
                v.same_as = "auto"
            job.variants.append(v)
    os.makedirs(directory, exist_ok=True)
    for v in job.variants:
        if v.same_as or v.error:
            continue
        paths = write_files(v.fwd, directory, v.kernel, emit=("header", "bench"), back_plan=v.back,
                            command=f"ll_codegen.bench {name} {v.label}")
        v.source = paths[-1]
    return job


def compile_jobs(jobs: Sequence[Job], arch: str = "sm_90", workers: int | None = None,
                 nvcc: str = "nvcc", log: Callable[[str], None] = print) -> None:
    """``nvcc -cubin`` every variant source, in parallel; for an ``arch`` other than sm_90
    (e.g. sm_80 plans timed on an H100) PTX for ``compute_XX`` instead, which the driver
    JIT-compiles when the module is loaded (``Variant.cubin`` then names the .ptx)."""
    todo = [v for j in jobs for v in j.variants if v.source and not v.cubin]
    ptx = arch != "sm_90"

    def one(v: Variant) -> None:
        out = v.source.rsplit(".", 1)[0] + (".ptx" if ptx else ".cubin")
        # -Xptxas -v: registers, stack frame and spill bytes of every kernel (the integrity columns)
        cmd = [nvcc, "-ptx" if ptx else "-cubin", f"-arch={arch.replace('sm_', 'compute_') if ptx else arch}",
               "-O3", "-std=c++17", *([] if ptx else ["-Xptxas", "-v"]), "-o", out, v.source]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if not r.returncode and not ptx and spills(parse_ptxas(r.stderr)):
            # ptxas without a register cap spills long-lived values to fit one more CTA per SM; the
            # explicit cap (Gluon's maxnreg, the same rule) lets it use them all
            r = subprocess.run(cmd[:-3] + [f"-maxrregcount={MAXRREG}"] + cmd[-3:], capture_output=True, text=True)
            v.maxrreg = MAXRREG
        if r.returncode:
            v.error = "nvcc: " + (r.stderr.strip().splitlines() or ["failed"])[0][:300]
            log(f"compile failed: {v.kernel}: {r.stderr[:2000]}")
            return
        v.cubin = out
        if not ptx:
            inspect_cubin(v, r.stderr)
    with ThreadPoolExecutor(workers or os.cpu_count() or 4) as ex:
        list(ex.map(one, todo))



def inspect_cubin(v: Variant, ptxas_log: str = "") -> None:
    """Fill ``v.ptxas``/``v.res``/``v.sass`` from nvcc's ptxas ``-v`` log and the cubin, and write
    its SASS next to it (``<kernel>.sass``, for the run's ``sass.tar.gz``)."""
    v.ptxas = parse_ptxas(ptxas_log)
    v.res = res_usage(v.cubin)
    text = sass_text(v.cubin)
    if text:
        v.sass = {fn: sass_counts(t) for fn, t in functions(text).items()}
        with open(v.cubin.rsplit(".", 1)[0] + ".sass", "w") as f:
            f.write(text)
