"""Rendering: deterministic text, CUDA/HIP compilation, and PTX/ISA instruction
counts that match the plan.

Compile checks need ``nvcc`` (CUDA) or Debian's ``hipcc`` (HIP); without them
those tests are skipped with the reason.  All files of one toolchain are
compiled once per session, several to a translation unit (each header has its own namespace, each
kernel its own name; the PTX or assembly is split per kernel and function and attributed to its
conversion, ``toolchain.owner``), in parallel (module-scoped fixtures)."""
from __future__ import annotations

import os
import random
import re

import pytest

from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.model import AccessCost, LaneSelect, RegisterPlan, ShufflePlan, ShuffleRound, SmemAccess, SmemPlan, SmemRound, XorForm
from ll_codegen.plan.plans import ConvertPlan
from ll_codegen.emit.cexpr import linear_expr, parity_expr, select_tree, xor_form_expr
from ll_codegen.emit.render import file_names
from ll_codegen.operations import render, write_files
from toolchain import (HIP_ENV, check_isa, check_ptx, counted_kernel, need, nvcc_cubin, owner, run_all,
                       source_batches, split_isa, split_ptx, uses_matrix)

from ll_codegen.plan import planner


# ------------------------------------------------------------------ layouts
def rnd_pair(seed: int, nreg: int = 2, nl: int = 5, shape=(16, 16), src_zero_warp: bool = False):
    """Two distributed layouts of one 2-D tensor: a random assignment of the
    tensor's unit bits to register/lane/warp, and a random re-shuffle of the
    register and lane bits (warps kept, so shuffles are legal)."""
    rng = random.Random(seed)
    bits = [[1 << i, 0] for i in range(shape[0].bit_length() - 1)] + \
           [[0, 1 << i] for i in range(shape[1].bit_length() - 1)]
    p = list(range(len(bits)))
    rng.shuffle(p)
    q = p[:nreg + nl]
    rng.shuffle(q)
    q += p[nreg + nl:]

    def lay(perm, zero_warp=False):
        b = [bits[i] for i in perm]
        reg, lane, warp = b[:nreg], b[nreg:nreg + nl], b[nreg + nl:]
        if zero_warp:                  # warps hold broadcast copies: one warp bit moves into the registers
            reg, warp = reg + warp[-1:], warp[:-1] + [[0, 0]]
        return LinearLayout({"register": reg, "lane": lane, "warp": warp}, ["dim0", "dim1"])
    return lay(p, src_zero_warp), lay(q)


def plans(seed, strategy, dtype, target="cuda", arch=None, **kw):
    nl = 6 if arch in ("gfx90a", "gfx940") else 5
    shape = kw.pop("shape", (16, 32) if nl == 6 else (16, 16))
    A, B = rnd_pair(seed, nl=nl, shape=shape, nreg=kw.pop("nreg", 2), src_zero_warp=kw.pop("zero_warp", False))
    f = planner.plan_conversion(A, B, dtype, target=target, arch=arch, strategy=strategy, **kw)
    b = planner.plan_conversion(B, A, dtype, target=target, arch=arch, strategy=strategy, **kw)
    return f, b


def _base(strategy, n_src=4, n_dst=4, elem=2, target="cuda", arch="sm_90", ws=32, **kw):
    A, B = rnd_pair(0, nl=5 if ws == 32 else 6, shape=(16, 16) if ws == 32 else (16, 32))
    return ConvertPlan(strategy=strategy, dtype={1: "i8", 2: "f16", 4: "f32", 8: "f64"}[elem], elem_bytes=elem,
                          target=target, arch=arch, warp_size=ws, num_warps=2, n_src=n_src, n_dst=n_dst,
                          src_bases={"in_dims": A.bases, "out_dims": A.out_dim_sizes},
                          dst_bases={"in_dims": B.bases, "out_dims": B.out_dim_sizes},
                          shape=(16, 16), **kw)


def hand_plans() -> dict[str, ConvertPlan]:
    """Plans built by hand: every code path whether or not the planner picks it."""
    cost = AccessCost(1, 0, 2, 2)
    out = {
        "hand_reg": _base("register", register=RegisterPlan((3, 2, 1, 0))),
        "hand_shfl_xor": _base("shuffle", shuffle=ShufflePlan(
            vec=2, words=1, send_select=LaneSelect(), recv_select=LaneSelect(), src_lane=None,
            rounds=(ShuffleRound(((0, 1),), 0, ((0, 1),)), ShuffleRound(((2, 3),), 5, ((2, 3),))))),
        "hand_shfl_sel": _base("shuffle", elem=8, dst_copies=((3, 2),), shuffle=ShufflePlan(
            vec=1, words=2, send_select=LaneSelect((0x3,)), recv_select=LaneSelect((0x4, 0x10)),
            src_lane=(2, 1, 4, 8, 16),
            rounds=(ShuffleRound(((0,), (1,)), 1, ((0,), (1,), (2,), (0,))),
                    ShuffleRound(((1,), (0,)), 2, ((1,), (2,), (0,), (1,))),
                    ShuffleRound(((2,), (3,)), 3, ((2,), (0,), (1,), (2,)))))),
    }
    for vb in (4, 8, 16):
        elem = 2
        vec = vb // elem
        regs = tuple(range(vec))
        out[f"hand_smem_v{vb}"] = _base("smem", n_src=vec * 2, n_dst=vec * 6, smem=SmemPlan(
            layout={"offset": [], "round": []}, swizzle="optimal", store_vec=vec, load_vec=vec, vector_bytes=vb,
            bytes=1024, store_base=XorForm((vb, 2 * vb, 4 * vb, 8 * vb, 16 * vb), (512,)),
            load_base=XorForm((16 * vb, 8 * vb, 4 * vb, 2 * vb, vb ^ 32 * vb), (512,)), store_warp_skip=1,
            rounds=tuple(SmemRound((SmemAccess(regs, 0), SmemAccess(tuple(r + vec for r in regs), 0x1000 + 16 * k)),
                                   (SmemAccess(tuple(r + 2 * vec * k for r in regs[::-1]), 0),
                                    SmemAccess(tuple(r + (2 * k + 1) * vec for r in regs), 16)))
                         for k in range(3)),
            store=cost, load=cost))
    out["hand_smem_f64"] = _base("smem", elem=8, smem=SmemPlan(
        layout={"offset": [], "round": []}, swizzle="optimal", store_vec=2, load_vec=1, vector_bytes=16,
        bytes=2048, store_base=XorForm((16, 32, 64, 128, 256), (512,)), load_base=XorForm((8, 16, 32, 64, 128), (1024,)),
        store_warp_skip=0, rounds=(SmemRound((SmemAccess((0, 1), 0), SmemAccess((2, 3), 16)),
                                             tuple(SmemAccess((r,), 256 * r) for r in range(4))),),
        store=cost, load=cost))
    return out


def real_cases() -> dict[str, tuple[ConvertPlan, ConvertPlan]]:
    """name -> (forward, backward) plans from the planner."""
    cases = {}
    for seed, dt in ((1, "f16"), (26, "i8"), (0, "f64"), (1, "f32")):
        cases[f"shfl{seed}_{dt}"] = plans(seed, "shuffle", dt)
    for seed, dt in ((0, "f16"), (3, "f64"), (4, "i8"), (99, "i8")):
        cases[f"smem{seed}_{dt}"] = plans(seed, "smem", dt, shape=(32, 32), nreg=4)
    for seed, dt in ((60, "f16"), (211, "f16"), (85, "i8"), (17, "f32")):      # ldmatrix/stmatrix (sm_90)
        cases[f"mx{seed}_{dt}"] = plans(seed, "smem", dt, shape=(32, 32) if dt == "i8" else (16, 16),
                                        nreg=4 if dt == "i8" else 2)
    cases["rounds_f16"] = plans(5, "smem", "f16", shape=(32, 32), nreg=4, smem_budget=1024)
    cases["skip_f32"] = plans(7, "smem", "f32", zero_warp=True)
    cases["auto2"] = plans(2, "auto", "f16")
    return cases


# ------------------------------------------------------------ expression helpers
def _eval_c(expr: str, **vars) -> int:
    e = expr.replace("0u", "0").replace("__popc", "popc")
    return eval(e, {"popc": lambda x: bin(x).count("1")}, vars)


@pytest.mark.parametrize("seed", range(50))
def test_linear_expr_matches_xor_form(seed):
    rng = random.Random(seed)
    lane = tuple(rng.choice([0, 1 << rng.randrange(12), rng.randrange(1 << 12)]) for _ in range(5))
    warp = tuple(rng.randrange(1 << 12) for _ in range(rng.randrange(3)))
    f = XorForm(lane, warp)
    e = xor_form_expr(f, 5, len(warp))
    for ln in range(32):
        for w in range(1 << len(warp)):
            assert _eval_c(e, lane=ln, warp=w) == f(ln, w), (e, ln, w)


def test_expression_shapes():
    assert linear_expr((1, 2, 4, 8, 16), "lane", 5) == "lane"
    assert xor_form_expr(XorForm((0,) * 5), 5, 0) == "0u"
    assert xor_form_expr(XorForm((0, 0, 32, 64, 128)), 5, 0) == "(lane & 0x1c) << 3"
    assert xor_form_expr(XorForm((0, 1, 2, 0, 0)), 5, 0) == "(lane >> 1) & 0x3"
    assert xor_form_expr(XorForm((0,) * 5, (0x120,)), 5, 1) == "warp * 0x120"
    assert parity_expr(4) == "(lane >> 2) & 1" and parity_expr(1) == "lane & 1"
    assert parity_expr(6) == "__popc(lane & 0x6) & 1"
    assert select_tree(["a", "b", "c", "d"], ["x", "y"]) == "y ? (x ? d : c) : (x ? b : a)"
    assert select_tree(["a", "a"], ["x"]) == "a"


# ------------------------------------------------------------------ rendering
def test_render_deterministic_and_contract(tmp_path):
    for name, (f, b) in list(real_cases().items())[:6]:
        for kind in ("header", "harness", "bench"):
            one = render(f, kind, name, "llgen convert x", back_plan=b)
            assert one == render(f, kind, name, "llgen convert x", back_plan=b)
        h = render(f, "header", name, "llgen convert --src a.yaml")
        assert "llgen convert --src a.yaml" in h and f"namespace {name} {{" in h
        for const in ("kSrcRegs", "kDstRegs", "kSmemBytes", "kThreads", "kWarpSize"):
            assert f"constexpr int {const}" in h
        assert re.findall(r"#include <([^>]+)>", h) == ["cuda_runtime.h", "cstdint"]
        assert "bank conflicts" in h or f.smem is None
    with pytest.raises(ValueError, match="back_plan"):
        render(f, "bench", "x")
    with pytest.raises(ValueError, match="kind"):
        render(f, "nope", "x")


# ------------------------------------------------------------------ compilation
#: files per translation unit: one compiler start-up (cicc reading the CUDA headers, ~0.4 s) for all
BATCH = 12


def batched_jobs(d: str, prefix: str, files: list[str], size: int, command) -> list[tuple[list[str], str, object]]:
    """``files`` (in ``d``) ``size`` to a translation unit named ``<prefix>_<k>``: [(files, unit, command(unit))]."""
    out = []
    for k, batch in enumerate(source_batches([os.path.join(d, f) for f in files], size)):
        ext = os.path.splitext(batch[0])[1]
        tu = os.path.join(d, f"{prefix}_{k:02d}{ext}")
        with open(tu, "w") as f:
            f.writelines(f'#include "{os.path.basename(p)}"\n' for p in batch)
        out.append(([os.path.basename(p) for p in batch], tu, command(tu)))
    return out


def per_conversion(code: str, names, plans, split) -> dict[str, str]:
    """The code of each conversion's harness in a unit's PTX or assembly (``toolchain.owner``)."""
    per = {n: "" for n in names}
    for sym, body in split(code).items():
        n = owner(sym, names)
        if n is not None and counted_kernel(sym, n, plans[n]):
            per[n] += body
    return per


@pytest.fixture(scope="module")
def cuda_build(tmp_path_factory):
    """Every harness and bench compiled for its archs, device code only, several to a translation
    unit, the PTX kept: (folder, plans, {(name, arch): the PTX of its harness}, compiler results)."""
    nvcc = need("nvcc")
    d = str(tmp_path_factory.mktemp("cuda"))
    meta = {}
    real = real_cases()
    for name, (f, b) in real.items():
        write_files(f, d, name, emit=("header", "harness", "bench"), back_plan=b, command="pytest")
        meta[name] = f
    for name, p in hand_plans().items():
        write_files(p, d, name, emit=("header", "harness"), command="pytest")
        meta[name] = p
    units = []                             # (arch, names, unit, ptx or None, cmd)
    for arch in ("sm_80", "sm_90"):
        names = [n for n, p in meta.items() if arch == "sm_90" or not uses_matrix(p)]
        for kind in ("harness", "bench"):
            files = [f"{n}_{kind}.cu" for n in names if kind == "harness" or n in real]
            for batch, tu, (cmd, ptx) in batched_jobs(d, f"{kind}_{arch}", files, BATCH, lambda tu: nvcc_cubin(nvcc, tu, arch, tu[:-3])):
                units.append((arch, [f.rsplit("_", 1)[0] for f in batch], tu, ptx if kind == "harness" else None, cmd))
    results = run_all([(" + ".join(u[1]) + f" ({u[0]})", u[4]) for u in units], d)
    ptxs = {}
    for arch, names, tu, ptx, cmd in units:
        if ptx is not None and os.path.exists(ptx):
            with open(ptx) as f:
                ptxs.update({(n, arch): c for n, c in per_conversion(f.read(), names, meta, split_ptx).items()})
    return d, meta, ptxs, results


@pytest.mark.compile
def test_cuda_compiles(cuda_build):
    d, meta, ptxs, results = cuda_build
    bad = [(n, " ".join(c), out) for n, c, rc, out in results if rc != 0]
    assert not bad, bad[0]
    warn = [(n, " ".join(c), out) for n, c, rc, out in results if "warning" in out]
    assert not warn, warn[0]
    want = {(n, a) for n, p in meta.items() for a in (("sm_90",) if uses_matrix(p) else ("sm_80", "sm_90"))}
    assert set(ptxs) == want


@pytest.mark.compile
def test_cuda_ptx_counts(cuda_build):
    d, meta, ptxs, _ = cuda_build
    for name, plan in meta.items():
        assert ptxs[name, "sm_90"], name
        check_ptx(plan, ptxs[name, "sm_90"], name)


@pytest.fixture(scope="module")
def hip_build(tmp_path_factory):
    """Harnesses and benches for gfx90a and gfx1030, several to a translation unit, the assembly
    kept: (folder, {name: (arch, plan)}, {name: the assembly of its harness}, compiler results)."""
    hipcc = need("hipcc")
    d = str(tmp_path_factory.mktemp("hip"))
    meta, units = {}, []
    for arch in ("gfx90a", "gfx1030"):
        names = []
        for seed, st, dt in ((1, "shuffle", "f16"), (26, "shuffle", "i8"), (0, "shuffle", "f64"),
                             (3, "smem", "f16"), (3, "smem", "f64"), (4, "smem", "i8"), (9, "smem", "f32")):
            name = f"h{seed}_{st}_{dt}_{arch}"
            f, b = plans(seed, st, dt, target="hip", arch=arch)   # seeds chosen so every plan exists
            write_files(f, d, name, emit=("header", "harness", "bench"), back_plan=b)
            meta[name] = (arch, f)
            names.append(name)
        for kind in ("harness", "bench"):
            files = [file_names("hip", n)[kind] for n in names]
            for batch, tu, cmd in batched_jobs(d, f"{kind}_{arch}", files, BATCH, lambda tu: [
                    hipcc, f"--offload-arch={arch}", "--genco", "-save-temps=obj", "-o", tu + ".co", tu]):
                units.append((arch, [f.rsplit("_", 1)[0] for f in batch], tu, kind, cmd))
    results = run_all([(" + ".join(u[1]) + f" ({u[0]})", u[4]) for u in units], d, HIP_ENV)
    isas = {}
    for arch, names, tu, kind, cmd in units:
        asm = f"{tu[:-4]}-hip-amdgcn-amd-amdhsa-{arch}.s"
        if kind == "harness" and os.path.exists(asm):
            with open(asm) as f:
                isas.update(per_conversion(f.read(), names, {n: meta[n][1] for n in names}, split_isa))
    return d, meta, isas, results


@pytest.mark.compile
def test_hip_compiles(hip_build):
    d, meta, isas, results = hip_build
    bad = [(n, " ".join(c), out) for n, c, rc, out in results if rc != 0 or "warning" in out]
    assert not bad, bad[0]
    assert set(isas) == set(meta)


@pytest.mark.compile
def test_hip_isa_counts(hip_build):
    d, meta, isas, _ = hip_build
    for name, (arch, plan) in meta.items():
        assert isas[name], name
        check_isa(plan, isas[name], name)


def _distinct_byte_perms(code: str) -> int:
    """Distinct ``__byte_perm(...)`` expressions (nested ones counted too): what the compiler keeps."""
    found, i = set(), code.find("__byte_perm(")
    while i >= 0:
        depth, j = 0, i + len("__byte_perm")
        while True:
            depth += {"(": 1, ")": -1}.get(code[j], 0)
            if depth == 0:
                break
            j += 1
        found.add(code[i:j + 1])
        i = code.find("__byte_perm(", i + 1)
    return len(found)


def test_shuffle_pack_ops_count_the_rendered_permutes():
    """The cost model's pack count (``ShufflePlan.pack_ops``) is the number of distinct byte permutes
    the word view renders, for every form of lane-dependent registers (select trees, swap stages, each
    fused: byte permutes with per-lane selectors, whose bodies have no select left)."""
    from dataclasses import replace
    from ll_codegen.testing.corpus import random_pair
    from ll_codegen.plan.model import word_view
    from ll_codegen.emit.convert import convert_function, namespace
    from ll_codegen.plan.shuffle import fuse_form, plan_shuffle, swap_form
    rng, checked, nonzero, fused = random.Random(7), 0, 0, 0
    for _ in range(60):
        src, dst = random_pair(rng, lanes=32, same_warps=True)
        for dtype in ("i8", "f16"):
            try:
                p = planner.plan_conversion(src, dst, dtype, "cuda", "sm_90", strategy="shuffle")
            except ValueError:
                break
            trees = plan_shuffle(planner.normalise(src), planner.normalise(dst), p.elem_bytes)
            forms = [trees, swap_form(trees)]
            forms += [f for f in (fuse_form(f, word_view(p), p.dst_copies) for f in forms) if f is not None]
            for sp in forms:
                q = replace(p, shuffle=sp)
                if not word_view(q):
                    continue
                fn = convert_function(q, namespace(q, "k"))
                body = "\n".join(line for step in fn.steps for line in step["lines"])
                got = _distinct_byte_perms(body)
                assert got == q.shuffle.pack_ops(word_view(q), q.dst_copies), (dtype, sp, src.bases, dst.bases)
                assert body.count("?") == q.shuffle.selects or not (sp.send_fused and sp.recv_fused)
                checked, nonzero, fused = checked + 1, nonzero + (got > 0), fused + (sp.send_fused and sp.recv_fused)
    assert checked >= 200 and nonzero >= 50 and fused >= 30, (checked, nonzero, fused)
