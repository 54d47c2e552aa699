"""Time generated conversions on a GPU against a naive plan, Triton's own
``convert_layout`` (a Gluon kernel with the same layouts) and a throughput bound.

Every measured kernel does the same work (``templates/bench.cu.j2``): each CTA
loads one tile in the source layout, then ``iters`` times converts it to the
destination layout, xors every element e with ``key(e) ^ k`` (``bench_key``:
a hash of e's row-major index in the tile, k the iteration, as raw bits of the
element width) and converts it back, and stores it once:
``out[e] = in[e] ^ (key(e) if iters is odd) ^ XOR_{k<iters} k``.  The key
depends on where an element is, so an odd ``iters`` check sees a forward
conversion that misplaces elements even when the back conversion undoes it.
The Triton kernel does ``y = convert_layout(x, dst); y ^= key ^ k;
x = convert_layout(y, src)`` with the key computed in the destination layout
-- the same operation at the same place.

Each side is also timed without its conversions (``<name>_base``, Gluon with
``CONVERT=False``: the same loop xoring the source registers, keyed in the
source layout), and a conversion costs the difference: loop and data-change
instructions, which the two compilers emit differently, cancel.

Numbers: the median over ``repeats`` timed groups (after ``warmup`` launches)
of the kernel time measured with CUDA events, each group ``n`` back-to-back
launches sized to last >= ``group_ms``; *per conversion per SM* is
``(time - base time) / (ctas * 2 * iters / SMs)`` -- the throughput figure,
independent of how many CTAs fit on an SM -- reported in nanoseconds and in SM
clocks at the measured clock.  The bound is the smaller of the shared-memory
bound (the tile's bytes stored and loaded once each at 128 B per clock per SM)
and, for conversions inside warps, the shuffle bound (one 32-bit warp shuffle
per clock per SM for every word that has to leave its thread).

Public entry points: ``bench_pair`` (one pair: plan, render, compile, check,
time; returns a dict) and ``format_table`` (rows of such dicts as Markdown).
``prepare``/``compile_jobs``/``run_job`` are the same steps for a batch
(``bench/bench_convert.py`` compiles a whole corpus in parallel).
GPU imports (CuPy, torch, Triton) happen inside the functions only.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import statistics
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.model import ConversionPlan, word_view
from ll_codegen.plan.planner import (ALU, BARRIER, DTYPE_BYTES, SELECT, SHUFFLE, STMATRIX, WARP_BARRIER, WAVEFRONT, normalise,
                      classify, plan_conversion)
from ll_codegen.emit.render import bench_smem, write_files
from ll_codegen.plan.shuffle import plan_shuffle
from ll_codegen.plan.swizzle import plan_smem
from ll_codegen.core.target import get_target

SMEM_BYTES_PER_CLK = 128       # per SM
SHFL_PER_CLK = 1               # warp instructions per clock per SM


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


def _sizes(L: LinearLayout) -> list[int]:
    return list(L.out_dim_sizes.values())


def hardware_points(L: LinearLayout) -> np.ndarray:
    """(warps, lanes, registers) array of row-major element indices."""
    coords = L.apply_all()
    idx = np.zeros(len(coords), dtype=np.int64)
    for k, s in enumerate(_sizes(L)):
        idx = idx * s + coords[:, k]
    return idx.reshape(L.in_dim_size("warp"), L.in_dim_size("lane"), L.in_dim_size("register"))


def bounds(src: LinearLayout, dst: LinearLayout, elem_bytes: int) -> dict:
    """Lower bounds, in SM clocks per conversion of one CTA's tile.

    ``smem``: unique tile bytes stored once and loaded once at 128 B/clk/SM.
    ``shuffle`` (only when no data crosses warps): per warp, the 32-bit words a
    thread must receive from other lanes (max over lanes), one warp
    instruction per clock per SM, summed over warps.  ``bound`` is the
    smaller legal one; 0 when no data crosses lanes."""
    src, dst = normalise(src), normalise(dst)
    level = classify(src, dst)
    tile = 1
    for s in _sizes(src):
        tile *= s
    smem = 2 * tile * elem_bytes / SMEM_BYTES_PER_CLK
    out = {"level": level, "smem_clk": smem, "shuffle_clk": None, "bound_clk": smem, "bound_kind": "smem"}
    if level in ("noop", "register"):
        out.update(bound_clk=0.0, bound_kind="none")
    elif level == "shuffle":
        a, b = hardware_points(src), hardware_points(dst)
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


# --------------------------------------------------------------- features
def plan_features(plan: ConversionPlan) -> dict:
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
    elif plan.shuffle is not None:
        s = plan.shuffle
        f.update(shfl=s.shuffles, selects=s.selects, packs=s.pack_ops(word_view(plan), plan.dst_copies))
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
    if f["strategy"] == "shuffle":
        return shuffle * f["shfl"] + select * f["selects"] + alu * f["packs"]
    stmatrix_extra = (STMATRIX - 1) * f.get("stmatrix_waves", 0)
    return (wavefront * (f["waves"] + stmatrix_extra) + alu * f["instrs"] + barrier * f["barriers"]
            + warp_barrier * f.get("warp_barriers", 0))


def describe(plan: ConversionPlan) -> str:
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
        return tag
    if plan.shuffle is not None:
        return f"shuffle x{f['shfl']}"
    return plan.strategy


# ------------------------------------------------------------------ jobs
@dataclass
class Variant:
    label: str                 # auto | naive | cand<i>
    fwd: ConversionPlan
    back: ConversionPlan
    kernel: str                # C identifier of the generated conversion namespace
    source: str = ""           # path of the bench .cu
    cubin: str = ""
    same_as: str | None = None  # label of an identical variant (not compiled again)
    error: str | None = None


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


def _ident(text: str) -> str:
    s = re.sub(r"\W", "_", text)
    return s if s[:1].isalpha() else "k_" + s


def _same_plan(a: ConversionPlan, b: ConversionPlan) -> bool:
    return (a.strategy, a.register, a.shuffle, a.smem) == (b.strategy, b.register, b.shuffle, b.smem)


def alternatives(src: LinearLayout, dst: LinearLayout, dtype: str, target: str = "cuda",
                 arch: str | None = None) -> list[ConversionPlan]:
    """Every candidate plan the planner scores for ``auto`` (register,
    shuffle, each smem instruction pairing), as full plans."""
    out: list[ConversionPlan] = []
    tgt = get_target(target, arch)
    for strategy in ("register", "shuffle", "smem"):
        try:
            p = plan_conversion(src, dst, dtype, tgt, strategy=strategy)
        except ValueError:
            continue
        if strategy != "smem":
            out.append(p)
            if strategy == "shuffle" and p.shuffle.send_swaps + p.shuffle.recv_swaps:
                # the select-tree form of the same rounds too
                out.append(replace(p, shuffle=plan_shuffle(normalise(src), normalise(dst), DTYPE_BYTES[dtype]),
                                   candidates=()))
            continue
        try:
            smem = plan_smem(normalise(src), normalise(dst), DTYPE_BYTES[dtype], tgt, "optimal")
        except ValueError:
            smem = [p.smem]
        out += [replace(p, smem=m, candidates=()) for m in smem]
    return out


def prepare(name: str, src: Any, dst: Any, dtype: str, directory: str, *, naive: bool = True,
            candidates: bool = False, target: str = "cuda", arch: str | None = None,
            legacy_specs: tuple[dict, dict] | None = None, note: str = "") -> Job:
    """Plan the variants of one pair and write their bench sources into ``directory``."""
    src, dst = as_linear(src), as_linear(dst)
    w = DTYPE_BYTES[dtype]
    job = Job(name, src, dst, dtype, w, src.in_dim_size("warp"), tuple(_sizes(src)), legacy_specs=legacy_specs,
              note=note)
    job.bound = bounds(src, dst, w)

    def round_trip(label: str, **kw) -> Variant:
        """The forward and the reverse plan with the same options."""
        return Variant(label, plan_conversion(src, dst, dtype, target, arch, **kw),
                       plan_conversion(dst, src, dtype, target, arch, **kw), _ident(f"{name}_{label}"))
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
            v = Variant(f"cand{i}", p, back, _ident(f"{name}_cand{i}"))
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
        cmd = [nvcc, "-ptx" if ptx else "-cubin", f"-arch={arch.replace('sm_', 'compute_') if ptx else arch}",
               "-O3", "-std=c++17", "-o", out, v.source]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            v.error = "nvcc: " + (r.stderr.strip().splitlines() or ["failed"])[0][:300]
            log(f"compile failed: {v.kernel}: {r.stderr[:2000]}")
        else:
            v.cubin = out
    with ThreadPoolExecutor(workers or os.cpu_count() or 4) as ex:
        list(ex.map(one, todo))


# ---------------------------------------------------------------- timing
def xor_upto(n: int, bits: int) -> int:
    x = 0
    for k in range(n):
        x ^= k & ((1 << bits) - 1)
    return x


def _signed(v: int, bits: int) -> int:
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def time_launches(launch: Callable[[], None], event_pair: Callable[[], tuple[Any, Any, Callable]],
                  warmup: int = 2, repeats: int = 7, group_ms: float = 2.0) -> float:
    """Median milliseconds per launch (groups of back-to-back launches)."""
    for _ in range(warmup):
        launch()
    s, e, elapsed = event_pair()
    s.record()
    launch()
    e.record()
    e.synchronize()
    one = max(elapsed(s, e), 1e-3)
    n = max(1, min(200, math.ceil(group_ms / one)))
    ts = []
    for _ in range(repeats):
        s, e, elapsed = event_pair()
        s.record()
        for _ in range(n):
            launch()
        e.record()
        e.synchronize()
        ts.append(elapsed(s, e) / n)
    return statistics.median(ts)


def _cupy_events():
    import cupy
    return cupy.cuda.Event(), cupy.cuda.Event(), lambda a, b: cupy.cuda.get_elapsed_time(a, b)


def _torch_events():
    import torch
    return (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True),
            lambda a, b: a.elapsed_time(b))


TORCH_INT = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def bench_key(e: np.ndarray) -> np.ndarray:
    """key(e) of the bench kernels (``templates/bench.cu.j2``) for row-major tile indices ``e``."""
    e = np.asarray(e, dtype=np.uint32)
    return ((e * np.uint32(40503)) ^ (e >> np.uint32(5))) & np.uint32(0xFFFF)


def expected_output(inp: np.ndarray, tile_elems: int, iters: int) -> np.ndarray:
    """What a bench kernel writes for input ``inp`` (raw integers, tiles of ``tile_elems``)."""
    bits = 8 * inp.dtype.itemsize
    key = bench_key(np.arange(inp.size) % tile_elems).astype(np.uint64) & np.uint64((1 << bits) - 1)
    change = (key if iters % 2 else np.zeros_like(key)) ^ np.uint64(xor_upto(iters, bits))
    return inp ^ change.astype(f"u{inp.dtype.itemsize}").view(inp.dtype)


@dataclass
class Buffers:
    inp: Any            # torch tensor (int of the element width)
    out: Any
    n: int
    key: Any = None     # bench_key of every element's tile index, as the element type


def _as_signed(x, bits: int):
    """int64 torch values in [0, 2^bits) -> the same bits as a signed ``bits``-wide value."""
    return x - ((x >> (bits - 1)) & 1) * (1 << bits) if bits < 64 else x


def make_buffers(job: Job, ctas: int, seed: int = 0) -> Buffers:
    import torch
    n = ctas * int(np.prod(job.shape))
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    raw = torch.randint(0, 256, (n * job.elem_bytes,), dtype=torch.uint8, device="cuda", generator=g)
    inp = raw.view(getattr(torch, TORCH_INT[job.elem_bytes]))
    e = torch.arange(n, device="cuda", dtype=torch.int64) % int(np.prod(job.shape))
    bits = 8 * job.elem_bytes
    key = ((e * 40503) ^ (e >> 5)) & min(0xFFFF, (1 << bits) - 1)       # bench_key, truncated
    return Buffers(inp, torch.empty_like(inp), n, _as_signed(key, bits).to(inp.dtype))


def _check(buf: Buffers, iters: int, tile_elems: int) -> bool:
    """The kernels' output is ``expected_output`` (computed on the GPU)."""
    import torch
    bits = 8 * buf.inp.element_size()
    change = _as_signed(torch.tensor(xor_upto(iters, bits), dtype=torch.int64), bits).to(buf.inp.dtype)
    want = buf.inp ^ change ^ buf.key if iters % 2 else buf.inp ^ change
    return bool(torch.equal(buf.out, want))


def occupancy(fn: Any, threads: int, smem: int) -> int | None:
    try:
        import cupy
        ptr = getattr(fn, "ptr", None) or fn.kernel.ptr
        return int(cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(ptr, threads, smem))
    except Exception:
        return None


def run_ours(job: Job, v: Variant, buf: Buffers, iters: int, ctas: int, check_iters: int = 5,
             **tk) -> dict:
    """Check (``check_iters`` round trips, odd: the check sees element placement) and time the
    bench kernel and its base (the loop without the conversions); ``ms`` is their difference."""
    import cupy
    mod = cupy.RawModule(path=v.cubin)
    smem = bench_smem(v.fwd, v.back)[1]
    threads = v.fwd.threads
    cin = cupy.asarray(buf.inp)
    cout = cupy.asarray(buf.out)
    tile = int(np.prod(job.shape))
    res: dict[str, Any] = {"smem": smem, "ok": True}
    for kind in ("bench", "base"):
        fn = mod.get_function(f"{v.kernel}_{kind}")
        if smem > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = smem

        def launch(k=iters, fn=fn):
            fn((ctas,), (threads,), (cin, cout, np.int32(k)), shared_mem=smem)
        buf.out.fill_(0x35)
        launch(check_iters)
        cupy.cuda.runtime.deviceSynchronize()
        ok = _check(buf, check_iters, tile)
        ms = time_launches(launch, _cupy_events, **tk)
        res["ok"] = res["ok"] and ok and _check(buf, iters, tile)
        if kind == "bench":
            res.update(regs=fn.num_regs, ctas_per_sm=occupancy(fn, threads, smem), ms_loop=ms)
        else:
            res.update(base_regs=fn.num_regs, ms_base=ms)
    res["ms"] = res["ms_loop"] - res["ms_base"]
    return res


# ---------------------------------------------------------------- Triton
_GLUON: dict = {}


def gluon_kernels():
    """The two Gluon round-trip kernels (1-D and 2-D tiles), built once."""
    if _GLUON:
        return _GLUON
    from triton.experimental import gluon
    from triton.experimental.gluon import language as ttgl

    @gluon.jit
    def roundtrip_2d(in_ptr, out_ptr, iters, SRC: ttgl.constexpr, DST: ttgl.constexpr,
                     M: ttgl.constexpr, N: ttgl.constexpr, CONVERT: ttgl.constexpr):
        base = ttgl.program_id(0) * (M * N)
        rm = ttgl.arange(0, M, layout=ttgl.SliceLayout(1, SRC))[:, None]
        rn = ttgl.arange(0, N, layout=ttgl.SliceLayout(0, SRC))[None, :]
        offs = base + rm * N + rn
        x = ttgl.load(in_ptr + offs)
        if CONVERT:
            e = ttgl.arange(0, M, layout=ttgl.SliceLayout(1, DST))[:, None] * N + \
                ttgl.arange(0, N, layout=ttgl.SliceLayout(0, DST))[None, :]
        else:
            e = rm * N + rn
        key = (((e * 40503) ^ (e >> 5)) & 0xFFFF).to(x.dtype)
        for k in range(iters):
            if CONVERT:
                y = ttgl.convert_layout(x, DST)
                y = y ^ (key ^ k.to(y.dtype))
                x = ttgl.convert_layout(y, SRC)
            else:
                x = x ^ (key ^ k.to(x.dtype))
        ttgl.store(out_ptr + offs, x)

    @gluon.jit
    def roundtrip_1d(in_ptr, out_ptr, iters, SRC: ttgl.constexpr, DST: ttgl.constexpr, M: ttgl.constexpr,
                     CONVERT: ttgl.constexpr):
        offs = ttgl.program_id(0) * M + ttgl.arange(0, M, layout=SRC)
        x = ttgl.load(in_ptr + offs)
        if CONVERT:
            e = ttgl.arange(0, M, layout=DST)
        else:
            e = ttgl.arange(0, M, layout=SRC)
        key = (((e * 40503) ^ (e >> 5)) & 0xFFFF).to(x.dtype)
        for k in range(iters):
            if CONVERT:
                y = ttgl.convert_layout(x, DST)
                y = y ^ (key ^ k.to(y.dtype))
                x = ttgl.convert_layout(y, SRC)
            else:
                x = x ^ (key ^ k.to(x.dtype))
        ttgl.store(out_ptr + offs, x)

    _GLUON.update(k1=roundtrip_1d, k2=roundtrip_2d, ttgl=ttgl)
    return _GLUON


def gluon_linear(L: LinearLayout):
    """Our layout as ``ttgl.DistributedLinearLayout`` with exactly our bases."""
    ttgl = gluon_kernels()["ttgl"]
    b = normalise(L).bases
    return ttgl.DistributedLinearLayout(reg_bases=b["register"], lane_bases=b["lane"], warp_bases=b["warp"],
                                        block_bases=b.get("block", []), shape=_sizes(L))


def gluon_legacy(spec: dict):
    """A spec dict as Gluon's legacy layout class (blocked, slice, nvidia_mma,
    dot_operand); raises ValueError for anything else."""
    ttgl = gluon_kernels()["ttgl"]
    k = spec["kind"]
    if k == "blocked":
        return ttgl.BlockedLayout(size_per_thread=spec["size_per_thread"], threads_per_warp=spec["threads_per_warp"],
                                  warps_per_cta=spec["warps_per_cta"], order=spec["order"])
    if k == "slice":
        return ttgl.SliceLayout(spec["dim"], gluon_legacy(spec["parent"]))
    if k == "nvidia_mma":
        return ttgl.NVMMADistributedLayout(version=spec["version"], warps_per_cta=spec["warps_per_cta"],
                                           instr_shape=spec["instr_shape"])
    if k == "dot_operand":
        return ttgl.DotOperandLayout(operand_index=spec["operand_index"], parent=gluon_legacy(spec["parent"]),
                                     k_width=spec["k_width"])
    raise ValueError(f"no Gluon legacy class for kind {k!r}")


def run_triton(job: Job, buf: Buffers, iters: int, ctas: int, src_layout=None, dst_layout=None,
               check_iters: int = 5, sass_dir: str | None = None, tag: str = "triton", **tk) -> dict:
    """Compile, check and time the Gluon round trip and its base (``CONVERT=False``); layouts
    default to our exact bases; ``ms`` is the difference, as in ``run_ours``."""
    K = gluon_kernels()
    src_layout = src_layout if src_layout is not None else gluon_linear(job.src)
    dst_layout = dst_layout if dst_layout is not None else gluon_linear(job.dst)
    import torch
    tile = int(np.prod(job.shape))
    res: dict[str, Any] = {"ok": True}
    for convert in (True, False):
        if len(job.shape) == 1:
            def launch(k=iters, convert=convert):
                return K["k1"][(ctas,)](buf.inp, buf.out, k, src_layout, dst_layout, job.shape[0], convert,
                                        num_warps=job.warps)
        else:
            def launch(k=iters, convert=convert):
                return K["k2"][(ctas,)](buf.inp, buf.out, k, src_layout, dst_layout, job.shape[0], job.shape[1],
                                        convert, num_warps=job.warps)
        buf.out.fill_(0x35)
        compiled = launch(check_iters)
        torch.cuda.synchronize()
        ok = _check(buf, check_iters, tile)
        ms = time_launches(launch, _torch_events, **tk)
        res["ok"] = res["ok"] and ok and _check(buf, iters, tile)
        if not convert:
            res["ms_base"] = ms
            continue
        res.update(regs=getattr(compiled, "n_regs", None), smem=getattr(compiled.metadata, "shared", None),
                   ms_loop=ms)
        if sass_dir:
            try:
                path = os.path.join(sass_dir, _ident(f"{job.name}_{tag}") + ".cubin")
                with open(path, "wb") as f:
                    f.write(compiled.asm["cubin"])
                res["cubin"] = path
            except Exception as e:  # noqa: BLE001
                res["cubin_error"] = str(e)
    res["ms"] = res["ms_loop"] - res["ms_base"]
    return res


# ------------------------------------------------------------------ SASS
_OP = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
_LABEL = re.compile(r"^\s*\.(L_x_\d+):")
_BRA = re.compile(r"BRA\s+(?:`\()?\.?(L_x_\d+|0x[0-9a-f]+)")
ALU_OPS = ("IMAD", "IADD3", "LOP3", "SHF", "LEA", "MOV", "PRMT", "SEL", "ISETP", "IABS", "BFE", "BFI", "SGXT",
           "POPC", "FLO", "S2R", "IMNMX", "VIADD", "UIADD3", "ULOP3", "USHF", "UMOV", "ULEA", "UIMAD", "CS2R")


def sass_text(cubin: str) -> str:
    r = subprocess.run(["cuobjdump", "-sass", cubin], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else ""


def sass_counts(text: str) -> dict:
    """Opcode counts for the whole kernel and for its main (largest backward-branch) loop."""
    instrs: list[tuple[int, str, str]] = []
    labels: dict[str, int] = {}
    pending: list[str] = []
    for line in text.splitlines():
        m = _LABEL.match(line)
        if m:
            pending.append(m.group(1))
            continue
        m = _OP.match(line)
        if m:
            addr = int(m.group(1), 16)
            for lb in pending:
                labels[lb] = addr
            pending = []
            instrs.append((addr, m.group(3), line))
    loop = (0, -1)
    for addr, op, line in instrs:
        if op.startswith("BRA"):
            b = _BRA.search(line)
            if b:
                t = b.group(1)
                tgt = int(t, 16) if t.startswith("0x") else labels.get(t, addr)
                if tgt < addr and addr - tgt > loop[1] - loop[0]:
                    loop = (tgt, addr)

    def count(sel) -> dict:
        c: dict[str, int] = {}
        for addr, op, _ in sel:
            c[op] = c.get(op, 0) + 1
        return c
    body = [t for t in instrs if loop[0] <= t[0] <= loop[1]]
    whole, inner = count(instrs), count(body)

    def fam(c: dict) -> dict:
        f = {"total": sum(c.values()), "LDS": 0, "STS": 0, "LDSM": 0, "STSM": 0, "SHFL": 0, "BAR": 0, "ALU": 0,
             "NOP": 0, "SEL": 0, "PRMT": 0}
        for op, n in c.items():
            head = op.split(".")[0]
            if head in ("SEL", "PRMT"):         # selects and byte permutes of shuffle plans, also in ALU
                f[head] += n
            if head in ("LDS", "STS", "LDSM", "STSM", "SHFL", "BAR", "NOP"):
                f[head] += n
            elif head in ALU_OPS:
                f["ALU"] += n
        f["detail"] = {op: n for op, n in sorted(c.items()) if op.split(".")[0] in
                       ("LDS", "STS", "LDSM", "STSM", "SHFL", "BAR")}
        return f
    return {"kernel": fam(whole), "loop": fam(inner), "loop_instrs": len(body)}


# ------------------------------------------------------------ one pair
def run_job(job: Job, iters: int = 64, ctas: int = 132 * 48, triton: bool = True, sms: int = 132,
            clock_mhz: float | None = None, sass: bool = False, sass_dir: str | None = None,
            log: Callable[[str], None] = print, **tk) -> dict:
    """Check and time every compiled variant of ``job`` (and Triton); one result dict."""
    buf = make_buffers(job, ctas)
    convs_per_sm = ctas * 2 * iters / sms
    b = job.bound
    row: dict[str, Any] = {
        "name": job.name, "dtype": job.dtype, "shape": list(job.shape), "warps": job.warps,
        "elem_bytes": job.elem_bytes, "level": b["level"], "bound_clk": b["bound_clk"],
        "bound_kind": b["bound_kind"], "smem_bound_clk": b["smem_clk"], "shuffle_bound_clk": b["shuffle_clk"],
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
            if sass:
                txt = sass_text(v.cubin)
                if txt:
                    entry["sass"] = sass_counts(txt)
                    if sass_dir:
                        with open(os.path.join(sass_dir, f"{v.kernel}.sass"), "w") as f:
                            f.write(txt)
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
                res = run_triton(job, buf, iters, ctas, s, d, sass_dir=sass_dir if sass else None, tag=tag, **tk)
                if sass and res.get("cubin"):
                    txt = sass_text(res["cubin"])
                    if txt:
                        res["sass"] = sass_counts(txt)
                        if sass_dir:
                            with open(res["cubin"][:-6] + ".sass", "w") as f:
                                f.write(txt)
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
    del buf
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


def measure_clock_mhz(sms: int = 132) -> dict:
    """SM clock under load: clock64 cycles over %globaltimer nanoseconds in a spin kernel."""
    import cupy
    src = r'''
extern "C" __global__ void spin(unsigned long long* out, int n) {
    unsigned long long g0, g1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
    long long t0 = clock64();
    float x = threadIdx.x;
    for (int i = 0; i < n; ++i) x = x * 1.0000001f + 0.5f;
    long long t1 = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
    if (threadIdx.x == 0) { out[2 * blockIdx.x] = t1 - t0; out[2 * blockIdx.x + 1] = g1 - g0; }
    if (x == 1.2345f) out[0] = 0;
}'''
    fn = cupy.RawKernel(src, "spin")
    out = cupy.zeros(2 * sms * 4, dtype=cupy.uint64)
    for n in (1000, 2_000_000):
        fn((sms * 4,), (256,), (out, np.int32(n)))
    cupy.cuda.runtime.deviceSynchronize()
    o = out.get().reshape(-1, 2).astype(np.float64)
    mhz = float(np.median(o[:, 0] / o[:, 1] * 1e3))
    res = {"clock_mhz": mhz, "spin_ms": float(np.median(o[:, 1]) / 1e6)}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        res["nvidia_smi"] = q.stdout.strip()
    except Exception:  # noqa: BLE001
        pass
    return res


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
        job = prepare(_ident(name), src_layout, dst_layout, dtype, tmp, naive=naive, candidates=candidates)
        compile_jobs([job])
        return run_job(job, iters=iters, ctas=ctas, triton=triton, sms=sms, clock_mhz=clock_mhz, sass=sass,
                       sass_dir=tmp if sass else None, repeats=repeats, warmup=warmup)
    finally:
        if workdir is None:
            shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------ table
def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "—" if x is None else fmt.format(x)


def format_table(rows: Sequence[dict]) -> str:
    """Markdown table: per pair, time per conversion per SM (ns and clocks),
    ours/Triton (conversions), ours/Triton (whole loop), ours/bound, Triton/bound, naive/ours, strategy chosen."""
    head = ("| pair | dtype | warps | tile | auto plan | bound clk | ours clk | Triton clk | naive clk "
            "| ours/Triton | loop ours/Triton | ours/bound | Triton/bound | naive/ours |")
    lines = [head, "|" + " --- |" * 5 + " ---: |" * 9]
    for r in rows:
        v = r["variants"]["auto"]
        t = r.get("triton", {})
        nv = r["variants"].get("naive", {})
        tri = _f(t.get("clk_per_conv_sm"), "{:.0f}") if "error" not in t else "n/a"
        if v.get("ok") is False or t.get("ok") is False:
            tri += " (WRONG)" if t.get("ok") is False else ""
        plan = r["plan"] + ("" if r["plan"] == r.get("back_plan") else f" / back {r.get('back_plan')}")
        lines.append(
            f"| {r['name']} | {r['dtype']} | {r['warps']} | {'x'.join(map(str, r['shape']))} | {plan} "
            f"| {_f(r['bound_clk'], '{:.0f}')} | {_f(v.get('clk_per_conv_sm'), '{:.0f}')}"
            f"{'' if v.get('ok', True) else ' (WRONG)'} | {tri} | {_f(nv.get('clk_per_conv_sm'), '{:.0f}')} "
            f"| {_f(r.get('ours_over_triton'))} | {_f(r.get('loop_ours_over_triton'))} | {_f(r.get('ours_over_bound'))} | {_f(r.get('triton_over_bound'))} "
            f"| {_f(r.get('naive_over_ours'))} |")
    return "\n".join(lines)


def geomean(xs: Sequence[float]) -> float:
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")
