"""The GPU suite's conversions: (name, plan, tags) for every case.

Sources (all CUDA, warp size 32):

* ``named``: every CUDA pair of ``corpus.NAMED`` with each of its dtypes;
* ``kinds``: extra pairs so that every layout kind a CUDA warp can hold is a
  source and a destination -- blocked, slice, nvidia_mma v2 and v3, dot_operand
  (A and B; mma v2, wgmma and blocked parents), linear, and amd_wmma (wave32,
  versions 1 and 2; AMD layouts with 64 lanes cannot run on an NVIDIA GPU);
* ``random``: seeded ``corpus.random_pair`` (1-8 warps, 1/2/4/8-byte elements);
* ``generated``: the CUDA conversions of ``generated/manifest.yaml`` (see
  ``generated_cases``).

For each (pair, dtype) the variants are: ``auto``; every legal forced
strategy (register, shuffle, smem); smem with swizzle ``none``; smem with
``max_vector_bytes`` 4 and 2; smem with a budget a quarter of the tile
(several rounds) where the layouts allow rounds; and every shared-memory
candidate pairing (vector, ldmatrix/stmatrix[.trans]) of the optimal swizzle.
Variants whose plan equals an earlier one of the same pair are dropped.
"""
from __future__ import annotations

import functools
import json
import os
import random
import re
from dataclasses import dataclass, field, replace

from ll_codegen.testing import corpus
from ll_codegen.layouts.kinds import from_dict
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.planner import DTYPE_BYTES, plan_conversion
from ll_codegen.plan.plans import Transfer
from ll_codegen.core.target import get_target

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPE_OF = {1: "u8", 2: "f16", 4: "f32", 8: "f64"}


@dataclass
class Case:
    name: str                 # C identifier, unique in the suite
    plan: Transfer
    source: str               # named | kinds | random | generated
    pair: str                 # the pair's label
    variant: str              # auto | register | shuffle | smem | smem_none | vec4 | ... | cand_<st>_<ld>
    kinds: tuple[str, str] = ("", "")
    files: dict = field(default_factory=dict)   # generated/: header and harness paths

    @property
    def tag(self) -> str:
        p = self.plan
        if p.operation == "convert" and p.smem is not None:
            m = p.smem
            return (f"smem/{m.store_instr}->{m.load_instr}/{m.swizzle}/{len(m.rounds)}r/"
                    f"{p.elem_bytes * 8}b")
        return p.strategy


def kind_label(spec: dict) -> str:
    """``blocked``, ``nvidia_mma_v2``/``_v3``, ``amd_wmma_v1``, ``dot_operand(nvidia_mma_v2)``, ..."""
    k = spec["kind"]
    if k == "nvidia_mma":
        return f"nvidia_mma_v{spec['version'][0]}"
    if k == "amd_wmma":
        return f"amd_wmma_v{spec['version']}"
    if k in ("dot_operand", "slice"):
        return f"{k}({kind_label(spec['parent'])})"
    return k


def _lin(spec: dict) -> LinearLayout:
    return from_dict(spec).to_linear(spec["shape"])


# ------------------------------------------------------------------ kind pairs
B = corpus.blocked
ROW = B([1, 8], [4, 8], [4, 1], [1, 0], [64, 64])
COL = B([8, 1], [8, 4], [1, 4], [0, 1], [64, 64])
ROW4 = B([1, 4], [2, 16], [4, 1], [1, 0], [64, 64])
MMA22 = corpus.mma_v2([2, 2], [64, 64])
MMA41 = corpus.mma_v2([4, 1], [64, 64])
WG = corpus.wgmma([4, 1], 64, [64, 64])
WG128 = corpus.wgmma([4, 1], 128, [128, 128])


def wmma(version, wpc, shape, transposed=False) -> dict:
    return {"kind": "amd_wmma", "version": version, "transposed": transposed, "warps_per_cta": wpc,
            "shape": shape}


def _linear_of(spec: dict) -> dict:
    """A ``linear`` spec with the same bases as ``spec`` (the linear kind as a source/destination)."""
    L = _lin(spec)
    return corpus.linear(**{d: [list(v) for v in L.bases.get(d, [])] for d in ("register", "lane", "warp")},
                         shape=spec["shape"])


KIND_PAIRS: list[tuple[str, dict, dict, tuple[str, ...]]] = [
    ("mma_v2_to_col", MMA22, COL, ("f16", "f32")),
    ("col_to_mma_v2", COL, MMA22, ("f16",)),
    ("mma_v2_4x1_to_mma_v2_2x2", MMA41, MMA22, ("f32",)),
    ("mma_v2_to_dot_b_k2", MMA22, corpus.dot(MMA22, 1, 2, [64, 64]), ("f16",)),
    ("blocked_to_dot_b_k2", ROW, corpus.dot(MMA22, 1, 2, [64, 64]), ("f16",)),
    ("blocked_to_dot_a_k4", ROW, corpus.dot(MMA41, 0, 4, [64, 64]), ("i8",)),
    ("dot_a_to_blocked", corpus.dot(MMA41, 0, 2, [64, 64]), ROW4, ("bf16",)),
    ("dot_b_to_dot_a", corpus.dot(MMA22, 1, 2, [64, 64]), corpus.dot(MMA22, 0, 2, [64, 64]), ("f16",)),
    ("blocked_to_fma_dot_a", ROW, corpus.dot(ROW4, 0, 0, [64, 64]), ("f32",)),
    ("wgmma_to_mma_v2", WG, MMA41, ("f32", "f16")),
    ("wgmma_to_col", WG, COL, ("f16",)),
    ("blocked_to_wgmma", ROW4, WG, ("f32",)),
    ("wgmma_to_dot_a_k2", WG, corpus.dot(WG, 0, 2, [64, 64]), ("f16",)),
    ("wgmma128_to_blocked_f64", WG128, B([1, 2], [4, 8], [4, 1], [1, 0], [128, 128]), ("f64",)),
    ("slice_mma_to_slice_blocked_d0", corpus.sliced(MMA22, 0, [64]), corpus.sliced(ROW, 0, [64]), ("f32",)),
    ("slice_wgmma_to_slice_blocked_d1", corpus.sliced(WG, 1, [64]), corpus.sliced(ROW4, 1, [64]), ("f16",)),
    ("slice_blocked_to_slice_blocked", corpus.sliced(ROW, 1, [64]), corpus.sliced(COL, 1, [64]), ("f64",)),
    ("linear_to_blocked", _linear_of(MMA22), COL, ("f16",)),
    ("blocked_to_linear", ROW, _linear_of(MMA41), ("f32",)),
    ("linear_to_linear", _linear_of(ROW), _linear_of(COL), ("u8",)),
    ("wmma1_to_blocked", wmma(1, [2, 2], [64, 64]), ROW, ("f16", "f32")),
    ("blocked_to_wmma2", ROW4, wmma(2, [4, 1], [64, 64]), ("f16",)),
    ("wmma2t_to_mma_v2", wmma(2, [2, 2], [64, 64], transposed=True), MMA22, ("f32",)),
    ("mma_v2_to_wmma1", MMA22, wmma(1, [2, 2], [64, 64]), ("f16",)),
    ("wmma1_to_wmma2", wmma(1, [1, 4], [64, 64]), wmma(2, [1, 4], [64, 64]), ("f16",)),
    ("mma_v2_1warp_to_blocked", corpus.mma_v2([1, 1], [16, 32]), B([1, 2], [4, 8], [1, 1], [1, 0], [16, 32]),
     ("f16", "i8")),
    ("blocked_8warps_to_mma_v2", B([1, 8], [2, 16], [8, 1], [1, 0], [128, 128]), corpus.mma_v2([4, 2], [128, 128]),
     ("f16",)),
]


# --------------------------------------------------------------------- variants
def _variants(src: LinearLayout, dst: LinearLayout, dtype: str) -> list[tuple[str, Transfer]]:
    from ll_codegen.plan import swizzle as sw
    out: list[tuple[str, Transfer]] = []

    def add(label, **kw):
        try:
            out.append((label, plan_conversion(src, dst, dtype, "cuda", "sm_90", **kw)))
        except ValueError:
            pass
    add("auto")
    for s in ("register", "shuffle", "smem"):
        add(s, strategy=s)
    add("smem_none", strategy="smem", swizzle="none")
    add("vec4", strategy="smem", max_vector_bytes=4)
    add("vec2", strategy="smem", max_vector_bytes=2)
    tile = DTYPE_BYTES[dtype] << src.total_out_size_log2
    for lbl, sw_ in (("rounds", "optimal"), ("rounds_none", "none")):
        add(lbl, strategy="smem", swizzle=sw_, smem_budget=max(16, tile // 4))
    add("rounds2", strategy="smem", smem_budget=max(16, tile // 2), max_vector_bytes=8)
    if tile > 48 * 1024:               # one round in more than 48 KiB (raised dynamic smem limit)
        add("bigsmem", strategy="smem", smem_budget=min(tile, 224 * 1024))
    # every candidate pairing of the optimal swizzle (ldmatrix/stmatrix live here)
    try:
        base = plan_conversion(src, dst, dtype, "cuda", "sm_90", strategy="smem")
    except ValueError:
        base = None
    if base is not None:
        norm = [L.with_in_dims({d: L.in_dim_size(d) for d in ("register", "lane", "warp", "block")})
                for L in (src, dst)]
        t = get_target("cuda", "sm_90")
        for mp in sw.plan_smem(norm[0], norm[1], DTYPE_BYTES[dtype], t, "optimal"):
            lbl = f"cand_{mp.store_instr}_{mp.load_instr}".replace(".", "")
            out.append((lbl, replace(base, smem=mp)))
    # drop duplicates (same plan data under another label)
    seen, uniq = set(), []
    for lbl, p in out:
        key = json.dumps({k: v for k, v in p.to_dict().items() if k != "candidates"}, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        uniq.append((lbl, p))
    return uniq


def _ident(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", text)


def pair_cases(n_random: int = 230, n_local: int = 40, seed: int = 20250105) -> list[Case]:
    """Every named, kind and random pair with all its variants."""
    cases: list[Case] = []

    def emit(source, label, src, dst, dtype, kinds):
        for var, plan in _variants(src, dst, dtype):
            name = _ident(f"g{len(cases)}_{var}")
            cases.append(Case(name, plan, source, f"{label}/{dtype}", var, kinds))
    for p in corpus.NAMED:
        if p.target != "cuda":
            continue
        for dt in p.dtypes:
            emit("named", p.name, _lin(p.src), _lin(p.dst), dt, (kind_label(p.src), kind_label(p.dst)))
    for label, s, d, dts in KIND_PAIRS:
        for dt in dts:
            emit("kinds", label, _lin(s), _lin(d), dt, (kind_label(s), kind_label(d)))
    rng = random.Random(seed)
    sizes = (1, 2, 4, 8)
    for i in range(n_random):
        s, d = corpus.random_pair(rng, 32, same_warps=None if i % 3 else (i % 2 == 0))
        dt = DTYPE_OF[sizes[i % 4]]
        emit("random", f"random{i}", s, d, dt, ("linear", "linear"))
    for i in range(n_local):           # data stays inside warps (shuffle) or threads (register)
        s, d = local_pair(rng, same_threads=i % 2 == 1)
        dt = DTYPE_OF[sizes[i % 4]]
        emit("random", f"local{i}", s, d, dt, ("linear", "linear"))
    # --scratch-per-warp for every warp-local shared-memory case (appended: earlier names stay put)
    from ll_codegen.core.layout import layout_of
    done = set()
    for c in [c for c in cases if c.plan.operation == "convert" and c.plan.smem is not None
              and c.plan.smem.barrier == "warp"]:
        if c.pair in done:
            continue
        done.add(c.pair)
        p = plan_conversion(layout_of(c.plan.src_bases), layout_of(c.plan.dst_bases), c.plan.dtype, "cuda",
                            "sm_90", strategy="smem", scratch_per_warp=True)
        if p.smem.per_warp:            # (not when the default budget splits the tile into rounds)
            cases.append(Case(_ident(f"g{len(cases)}_perwarp"), p, c.source, c.pair, "perwarp", c.kinds))
    for dt in ("i8", "f16", "f32"):    # vector accesses whose registers are several register bits apart
        emit("regression", "combined_register_bits", *(_lin(s) for s in corpus.COMBINED_REGISTER_PAIR), dt,
             ("linear", "linear"))
    return cases


def local_pair(rng: random.Random, same_threads: bool) -> tuple[LinearLayout, LinearLayout]:
    """A random pair whose data never crosses warps: same warp columns
    (``same_threads``: same lane columns too, registers permuted)."""
    warps = 1 << rng.randint(0, 3)
    total = 5 + warps.bit_length() - 1 + rng.randint(0, 5)
    d0 = rng.randint(0, total)
    shape = {"dim0": 1 << d0, "dim1": 1 << (total - d0)}
    src = corpus.random_layout(rng, shape, 32, warps)
    if not same_threads:
        return src, corpus.random_layout(rng, shape, 32, warps, warp_bits=src.flat_bases("warp"))
    reg = list(src.flat_bases("register"))
    rng.shuffle(reg)
    dst = LinearLayout.from_flat({"register": reg, "lane": src.flat_bases("lane"),
                                  "warp": src.flat_bases("warp"), "block": []}, shape, require_surjective=True)
    return src, dst


# ------------------------------------------------------------------ generated/
def generated_manifest() -> str | None:
    p = os.path.join(REPO, "generated", "manifest.yaml")
    return p if os.path.exists(p) else None


@functools.lru_cache(maxsize=None)
def _manifest_entries() -> tuple:
    """The entries of ``generated/manifest.yaml`` planned and rendered by
    ``ll_codegen.regenerate`` (the same code that wrote the folder), once."""
    from ll_codegen import regenerate
    from ll_codegen.cli import MANIFEST_COMMANDS
    path = generated_manifest()
    if path is None:
        return ()
    entries = regenerate.load_manifest(path)
    regenerate.build(entries, os.path.relpath(path, REPO), MANIFEST_COMMANDS)
    return tuple(entries)


def generated_cases() -> list[Case]:
    """The CUDA conversions of ``generated/manifest.yaml``.  ``files`` holds the
    header and harness text that ``generated/`` must contain; the GPU test
    compiles the files in ``generated/`` themselves."""
    out = []
    for e in _manifest_entries():
        c = e.conv
        if e.command != "convert" or c.plan.target != "cuda":      # gathers: gather_cases()
            continue
        files = {k: v for k, v in c.files.items() if k in (f"{c.name}.cuh", f"{c.name}_harness.cu")}
        out.append(Case(c.name, c.plan, "generated", c.name, "manifest", files=files))
    return out


# ----------------------------------------------------- shared-memory showcase
def smem_showcase(cases: list[Case] | None = None, limit: int = 64) -> list[Case]:
    """Shared-memory plans for the Nsight Compute and sanitizer runs: every
    named pair's own plan, every store/load instruction pairing, swizzle
    ``none`` plans that conflict, multi-round plans and narrow vectors, at 8,
    16, 32 and 64 bits, deterministic."""
    cases = pair_cases() if cases is None else cases
    smem = [c for c in cases if c.plan.operation == "convert" and c.plan.smem is not None]
    out: list[Case] = []
    names: set[str] = set()

    def take(pred, n):
        k = 0
        for c in smem:
            if k >= n or len(out) >= limit:
                return
            if c.name not in names and pred(c):
                out.append(c)
                names.add(c.name)
                k += 1
    m = lambda c: c.plan.smem                          # noqa: E731
    take(lambda c: c.source == "named" and c.variant in ("auto", "smem"), 14)
    for st in ("vector", "matrix", "matrix.trans"):
        for ld in ("vector", "matrix", "matrix.trans"):
            if st == ld == "vector":
                continue
            take(lambda c, st=st, ld=ld: (m(c).store_instr, m(c).load_instr) == (st, ld) and len(m(c).rounds) == 1, 2)
    for bits in (8, 16, 32, 64):
        take(lambda c, b=bits: m(c).swizzle == "none" and c.plan.elem_bytes * 8 == b
             and m(c).store.bank_conflicts + m(c).load.bank_conflicts > 0, 2)
        take(lambda c, b=bits: len(m(c).rounds) > 1 and c.plan.elem_bytes * 8 == b, 2)
        take(lambda c, b=bits: c.source == "random" and c.variant == "auto" and c.plan.elem_bytes * 8 == b, 1)
    take(lambda c: c.variant in ("vec2", "vec4"), 3)
    take(lambda c: len(m(c).rounds) > 1 and m(c).store_instr != "vector", 2)
    take(lambda c: c.plan.smem_bytes > 48 * 1024, 2)
    take(lambda c: m(c).per_warp, 3)                   # --scratch-per-warp: the warps on the top offset bits
    return out


def sanitizer_subset(cases: list[Case] | None = None) -> list[Case]:
    """A representative subset for compute-sanitizer: every strategy, every
    shared-memory instruction pairing, swizzle none, multi-round, each element
    size."""
    cases = pair_cases() if cases is None else cases
    out, seen = [], set()
    for c in cases:
        p = c.plan
        m = p.smem if p.operation == "convert" else None
        key = c.tag if m is None else (m.store_instr, m.load_instr, m.swizzle, len(m.rounds) > 1, p.elem_bytes,
                                       m.per_warp)
        if key in seen:
            continue
        seen.add(key)
        out.append(c)
    return out


# ------------------------------------------------------------ memory endpoints
#: (label, register side, memory tile spec path, dtypes): stores and loads of the layouts kernels use
MEMORY_NAMED = (
    ("blocked_to_nvmma128", ROW, "examples/nvmma_shared_64x64.yaml", ("f16",)),
    ("blocked_to_swizzled", ROW, "examples/swizzled_shared_64x64.yaml", ("f16", "u8", "f32")),
    ("dot_a_from_swizzled", corpus.dot(MMA22, 0, 2, [64, 64]), "examples/swizzled_shared_64x64.yaml", ("f16", "f32")),
    ("dot_b_from_swizzled", corpus.dot(MMA22, 1, 2, [64, 64]), "examples/swizzled_shared_64x64.yaml", ("f16",)),
    ("dot_a_from_nvmma128", corpus.dot(MMA22, 0, 2, [64, 64]), "examples/nvmma_shared_64x64.yaml", ("f16",)),
    ("mma_acc_to_swizzled_v4", MMA22, "examples/specs/swizzled_v4_64x64.yaml", ("f32",)),
    ("mma_acc_to_global", MMA22, "examples/global_64x64.yaml", ("f32", "f16")),      # f16: via a conversion
    ("dot_a_from_global", corpus.dot(MMA22, 0, 2, [64, 64]), "examples/global_64x64.yaml", ("f16", "u8")),
    ("blocked_global", ROW, "examples/global_64x64.yaml", ("f16", "u8", "f32", "f64")),
    ("col_blocked_global", COL, "examples/global_64x64.yaml", ("f16", "f32")),
    ("blocked_to_cute", corpus.blocked([1, 8], [8, 4], [4, 1], [1, 0], [128, 64]), "examples/cute_128x64.yaml",
     ("f16",)),
)


#: (label, global tile spec path or dict, shared tile spec path, dtypes): global -> shared copies
COPY_NAMED = (
    ("global_to_nvmma128", "examples/global_64x64.yaml", "examples/nvmma_shared_64x64.yaml", ("f16",)),
    ("global_to_swizzled", "examples/global_64x64.yaml", "examples/swizzled_shared_64x64.yaml", ("f16", "u8", "f32",
                                                                                              "f64")),
    ("colmajor_global_to_swizzled", {"kind": "global", "order": [0, 1], "alignment": 4, "shape": [64, 64]},
     "examples/swizzled_shared_64x64.yaml", ("f16",)),
)


def memory_cases(n_random: int = 200, n_copies: int = 48, seed: int = 20261123) -> list[Case]:
    """Stores, loads and copies (CUDA sm_90, warp 32): every ``MEMORY_NAMED``
    pair in both directions with its vector and ldmatrix/stmatrix variants,
    every ``COPY_NAMED`` copy with 1, 4 and 8 warps, ``n_copies`` random
    global -> shared copies, and ``n_random`` seeded random distributed
    layouts against random tiles of every memory kind
    (``corpus.random_memory_tile``), 1/2/4/8-byte elements."""
    from ll_codegen.plan.planner import plan_memory
    from ll_codegen.spec import load_spec
    target = get_target("cuda", "sm_90")
    out: list[Case] = []

    def emit(label, dist, tile, space, dtype, kinds, alignment=16):
        for direction in ("store", "load"):
            seen = set()
            for instr in ("auto", "vector", "matrix", "matrix.trans", "via"):
                try:
                    plan = plan_memory(dist, tile, direction, space, dtype, target, alignment=alignment, instr=instr)
                except ValueError:
                    continue
                key = plan.to_json()
                if key in seen:
                    continue
                seen.add(key)
                out.append(Case(_ident(f"m{len(out)}_{direction}_{instr}"), plan, "memory",
                                f"{label}/{dtype}/{direction}", instr, kinds if direction == "store" else kinds[::-1]))
    for label, dist, path, dtypes in MEMORY_NAMED:
        spec = load_spec(os.path.join(REPO, path))
        for dt in dtypes:
            emit(label, _lin(dist), spec.linear, spec.layout.space, dt, (kind_label(dist), spec.kind),
                 getattr(spec.layout, "alignment", 16))
    from ll_codegen.plan.planner import plan_copy
    for label, gpath, spath, dtypes in COPY_NAMED:
        g, sh = load_spec(os.path.join(REPO, gpath)) if isinstance(gpath, str) else None, \
            load_spec(os.path.join(REPO, spath))
        glin = g.linear if g is not None else _lin(gpath)
        align = g.layout.alignment if g is not None else gpath["alignment"]
        for dt in dtypes:
            for warps in (1, 4, 8):
                plan = plan_copy(glin, sh.linear, dt, target, alignment=align, num_warps=warps)
                out.append(Case(_ident(f"k{len(out)}_copy_w{warps}"), plan, "memory", f"{label}/{dt}/copy/w{warps}",
                                "copy", ("global", sh.kind)))
    rng = random.Random(seed)
    for i in range(n_copies):
        dt = DTYPE_OF[(1, 2, 4, 8)[i % 4]]
        kind = ("shared_linear", "swizzled_shared", "nvmma_shared")[i // 4 % 3]
        warps = 1 << rng.randint(0, 3)
        total = rng.randint(3, 13)
        d0 = rng.randint(0, total)
        shape = {"dim0": 1 << d0, "dim1": 1 << (total - d0)}
        gspec, gtile = corpus.random_memory_tile(rng, shape, DTYPE_BYTES[dt], "global")
        _, stile = corpus.random_memory_tile(rng, shape, DTYPE_BYTES[dt], kind)
        plan = plan_copy(gtile, stile, dt, target, alignment=gspec["alignment"], num_warps=warps)
        out.append(Case(_ident(f"kr{i}_copy"), plan, "memory", f"random{i}/global->{kind}/{dt}/copy", "copy",
                        ("global", kind)))
    kinds = corpus.MEMORY_KINDS
    for i in range(n_random):
        dt = DTYPE_OF[(1, 2, 4, 8)[i % 4]]
        kind = kinds[i // 4 % len(kinds)]
        warps = 1 << rng.randint(0, 3)
        total = 5 + warps.bit_length() - 1 + rng.randint(0, 5)
        d0 = rng.randint(0, total)
        shape = {"dim0": 1 << d0, "dim1": 1 << (total - d0)}
        dist = corpus.random_layout(rng, shape, 32, warps)
        spec, tile = corpus.random_memory_tile(rng, shape, DTYPE_BYTES[dt], kind)
        space = "global" if kind == "global" else "shared"
        direction = ("store", "load")[i // 16 % 2]
        plan = plan_memory(dist, tile, direction, space, dt, target,
                           alignment=spec["alignment"] if space == "global" else 16)
        out.append(Case(_ident(f"mr{i}_{direction}"), plan, "memory", f"random{i}/{kind}/{dt}/{direction}",
                        "auto", ("linear", kind) if direction == "store" else (kind, "linear")))
    return out


def memory_showcase(cases: list[Case] | None = None) -> list[Case]:
    """Memory plans for Nsight Compute: every named one (copies included), and
    random ones of each kind, direction and element size (deterministic)."""
    cases = memory_cases() if cases is None else cases
    out = [c for c in cases if not c.pair.startswith("random")]
    seen = set()
    for c in cases:
        if c.pair.startswith("random"):
            key = (c.kinds, c.plan.elem_bytes, c.plan.operation != "copy")
            if key not in seen:
                seen.add(key)
                out.append(c)
    return out


# ------------------------------------------------------------------ gather
@dataclass
class GatherGpuCase:
    name: str
    pair: str
    plan: object             # ll_codegen.plan.gather.GatherPlan
    tags: tuple[str, ...] = ()


def gather_cases(n_random: int = 90, seed: int = 20261125) -> list[GatherGpuCase]:
    """Gather harnesses for the GPU: every CUDA case of ``corpus.GATHER_NAMED`` with each of
    its dtypes, forced shuffle (where warp-local) and smem, plus seeded random pairs (1-D and
    2-D, warp-local and not, 1-8 warps, every element width and index type)."""
    from ll_codegen.testing.corpus import GATHER_NAMED, random_gather_pair
    from ll_codegen.plan.gather import plan_gather
    from ll_codegen.spec import spec_from_dict
    out: list[GatherGpuCase] = []
    for c in GATHER_NAMED:
        if c.target != "cuda":
            continue
        s, i = spec_from_dict(c.src).linear, spec_from_dict(c.idx).linear
        kinds = (kind_label(c.src), kind_label(c.idx))
        for dt in c.dtypes:
            for st in ("shuffle", "smem"):
                try:
                    p = plan_gather(s, i, c.axis, dt, c.index_dtype, "cuda", strategy=st)
                except ValueError:
                    continue
                out.append(GatherGpuCase(_ident(f"g{len(out):03d}_{c.name}_{dt}_{st}"), c.name, p,
                                         kinds + (f"rank{len(p.src_shape)}", f"axis{c.axis}", st)))
    rng = random.Random(seed)
    dts, its = ("i8", "f16", "f32", "f64", "bf16", "u32"), ("i32", "u32", "i16", "u16", "i8", "u8")
    for k in range(n_random):
        src, idx, axis = random_gather_pair(rng, 32, local=k % 2 == 0)
        for st in ("shuffle", "smem"):
            try:
                p = plan_gather(src, idx, axis, dts[k % len(dts)], its[k % len(its)], "cuda", strategy=st)
            except ValueError:
                continue
            out.append(GatherGpuCase(_ident(f"g{len(out):03d}_random{k}_{st}"), f"random{k}", p,
                                     ("linear", f"rank{len(p.src_shape)}", f"axis{axis}", st)))
    # the CUDA gathers of generated/manifest.yaml (their files there are these plans rendered)
    for e in _manifest_entries():
        if e.command == "gather" and e.conv.plan.target == "cuda":
            out.append(GatherGpuCase(e.conv.name, e.conv.name, e.conv.plan, ("generated", e.conv.plan.strategy)))
    return out
