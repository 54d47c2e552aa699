"""The numpy references: what a correct plan or harness yields, from the layouts alone.

Nothing here reads a plan's steps: every function takes the layouts (or the
layouts a plan records, ``src_bases``/``dst_bases``/``idx_bases``) and the
tensor, and computes where each element must end up with numpy.  The
emulators (the modules of ``emulate``) and the harness drivers (``run/harness.py``,
``run/host.py``, ``run/gpu.py``) compare against these.

Registers are raw bits: ``(num_warps, warp_size, n)`` arrays of the unsigned
type of the element width (``core.dtypes.NP_RAW``), or ``(threads, n)`` for
what a harness writes per thread.

* ``regs_of(L, tensor)``: ``regs[w, l, r] = tensor[L(register=r, lane=l, warp=w)]``;
  ``reference(src, dst, tensor)`` is that under both layouts of a conversion.
* ``row_major_index(L)`` / ``reference_registers(L, flat, threads)``: the same
  for a row-major flat tensor, per thread (what the harnesses write).
* ``memory_reference(plan, tensor, extent, fill)``: a store's tile or a load's
  registers, masked by ``extent``.
* ``gather_reference(src, idx, axis, src_t, idx_t)``: the output registers of
  ``take_along_axis(src, idx mod n, axis)`` through the index layout;
  ``gather_tensors(plan, rng)`` draws a gather's random inputs (repeated,
  extreme and out-of-range indices) and ``gather_expected(plan, rng)`` gives
  them with the expected output tensor and registers.
"""
from __future__ import annotations

import numpy as np

from ll_codegen.core.dtypes import INDEX_DTYPES, NP_RAW
from ll_codegen.core.layout import LinearLayout, layout_of


# ------------------------------------------------------------- registers
def dim_images(L: LinearLayout, dim: str) -> np.ndarray:
    """Flattened image of every index of ``dim`` (others 0)."""
    vals = np.zeros(1, dtype=np.int64)
    for v in L.flat_bases(dim):
        vals = np.concatenate([vals, vals ^ v])
    return vals


def regs_of(L: LinearLayout, tensor: np.ndarray) -> np.ndarray:
    """Every thread's registers ``(num_warps, warp_size, n)`` holding ``tensor`` in layout ``L``."""
    if L.in_dim_size("block") != 1:
        raise ValueError("block dim must have size 1")
    shape = tuple(L.out_dim_sizes.values())
    if tensor.shape != shape:
        raise ValueError(f"tensor shape {tensor.shape} does not match the layout's {shape}")
    reg, lane, warp = (dim_images(L, d) for d in ("register", "lane", "warp"))
    flat = warp[:, None, None] ^ lane[None, :, None] ^ reg[None, None, :]
    # flattened index: first out dim in the low bits == C order of the reversed shape
    return tensor.reshape(-1, order="F")[flat]


def reference(src: LinearLayout, dst: LinearLayout, tensor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(src_regs, dst_regs), each (num_warps, warp_size, n_regs)."""
    return regs_of(src, tensor), regs_of(dst, tensor)


def row_major_index(layout: LinearLayout) -> np.ndarray:
    """Row-major element index of every hardware point (register fastest,
    then lane, warp): the inverse view of how the harness addresses ``in``."""
    coords = layout.apply_all()
    sizes = list(layout.out_dim_sizes.values())
    idx = np.zeros(len(coords), dtype=np.int64)
    for k, s in enumerate(sizes):
        idx = idx * s + coords[:, k]
    return idx


def reference_registers(layout: LinearLayout, flat: np.ndarray, threads: int) -> np.ndarray:
    """(threads, registers) array of what each thread must hold."""
    return flat[row_major_index(layout)].reshape(threads, -1)


# ---------------------------------------------------------- memory plans
def tensor_flat(tensor: np.ndarray) -> np.ndarray:
    """The tensor flattened with the first out dim in the low bits, as ``flat_bases``."""
    return tensor.reshape(-1, order="F")


def coords_of(flat: np.ndarray, sizes: list[int]) -> list[np.ndarray]:
    """Coordinates of flat indices (first dim in the low bits) of a power-of-two shape."""
    out, shift = [], 0
    for s in sizes:
        k = s.bit_length() - 1
        out.append((flat >> shift) & ((1 << k) - 1))
        shift += k
    return out


def inside(coords: list[np.ndarray], extent) -> np.ndarray:
    """Whether every coordinate is below ``extent`` (all True for None)."""
    ok = np.ones(np.broadcast(*coords).shape, dtype=bool)
    if extent is not None:
        for c, e in zip(coords, extent):
            ok &= c < e
    return ok


def distributed_layout(plan) -> LinearLayout:
    """The register side of a memory plan (source of a store, destination of a load)."""
    return layout_of(plan.src_bases if plan.memory.direction == "store" else plan.dst_bases)


def tile_layout(plan) -> LinearLayout:
    """The memory side of a memory plan (destination of a store, source of a load)."""
    return layout_of(plan.dst_bases if plan.memory.direction == "store" else plan.src_bases)


def memory_reference(plan, tensor: np.ndarray, extent=None, fill: int = 0) -> np.ndarray:
    """What a correct memory plan yields: for a store, the tensor (elements
    outside ``extent`` keep ``fill``, standing for memory the store must not
    touch); for a load, every thread's registers (num_warps, warp_size, n)
    with ``fill`` outside ``extent``."""
    sizes = list(plan.shape)
    if plan.memory.direction == "store":
        flat = np.arange(tensor.size)
        ok = inside(coords_of(flat, sizes), extent)
        out = tensor_flat(tensor).copy()
        out[~ok] = fill
        return out.reshape(tensor.shape, order="F")
    L = distributed_layout(plan)
    regs = regs_of(L, tensor)
    reg, lane, warp = (dim_images(L, d) for d in ("register", "lane", "warp"))
    flat = warp[:, None, None] ^ lane[None, :, None] ^ reg[None, None, :]
    return np.where(inside(coords_of(flat, sizes), extent), regs, np.asarray(fill, dtype=regs.dtype))


# ------------------------------------------------------------------ gather
def gather_reference(src: LinearLayout, idx: LinearLayout, axis: int, src_tensor: np.ndarray,
                     idx_tensor: np.ndarray) -> np.ndarray:
    """Every thread's output registers ``(num_warps, warp_size, n_idx)`` by
    numpy: ``out = take_along_axis(src, index mod n, axis)`` read through the
    index layout (indices are any integers; mod is Python's, -1 -> n - 1)."""
    n = src_tensor.shape[axis]
    out = np.take_along_axis(src_tensor, np.mod(idx_tensor.astype(np.int64), n), axis=axis)
    return regs_of(idx, out)


def gather_tensors(plan, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random source bits (full range) and indices: uniform in range, plus
    repeated values, 0, n - 1 and out-of-range ones (negative, n, the index
    type's extremes) -- all taken mod n."""
    w, n = plan.elem_bytes, plan.axis_size
    src = rng.integers(0, 1 << (8 * w), size=plan.src_shape, dtype=np.uint64).astype(NP_RAW[w])
    signed = plan.index_dtype.startswith("i")
    bits = 8 * plan.index_bytes
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    idx = rng.integers(0, n, size=plan.idx_shape).astype(np.int64)
    special = np.array([0, n - 1, n, lo, hi, -1 if signed else hi, 2 * n + 1, n // 2])
    special = np.clip(special, lo, hi)
    mask = rng.random(plan.idx_shape)
    idx = np.where(mask < 0.15, special[rng.integers(0, len(special), plan.idx_shape)], idx)
    idx = np.where((mask > 0.15) & (mask < 0.3), idx.reshape(-1)[0], idx)        # a repeated value
    return src, (idx - lo) % (1 << bits) + lo                  # what the index type holds (i8: 200 -> -56)


def gather_expected(plan, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(source tensor, index tensor, output tensor, output registers per thread) for one
    random run (``gather_tensors``), all row-major and raw, the references by numpy."""
    src_t, idx_t = gather_tensors(plan, rng)
    want_t = np.take_along_axis(src_t, np.mod(idx_t, plan.axis_size), axis=plan.axis)
    regs = gather_reference(layout_of(plan.src_bases), layout_of(plan.idx_bases), plan.axis, src_t, idx_t)
    return src_t, idx_t.astype(INDEX_DTYPES[plan.index_dtype][2]), want_t, regs.reshape(plan.threads, plan.n_idx)


# ------------------------------------------------------------------- mma
#: dtype -> (low, high) of the small integers an MMA check draws: every product and sum of a tile
#: is then exact in the accumulator, so results are bit-exact whatever the summation order
MMA_RANGES = {"f16": (-4, 4), "bf16": (-4, 4), "tf32": (-4, 4), "f8e4m3": (-4, 4), "f8e5m2": (-4, 4),
              "i8": (-8, 8), "u8": (0, 8)}


def encode_small(values: np.ndarray, dtype: str) -> np.ndarray:
    """Raw bits of small integer ``values`` in an MMA operand type (f16, bf16, tf32 as f32 bits,
    f8e4m3, f8e5m2, i8, u8)."""
    v = np.asarray(values)
    if dtype == "f16":
        return v.astype(np.float16).view(np.uint16)
    if dtype == "bf16":
        return (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if dtype == "tf32":
        return v.astype(np.float32).view(np.uint32)
    if dtype == "f8e5m2":                     # the upper byte of the f16 (exact for small integers)
        return (v.astype(np.float16).view(np.uint16) >> 8).astype(np.uint8)
    if dtype == "f8e4m3":                     # sign, 4 exponent bits (bias 7), 3 mantissa bits
        a = np.abs(v).astype(np.float64)
        e = np.floor(np.log2(np.where(a > 0, a, 1))).astype(np.int64)
        m = np.round((a / 2.0 ** e - 1) * 8).astype(np.int64)
        bits = np.where(a > 0, ((e + 7) << 3) | m, 0) | np.where(v < 0, 0x80, 0)
        return bits.astype(np.uint8)
    if dtype in ("i8", "u8"):
        return v.astype(np.int64).astype(np.uint8)
    raise ValueError(f"no MMA operand type {dtype!r}")


def round16_bits(values: np.ndarray, dtype: str) -> np.ndarray:
    """Raw bits of ``values`` rounded to nearest even in a 16-bit float type (``f16`` or ``bf16``),
    as ``__float2half_rn``/``__float2bfloat16_rn`` round an f32 (values outside f32's exact range
    are first rounded to f32)."""
    if dtype == "f16":
        return np.asarray(values, dtype=np.float32).astype(np.float16).view(np.uint16)
    if dtype == "bf16":
        u = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    raise ValueError(f"no 16-bit float type {dtype!r}")


#: the integers an f16 accumulator holds exactly: |x| <= 2^11 (11 significand bits)
F16_EXACT = 2048


def mma_tensors(plan, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, C, C + A @ B) as integer arrays for ``plan`` (M x K, K x N, M x N, M x N).

    With an f16 accumulator every partial sum, in any order, is at most 64 + K h^2 in magnitude
    (|C| <= 64, |A|, |B| <= h), so h is cut to keep that within ``F16_EXACT``."""
    M, N, K = plan.shape
    ranges = []
    for dtype in (getattr(plan, "a_type", plan.dtype), plan.dtype):       # A's type, B's
        lo, hi = MMA_RANGES[dtype]
        if plan.acc_dtype == "f16":
            h = int(np.sqrt((F16_EXACT - 64) // K))
            lo, hi = max(lo, -h), min(hi, h)
        ranges.append((lo, hi))
    a = rng.integers(*ranges[0], size=(M, K), endpoint=True)
    b = rng.integers(*ranges[1], size=(K, N), endpoint=True)
    c = rng.integers(-64, 64, size=(M, N), endpoint=True)
    return a, b, c, c + a @ b


def acc_bits(values: np.ndarray, acc_dtype: str) -> np.ndarray:
    """Raw bits of exact accumulator values as 32-bit words (f32, i32; f16 in the low half)."""
    if acc_dtype == "f32":
        return np.asarray(values).astype(np.float32).view(np.uint32)
    if acc_dtype == "f16":
        return np.asarray(values).astype(np.float16).view(np.uint16).astype(np.uint32)
    return np.asarray(values).astype(np.int32).view(np.uint32)


# ------------------------------------------------------------------ reduce
#: the element types a reduction computes in -> the numpy type its values are held in (bf16 values
#: in float32, every result rounded back to bf16: ``bf16_round``)
REDUCE_VALUES = {"f32": np.float32, "f16": np.float16, "bf16": np.float32, "i32": np.int32}


def bf16_round(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bf16, ties to even (finite values; the result is
    float32 holding a bf16 value exactly)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


def reduce_values(raw: np.ndarray, dtype: str) -> np.ndarray:
    """Raw bits of a reduction's element type -> the values it computes with (``REDUCE_VALUES``)."""
    raw = np.asarray(raw)
    if dtype == "bf16":
        return (raw.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return raw.view(REDUCE_VALUES[dtype])


def reduce_raw(values: np.ndarray, dtype: str) -> np.ndarray:
    """Values (``reduce_values``) -> raw bits of the element type."""
    v = np.asarray(values, dtype=REDUCE_VALUES[dtype])
    if dtype == "bf16":
        return (v.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return v.view(NP_RAW[v.dtype.itemsize])


def reduce_op(combine: str, dtype: str):
    """``op(a, b)`` of a reduction on value arrays with the element type's arithmetic: IEEE
    round-to-nearest sums (f32 in float32; f16 in float16 -- numpy adds in float32 and rounds
    once, exact since 24 >= 2 * 11 + 2; bf16 in float32 rounded to bf16 after every op, likewise
    exact), i32 sums wrap modulo 2^32; max / min exact (no NaN in the data)."""
    if combine == "max":
        return np.maximum
    if combine == "min":
        return np.minimum
    if combine != "sum":
        raise ValueError(f"no combine {combine!r}")
    if dtype == "bf16":
        return lambda a, b: bf16_round(np.add(a, b, dtype=np.float32))
    if dtype == "i32":
        return lambda a, b: (np.asarray(a, dtype=np.int64) + b).astype(np.int32)
    t = REDUCE_VALUES[dtype]
    return lambda a, b: np.add(a, b, dtype=t)


def reduce_tensor(dtype: str, combine: str, size: int, rng: np.random.Generator) -> np.ndarray:
    """Random raw bits of a reduction's input (``size`` elements): floats normal (finite, no NaN,
    no zero -- max/min of signed zeros is left out), rounded to the type; i32: small integers
    mixed with full-range ones (sums wrap)."""
    if dtype == "i32":
        small = rng.integers(-1000, 1000, size=size, endpoint=True)
        full = rng.integers(-(1 << 31), 1 << 31, size=size)
        v = np.where(rng.random(size) < 0.5, small, full).astype(np.int32)
        return v.view(np.uint32)
    x = rng.standard_normal(size).astype(np.float32)
    x = np.where(np.abs(x) < 1e-3, np.float32(1.0), x)
    if dtype == "f16":
        return x.astype(np.float16).view(np.uint16)
    if dtype == "bf16":
        return reduce_raw(bf16_round(x), "bf16")
    return x.view(np.uint32)


def tree_fold(values: list, op):
    """The pairwise tree of ``values`` (a power of two of them), the order every step of a
    reduction combines in: neighbours first (0 with 1, 2 with 3, ...), then pairs of pairs --
    a butterfly over the bits of the index, lowest first."""
    values = list(values)
    step = 1
    while step < len(values):
        for i in range(0, len(values), 2 * step):
            values[i] = op(values[i], values[i + step])
        step *= 2
    return values[0]


def reduce_reference(L: LinearLayout, dims, combine: str, dtype: str, flat: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What ``reduce(flat, dims, combine)`` over the distributed layout ``L`` yields, in the order
    the plan promises (``plan/reduce.py``), from ``L`` and the row-major raw bits ``flat`` alone:
    ``(out, regs, back)`` -- the row-major result tensor (the reduced dims dropped), every
    thread's result registers ``(threads, n_dst)`` (register ``j``: the layout's kept register
    bits, the bits of ``j`` lowest first) and the result broadcast back to every source register
    ``(threads, n_src)``; all raw bits.

    Order: per thread, output register ``j`` is the pairwise tree (``tree_fold``) of the source
    registers whose bits are ``j``'s kept bits plus any reduced register bits (broadcast register
    bits 0), indexed by those reduced bits; then per reduced lane bit, lowest first,
    ``v = op(v, v of lane ^ bit)``; then, if warp bits are reduced, the pairwise tree over the
    ``2^k`` warps that differ in them, indexed by the reduced warp bits (compressed, lowest first).  A basis is broadcast (image 0), reduced (image
    inside the reduced dims) or kept."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    sizes = list(L.out_dim_sizes.values())
    shape = tuple(sizes)
    red_mask, shift = 0, 0
    for d, n in enumerate(sizes):
        k = n.bit_length() - 1
        if d in dims:
            red_mask |= ((1 << k) - 1) << shift
        shift += k

    def kinds(dim: str) -> tuple[list[int], list[int]]:
        kept, red = [], []
        for i, v in enumerate(L.flat_bases(dim) if dim in L.in_dims else []):
            if v and v & ~red_mask:
                kept.append(i)
            elif v:
                red.append(i)
        return kept, red

    def expand(x: int, bits: list[int]) -> int:
        return sum(((x >> i) & 1) << b for i, b in enumerate(bits))

    r_kept, r_red = kinds("register")
    _, l_red = kinds("lane")
    _, w_red = kinds("warp")
    op = reduce_op(combine, dtype)
    vals = regs_of(L, reduce_values(np.asarray(flat).reshape(shape), dtype))      # (W, lanes, n_src)
    W, lanes, n_src = vals.shape
    n_dst = 1 << len(r_kept)
    v = tree_fold([vals[:, :, [expand(j, r_kept) | expand(k, r_red) for j in range(n_dst)]]   # in each thread
                   for k in range(1 << len(r_red))], op)
    lane = np.arange(lanes)
    for b in l_red:                                                # butterfly, lowest lane bit first
        v = op(v, v[:, lane ^ (1 << b)])
    if w_red:                                                      # the warp partials
        base = np.arange(W) & ~sum(1 << b for b in w_red)
        v = tree_fold([v[base | expand(k, w_red)] for k in range(1 << len(w_red))], op)
    bits = reduce_raw(v, dtype)                                    # (W, lanes, n_dst)
    # where each result lives: the kept coordinates of its elements, row-major in the result
    img = {d: dim_images(L, d) if d in L.in_dims else np.zeros(1, np.int64) for d in ("register", "lane", "warp")}
    point = img["warp"][:, None, None] ^ img["lane"][None, :, None]          # (W, lanes, 1)
    keep = [d for d in range(len(sizes)) if d not in dims]
    rshape = tuple(sizes[d] for d in keep)

    def result_index(flat_pts: np.ndarray) -> np.ndarray:
        coords = coords_of(flat_pts, sizes)
        e = np.zeros(flat_pts.shape, dtype=np.int64)
        for d in keep:
            e = e * sizes[d] + coords[d]
        return e
    e_dst = result_index(point ^ img["register"][[expand(j, r_kept) for j in range(n_dst)]][None, None, :])
    e_src = result_index(point ^ img["register"][None, None, :n_src])
    n_out = int(np.prod(rshape)) if rshape else 1
    out = np.zeros(n_out, dtype=bits.dtype)
    seen = np.zeros(n_out, dtype=bool)
    out[e_dst.reshape(-1)] = bits.reshape(-1)
    seen[e_dst.reshape(-1)] = True
    if not seen.all():
        raise AssertionError(f"reduce reference: {int((~seen).sum())} result element(s) held by no thread")
    if (out[e_dst] != bits).any():
        raise AssertionError("reduce reference: two holders of one result disagree (op not commutative?)")
    threads = W * lanes
    return out, bits.reshape(threads, n_dst), out[e_src].reshape(threads, n_src)
