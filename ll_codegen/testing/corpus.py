"""Conversion pairs shared by the CPU tests, the GPU tests and the benchmarks.

``NAMED`` is the planner corpus of named pairs (spec dicts, as in YAML files)
with the strategy the planner is expected to choose; ``random_layout`` draws
seeded random distributed layouts (tensor bits assigned to register, lane and
warp, with broadcast bases).
"""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from ll_codegen.core.layout import LinearLayout


def blocked(spt, tpw, wpc, order, shape) -> dict:
    return {"kind": "blocked", "size_per_thread": spt, "threads_per_warp": tpw,
            "warps_per_cta": wpc, "order": order, "shape": shape}


def mma_v2(wpc, shape, instr=(16, 8)) -> dict:
    return {"kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": wpc, "instr_shape": list(instr),
            "shape": shape}


def wgmma(wpc, n, shape) -> dict:
    return {"kind": "nvidia_mma", "version": [3, 0], "warps_per_cta": wpc, "instr_shape": [16, n, 16],
            "shape": shape}


def dot(parent, index, k_width, shape) -> dict:
    p = {k: v for k, v in parent.items() if k != "shape"}
    return {"kind": "dot_operand", "operand_index": index, "k_width": k_width, "parent": p, "shape": shape}


def sliced(parent, dim, shape) -> dict:
    p = {k: v for k, v in parent.items() if k != "shape"}
    return {"kind": "slice", "dim": dim, "parent": p, "shape": shape}


def linear(register, lane, warp, shape, block=()) -> dict:
    return {"kind": "linear", "register": register, "lane": lane, "warp": warp, "block": list(block),
            "shape": shape}


def mfma(wpc, instr, shape, transposed=False) -> dict:
    return {"kind": "amd_mfma", "version": 3, "instr_shape": list(instr), "transposed": transposed,
            "warps_per_cta": wpc, "shape": shape}


@dataclass(frozen=True)
class NamedPair:
    name: str
    src: dict
    dst: dict
    dtypes: tuple[str, ...]
    expect: str                          # strategy `auto` must choose
    target: str = "cuda"
    note: str = ""
    expect_conflicts: tuple[int, int] | None = field(default=(0, 0))   # (store, load) per instr, smem only


ROW = blocked([1, 8], [4, 8], [4, 1], [1, 0], [64, 64])
COL = blocked([8, 1], [8, 4], [1, 4], [0, 1], [64, 64])
MMA = mma_v2([2, 2], [64, 64])
MMA_4x1 = mma_v2([4, 1], [64, 64])

NAMED: tuple[NamedPair, ...] = (
    NamedPair("blocked_to_mma_v2_f16", ROW, MMA, ("f16",), "smem"),
    NamedPair("mma_v2_to_blocked_f32", MMA, ROW, ("f32",), "smem"),
    NamedPair("mma_v2_to_blocked_f16_128", mma_v2([2, 2], [128, 128]),
              blocked([1, 8], [4, 8], [4, 1], [1, 0], [128, 128]), ("f16", "bf16"), "smem"),
    NamedPair("wgmma_to_blocked_f32", wgmma([4, 1], 128, [128, 128]),
              blocked([1, 4], [2, 16], [4, 1], [1, 0], [128, 128]), ("f32",), "smem"),
    NamedPair("wgmma_to_blocked_f16_8warps", wgmma([8, 1], 256, [128, 256]),
              blocked([1, 8], [2, 16], [8, 1], [1, 0], [128, 256]), ("f16",), "smem"),
    NamedPair("flash_attention_acc_to_dot_a_f16", MMA_4x1, dot(MMA_4x1, 0, 2, [64, 64]), ("f16",), "noop",
              note="Triton: mma accumulator -> dot operand A with k_width 2 moves no data"),
    NamedPair("flash_attention_acc_to_dot_a_f8", MMA_4x1, dot(MMA_4x1, 0, 4, [64, 64]), ("f8e4m3",), "shuffle",
              note="k_width 4: each thread needs its neighbours' bytes: 8 word shuffles, no smem"),
    NamedPair("blocked_transpose_f8_fig2", ROW, COL, ("f8e4m3", "i8"), "shuffle+smem",
              note="paper Fig. 2: fp8 transpose (2-byte stores after one lane/register bit swap)"),
    NamedPair("blocked_transpose_f16", ROW, COL, ("f16",), "smem"),
    NamedPair("blocked_transpose_f32_128", blocked([1, 4], [4, 8], [8, 1], [1, 0], [128, 128]),
              blocked([4, 1], [8, 4], [1, 8], [0, 1], [128, 128]), ("f32",), "smem"),
    NamedPair("blocked_intra_warp_f16", blocked([1, 8], [4, 8], [4, 1], [1, 0], [64, 64]),
              blocked([1, 4], [4, 8], [4, 1], [1, 0], [64, 64]), ("f16", "f32"), "shuffle"),
    NamedPair("blocked_registers_only", blocked([1, 4], [4, 8], [4, 1], [1, 0], [64, 64]),
              linear(register=[[16, 0], [0, 32], [0, 1], [32, 0], [0, 2]],
                     lane=[[0, 4], [0, 8], [0, 16], [1, 0], [2, 0]],
                     warp=[[4, 0], [8, 0]], shape=[64, 64]), ("f32", "f16"), "register",
              note="same lanes and warps, registers reordered: a pure register permutation"),
    NamedPair("slice_blocked_to_slice_mma", sliced(ROW, 1, [64]), sliced(MMA, 1, [64]), ("f32",), "smem"),
    NamedPair("slice_blocked_dim0", sliced(ROW, 0, [64]), sliced(COL, 0, [64]), ("f16",), "shuffle",
              note="every warp holds the whole vector: a shuffle plan per warp, no barrier"),
    NamedPair("mfma_to_blocked_wave64", mfma([2, 2], [32, 32, 8], [64, 64]),
              blocked([1, 4], [4, 16], [4, 1], [1, 0], [64, 64]), ("f16", "f32"), "smem", target="hip"),
    NamedPair("blocked_to_mfma_wave64", blocked([1, 4], [4, 16], [4, 1], [1, 0], [64, 64]),
              mfma([2, 2], [32, 32, 8], [64, 64]), ("f32",), "smem", target="hip"),
    NamedPair("seed001_128x64_f16_blocked_to_dot_a", blocked([1, 8], [8, 4], [4, 1], [1, 0], [128, 64]),
              dot(mma_v2([4, 1], [128, 64]), 0, 2, [128, 64]), ("f16",), "smem",
              note="seed 001 worked example: 128x64 f16 into a dot operand, several candidates scored"),
)


def random_layout(rng: random.Random, shape: dict[str, int], lanes: int, warps: int,
                  broadcast: float = 0.15, warp_bits: list[int] | None = None) -> LinearLayout:
    """A random distributed layout of ``shape``: each tensor bit goes to a
    register, lane or warp column; leftover lane/warp columns (and, with
    probability ``broadcast``, some chosen ones) are zero; ``warp_bits`` fixes
    the warp columns (to keep a pair inside warps)."""
    total = sum(s.bit_length() - 1 for s in shape.values())
    bits = [1 << i for i in range(total)]
    rng.shuffle(bits)
    nl, nw = lanes.bit_length() - 1, warps.bit_length() - 1

    def take(n: int, pool: list[int]) -> list[int]:
        out = []
        for _ in range(n):
            out.append(0 if not pool or rng.random() < broadcast else pool.pop())
        return out
    if warp_bits is None:
        warp = take(nw, bits)
    else:
        warp = list(warp_bits)
        bits = [b for b in bits if b not in warp]
    lane = take(nl, bits)
    reg = bits + ([0] if rng.random() < broadcast else [])
    rng.shuffle(reg)
    return LinearLayout.from_flat({"register": reg, "lane": lane, "warp": warp, "block": []}, shape,
                                  require_surjective=True)


def random_pair(rng: random.Random, lanes: int = 32, same_warps: bool | None = None,
                min_bits: int = 0, max_bits: int = 5) -> tuple[LinearLayout, LinearLayout]:
    """A random (src, dst) pair over a random 2-D shape; 1-8 warps."""
    warps = 1 << rng.randint(0, 3)
    nl, nw = lanes.bit_length() - 1, warps.bit_length() - 1
    total = nl + nw + rng.randint(min_bits, max_bits)
    d0 = rng.randint(0, total)
    shape = {"dim0": 1 << d0, "dim1": 1 << (total - d0)}
    src = random_layout(rng, shape, lanes, warps)
    if same_warps if same_warps is not None else rng.random() < 0.5:
        dst = random_layout(rng, shape, lanes, warps, warp_bits=src.flat_bases("warp"))
    else:
        dst = random_layout(rng, shape, lanes, warps)
    return src, dst


#: (src, dst) specs, 64 x 16 over 2 warps: the destination's register 12 ([0, 8] ^ [2, 8] = [2, 0]) sits one
#: element after register 0 in the shared tile the planner picks, so a 2-element vector access holds
#: registers r and r ^ 12 (several register bits apart); the source broadcasts two lane bits
COMBINED_REGISTER_PAIR = (
    linear([[16, 0], [4, 0], [2, 0], [0, 1], [0, 2], [32, 0]], [[0, 0], [8, 0], [0, 8], [0, 4], [0, 0]], [[1, 0]],
           [64, 16]),
    linear([[32, 0], [0, 1], [0, 8], [2, 8]], [[16, 0], [8, 3], [4, 0], [8, 1], [0, 4]], [[9, 6]], [64, 16]))


def per_warp_pair(rng: random.Random, lanes: int = 32) -> tuple[LinearLayout, LinearLayout]:
    """A random (src, dst) pair whose warps each hold what the destination's same warp needs, with
    different warp columns (1-8 warps, 2 at least): ``src`` random (its zero warp columns: warps
    that hold copies, a slice's or a broadcast's); each warp column of ``dst`` is ``src``'s xor a
    random combination of ``src``'s register and lane columns -- one of them taken out of the
    pool when ``src``'s warp column is zero -- and ``dst``'s lanes and registers the rest of that
    pool (some lanes zero), shuffled and mixed by xor."""
    while True:
        warps = 1 << rng.randint(1, 3)
        nl, nw = lanes.bit_length() - 1, warps.bit_length() - 1
        total = nl + nw + rng.randint(0, 4)
        d0 = rng.randint(0, total)
        shape = {"dim0": 1 << d0, "dim1": 1 << (total - d0)}
        src = random_layout(rng, shape, lanes, warps, broadcast=0.3)
        pool = [v for v in src.flat_bases("register") + src.flat_bases("lane") if v]
        rng.shuffle(pool)
        warp = []
        for s in src.flat_bases("warp"):
            v = s if s else pool.pop()
            for p in pool:
                v ^= p if rng.random() < 0.3 else 0
            warp.append(v)
        if warp == src.flat_bases("warp"):
            continue
        for i in range(1, len(pool)):
            pool[i] ^= pool[rng.randrange(i)] if rng.random() < 0.25 else 0
        lane = [pool.pop() if pool and rng.random() > 0.15 else 0 for _ in range(nl)]
        dst = LinearLayout.from_flat({"register": pool, "lane": lane, "warp": warp, "block": []}, shape,
                                     require_surjective=True)
        return src, dst


# ------------------------------------------------------------------ memory tiles
MEMORY_KINDS = ("shared_linear", "swizzled_shared", "nvmma_shared", "global")


def random_memory_tile(rng: random.Random, shape: dict[str, int], elem_bytes: int,
                       kind: str) -> tuple[dict | None, LinearLayout]:
    """A random memory tile of ``shape`` for ``elem_bytes`` elements: (spec
    mapping or None, its layout).  ``shared_linear``: a random bijection
    offset -> tensor (unit vectors shuffled, then mixed by XOR); the
    Triton kinds with random parameters (redrawn until valid); ``global``: a
    random order and an alignment of one element to 16 bytes."""
    from ll_codegen.spec import SpecError, spec_from_dict
    names = list(shape)
    dims = [shape[n] for n in names]
    total = sum(s.bit_length() - 1 for s in dims)
    if kind == "shared_linear":
        vecs = [1 << i for i in range(total)]
        rng.shuffle(vecs)
        for i in range(total):
            for j in range(i):
                if rng.random() < 0.25:
                    vecs[i] ^= vecs[j]
        return None, LinearLayout.from_flat({"offset": vecs, "block": []}, shape, require_surjective=True)
    for _ in range(100):
        if kind == "swizzled_shared":
            d = {"kind": kind, "vec": 1 << rng.randint(0, 3), "per_phase": 1 << rng.randint(0, 2),
                 "max_phase": 1 << rng.randint(0, 3), "order": rng.sample(range(len(dims)), len(dims))}
        elif kind == "nvmma_shared":
            d = {"kind": kind, "swizzle_byte_width": rng.choice([0, 32, 64, 128]),
                 "element_bitwidth": 8 * elem_bytes, "rank": len(dims), "transposed": rng.random() < 0.5}
        elif kind == "global":
            d = {"kind": kind, "order": rng.sample(range(len(dims)), len(dims)),
                 "alignment": rng.choice([a for a in (1, 2, 4, 8, 16) if a >= elem_bytes])}
        else:
            raise ValueError(f"unknown memory kind {kind!r}")
        try:
            spec = spec_from_dict(dict(d, shape=dims))
        except SpecError:
            continue
        return d, spec.linear
    raise ValueError(f"no valid {kind} tile for shape {dims} in 100 draws")


# ------------------------------------------------------------------ gather pairs
@dataclass(frozen=True)
class GatherCase:
    """A gather (``gather.py``): source and index specs, axis, dtypes."""
    name: str
    src: dict
    idx: dict
    axis: int
    dtypes: tuple[str, ...] = ("f32",)
    index_dtype: str = "i32"
    target: str = "cuda"


_ISSUE = blocked([1, 4], [8, 4], [4, 1], [1, 0], [64, 64])
GATHER_NAMED: tuple[GatherCase, ...] = (
    GatherCase("issue_64x64_axis1", _ISSUE, _ISSUE, 1, ("f32", "f16", "i8", "f64")),   # warp-local, 16 candidates
    GatherCase("issue_64x64_axis0", _ISSUE, _ISSUE, 0, ("f32", "f16")),                # across warps
    GatherCase("lanes_4x32_axis1", blocked([1, 1], [1, 32], [4, 1], [1, 0], [4, 32]),
               blocked([1, 1], [1, 32], [4, 1], [1, 0], [4, 32]), 1, ("f32", "f16", "f64")),
    GatherCase("lanes2_16x64_axis1", blocked([1, 2], [1, 32], [4, 1], [1, 0], [16, 64]),
               blocked([1, 2], [1, 32], [4, 1], [1, 0], [16, 64]), 1, ("f32", "bf16", "u8")),
    GatherCase("one_d_128", blocked([1], [32], [4], [0], [128]), blocked([1], [32], [4], [0], [128]), 0,
               ("f32", "f16")),
    GatherCase("one_d_32_bcast_warps", blocked([1], [32], [4], [0], [32]), blocked([1], [32], [4], [0], [32]), 0,
               ("f32", "i16"), "u8"),
    GatherCase("one_d_64_regs", blocked([2], [32], [1], [0], [64]), blocked([2], [32], [1], [0], [64]), 0,
               ("f32", "f16"), "i16"),
    GatherCase("mma_64x64_axis1", mma_v2([4, 1], [64, 64]), mma_v2([4, 1], [64, 64]), 1, ("f32", "f16")),
    GatherCase("mma_64x64_axis0", mma_v2([4, 1], [64, 64]), mma_v2([4, 1], [64, 64]), 0, ("f32", "f16")),
    GatherCase("mma_src_blocked_idx_axis1", mma_v2([4, 1], [64, 32]),
               blocked([1, 4], [8, 4], [4, 1], [1, 0], [64, 16]), 1, ("f32",)),
    GatherCase("wider_index_axis1", blocked([1, 4], [8, 4], [4, 1], [1, 0], [32, 16]),
               blocked([1, 8], [8, 4], [4, 1], [1, 0], [32, 64]), 1, ("f32", "f16"), "u32"),
    GatherCase("triton_crazy_2d",
               linear([[0, 2], [2, 0]], [[0, 8], [8, 0], [1, 0], [4, 0], [16, 0]], [[0, 1], [0, 4]], [32, 16]),
               linear([[2, 0], [0, 2]], [[0, 8], [16, 0], [1, 0], [8, 0], [4, 0]], [[0, 1], [0, 4]], [32, 16]),
               0, ("f32", "f16")),
    GatherCase("bcast_warp_2d", blocked([2, 1], [32, 1], [1, 4], [1, 0], [64, 2]),
               blocked([2, 1], [32, 1], [1, 4], [1, 0], [64, 2]), 0, ("f32",), "i8"),
    GatherCase("wave64_64x64_axis1", blocked([1, 4], [4, 16], [4, 1], [1, 0], [64, 64]),
               blocked([1, 4], [4, 16], [4, 1], [1, 0], [64, 64]), 1, ("f32", "f16"), "i32", "hip"),
    GatherCase("wave64_mfma_axis0", mfma([2, 2], [32, 32], [64, 64]), mfma([2, 2], [32, 32], [64, 64]), 0,
               ("f32",), "i32", "hip"),
)


def random_gather_pair(rng: random.Random, lanes: int = 32, local: bool | None = None,
                       max_bits: int = 4) -> tuple[LinearLayout, LinearLayout, int]:
    """A random (src, index, axis) over a random 1-D or 2-D shape, 1-8 warps;
    the index's size along the axis may differ.  ``local``: keep the axis off
    the source's warps and give the index the source's warp bases (warp-local)."""
    warps = 1 << rng.randint(0, 3)
    nl, nw = lanes.bit_length() - 1, warps.bit_length() - 1
    total = nl + nw + rng.randint(0, max_bits)
    rank = rng.choice((1, 2, 2))
    d0 = total if rank == 1 else rng.randint(0, total)
    sizes = [d0] if rank == 1 else [d0, total - d0]
    axis = rng.randrange(rank)
    if local is None:
        local = rng.random() < 0.5
    if local and sizes[axis] == 0:
        sizes[axis], sizes[1 - axis] = sizes[1 - axis], sizes[axis]
    s_shape = {f"dim{d}": 1 << b for d, b in enumerate(sizes)}
    i_bits = list(sizes)
    i_bits[axis] = max(0, sizes[axis] + rng.choice((-1, 0, 0, 1)))
    i_shape = {f"dim{d}": 1 << b for d, b in enumerate(i_bits)}
    off = sum(sizes[:axis])                        # the axis bits' position in the source's vectors
    axis_mask = ((1 << sizes[axis]) - 1) << off
    if local:
        pool = [1 << i for i in range(total) if not axis_mask >> i & 1]
        rng.shuffle(pool)
        warp = [pool.pop() if pool and rng.random() > 0.15 else 0 for _ in range(nw)]
        src = random_layout(rng, s_shape, lanes, warps, warp_bits=warp)

        def to_index(v: int) -> int:                 # a non-axis source vector in the index's bit positions
            lo = v & ((1 << off) - 1)
            hi = v >> (off + sizes[axis])
            return lo | hi << (off + i_bits[axis])
        idx = random_layout(rng, i_shape, lanes, warps, warp_bits=[to_index(v) for v in warp])
    else:
        src = random_layout(rng, s_shape, lanes, warps)
        idx = random_layout(rng, i_shape, lanes, warps)
    return src, idx, axis


# ------------------------------------------------------------------- mma
@dataclass(frozen=True)
class MmaCase:
    """One ``plan_mma`` call: layouts of the accumulator, A and B (with their spaces)."""
    name: str
    acc: LinearLayout
    a: LinearLayout
    b: LinearLayout
    a_space: str
    b_space: str
    version: int
    dtype: str
    acc_dtype: str
    arch: str


#: the shapes of the shared-operand wgmma cases: (M, N, wgmma's N, warps along M, warps along N)
WGMMA_SHAPES = ((64, 64, 64, 4, 1), (128, 128, 128, 4, 1), (128, 64, 32, 8, 1), (64, 256, 128, 4, 2))


def mma_cases() -> list[MmaCase]:
    """wgmma with both operands in shared memory (swizzle 128/64/32, A and B K- or MN-major, f16,
    bf16, tf32, f8e4m3, i8, one or two warp groups along M or N, N 32..128), wgmma with A in
    registers, and mma.sync for each operand type: every form ``llgen mma`` generates.  Then the
    f16 accumulators (``_f16acc``): wgmma shared-operand f16 (every swizzle and majorness) and
    f8e4m3/f8e5m2, wgmma with A in registers, mma.sync f16 and f8e4m3."""
    from ll_codegen.layouts.dot_operand import DotOperandLayout
    from ll_codegen.layouts.memory import NVMMASharedLayout
    from ll_codegen.layouts.nvidia import NVMMADistributedLayout as Acc
    bits = {"f16": 16, "bf16": 16, "tf32": 32, "f8e4m3": 8, "f8e5m2": 8, "i8": 8}
    accs = {"i8": "i32"}
    out = []

    def wgmma_ss(dtype: str, swz: int, a_mn: bool, b_mn: bool, shape: tuple[int, ...], acc_dtype: str) -> None:
        m, n, n_i, wm, wn = shape
        e = bits[dtype]
        if (a_mn or b_mn) and e != 16:
            return                                     # wgmma transposes only 16-bit operands
        k = 2 * 8 * swz // e                           # two swizzle rows of K
        try:
            a = NVMMASharedLayout(swz, e, transposed=a_mn).to_linear([m, k])
            b = NVMMASharedLayout(swz, e, transposed=not b_mn).to_linear([k, n])
        except ValueError:
            return                                     # smaller than one core matrix of this swizzle
        acc = Acc(version=(3, 0), warps_per_cta=(wm, wn), instr_shape=(16, n_i, 16)).to_linear([m, n])
        tag = "_f16acc" if acc_dtype == "f16" else ""
        out.append(MmaCase(f"wgmma_{dtype}_sw{swz}_a{'mn' if a_mn else 'k'}_b{'mn' if b_mn else 'k'}_{m}x{n}x{k}"
                           f"_w{wm}x{wn}{tag}", acc, a, b, "shared", "shared", 3, dtype, acc_dtype, "sm_90a"))

    def registers(dtype: str, kw: int, acc_dtype: str) -> None:
        tag = "_f16acc" if acc_dtype == "f16" else ""
        par = Acc(version=(3, 0), warps_per_cta=(4, 1), instr_shape=(16, 64, 16))
        k = 64 // (bits[dtype] // 8)
        b = NVMMASharedLayout(128 if k * bits[dtype] >= 1024 else 64, bits[dtype], transposed=True).to_linear([k, 64])
        out.append(MmaCase(f"wgmma_rs_{dtype}{tag}", par.to_linear([64, 64]),
                           DotOperandLayout(0, par, kw).to_linear([64, k]), b, "registers", "shared", 3, dtype,
                           acc_dtype, "sm_90a"))
        par = Acc(version=(2, 0), warps_per_cta=(2, 2), instr_shape=(16, 8))
        out.append(MmaCase(f"mma_sync_{dtype}{tag}", par.to_linear([64, 64]),
                           DotOperandLayout(0, par, kw).to_linear([64, k]),
                           DotOperandLayout(1, par, kw).to_linear([k, 64]),
                           "registers", "registers", 2, dtype, acc_dtype,
                           "sm_90" if dtype.startswith("f8") else "sm_80"))

    for dtype, swz, a_mn, b_mn, shape in itertools.product(("f16", "bf16", "tf32", "f8e4m3", "i8"), (128, 64, 32),
                                                           (False, True), (False, True), WGMMA_SHAPES):
        wgmma_ss(dtype, swz, a_mn, b_mn, shape, accs.get(dtype, "f32"))
    for dtype, kw in (("f16", 2), ("bf16", 2), ("tf32", 1), ("f8e4m3", 4), ("i8", 4)):
        registers(dtype, kw, accs.get(dtype, "f32"))
    # f16 accumulators: half the registers (.f16x2), for f16 and fp8 operands
    for swz, a_mn, b_mn in itertools.product((128, 64, 32), (False, True), (False, True)):
        wgmma_ss("f16", swz, a_mn, b_mn, WGMMA_SHAPES[0 if a_mn == b_mn else 3], "f16")
    for dtype, swz in itertools.product(("f8e4m3", "f8e5m2"), (128, 64, 32)):
        wgmma_ss(dtype, swz, False, False, WGMMA_SHAPES[1 if swz == 128 else 2], "f16")
    for dtype, kw in (("f16", 2), ("f8e4m3", 4)):
        registers(dtype, kw, "f16")
    return out


def mfma_cases() -> list[MmaCase]:
    """AMD MFMA (``llgen mma --target hip``): f16, bf16 and i8 on gfx90a (CDNA2) and gfx942 (CDNA3),
    32x32 and 16x16 instructions, plain and transposed accumulators, wavefronts along M, N or both,
    two tiles per wavefront; A and B ``dot_operand`` registers holding each instruction's K items."""
    from ll_codegen.layouts.amd import AMDMFMALayout
    from ll_codegen.layouts.dot_operand import DotOperandLayout
    forms = ((32, False, (2, 2), None), (32, True, (2, 2), None), (16, False, (2, 2), None), (16, True, (1, 4), None),
             (32, False, (1, 2), (2, 1)))
    out = []
    for arch, dtype, (m, transposed, warps, tiles) in itertools.product(("gfx90a", "gfx942"), ("f16", "bf16", "i8"),
                                                                          forms):
        k = (16 if m == 32 else 32) if arch == "gfx942" and dtype == "i8" else (8 if m == 32 else 16)
        kw = k * m // 64
        par = AMDMFMALayout(version=3 if arch == "gfx942" else 2, instr_shape=(m, m, k), transposed=transposed,
                            warps_per_cta=warps, tiles_per_warp=tiles)
        K = 4 * k
        out.append(MmaCase(f"mfma_{arch}_{dtype}_{m}x{m}{'_t' if transposed else ''}_w{warps[0]}x{warps[1]}"
                           f"{'_tiles' if tiles else ''}", par.to_linear([64, 64]),
                           DotOperandLayout(0, par, kw).to_linear([64, K]),
                           DotOperandLayout(1, par, kw).to_linear([K, 64]),
                           "registers", "registers", 0, dtype, "i32" if dtype == "i8" else "f32", arch))
    return out


# ------------------------------------------------------------------ reductions
@dataclass(frozen=True)
class ReduceCase:
    """A reduction (``plan/reduce.py``): the source spec, the reduced dims, the target."""
    name: str
    src: dict
    dims: tuple[int, ...]
    target: str = "cuda"
    arch: str | None = None
    note: str = ""


_BLK3 = blocked([1, 1, 4], [2, 4, 4], [2, 2, 1], [2, 1, 0], [8, 16, 32])
REDUCE_NAMED: tuple[ReduceCase, ...] = (
    ReduceCase("wgmma_rows", wgmma([4, 1], 128, [128, 128]), (1,), note="softmax row max/sum: lanes 0x3"),
    ReduceCase("wgmma_cols", wgmma([4, 1], 128, [128, 128]), (0,), note="across the 4 warps"),
    ReduceCase("wgmma_8warps_rows", wgmma([8, 1], 256, [128, 256]), (1,)),
    ReduceCase("wgmma_4x2_rows", wgmma([4, 2], 128, [64, 256]), (1,), note="rows span two warps"),
    ReduceCase("mma_v2_rows", mma_v2([2, 2], [64, 64]), (1,)),
    ReduceCase("mma_v2_cols", mma_v2([2, 2], [64, 64]), (0,)),
    ReduceCase("dot_a_rows", dot(MMA_4x1, 0, 2, [64, 64]), (1,)),
    ReduceCase("blocked_rows", ROW, (1,)),
    ReduceCase("blocked_cols", ROW, (0,), note="across the 4 warps"),
    ReduceCase("blocked_col_major_rows", COL, (1,)),
    ReduceCase("blocked_small_bcast", blocked([1, 4], [4, 8], [4, 1], [1, 0], [16, 16]), (1,),
               note="the tile is smaller than the CTA: broadcast lane and warp bits"),
    ReduceCase("blocked_small_bcast_cols", blocked([1, 4], [4, 8], [4, 1], [1, 0], [16, 16]), (0,)),
    ReduceCase("blocked_warp_per_row", blocked([1, 4], [1, 32], [4, 1], [1, 0], [4, 128]), (1,)),
    ReduceCase("blocked_row_per_thread", blocked([1, 8], [32, 1], [4, 1], [1, 0], [128, 8]), (1,),
               note="each row in one thread's registers: no data leaves the thread"),
    ReduceCase("blocked_3d_inner", _BLK3, (2,)),
    ReduceCase("blocked_3d_outer_two", _BLK3, (0, 2)),
    ReduceCase("blocked_3d_middle", _BLK3, (1,)),
    ReduceCase("slice_of_3d", sliced(_BLK3, 1, [8, 32]), (1,)),
    ReduceCase("mfma_rows_wave64", mfma([2, 2], [32, 32, 8], [64, 64]), (1,), "hip", "gfx90a"),
    ReduceCase("mfma_cols_wave64", mfma([2, 2], [32, 32, 8], [64, 64]), (0,), "hip", "gfx90a"),
    ReduceCase("blocked_wave64_rows", blocked([1, 4], [4, 16], [4, 1], [1, 0], [64, 64]), (1,), "hip", "gfx90a"),
    ReduceCase("blocked_wave64_cols", blocked([1, 4], [4, 16], [4, 1], [1, 0], [64, 64]), (0,), "hip", "gfx90a"),
    ReduceCase("blocked_wave32_rdna_cols", ROW, (0,), "hip", "gfx1030"),
)


def random_reduce(rng: random.Random, lanes: int = 32, broadcast: float = 0.2,
                  max_bits: int = 4) -> tuple[LinearLayout, tuple[int, ...]]:
    """A random distributed layout of rank 2 or 3 (1-8 warps, broadcast bases with probability
    ``broadcast``) and a random non-empty proper subset of its dims to reduce."""
    warps = 1 << rng.randint(0, 3)
    nl, nw = lanes.bit_length() - 1, warps.bit_length() - 1
    total = nl + nw + rng.randint(0, max_bits)
    rank = rng.choice((2, 2, 3))
    cuts = sorted(rng.randint(0, total) for _ in range(rank - 1))
    sizes = [b - a for a, b in zip([0] + cuts, cuts + [total])]
    shape = {f"dim{d}": 1 << b for d, b in enumerate(sizes)}
    L = random_layout(rng, shape, lanes, warps, broadcast=broadcast)
    k = rng.randint(1, rank - 1)
    return L, tuple(sorted(rng.sample(range(rank), k)))
