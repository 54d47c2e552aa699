"""Triton's side of the benches: Gluon kernels with exactly our layouts, and what they compile to.

Conversions (``gluon_kernels``; the same harness as ours, so the comparison is fair): each CTA loads its
tile (rank 1, 2 or 3: ``tile_offsets``) in the source layout, then ``iters`` times
``y = convert_layout(x, DST); y ^= key ^ k; x = convert_layout(y, SRC)`` and stores ``x`` -- the
position-keyed round trip of ``templates/bench.cu.j2``.  The key (``emit.convert.bench_key``,
F2-linear in the row-major index e) is computed as ours is: ``key(e & REGMASK)``, the bits of e the
destination's registers set (a constant per register once LLVM folds the lane/warp bits away), xored
with ``key(e & ~REGMASK) ^ k`` (one value per thread, once per iteration) -- one ``LOP3`` with an
immediate per word and no key array in registers, on both sides.  Equal work on both sides:

* the xor works on 32-bit words wherever ours does (``PACK`` = elements per word): an inline
  ``lop3.b32`` with ``pack=PACK`` takes ``PACK`` consecutive registers of the destination layout
  as one word, the words ours xors (``plan.model.word_view``);
* the base loop (``base_words``) carries the same words as ours' ``_base`` does: the tile as a
  1-D word layout (``words.word_view``), gathered into words once, one xor per word per iteration
  with the key split the same way and ``(k & mask) * 0x00010001`` (or ``0x01010101``), scattered
  back once (ours' loops are not unrolled, as Triton's: unrolled, the immediates of consecutive
  iterations cancel);
* ``maxnreg=255`` where the default build spills: without an explicit cap ptxas spills a few
  long-lived values to local memory to fit one more CTA per SM (seen at 80 and 168 registers); ours
  get ``-maxrregcount=255`` by the same rule (``jobs.compile_jobs``);
* ``iters`` is not specialised, so the checked kernel (5 round trips) is the timed one (64).

``compile_offline`` compiles both kernels for sm_90 without a GPU (CPU checks of registers,
spills and base-loop SASS); ``run_triton`` checks and times them on the GPU like
``timing.run_ours`` and records both kernels' integrity.  ``gluon_gather_kernel`` is the gather
loop of ``bench_gather.py``.  Triton and torch are imported inside the functions only.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from ll_codegen.core.layout import LinearLayout
from ll_codegen.emit.cexpr import row_major_bases
from ll_codegen.emit.convert import BENCH_KEY_COLUMNS, bench_key
from ll_codegen.plan.planner import normalise
from llgen_bench.integrity import kernel_record, res_usage
from llgen_bench.jobs import MAXRREG, Job, ident, sizes
from llgen_bench.sass import functions, sass_counts, sass_text
from llgen_bench.timing import Buffers, check_output, time_launches, torch_events
from llgen_bench.words import WordView, insert_zero_bits, word_view

MAXNREG = MAXRREG                 # maxnreg of a kernel whose default build spills
_RAW = {1: "i8", 2: "i16", 4: "i32", 8: "i64"}
_GLUON: dict = {}


def gluon_kernels() -> dict:
    """The Gluon conversion kernels (``roundtrip``: the round trip of a 1-, 2- or 3-D tile, ``base``:
    the word base loop), built once."""
    if _GLUON:
        return _GLUON
    from triton.experimental import gluon
    from triton.experimental.gluon import language as ttgl

    @gluon.jit
    def xor3(a, b, c, PACK: ttgl.constexpr):
        # a ^ b ^ c; PACK > 1: on words of PACK consecutive registers (one lop3 per word, as ours)
        if PACK > 1:
            return ttgl.inline_asm_elementwise("lop3.b32 $0, $1, $2, $3, 0x96;", "=r,r,r,r", [a, b, c],
                                               dtype=a.dtype, is_pure=True, pack=PACK)
        else:
            return a ^ (b ^ c)

    @gluon.jit
    def xor_key(y, kc, t, PACK, WIDE):                  # PACK, WIDE: constexprs
        # y ^ kc ^ t (kc: the immediates, t: the thread's key ^ k, int32); 8-byte elements: zero-extended,
        # the high word untouched (as ours: a 32-bit key and counter)
        if WIDE:
            return y ^ (kc ^ t).to(ttgl.uint32).to(y.dtype)    # zero-extended: the high word stays
        else:
            return xor3(y, kc.to(y.dtype), t.to(y.dtype), PACK)

    @gluon.jit
    def tile_offsets(L: ttgl.constexpr, S0: ttgl.constexpr, S1: ttgl.constexpr, S2: ttgl.constexpr,
                     RANK: ttgl.constexpr):
        # the row-major index of every element of the RANK-dimensional S0 x S1 x S2 tile, in layout L
        if RANK == 1:
            return ttgl.arange(0, S0, layout=L)
        elif RANK == 2:
            return (ttgl.arange(0, S0, layout=ttgl.SliceLayout(1, L))[:, None] * S1
                    + ttgl.arange(0, S1, layout=ttgl.SliceLayout(0, L))[None, :])
        else:
            return (ttgl.arange(0, S0, layout=ttgl.SliceLayout(1, ttgl.SliceLayout(2, L)))[:, None, None] * (S1 * S2)
                    + ttgl.arange(0, S1, layout=ttgl.SliceLayout(0, ttgl.SliceLayout(2, L)))[None, :, None] * S2
                    + ttgl.arange(0, S2, layout=ttgl.SliceLayout(0, ttgl.SliceLayout(1, L)))[None, None, :])

    @gluon.jit
    def linear_key(e, COLS: ttgl.constexpr, NBITS: ttgl.constexpr):
        # bench_key: the XOR of COLS[i] over the set bits i of e
        key = e & 0
        for i in ttgl.static_range(NBITS):
            key = key ^ (((e >> i) & 1) * COLS[i])
        return key

    @gluon.jit
    def split_key(e, COLS, NBITS, REGMASK, KMASK, PACK, BITS, PARTKEY):      # constexprs but e
        # key(e) = kc ^ kt: kc of e's register bits (REGMASK; a constant per register once LLVM folds the
        # lane/warp bits away), kt of its lane/warp bits (one value per thread); PACK > 1: splat over a
        # word, kc ^ PARTKEY the key of the word's other elements (e ^ parts[i])
        kc = linear_key(e & REGMASK, COLS, NBITS) & KMASK
        kt = linear_key(e & ~REGMASK, COLS, NBITS) & KMASK
        if PACK > 1:
            kc = kc | (kc << BITS)
            kt = kt | (kt << BITS)
            if PACK == 4:
                kc = kc | (kc << (2 * BITS))
                kt = kt | (kt << (2 * BITS))
            kc = kc ^ PARTKEY
        return kc, kt

    @gluon.jit(do_not_specialize=["iters"])
    def roundtrip(in_ptr, out_ptr, iters, SRC: ttgl.constexpr, DST: ttgl.constexpr, S0: ttgl.constexpr,
                  S1: ttgl.constexpr, S2: ttgl.constexpr, RANK: ttgl.constexpr, PACK: ttgl.constexpr,
                  WIDE: ttgl.constexpr, COLS: ttgl.constexpr, NBITS: ttgl.constexpr, REGMASK: ttgl.constexpr,
                  KMASK: ttgl.constexpr):
        base = ttgl.program_id(0) * (S0 * S1 * S2)
        offs = tile_offsets(SRC, S0, S1, S2, RANK)
        x = ttgl.load(in_ptr + base + offs)
        # the key in the destination layout as ours: an immediate per register and one value per
        # thread, xored with k once per iteration (kt ^ k), so no key array lives in registers
        kc, kt = split_key(tile_offsets(DST, S0, S1, S2, RANK), COLS, NBITS, REGMASK, KMASK, 1, 0, 0)
        for k in range(iters):
            y = ttgl.convert_layout(x, DST)
            y = xor_key(y, kc, kt ^ k, PACK, WIDE)
            x = ttgl.convert_layout(y, SRC)
        ttgl.store(out_ptr + base + offs, x)

    @gluon.jit
    def gather_word(ptr, c, PACK: ttgl.constexpr, BITS: ttgl.constexpr, MASK: ttgl.constexpr,
                    P1: ttgl.constexpr, P2: ttgl.constexpr, P3: ttgl.constexpr):
        w = ttgl.load(ptr + c).to(ttgl.int32) & MASK
        w = w | ((ttgl.load(ptr + (c ^ P1)).to(ttgl.int32) & MASK) << BITS)
        if PACK == 4:
            w = w | ((ttgl.load(ptr + (c ^ P2)).to(ttgl.int32) & MASK) << (2 * BITS))
            w = w | ((ttgl.load(ptr + (c ^ P3)).to(ttgl.int32) & MASK) << (3 * BITS))
        return w

    @gluon.jit
    def scatter_word(ptr, c, w, PACK: ttgl.constexpr, BITS: ttgl.constexpr, P1: ttgl.constexpr,
                     P2: ttgl.constexpr, P3: ttgl.constexpr):
        ty = ptr.dtype.element_ty
        ttgl.store(ptr + c, w.to(ty))
        ttgl.store(ptr + (c ^ P1), (w >> BITS).to(ty))
        if PACK == 4:
            ttgl.store(ptr + (c ^ P2), (w >> (2 * BITS)).to(ty))
            ttgl.store(ptr + (c ^ P3), (w >> (3 * BITS)).to(ty))

    @gluon.jit(do_not_specialize=["iters"])
    def base_words(in_ptr, out_ptr, iters, W: ttgl.constexpr, WORDS: ttgl.constexpr,
                   TILE: ttgl.constexpr, PACK: ttgl.constexpr, BITS: ttgl.constexpr, MASK: ttgl.constexpr,
                   SPLAT: ttgl.constexpr, Q0: ttgl.constexpr, Q1: ttgl.constexpr, P1: ttgl.constexpr,
                   P2: ttgl.constexpr, P3: ttgl.constexpr, WIDE: ttgl.constexpr, COLS: ttgl.constexpr,
                   NBITS: ttgl.constexpr, REGMASK: ttgl.constexpr, KMASK: ttgl.constexpr, PARTKEY: ttgl.constexpr):
        # c: row-major index of each word's first element (the word index with zero bits inserted)
        c = ttgl.arange(0, WORDS, layout=W)
        if Q0 >= 0:
            c = ((c >> Q0) << (Q0 + 1)) | (c & ((1 << Q0) - 1))
        if Q1 >= 0:
            c = ((c >> Q1) << (Q1 + 1)) | (c & ((1 << Q1) - 1))
        base = ttgl.program_id(0) * TILE
        # the key keyed in the source layout, split as in the round trip (ours' _base does the same)
        kc, kt = split_key(c, COLS, NBITS, REGMASK, KMASK, PACK, BITS, PARTKEY)
        if PACK == 1:
            x = ttgl.load(in_ptr + base + c)
            for k in range(iters):
                x = xor_key(x, kc, kt ^ k, 1, WIDE)
            ttgl.store(out_ptr + base + c, x)
        else:
            x = gather_word(in_ptr + base, c, PACK, BITS, MASK, P1, P2, P3)
            for k in range(iters):
                # every element ^= key ^ k, as ours' _base; unsigned: (k & 0xff) * 0x01010101 wraps
                x = x ^ (kc ^ (kt ^ ((k.to(ttgl.uint32) & MASK) * SPLAT).to(ttgl.int32, bitcast=True)))
            scatter_word(out_ptr + base, c, x, PACK, BITS, P1, P2, P3)

    _GLUON.update(roundtrip=roundtrip, base=base_words, ttgl=ttgl)
    return _GLUON


def gluon_linear(L: LinearLayout):
    """Our layout as ``ttgl.DistributedLinearLayout`` with exactly our bases."""
    ttgl = gluon_kernels()["ttgl"]
    b = normalise(L).bases
    return ttgl.DistributedLinearLayout(reg_bases=b["register"], lane_bases=b["lane"], warp_bases=b["warp"],
                                        block_bases=b.get("block", []), shape=sizes(L))


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


# ------------------------------------------------------------ arguments
def key_regmask(reg: list[int], threads: list[int]) -> int:
    """The bits of the row-major index e that a layout's registers set (``reg``: their images in e);
    the Gluon kernels split key(e) into ``key(e & mask)`` (a constant per register) and ``key(e & ~mask)``
    (one value per thread), which needs the lane/warp images (``threads``) clear of those bits."""
    mask = 0
    for v in reg:
        mask |= v
    if any(v & mask for v in threads):
        raise ValueError("the layout's register and lane/warp bits of the row-major index overlap: "
                         "the Gluon bench key cannot be split into per-register constants")
    return mask


def _signed32(v: int) -> int:
    return v - (1 << 32) if v >= 1 << 31 else v


def kernel_args(job: Job, pack: int, src_layout=None, dst_layout=None) -> dict[str, tuple[tuple, dict]]:
    """(positional args after the two pointers and ``iters``, options) of the round trip
    (``bench``) and its base loop (``base``); ``pack`` 2 or 4 when ours xors packed words."""
    K = gluon_kernels()
    wv: WordView | None = word_view(job.src, pack) if pack > 1 else None
    if wv is None:
        pack, wv = 1, word_view(job.src, 1)
    src_layout = src_layout if src_layout is not None else gluon_linear(job.src)
    dst_layout = dst_layout if dst_layout is not None else gluon_linear(job.dst)
    wide = job.elem_bytes == 8
    tile = int(np.prod(job.shape))
    nbits = tile.bit_length() - 1
    if nbits > len(BENCH_KEY_COLUMNS) or len(job.shape) > 3:
        raise ValueError(f"the Gluon round trip takes tiles of rank <= 3 and <= 2^{len(BENCH_KEY_COLUMNS)} elements")
    # the key (``emit.convert.bench_key``): its columns, the index bits, the element's key bits
    key = (tuple(BENCH_KEY_COLUMNS[:nbits]), nbits)
    kmask = (1 << (8 * min(job.elem_bytes, 2))) - 1
    dst = normalise(job.dst)
    shape = list(job.shape) + [1] * (3 - len(job.shape))
    bench = (src_layout, dst_layout, *shape, len(job.shape), pack, wide, *key,
             key_regmask(row_major_bases(dst, "register"), row_major_bases(dst, "lane") + row_major_bases(dst, "warp")),
             kmask)
    bits = 8 * job.elem_bytes if pack > 1 else 0
    W = K["ttgl"].DistributedLinearLayout(reg_bases=wv.bases["register"], lane_bases=wv.bases["lane"],
                                          warp_bases=wv.bases["warp"], block_bases=wv.bases["block"],
                                          shape=[wv.words])
    q = list(wv.pivots) + [-1] * (2 - len(wv.pivots))
    p = list(wv.parts[1:]) + [0] * (3 - len(wv.parts[1:]))
    # the base loop's words in the source layout: register and lane/warp images of the word layout, as
    # representatives' indices (zero bits inserted); a word's other elements at e ^ parts[i]
    images = {d: [insert_zero_bits(b[0], wv.pivots) for b in wv.bases[d]] for d in ("register", "lane", "warp")}
    partkey = sum((bench_key(e) & kmask) << (bits * i) for i, e in enumerate(wv.parts)) if pack > 1 else 0
    base = (W, wv.words, tile, pack, bits, (1 << bits) - 1 if bits else 0,
            {8: 0x01010101, 16: 0x00010001}.get(bits, 0), *q, *p, wide, *key,
            key_regmask(images["register"], images["lane"] + images["warp"]), kmask, _signed32(partkey))
    return {"bench": (bench, {"num_warps": job.warps}), "base": (base, {"num_warps": job.warps})}


def compiled_integrity(compiled, path: str, cap: int | None = None) -> dict:
    """Integrity record and SASS counts of one compiled Gluon kernel (its cubin written to ``path``)."""
    with open(path, "wb") as f:
        f.write(compiled.asm["cubin"])
    res = res_usage(path)
    text = sass_text(path)
    fns = functions(text) if text else {}
    counts = sass_counts(next(iter(fns.values()))) if fns else None
    if text:
        with open(path[:-6] + ".sass", "w") as f:
            f.write(text)
    n_spills = getattr(compiled, "n_spills", None)
    return {"integrity": kernel_record(regs=getattr(compiled, "n_regs", None), res=next(iter(res.values()), None),
                                       local_bytes=None if n_spills is None else 4 * n_spills, sass=counts,
                                       cap=cap),
            "sass": counts, "cubin": path}


def compile_offline(job: Job, pack: int, arch: int = 90, work: str | None = None) -> dict[str, dict]:
    """Compile the Gluon round trip and base loop for ``sm_<arch>`` without a GPU (``triton.compile``
    with the pointer alignment the launches get); per kernel its ``compiled_integrity`` dict."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    K = gluon_kernels()
    work = work or tempfile.mkdtemp(prefix="llgen_gluon_")
    out = {}
    for kind, (args, opts) in kernel_args(job, pack).items():
        fn = K["base" if kind == "base" else "roundtrip"]
        names = fn.arg_names
        ptr = "*" + _RAW[job.elem_bytes]
        sig = {n: ptr for n in names[:2]} | {names[2]: "i32"} | {n: "constexpr" for n in names[3:]}
        path = os.path.join(work, ident(f"{job.name}_triton_{kind}") + ".cubin")
        for cap in (None, MAXNREG):         # the cap only where the default build spills, as run_triton
            src = GluonASTSource(fn, sig, {(3 + i,): a for i, a in enumerate(args)},
                                 {(i,): [["tt.divisibility", 16]] for i in range(2)})
            compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32),
                                      options=dict(opts, **({"maxnreg": cap} if cap else {})))
            out[kind] = compiled_integrity(compiled, path, cap)
            rec = out[kind]["integrity"]
            if not any(rec.get(k) for k in ("stack", "local", "stl", "ldl")):
                break
    return out


def run_triton(job: Job, buf: Buffers, iters: int, ctas: int, src_layout=None, dst_layout=None,
               check_iters: int = 5, work: str | None = None, tag: str = "triton", pack: int = 1, **tk) -> dict:
    """Compile, check and time the Gluon round trip and its base loop; layouts default to our
    exact bases; ``ms`` is the difference, as in ``run_ours``.  ``integrity``/``sass`` (and
    ``base_sass``) from both kernels' cubins, written to ``work``."""
    K = gluon_kernels()
    import torch
    work = work or tempfile.mkdtemp(prefix="llgen_gluon_")
    tile = int(np.prod(job.shape))
    args = kernel_args(job, pack, src_layout, dst_layout)
    res: dict[str, Any] = {"ok": True, "pack": args["bench"][0][6], "integrity": {}}
    for kind in ("bench", "base"):
        fn = K["base" if kind == "base" else "roundtrip"]
        a, opts = args[kind]
        opts = dict(opts)

        def launch(k=iters, fn=fn, a=a, opts=opts):
            return fn[(ctas,)](buf.inp, buf.out, k, *a, **opts)
        buf.out.fill_(0x35)
        compiled = launch(check_iters)
        if getattr(compiled, "n_spills", 0):
            opts["maxnreg"] = MAXNREG       # the default build spills: again with the cap (launch reads opts)
            compiled = launch(check_iters)
        torch.cuda.synchronize()
        ok = check_output(buf, check_iters, tile)
        ms = time_launches(launch, torch_events, **tk)
        res["ok"] = res["ok"] and ok and check_output(buf, iters, tile)
        info = compiled_integrity(compiled, os.path.join(work, ident(f"{job.name}_{tag}_{kind}") + ".cubin"),
                                  opts.get("maxnreg"))
        res["integrity"][kind] = info["integrity"]
        if kind == "bench":
            res.update(regs=getattr(compiled, "n_regs", None), smem=getattr(compiled.metadata, "shared", None),
                       ms_loop=ms, sass=info["sass"], cubin=info["cubin"])
        else:
            res.update(base_regs=getattr(compiled, "n_regs", None), ms_base=ms, base_sass=info["sass"])
    res["ms"] = res["ms_loop"] - res["ms_base"]
    return res


_GLUON_GATHER: dict = {}


def gluon_gather_kernel() -> dict:
    """The Gluon gather loop (1-D and 2-D tiles), built once; ``GATHER=False`` is the base loop, the
    work of ours' ``_base`` (``idx = (idx & ~1) | (s & 1)``, ``o = idx ^ s`` after the loop) with ``s`` a
    tile of source values in the index layout: one lop3 per element and iteration (``base_update``),
    the same inline PTX on both sides."""
    if _GLUON_GATHER:
        return _GLUON_GATHER
    from triton.experimental import gluon
    from triton.experimental.gluon import language as ttgl
    if not hasattr(ttgl, "gather"):
        raise RuntimeError("this Triton's Gluon has no gather (triton.experimental.gluon.language.gather)")

    @gluon.jit
    def base_update(idx, s, iters):
        # ours' base, o = idx ^ s; idx ^= o & 1, compiles to one lop3 per element and iteration,
        # idx = (idx & ~1) | (s & 1); LLVM sees that this is idempotent and deletes Triton's loop,
        # so the same lop3 is written out (opaque to LLVM, as ptxas sees ours)
        s1 = (s & 1).to(idx.dtype)
        for k in range(iters):
            idx = ttgl.inline_asm_elementwise("lop3.b32 $0, $1, 0xfffffffe, $2, 0xea;", "=r,r,r", [idx, s1],
                                              dtype=idx.dtype, is_pure=True, pack=1)
        return idx

    @gluon.jit(do_not_specialize=["iters"])
    def loop_2d(in_ptr, idx_ptr, out_ptr, iters, SRC: ttgl.constexpr, IDX: ttgl.constexpr, M: ttgl.constexpr,
                N: ttgl.constexpr, MI: ttgl.constexpr, NI: ttgl.constexpr, AXIS: ttgl.constexpr,
                GATHER: ttgl.constexpr):
        b = ttgl.program_id(0)
        so = (ttgl.arange(0, M, layout=ttgl.SliceLayout(1, SRC))[:, None] * N
              + ttgl.arange(0, N, layout=ttgl.SliceLayout(0, SRC))[None, :])
        io = (ttgl.arange(0, MI, layout=ttgl.SliceLayout(1, IDX))[:, None] * NI
              + ttgl.arange(0, NI, layout=ttgl.SliceLayout(0, IDX))[None, :])
        idx = ttgl.load(idx_ptr + b * (MI * NI) + io)
        if GATHER:
            x = ttgl.load(in_ptr + b * (M * N) + so)
            o = idx.to(x.dtype)
            for k in range(iters):
                o = ttgl.gather(x, idx, AXIS)
                idx = idx ^ (o & 1).to(idx.dtype)
        else:
            s = ttgl.load(in_ptr + b * (M * N) + (io % (M * N)))
            idx = base_update(idx, s, iters)
            o = idx.to(s.dtype) ^ s
        ttgl.store(out_ptr + b * (MI * NI) + io, o)

    @gluon.jit(do_not_specialize=["iters"])
    def loop_1d(in_ptr, idx_ptr, out_ptr, iters, SRC: ttgl.constexpr, IDX: ttgl.constexpr, M: ttgl.constexpr,
                MI: ttgl.constexpr, GATHER: ttgl.constexpr):
        b = ttgl.program_id(0)
        io = ttgl.arange(0, MI, layout=IDX)
        idx = ttgl.load(idx_ptr + b * MI + io)
        if GATHER:
            x = ttgl.load(in_ptr + b * M + ttgl.arange(0, M, layout=SRC))
            o = idx.to(x.dtype)
            for k in range(iters):
                o = ttgl.gather(x, idx, 0)
                idx = idx ^ (o & 1).to(idx.dtype)
        else:
            s = ttgl.load(in_ptr + b * M + (io % M))
            idx = base_update(idx, s, iters)
            o = idx.to(s.dtype) ^ s
        ttgl.store(out_ptr + b * MI + io, o)

    _GLUON_GATHER.update(k1=loop_1d, k2=loop_2d, ttgl=ttgl)
    return _GLUON_GATHER
