"""Reductions of a distributed layout over some of its tensor dims (``tt.reduce``), planned from the layout.

The source layout ``L`` maps (register, lane, warp) to tensor coordinates; ``P`` drops the reduced
dims.  Every input basis ``b`` of ``L`` is one of three kinds:

* broadcast: ``L(b) = 0`` -- the two hardware locations hold the same element, so the reduction
  must take it once (a sum would count it twice);
* reduced: ``L(b) != 0`` and ``P(L(b)) = 0`` -- the two locations hold two elements of one output;
* kept: ``P(L(b)) != 0`` -- the two locations hold elements of different outputs.

The plan combines over the reduced bases only, level by level, in a fixed order that the numpy
reference repeats exactly (floating-point sums depend on it).  Every level combines as a
butterfly over its reduced bits, lowest first: values ``v_0 .. v_{2^m - 1}`` indexed by the
reduced bits give ``op(op(v_0, v_1), op(v_2, v_3))`` for m = 2 (neighbours first, then pairs of
pairs), a tree whose latency is ``m`` combines rather than a chain's ``2^m - 1``:

1. in each thread, destination register ``j`` (the source's kept register bits, broadcast bits 0)
   is that tree over the source registers that differ from ``r_0`` in reduced register bits only,
   listed in the order of those bits (``RegisterGroup.srcs``);
2. across lanes, one butterfly round per reduced lane bit, lowest first:
   ``v = op(v, shfl_xor(v, 1 << bit))`` -- both partners compute the same value, as ``op`` is
   commutative (for max/min of non-NaN values, and for IEEE sums, ``op(a, b) == op(b, a)``
   bit for bit);
3. across warps, only when a reduced basis is a warp bit: each warp stores its partial of every
   output element to shared memory (one writer per element: the lanes whose reduced and broadcast
   lane bits are 0, in the warps whose broadcast warp bits are 0), a block barrier, then every
   thread combines the ``2^k`` partials of each of its outputs as that tree over ``k`` (the
   warp's reduced bits, compressed).  A barrier before the stores keeps the
   scratch free of an earlier call's reads.  Two forms of this stage (``WarpStage.spread``), both
   scored and kept as ``candidates`` (cheapest first; the plan has the cheaper's form):

   * direct (2 barriers): after the barrier every thread loads the ``parts`` partials of each of
     its ``n_dst`` outputs and combines them itself -- ``n_dst * parts`` loads a thread;
   * spread (3 barriers, Triton's form): after the barrier thread ``t`` combines, for each output
     ``e = t, t + stride, ... < outputs`` (``stride`` = the block's threads), the ``parts``
     partials at ``k * outputs + e`` as the same tree over ``k`` and stores the result at element
     ``results + e`` (``results`` = 0: partial 0's slot, which only the thread combining ``e``
     ever reads, and it reads it before it stores there); a block barrier; every thread loads its
     ``n_dst`` results -- ``ceil(outputs / stride) * (parts + 1) + n_dst`` accesses a thread.

   Both combine each output's partials in the same tree over ``k``, so every result bit is the
   same in either form (the reference does not know the form).  A thread's accesses of its own
   slots (the partials' stores, the direct form's loads, the spread form's result loads) move
   ``vec`` adjacent elements at once where the result layout keeps them adjacent and aligned
   (``vector_groups``: 4-, 8- or 16-byte ``st.shared`` / ``ld.shared``, ``ds_write_b64`` /
   ``b128``); the values and the combine order are those of the element-wise accesses.  Scores:
   the module's weights on one warp's wavefronts (``stage_wavefronts``: Lemma 9.4 on the result
   layout's lane offsets at the access width, bank conflicts included), a barrier ``BARRIER``, a
   combine ``ALU``.

The result is the slice layout of the reduced dims (Triton's ``SliceEncodingAttr``): ``P o L``
with the register bases that become zero removed; lane and warp bases of reduced or broadcast
bits map to 0 (every thread of a row holds the row's result).  ``broadcast`` copies the result
back to the source's registers (``dst_of_src``), for ``x - max(x)`` without a conversion.

The plan needs the nonzero images ``L(b)`` to be linearly independent (a distributed layout
duplicates data only through zero bases) and likewise the nonzero ``P(L(b))``, so that the
elements of one output are exactly the span of the reduced bases; legacy layouts always are.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

from ll_codegen.core import f2
from ll_codegen.core.dtypes import dtype_bytes
from ll_codegen.core.layout import LinearLayout
from ll_codegen.core.limits import short
from ll_codegen.core.target import Target, get_target
from ll_codegen.plan.model import Barrier, Candidate
from ll_codegen.plan.planner import check_distributed, check_threads, normalise
from ll_codegen.plan.plans import Transfer
from ll_codegen.plan.swizzle import phase_lanes_log2, predict_wavefronts

#: the combines every header offers; an author's functor may replace them (same order rules)
COMBINES = ("sum", "max", "min")
#: element types a reduction computes in (the harness's arithmetic types)
REDUCE_DTYPES = ("f32", "f16", "bf16", "i32")
#: cost weights (SM issue slots per warp, as the conversion planner's): a shuffle, an ALU combine,
#: a shared-memory wavefront, a block barrier
SHUFFLE, ALU, WAVEFRONT, BARRIER = 1.0, 0.25, 1.0, 4.0


@dataclass(frozen=True)
class RegisterGroup:
    """Destination register ``dst`` = the pairwise tree of ``src[srcs[0]], src[srcs[1]], ...`` (the
    module docstring: neighbours first, then pairs of pairs)."""
    dst: int
    srcs: tuple[int, ...]


@dataclass(frozen=True)
class WarpStage:
    """The cross-warp step: partial ``k`` of output element ``e`` (the row-major index of its kept
    coordinates in the result tensor) lives at scratch element ``k * outputs + e``.  A thread
    stores its result registers when ``lane & lane_skip == 0`` and ``warp & warp_skip == 0``, as
    partial ``f2.apply(warp_k, warp)``-th: ``k`` is the warp's reduced bits, compressed; after a
    block barrier it loads the ``parts`` partials of each output register and combines them as a
    pairwise tree over ``k``.  ``bytes``: the scratch it needs.

    ``spread`` (the module docstring's spread form): after that barrier thread ``t`` combines the
    partials of outputs ``t, t + stride, ...`` (below ``outputs``) instead, storing each result at
    scratch element ``results + e``; a block barrier; then every thread loads result ``results + e``
    of each of its registers.  ``stride`` and ``results`` are 0 in the direct form.
    ``vectors``: the accesses of a thread's own slots (the partials' stores, the direct form's
    loads of each partial ``k``, the spread form's loads of the results): access ``a`` moves result
    registers ``vectors[a]`` as one ``vec * elem_bytes``-byte access, register ``vectors[a][i]`` at
    element ``i`` (``vector_groups``).
    ``named_barrier``: every block barrier of the stage is that named barrier over the plan's
    threads instead of ``__syncthreads()`` (the block's other warps do not take part)."""
    outputs: int
    parts: int
    warp_bits: tuple[int, ...]       # the reduced warp bits, lowest first (k's bits in this order)
    lane_skip: int
    warp_skip: int
    bytes: int
    spread: bool = False
    stride: int = 0                  # spread form: threads sharing the outputs (the block's threads)
    results: int = 0                 # spread form: scratch element of output 0's result
    named_barrier: Barrier | None = None   # the block barriers as bar.sync id, threads (None: __syncthreads())
    vectors: tuple[tuple[int, ...], ...] = ()   # result registers of each scratch access, element order

    @property
    def vec(self) -> int:
        """Elements one scratch access of a thread's partials or results moves (``len(vectors[0])``)."""
        return len(self.vectors[0]) if self.vectors else 1

    @property
    def barriers(self) -> int:
        return 3 if self.spread else 2

    @property
    def share(self) -> int:
        """Spread form: outputs a thread combines at most (``ceil(outputs / stride)``)."""
        return -(-self.outputs // self.stride) if self.spread else 0


@dataclass(frozen=True, kw_only=True)
class ReducePlan(Transfer):
    """``dst = reduce(src, dims, combine)``: ``src_bases`` the source layout, ``dst_bases`` its
    slice over ``dims`` (the result); ``strategy`` the deepest level the reduction crosses
    (``registers``, ``shuffle`` or ``smem``).  ``groups`` the in-thread step, ``lane_xors`` the
    butterfly rounds (lane masks, in order), ``warps`` the cross-warp step (in the cheaper form:
    ``WarpStage.spread``; ``candidates`` score both) or None;
    ``dst_of_src[r]``: the result register that source register ``r``'s output is in (the
    broadcast back to the source layout)."""
    operation: ClassVar[str] = "reduce"
    dims: tuple[int, ...]
    combine: str
    groups: tuple[RegisterGroup, ...]
    lane_xors: tuple[int, ...]
    warps: WarpStage | None
    dst_of_src: tuple[int, ...]

    @property
    def smem_bytes(self) -> int:
        return self.warps.bytes if self.warps is not None else 0

    @property
    def shuffles(self) -> int:
        """Warp shuffles per thread (one per round and result register)."""
        return len(self.lane_xors) * self.n_dst

    @property
    def result_shape(self) -> tuple[int, ...]:
        return tuple(n for d, n in enumerate(self.shape) if d not in self.dims)


def kinds(L: LinearLayout, dims: tuple[int, ...], dim: str) -> tuple[list[int], list[int], list[int]]:
    """(kept, reduced, broadcast) bit positions of ``L``'s input dim ``dim`` for a reduction over ``dims``."""
    kept, reduced, bcast = [], [], []
    for i, b in enumerate(L.bases.get(dim, [])):
        if not any(b):
            bcast.append(i)
        elif any(c for d, c in enumerate(b) if d not in dims):
            kept.append(i)
        else:
            reduced.append(i)
    return kept, reduced, bcast


def result_layout(L: LinearLayout, dims: tuple[int, ...]) -> LinearLayout:
    """The slice of ``L`` over ``dims``: the reduced dims dropped, then the register bases that
    became zero removed (Triton's ``SliceEncodingAttr::toLinearLayout`` for one dim)."""
    keep = [d for d in range(len(L.out_dims)) if d not in dims]
    bases = {k: [[b[d] for d in keep] for b in bs] for k, bs in L.bases.items()}
    bases["register"] = [b for b in bases["register"] if any(b)]
    names = [L.out_dims[d] for d in keep]
    sizes = L.out_dim_sizes
    renamed = {f"dim{i}": sizes[n] for i, n in enumerate(names)}
    return LinearLayout(bases, renamed)


def _check_dims(L: LinearLayout, dims: tuple[int, ...]) -> None:
    """ValueError unless ``dims`` are distinct dims of ``L`` and leave at least one."""
    rank = len(L.out_dims)
    if not dims or len(set(dims)) != len(dims) or any(not 0 <= d < rank for d in dims):
        raise ValueError(f"--dim {short(list(dims))}: one or more distinct dims of the rank-{rank} layout")
    if len(dims) == rank:
        raise ValueError("a reduction keeps at least one dim (reduce over fewer dims than the layout has)")


def _check_independent(L: LinearLayout, dst: LinearLayout) -> None:
    """ValueError unless the nonzero images of ``L``'s bases are independent, and so those of its
    slice ``dst`` (the kept images ``P(L(b))``): the module docstring's condition."""
    for layout, why in ((L, "the layout holds one element in two places through nonzero bases; a reduction "
                            "needs broadcasts as zero bases only"),
                        (dst, "a basis of the layout mixes reduced and kept dims so that two inputs reach the same "
                              "output through different bases; llgen reduces layouts whose kept images are "
                              "independent")):
        flat = [v for d in ("register", "lane", "warp") for v in layout.flat_bases(d) if v]
        if f2.rank(flat) != len(flat):
            raise ValueError(why)


def _compress(x: int, bits: list[int]) -> int:
    """The bits of ``x`` at positions ``bits`` (lowest first), packed."""
    return sum(((x >> b) & 1) << i for i, b in enumerate(bits))


def _expand(v: int, bits: list[int]) -> int:
    return sum(((v >> i) & 1) << b for i, b in enumerate(bits))


def row_major_images(D: LinearLayout, dim: str) -> list[int]:
    """Row-major index in ``D``'s tensor of each basis of input dim ``dim``: the sizes are powers
    of two, so the index of any input is the XOR of its bases' (every tensor dim owns its bits)."""
    sizes = list(D.out_dim_sizes.values())
    out = []
    for b in D.bases.get(dim, []):
        idx = 0
        for c, n in zip(b, sizes):
            idx = idx * n + c
        out.append(idx)
    return out


def vector_groups(D: LinearLayout, elem_bytes: int, outputs: int) -> tuple[tuple[int, ...], ...]:
    """The scratch accesses of one thread's result registers (``WarpStage.vectors``): the widest
    ``v`` elements (``v * elem_bytes`` of 16, 8, 4 bytes, ``v >= 2``; else ``v = 1``) such that

    * every lane and warp basis of the result layout ``D`` has a row-major image ``= 0 mod v``
      (a thread's result element ``e`` of register 0 is then ``0 mod v``: every access aligned,
      the same register order in every thread), ``outputs`` too (partial ``k``'s slots
      ``k * outputs + e`` keep that alignment), and
    * the register images ``R(j)`` (XOR of the register bases' images over ``j``'s bits) fall
      into groups of exactly ``v`` with equal ``R(j) // v`` covering ``R(j) % v = 0 .. v - 1``.

    Then a thread's slots of group ``g`` are ``base + i`` (``i = R(j) % v``): one ``v``-element
    access, register ``g[i]`` at element ``i``.  Groups in the order of their lowest register."""
    reg = row_major_images(D, "register")
    thr = row_major_images(D, "lane") + row_major_images(D, "warp")
    images = [0] * (1 << len(reg))
    for j in range(1, len(images)):
        low = (j & -j).bit_length() - 1
        images[j] = images[j & (j - 1)] ^ reg[low]
    for nbytes in (16, 8, 4):
        v = nbytes // elem_bytes
        if v < 2 or v > len(images) or outputs % v or any(t % v for t in thr):
            continue
        groups: dict[int, dict[int, int]] = {}
        for j, r in enumerate(images):
            groups.setdefault(r // v, {})[r % v] = j
        if all(len(g) == v for g in groups.values()):
            return tuple(sorted((tuple(g[i] for i in range(v)) for g in groups.values()), key=min))
    return tuple((j,) for j in range(len(images)))


def stage_wavefronts(stage: WarpStage, lanes: list[int], elem_bytes: int, target: Target) -> tuple[int, int, int]:
    """(store, load, combine) wavefronts of one warp in the warp stage, Lemma 9.4
    (``swizzle.predict_wavefronts``) on the byte offsets ``lanes`` of the result layout's lane bases:

    * store: a writer warp's ``len(vectors)`` partial stores of ``vec * elem_bytes`` bytes, served
      in the phases that hold a writer lane (lane bits of ``lane_skip`` have image 0: a skipped
      lane adds no word to its phase);
    * load: the direct form's ``parts`` loads of each access, the spread form's loads of the results;
    * combine (spread form): ``share`` iterations of ``parts`` loads and one store of consecutive
      elements (output ``o = tid + i * stride``) by the ``min(warp_size, outputs)`` lanes of warp 0
      (outputs and stride are powers of two: every iteration of the busiest warp is that full),
      0 in the direct form."""
    nbytes = stage.vec * elem_bytes
    nl = target.warp_size.bit_length() - 1
    p = phase_lanes_log2(nbytes, target)
    wf, _ = predict_wavefronts(lanes, nbytes, target, active_lanes=1 << p)
    phases = 1 << sum(1 for b in range(p, nl) if not stage.lane_skip >> b & 1)
    n = len(stage.vectors)
    store = n * phases * wf
    own = predict_wavefronts(lanes, nbytes, target, load=True)[0]
    if not stage.spread:
        return store, n * stage.parts * own, 0
    seq = [elem_bytes << b for b in range(nl)]
    on = min(target.warp_size, stage.outputs)
    comb = (stage.parts * predict_wavefronts(seq, elem_bytes, target, active_lanes=on, load=True)[0]
            + predict_wavefronts(seq, elem_bytes, target, active_lanes=on)[0])
    return store, n * own, stage.share * comb


def plan_reduce(src: LinearLayout, dims: tuple[int, ...] | list[int] | int, combine: str = "sum",
                dtype: str = "f32", target: Target | str = "cuda", arch: str | None = None,
                form: str | None = None, barrier: int | None = None) -> ReducePlan:
    """Plan ``reduce(src, dims, combine)`` (see the module docstring).  ``form``: the warp stage's
    form, ``"direct"`` or ``"spread"`` (default: the cheaper; ignored without a warp stage).
    ``barrier``: a named barrier id (``model.parse_barrier``) for the warp stage's block barriers;
    refused when there is no warp stage (no block barrier to name).
    ValueError in one line for a bad request."""
    if form not in (None, "direct", "spread"):
        raise ValueError(f"unknown warp-stage form {short(form)} (known: direct, spread)")
    if isinstance(target, str):
        target = get_target(target, arch)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if combine not in COMBINES:
        raise ValueError(f"unknown combine {short(combine)} (known: {', '.join(COMBINES)})")
    if dtype not in REDUCE_DTYPES:
        raise ValueError(f"a reduction computes in {', '.join(REDUCE_DTYPES)}, not {short(dtype)}")
    w = dtype_bytes(dtype)
    check_distributed("source", src)
    L = normalise(src)
    check_threads("source", L, target, "reductions")
    _check_dims(L, dims)
    dst = result_layout(L, dims)
    _check_independent(L, dst)
    r_kept, r_red, r_bc = kinds(L, dims, "register")
    _, l_red, l_bc = kinds(L, dims, "lane")
    _, w_red, w_bc = kinds(L, dims, "warp")
    n_src = L.in_dim_size("register")
    groups = tuple(RegisterGroup(j, tuple(_expand(j, r_kept) | _expand(k, r_red) for k in range(1 << len(r_red))))
                   for j in range(1 << len(r_kept)))
    dst_of_src = tuple(_compress(r, r_kept) for r in range(n_src))
    shape = tuple(L.out_dim_sizes.values())
    outputs = math.prod(dst.out_dim_sizes.values())
    strategy = "smem" if w_red else "shuffle" if l_red else "registers"
    n_dst = 1 << len(r_kept)
    combines = (n_src // (1 << len(r_bc)) - n_dst) + len(l_red) * n_dst
    base = SHUFFLE * len(l_red) * n_dst + ALU * combines
    how = [f"{len(r_red)} register bit(s) in each thread", f"{len(l_red)} shuffle round(s) x {n_dst} register(s)"]
    warps = None
    if not w_red:
        scored = [(base, strategy, ", then ".join(how), None)]
    else:
        parts = 1 << len(w_red)
        threads = L.in_dim_size("warp") * target.warp_size
        direct = WarpStage(outputs=outputs, parts=parts, warp_bits=tuple(w_red),
                           lane_skip=sum(1 << b for b in l_red + l_bc), warp_skip=sum(1 << b for b in w_bc),
                           bytes=w * outputs * parts, vectors=vector_groups(dst, w, outputs))
        spread = replace(direct, spread=True, stride=threads, results=0)
        lanes = [w * i for i in row_major_images(dst, "lane")]
        vb = direct.vec * w
        scored = []
        for stage in (direct, spread):
            st, ld, comb = stage_wavefronts(stage, lanes, w, target)
            if stage.spread:
                c = stage.share
                cost = WAVEFRONT * (st + ld + comb) + BARRIER * 3 + ALU * c * (parts - 1)
                step = (f"{parts} warp partials through {stage.bytes} B of shared memory ({vb} B accesses), "
                        f"spread: each thread combines {c} output(s) and stores the result, 3 barriers, "
                        f"{st + ld + comb} wavefronts a warp")
            else:
                cost = WAVEFRONT * (st + ld) + BARRIER * 2 + ALU * n_dst * (parts - 1)
                step = (f"{parts} warp partials through {stage.bytes} B of shared memory ({vb} B accesses), "
                        f"direct: each thread combines its {n_dst} output(s), 2 barriers, {st + ld} wavefronts a "
                        f"warp")
            scored.append((base + cost, "smem-spread" if stage.spread else "smem", ", then ".join(how + [step]),
                           stage))
        scored.sort(key=lambda t: t[0])                  # stable: the direct form on a tie
        warps = scored[0][3] if form is None else spread if form == "spread" else direct
        if barrier is not None:
            warps = replace(warps, named_barrier=Barrier(barrier, threads))
    if barrier is not None and warps is None:
        raise ValueError(f"--barrier {barrier}: this reduction ({strategy}) issues no block barrier: no reduced dim "
                         f"crosses warps (leave --barrier out)")
    candidates = tuple(Candidate(name, score, detail) for score, name, detail, _ in scored)
    return ReducePlan(
        strategy=strategy, dtype=dtype, elem_bytes=w, target=target.name, arch=target.arch,
        warp_size=target.warp_size, num_warps=L.in_dim_size("warp"), n_src=n_src, n_dst=n_dst,
        src_bases={"in_dims": L.bases, "out_dims": L.out_dim_sizes},
        dst_bases={"in_dims": dst.bases, "out_dims": dst.out_dim_sizes}, shape=shape,
        candidates=candidates,
        dims=tuple(sorted(dims)), combine=combine, groups=groups, lane_xors=tuple(1 << b for b in l_red),
        warps=warps, dst_of_src=dst_of_src)
