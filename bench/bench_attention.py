"""Time the forward-attention example built from generated headers against torch SDPA's cuDNN and
flash backends, in one device call.

    python bench/bench_attention.py --out DIR [--shapes D,SEQ,CAUSAL ...] [--dtypes f16 bf16] [--ladder]

Builds examples/kernels/attention_fwd.cu with nvcc (the kernel's own build line), then for every shape
(head dim 64 and 128, causal and not, seq 1024 .. 16384 with batch x heads x seq = 131072, 8 heads) and
dtype: random-normal Q, K, V; checks our O against float64 softmax attention on 256 query rows of two
(batch, head) pairs (first and last 128 rows: edges and the causal diagonal) within the GPU tests'
tolerances (2^-9 f16, 2^-6 bf16; a wrong result fails the bench, exit 1) and the LSE within 1e-3; then
times with CUDA events (bench_gemm.timed: the median of 15 samples of 10 back-to-back launches, the
kernels taking turns in a rotated order):

* ``ours``: the example (tensor maps encoded once, outside the timing);
* ``cudnn``: ``scaled_dot_product_attention`` under ``sdpa_kernel(SDPBackend.CUDNN_ATTENTION)``;
* ``flash``: the same under ``SDPBackend.FLASH_ATTENTION`` (FlashAttention-2 in torch).

``--fp8`` adds, on FP8_SHAPES (head dims 128 and 64), the e4m3 kernels: ``fp8 chain`` (P's and V's keys
relabelled as llgen chain chose: S -> P by byte permutes), ``fp8 identity`` (the same kernel built with
-D LLGEN_ATTENTION_FP8_IDENTITY=1: the keys in their own order, S -> P with warp shuffles) and ``bf16``
(our bf16 kernel at the same shape), timed together; e4m3 inputs N(0, 1) / descales (gpu_tests'
fp8_inputs), each fp8 O checked on the first and last 128 rows of two (batch, head) pairs against the
gpu tests' two fp8 references and tolerances (a wrong result fails the bench; "max err" of an fp8 row is
the largest excess over the exact reference's bound, <= 0 when right); the table gives fp8/bf16 (the
target: >= 1.4 at d 128) and chain/identity.

A backend that refuses a shape is reported, not fatal.  TFLOP/s = 4 B H S^2 D / time, half that for
causal.  ``--ladder`` also times variants of the example's tile and hand-written control (LADDER: the -D
knobs of attention_fwd.cu -- the tile per head dim (the 128 x 128 tile against the shipped 192 x 128 at
d 64, 192-key tiles at d 64 and d 128, P from shared memory at d 64), intra-warpgroup overlap, the
rescale slack, ping-pong, the causal launch order) on LADDER_SHAPES, f16; each variant's O is checked as
ours is.  ``--fp8-cuts`` times the e4m3 d 128 kernel with one stage cut out of its source (FP8_CUTS:
where its time goes; those outputs are wrong by design and not checked).  Writes DIR/attention.json and
DIR/attention_table.md and prints the table last.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for p in (os.path.join(ROOT, "gpu_tests"), os.path.join(ROOT, "bench"), ROOT):
    if p not in sys.path:
        sys.path.insert(0, p)

TOKENS = 131072  # batch x heads x seq
HEADS = 8
SEQS = [1024, 2048, 4096, 8192, 16384]
SHAPES = [(d, s, c) for d in (64, 128) for c in (False, True) for s in SEQS]
# The example as built, then variants of its tile and of its hand-written control (-D knobs of
# attention_fwd.cu).  Shipped tiles (BM query rows x BN keys): d 64 192 x 128 (three consumer warp
# groups), d 128 128 x 128; FlashAttention-3's on Hopper: d 64 192 x 128 (192 x 192 non-causal in some
# versions), d 128 128 x 176 non-causal (a 176-key tile is no sum of two wgmma N's here: 192 = 128 + 64
# is the nearest) and 128 x 128 causal.
LADDER = [("the example", ()),
          ("d 64: the 128 x 128 tile (2 consumer groups)", ("-DLLGEN_ATTENTION_BM_D64=128",)),
          ("d 64 causal: 128 x 128 (2 consumer groups)", ("-DLLGEN_ATTENTION_BM_CAUSAL_D64=128",)),
          ("d 64: 128 x 192 (2 consumer groups, 192-key tiles)",
           ("-DLLGEN_ATTENTION_BM_D64=128", "-DLLGEN_ATTENTION_BM_CAUSAL_D64=128", "-DLLGEN_ATTENTION_BN_D64=192",
            "-DLLGEN_ATTENTION_BN_CAUSAL_D64=192")),
          ("d 64: 192 x 192 non-causal, P from shared memory (ptxas spills 172 B)",
           ("-DLLGEN_ATTENTION_P_SMEM_D64=1", "-DLLGEN_ATTENTION_BN_D64=192")),
          ("d 64: 192 x 128, P from shared memory", ("-DLLGEN_ATTENTION_P_SMEM_D64=1",)),
          ("d 128: 128 x 192 (192-key tiles, 2 stages)",
           ("-DLLGEN_ATTENTION_BN_D128=192", "-DLLGEN_ATTENTION_BN_CAUSAL_D128=192")),
          ("d 128: 128 x 192 non-causal only", ("-DLLGEN_ATTENTION_BN_D128=192",)),
          ("no intra-warpgroup overlap, 2 stages at d 64",
           ("-DLLGEN_ATTENTION_OVERLAP=0", "-DLLGEN_ATTENTION_STAGES_D64=2")),
          ("no intra-warpgroup overlap", ("-DLLGEN_ATTENTION_OVERLAP=0",)),
          ("2 stages at d 64", ("-DLLGEN_ATTENTION_STAGES_D64=2",)),
          ("4 stages at d 64", ("-DLLGEN_ATTENTION_STAGES_D64=4",)),
          ("2 stages at d 128", ("-DLLGEN_ATTENTION_STAGES_D128=2",)),
          ("rescale skipped where no row max of the warp grew", ("-DLLGEN_ATTENTION_RESCALE_SLACK=0",)),
          ("no ping-pong", ("-DLLGEN_ATTENTION_PINGPONG=0",)),
          ("causal: one head's blocks after another's", ("-DLLGEN_ATTENTION_HEADS_FIRST=0",))]
LADDER_SHAPES = [(64, 1024, False), (64, 4096, False), (128, 4096, False), (64, 1024, True), (64, 2048, True),
                 (64, 8192, True), (128, 1024, True), (128, 4096, True)]
# Where the e4m3 d 128 kernel's time goes: the example with one stage cut out of its source (the text
# replaced), timed beside the example and our bf16 kernel.  Timing only: a cut variant's O is wrong by
# design and not checked.  Each text must occur once in the example (checked before building).
FP8_CUTS = [
    ("no V transpose (the producer only arrives)",
     "            Op::transpose_v(k_tile + 2 * KVTILE, k_tile + KVTILE, ptid);\n", ""),
    ("no exp2 (P = the raw scores)", "        S0::exp2_sub(s, shift, scale_log2);\n", ""),
    ("no O += P V wgmma", "        attention_pv_e4m3_d##D::mma(o, p, v0);", "        (void)v0;"),
    ("no S -> P byte permutes", "        p_of_s_d##D::convert_words(w, p, nullptr, tid);",
     "        for (int i = 0; i < kPWords; ++i) p[i] = w[i % p_of_s_d##D::kSrcWords];")]
FP8_CUT_SHAPES = [(128, 4096, False), (128, 8192, False), (128, 8192, True)]
FP8_ONLY = ("-DLLGEN_ATTENTION_DISABLE_F16=1", "-DLLGEN_ATTENTION_DISABLE_D64=1", "-DLLGEN_ATTENTION_DISABLE_D256=1")
FP8_SHAPES = [(128, 2048, False), (128, 4096, False), (128, 8192, False), (128, 4096, True), (128, 8192, True),
              (64, 4096, False)]  # at d 64 the identity build's kernels are the chain's (attention_fwd.cu)


def flops(B: int, H: int, S: int, d: int, causal: bool) -> float:
    return 4.0 * B * H * S * S * d / (2 if causal else 1)


def check_rows(q, k, v, o, lse, causal: bool) -> tuple[float, float]:
    """Max |O - ref| and |LSE - ref| over the first and last 128 query rows of (batch, head) (0, 0) and
    of the last pair, the reference softmax attention of those rows in float64."""
    import torch
    S, d = q.shape[2], q.shape[3]
    rows = torch.unique(torch.cat([torch.arange(0, min(128, S)), torch.arange(max(S - 128, 0), S)])).to(q.device)
    err = lerr = 0.0
    for b, h in ((0, 0), (q.shape[0] - 1, q.shape[1] - 1)):
        hk = h // (q.shape[1] // k.shape[1])
        s = (q[b, h, rows].double() @ k[b, hk].double().T) / math.sqrt(d)
        if causal:
            s = s.masked_fill(torch.arange(k.shape[2], device=q.device)[None, :] > rows[:, None], float("-inf"))
        want = torch.softmax(s, dim=-1) @ v[b, hk].double()
        err = max(err, (o[b, h, rows].double() - want).abs().max().item())
        lerr = max(lerr, (lse[b, h, rows].double() - torch.logsumexp(s, dim=-1)).abs().max().item())
    return err, lerr


def sdpa(backend, q, k, v, causal: bool):
    """A launch of torch SDPA on one backend, or None (with the reason) where it refuses the shape."""
    import torch
    from torch.nn.attention import sdpa_kernel

    def go():
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    try:
        go()
        torch.cuda.synchronize()
        return go, ""
    except RuntimeError as e:
        return None, str(e).splitlines()[0][:200]


def bench_shape(lib, d: int, S: int, causal: bool, dtype, variants: dict | None = None) -> dict:
    import torch
    from bench_gemm import timed, torch_stream
    from test_attention_fwd import LSE_TOL, TOL, inputs
    from torch.nn.attention import SDPBackend
    B = TOKENS // (HEADS * S)
    q, k, v = inputs(B, HEADS, HEADS, S, S, d, dtype, seed=S + d + causal)
    o = torch.full_like(q, float("nan"))
    lse = torch.full((B, HEADS, S), float("nan"), device="cuda")
    go = {"ours": lib.prepared(q, k, v, o, lse, causal, stream=torch_stream)}
    go["ours"]()
    torch.cuda.synchronize()
    err, lerr = check_rows(q, k, v, o, lse, causal)
    ok = err <= TOL[dtype] and lerr <= LSE_TOL
    for name, other in (variants or {}).items():
        go[name] = other.prepared(q, k, v, o, lse, causal, stream=torch_stream)
    refused = {}
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        fn, why = sdpa(backend, q, k, v, causal)
        if fn:
            go[name] = fn
        else:
            refused[name] = why
    ms = timed(go)
    if variants:  # the variants wrote o last: check them too
        o.fill_(float("nan"))
        for name in variants:
            go[name]()
            torch.cuda.synchronize()
            e, le = check_rows(q, k, v, o, lse, causal)
            ok = ok and e <= TOL[dtype] and le <= LSE_TOL
    fl = flops(B, HEADS, S, d, causal)
    return {"d": d, "seq": S, "causal": causal, "batch": B, "heads": HEADS, "dtype": str(dtype).split(".")[-1],
            "max_err": err, "max_lse_err": lerr, "ok": ok, "refused": refused, "ms": ms,
            "tflops": {n: fl / (t * 1e-3) / 1e12 for n, t in ms.items()}}


def bench_fp8(lib, ident, d: int, S: int, causal: bool) -> dict:
    """One FP8_SHAPES row: fp8 with the chain's keys, fp8 with the identity keys and our bf16, timed
    together; both fp8 outputs checked (first and last 128 rows of two (batch, head) pairs)."""
    import torch
    from bench_gemm import timed, torch_stream
    from test_attention_fwd import FP8_DESCALES, FP8_FLIPS, LSE_TOL, check_rows_fp8, fp8_inputs, inputs
    B = TOKENS // (HEADS * S)
    q8, k8, v8 = fp8_inputs(B, HEADS, HEADS, S, S, seed=S + causal, d=d)
    outs = {n: torch.full((B, HEADS, S, d), float("nan"), dtype=torch.bfloat16, device="cuda")
            for n in ("fp8 chain", "fp8 identity")}
    lses = {n: torch.full((B, HEADS, S), float("nan"), device="cuda") for n in outs}
    go = {n: l.prepared(q8, k8, v8, outs[n], lses[n], causal, stream=torch_stream, descales=FP8_DESCALES)
          for n, l in (("fp8 chain", lib), ("fp8 identity", ident))}
    q, k, v = inputs(B, HEADS, HEADS, S, S, d, torch.bfloat16, seed=S + d + causal)
    o16 = torch.empty_like(q)
    lse16 = torch.empty((B, HEADS, S), device="cuda")
    go["bf16"] = lib.prepared(q, k, v, o16, lse16, causal, stream=torch_stream)
    ms = timed(go)
    torch.cuda.synchronize()
    errs = {n: check_rows_fp8(q8, k8, v8, outs[n], lses[n], causal) for n in outs}
    ok = all(far <= FP8_FLIPS and over <= 0.0 and le <= LSE_TOL for far, over, le in errs.values())
    fl = flops(B, HEADS, S, d, causal)
    tf = {n: fl / (t * 1e-3) / 1e12 for n, t in ms.items()}
    return {"d": d, "seq": S, "causal": causal, "batch": B, "heads": HEADS, "dtype": "e4m3", "ok": ok,
            "errors": errs, "ms": ms, "tflops": tf, "refused": {},
            "max_err": max(over for _, over, _ in errs.values()), "max_lse_err": max(le for _, _, le in errs.values())}


def cut_sources(directory: str) -> dict[str, str]:
    """FP8_CUTS: name -> the path of the example's source with that cut made."""
    import test_attention_fwd as ta
    with open(ta.KERNEL) as f:
        src = f.read()
    out = {}
    for i, (name, old, new) in enumerate(FP8_CUTS):
        if src.count(old) != 1:
            raise SystemExit(f"bench_attention: the cut {name!r} matches {src.count(old)} places of {ta.KERNEL}")
        path = os.path.join(directory, f"cut{i}", "attention_fwd.cu")
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as f:
            f.write(src.replace(old, new))
        out[name] = path
    return out


def bench_fp8_cuts(lib, cuts: dict, d: int, S: int, causal: bool) -> dict:
    """One FP8_CUT_SHAPES row: the e4m3 example, each cut variant and our bf16 kernel, timed together."""
    import torch
    from bench_gemm import timed, torch_stream
    from test_attention_fwd import FP8_DESCALES, fp8_inputs, inputs
    B = TOKENS // (HEADS * S)
    q8, k8, v8 = fp8_inputs(B, HEADS, HEADS, S, S, seed=S + causal, d=d)
    o = torch.empty((B, HEADS, S, d), dtype=torch.bfloat16, device="cuda")
    lse = torch.empty((B, HEADS, S), device="cuda")
    go = {n: l.prepared(q8, k8, v8, o, lse, causal, stream=torch_stream, descales=FP8_DESCALES)
          for n, l in (("the example", lib), *cuts.items())}
    q, k, v = inputs(B, HEADS, HEADS, S, S, d, torch.bfloat16, seed=S + d + causal)
    go["bf16"] = lib.prepared(q, k, v, torch.empty_like(q), lse, causal, stream=torch_stream)
    ms = timed(go)
    fl = flops(B, HEADS, S, d, causal)
    return {"d": d, "seq": S, "causal": causal, "dtype": "e4m3",
            "tflops": {n: fl / (t * 1e-3) / 1e12 for n, t in ms.items()}}


def variant_table(title: str, rows: list[dict]) -> list[str]:
    """Markdown lines: ``title``, then a kernel variant per row and a shape per column (TFLOP/s; the
    torch backends left out)."""
    cols = [f"{r['dtype']} d{r['d']} seq {r['seq']}{' causal' if r['causal'] else ''}" for r in rows]
    names = [n for n in rows[0]["tflops"] if n not in ("cudnn", "flash")]
    return (["", title, "", "| variant | " + " | ".join(cols) + " |", "| --- |" + " --- |" * len(rows)]
            + [f"| {n} | " + " | ".join(f"{r['tflops'][n]:.0f}" for r in rows) + " |" for n in names])


def report(dev: str, rows: list[dict], ladder: list[dict], fp8: list[dict] | None = None,
           cuts: list[dict] | None = None) -> str:
    lines = [(f"Forward attention on {dev}: TFLOP/s (median of 15 x 10 launches, kernels interleaved), "
              f"batch x heads x seq = {TOKENS}, {HEADS} heads"), "",
             "| dtype | d | causal | seq | ours | cuDNN | flash | ours/cuDNN | ours/flash | max err |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    ratios = {}

    def num(x, fmt):
        return "-" if x is None else format(x, fmt)
    for r in rows:
        t = r["tflops"]
        c, f = t.get("cudnn"), t.get("flash")
        rc, rf = (t["ours"] / c if c else None), (t["ours"] / f if f else None)
        if rc:
            ratios.setdefault(r["dtype"], []).append(rc)
        lines.append(f"| {r['dtype']} | {r['d']} | {'yes' if r['causal'] else 'no'} | {r['seq']} | {t['ours']:.0f} | "
                     f"{num(c, '.0f')} | {num(f, '.0f')} | {num(rc, '.2f')} | {num(rf, '.2f')} | "
                     f"{r['max_err']:.2g}{'' if r['ok'] else ' WRONG'} |")
    lines.append("")
    for dt, rs in ratios.items():
        lines.append(f"{dt}: geomean ours/cuDNN {math.exp(sum(map(math.log, rs)) / len(rs)):.3f}, "
                     f"min {min(rs):.2f} over {len(rs)} shapes")
    if ladder:
        lines += variant_table("Ladder (hand-written control), TFLOP/s:", ladder)
    if fp8:
        lines += ["", "fp8 (e4m3 Q, K, V; O bf16), TFLOP/s:", "",
                  "| d | causal | seq | fp8 chain | fp8 identity | bf16 | fp8/bf16 | chain/identity | err - bound |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in fp8:
            t = r["tflops"]
            lines.append(f"| {r['d']} | {'yes' if r['causal'] else 'no'} | {r['seq']} | {t['fp8 chain']:.0f} | "
                         f"{t['fp8 identity']:.0f} | {t['bf16']:.0f} | {t['fp8 chain'] / t['bf16']:.2f} | "
                         f"{t['fp8 chain'] / t['fp8 identity']:.2f} | {r['max_err']:.2g}{'' if r['ok'] else ' WRONG'} |")
        rs = [r["tflops"]["fp8 chain"] / r["tflops"]["bf16"] for r in fp8 if r["d"] == 128]
        lines.append("")
        lines.append(f"fp8/bf16 geomean {math.exp(sum(map(math.log, rs)) / len(rs)):.3f} (target >= 1.4 at d 128)")
    if cuts:
        lines += variant_table("e4m3 d 128 with one stage cut out (timing only: a cut variant's O is wrong), "
                               "TFLOP/s:", cuts)
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    ap.add_argument("--shapes", nargs="*", default=None, help="D,SEQ,CAUSAL (0/1); default: SHAPES")
    ap.add_argument("--dtypes", nargs="*", default=["f16", "bf16"], choices=["f16", "bf16"])
    ap.add_argument("--ladder", action="store_true", help="also time variants of the example's control")
    ap.add_argument("--fp8", action="store_true", help="also time the e4m3 kernels (chain and identity keys) on FP8_SHAPES")
    ap.add_argument("--fp8-cuts", action="store_true",
                    help="also time the e4m3 d 128 kernel with one stage cut out (FP8_CUTS; timing only)")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    import test_attention_fwd as ta
    import torch
    shapes = ([tuple(int(x) for x in s.split(",")) for s in a.shapes] if a.shapes else SHAPES)
    dtypes = [{"f16": torch.float16, "bf16": torch.bfloat16}[t] for t in a.dtypes]
    d = tempfile.mkdtemp(prefix="llgen_attention_")
    lib = ta.Library(ta.build(d))
    dev = torch.cuda.get_device_name()
    if a.fp8:  # the identity build compiles while the 16-bit rows run
        ident_pool = ThreadPoolExecutor(max_workers=1)
        os.makedirs(os.path.join(d, "fp8_identity"))
        ident_path = ident_pool.submit(ta.build, os.path.join(d, "fp8_identity"), ta.FP8_VARIANTS["fp8_identity"])
    rows = [bench_shape(lib, dh, S, bool(c), dt) for dh, S, c in shapes for dt in dtypes]
    fp8 = []
    if a.fp8:
        ident = ta.Library(ident_path.result())
        fp8 = [bench_fp8(lib, ident, dh, S, c) for dh, S, c in FP8_SHAPES]
    cut_rows = []
    if a.fp8_cuts:
        srcs = cut_sources(d)
        # the example built with its e4m3 and bf16 d 128 kernels alone, and each cut likewise
        with ThreadPoolExecutor(max_workers=len(srcs) + 1) as pool:
            base = pool.submit(ta.build, os.path.join(d, "fp8_only"), FP8_ONLY)
            built = {n: pool.submit(ta.build, os.path.dirname(p), FP8_ONLY, p) for n, p in srcs.items()}
            base = ta.Library(base.result())
            cut_libs = {n: ta.Library(f.result()) for n, f in built.items()}
        cut_rows = [bench_fp8_cuts(base, cut_libs, dh, S, c) for dh, S, c in FP8_CUT_SHAPES]
    ladder = []
    if a.ladder:
        subs = [os.path.join(d, f"variant{i}") for i in range(1, len(LADDER))]
        for sub in subs:
            os.makedirs(sub)
        with ThreadPoolExecutor(max_workers=len(subs)) as pool:  # nvcc runs as a subprocess: builds overlap
            paths = list(pool.map(lambda i: ta.build(subs[i - 1], LADDER[i][1]), range(1, len(LADDER))))
        variants = {name: ta.Library(path) for (name, _), path in zip(LADDER[1:], paths)}
        for dh, S, c in LADDER_SHAPES:
            r = bench_shape(lib, dh, S, c, torch.float16, variants)
            r["tflops"][LADDER[0][0]] = r["tflops"].pop("ours")
            ladder.append(r)
    table = report(dev, rows, ladder, fp8, cut_rows)
    with open(os.path.join(a.out, "attention.json"), "w") as f:
        json.dump({"device": dev, "rows": rows, "ladder": ladder, "fp8": fp8, "fp8_cuts": cut_rows}, f, indent=1)
    with open(os.path.join(a.out, "attention_table.md"), "w") as f:
        f.write(table)
    for r in rows + ladder + fp8:
        if not r["ok"]:
            print(f"FAILED {r['dtype']} d{r['d']} seq {r['seq']} causal {r['causal']}: max err {r['max_err']:.3g}, "
                  f"LSE {r['max_lse_err']:.3g}")
        for n, why in r["refused"].items():
            print(f"refused: {n} {r['dtype']} d{r['d']} seq {r['seq']} causal {r['causal']}: {why}")
    print(table)
    return 1 if any(not r["ok"] for r in rows + ladder + fp8) else 0


if __name__ == "__main__":
    sys.exit(main())
