"""The ``reduce`` operation's generated code (``emit/reduce.py``, ``templates/reduce*.j2``) and its command.

Sample: every layout of ``corpus.REDUCE_NAMED`` (wgmma accumulator rows and columns, mma.sync,
a dot operand, blocked tiles over either dim and over two dims of a 3-D tile, tiles smaller than
the CTA with broadcast lanes, warps and registers, a slice, MFMA and blocked wave64, RDNA wave32),
each with one element type and combine in turn, plus three layouts (wgmma rows, mma.sync columns
through shared memory, blocked wave64 rows) with every element type x combine.

* the header is self-contained (only the runtime header, <cstdint> and the 16-bit float headers),
  states the plan, and its reduce() issues exactly the plan's steps in the plan's order: the
  in-thread folds, one shuffle per round and result register with the plan's lane masks (lowest
  first), the warp stage's two barriers (three in the spread form: the threads share the outputs'
  combines, then load their results) only when a warp bit is reduced; both forms of every named
  case with a warp stage are rendered, compiled and run;
* the CUDA headers and harnesses compile with nvcc for sm_80, sm_90 and ``-arch=sm_90a``, the HIP
  ones with hipcc (gfx90a for wave64, gfx1030 for wave32), without a warning (``compile``);
* every harness runs on the host SIMT runtime bit for bit against the numpy reference, and a
  plan with a wrong shuffle mask fails there (``compile``);
* ``llgen reduce``: files written (and the header's command line), ``--plan``/``--json``; a bad
  ``--dim``, ``--op``, a memory layout or a wrong lane count: one error line, exit status 2,
  nothing written.
"""
from __future__ import annotations

import itertools
import json
import os
import re
from dataclasses import replace

import pytest
from click.testing import CliRunner

from ll_codegen import cli
from ll_codegen.api import plan_reduce, reduce_files
from ll_codegen.emit.instructions import FEATURE_MACROS
from ll_codegen.emit.render import file_names
from ll_codegen.operations import render, write_files
from ll_codegen.plan.reduce import COMBINES, REDUCE_DTYPES
from ll_codegen.plan.reduce import plan_reduce as plan_reduce_form
from ll_codegen.run import host
from ll_codegen.spec import spec_from_dict
from ll_codegen.testing.corpus import REDUCE_NAMED
from toolchain import HIP_ENV, failures, need, run_all

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")
WGMMA, MMA = os.path.join(EX, "wgmma_128x128.yaml"), os.path.join(EX, "mma_v2_64x64.yaml")
WAVE64, SHARED = os.path.join(EX, "specs", "blocked_wave64_64x64.yaml"), os.path.join(EX, "swizzled_shared_64x64.yaml")
FULL = ("wgmma_rows", "mma_v2_cols", "blocked_wave64_rows")        # every element type x combine
COMBOS = list(itertools.product(REDUCE_DTYPES, COMBINES))
#: what a header may include
INCLUDES = {"cuda": {"cuda_runtime.h", "cstdint", "cuda_fp16.h", "cuda_bf16.h"},
            "hip": {"hip/hip_runtime.h", "cstdint", "hip/hip_fp16.h", "hip/hip_bfloat16.h"}}


#: a reduction that stays in each thread (strategy ``registers``): 4 columns per thread, one row per thread
ROW_IN_THREAD = {"kind": "blocked", "size_per_thread": [1, 4], "threads_per_warp": [32, 1], "warps_per_cta": [4, 1],
                 "order": [1, 0], "shape": [128, 4]}


def _plan(case, dtype: str, combine: str, form: str | None = None):
    arch = case.arch or ("sm_90a" if case.src.get("kind") == "nvidia_mma" and case.src.get("version", [0])[0] == 3
                         else "sm_90" if case.target == "cuda" else None)
    if form is not None:                       # a given form of the warp stage: the planner module itself
        return plan_reduce_form(spec_from_dict(dict(case.src)).linear, case.dims, combine, dtype, case.target, arch,
                                form=form)
    return plan_reduce(spec_from_dict(dict(case.src)).linear, case.dims, combine, dtype, case.target, arch)


def sample() -> list[tuple[str, object]]:
    items = []
    for i, case in enumerate(REDUCE_NAMED):
        combos = COMBOS if case.name in FULL else [COMBOS[(5 * i) % len(COMBOS)]]
        for dtype, combine in combos:
            items.append((f"r_{case.name}_{dtype}_{combine}", _plan(case, dtype, combine)))
    for dtype, combine in COMBOS[::5]:
        items.append((f"r_in_thread_{dtype}_{combine}",
                      plan_reduce(spec_from_dict(dict(ROW_IN_THREAD)).linear, 1, combine, dtype)))
    # the warp stage's other form of each named case (the planner picks one by cost), dtypes in turn
    for i, case in enumerate(REDUCE_NAMED):
        dtype, combine = COMBOS[(7 * i + 3) % len(COMBOS)]
        p = _plan(case, dtype, combine)
        if p.warps is not None:
            other = "direct" if p.warps.spread else "spread"
            items.append((f"r_{other}_{case.name}_{dtype}_{combine}", _plan(case, dtype, combine, other)))
    return items


@pytest.fixture(scope="module")
def items():
    return sample()


def test_sample_covers_the_brief(items):
    plans = [p for _, p in items]
    assert {(p.dtype, p.combine) for p in plans} == set(COMBOS)
    assert {p.strategy for p in plans} == {"registers", "shuffle", "smem"}
    assert {(p.target, p.warp_size) for p in plans} == {("cuda", 32), ("hip", 64), ("hip", 32)}
    assert any(p.arch == "sm_90a" for p in plans) and any(p.smem_bytes and p.target == "hip" for p in plans)
    assert any(len(p.dims) == 2 for p in plans)
    # both forms of the warp stage, on CUDA and HIP (wave64 and wave32), a share of more than one output
    forms = {(p.warps.spread, p.target, p.warp_size) for p in plans if p.warps is not None}
    assert forms == {(s, t, n) for s in (False, True) for t, n in (("cuda", 32), ("hip", 64), ("hip", 32))}, forms
    assert any(p.warps.spread and p.warps.outputs > p.warps.stride for p in plans if p.warps is not None)
    assert any(p.warps.spread and p.warps.outputs < p.warps.stride for p in plans if p.warps is not None)
    assert any(p.warps.spread and p.warps.outputs == p.warps.stride for p in plans if p.warps is not None)
    for want in ("wgmma_rows", "blocked_rows", "blocked_cols", "mma_v2_rows", "slice_of_3d", "blocked_wave64_rows",
                 "blocked_small_bcast"):
        assert any(n.startswith(f"r_{want}_") for n, _ in items), want


# ------------------------------------------------------------------ the text
def _reduce_body(text: str) -> str:
    start = text.index("__device__ __forceinline__ void reduce(")
    return text[start:text.index("\n}\n", start)]


def _wrappers(p):
    """The instruction records (``emit/instructions.py``) the plan's header must define: the CUDA
    vector accesses of the warp stage (``WarpStage.vectors`` wider than one element), a named barrier."""
    from ll_codegen.emit.instructions import BAR_SYNC, memory
    w = p.warps
    out = [BAR_SYNC] if w is not None and w.named_barrier is not None else []
    if w is not None and w.vec > 1 and p.target == "cuda":
        out += [memory(op, nbytes=w.vec * p.elem_bytes) for op in ("st_shared", "ld_shared")]
    return out


def test_header_states_and_does_the_plan(items):
    for name, p in items:
        text = render(p, "header", name, command="llgen reduce ...")
        assert f"namespace {name} {{" in text and "Command: llgen reduce ..." in text
        assert f"reduce {p.combine} over dim(s)" in text and "Result layout, the slice of dim(s)" in text
        for k, v in (("kSrcRegs", p.n_src), ("kDstRegs", p.n_dst), ("kSmemBytes", p.smem_bytes),
                     ("kThreads", p.threads), ("kWarpSize", p.warp_size), ("kElemBytes", p.elem_bytes)):
            assert re.search(rf"constexpr int {k} += {v};", text), (name, k)
        assert "src_index(int reg, int lane, int warp)" in text and "dst_index(int reg, int lane, int warp)" in text
        assert f"template <class T, class Op = {p.combine.capitalize()}>" in text
        includes = set(re.findall(r"#include <([^>]+)>", text))
        assert includes <= INCLUDES[p.target], (name, includes)
        # inline asm only in the instruction wrappers (emit/instructions.py): the vector accesses, a named barrier
        want_asm = [line for ins in _wrappers(p) for line in ins.device]
        assert re.findall(r"asm volatile\(.*\);", re.sub(r"//.*", "", text)) == want_asm, name
        body = _reduce_body(text)
        # in-thread trees: every group's source registers in the plan's order, then its destination
        assert [int(r) for r in re.findall(r"\bsrc\[(\d+)\]", body)] == [r for g in p.groups for r in g.srcs], name
        finals = re.findall(r"\bdst\[(\d+)\] = (?:op\(t0, t\d+\)|t0|src\[\d+\]);", body)
        assert [int(d) for d in finals[:len(p.groups)]] == [g.dst for g in p.groups], name
        # lane rounds: one shuffle per round and result register, the plan's masks in order
        masks = [int(m, 16) for m in re.findall(r"shfl_xor\(dst\[\d+\], (0x[0-9a-f]+)\)", body)]
        assert masks == [m for m in p.lane_xors for _ in range(p.n_dst)], name
        intrinsic = "__shfl_xor_sync(0xffffffffu, w, mask)" if p.target == "cuda" else "__shfl_xor(w, mask)"
        assert intrinsic in text
        # the warp stage: two barriers (three in the spread form), n_dst guarded stores, parts loads per
        # register (direct) or parts loads and a store per output of the thread's share, then n_dst loads
        # (spread), after the rounds
        w = p.warps
        assert body.count("__syncthreads()") == (w.barriers if w is not None else 0), name
        n_st = body.count("detail::st(") + body.count("detail::st_shared_")
        n_ld = body.count("detail::ld(") + body.count("detail::ld_shared_")
        if w is not None:
            # one access per vector group, its registers in the group's element order
            n = len(w.vectors)
            assert sorted(j for g in w.vectors for j in g) == list(range(p.n_dst))
            stores = body[body.index("// one writer per output element and partial"):
                          body.index("__syncthreads();  // every partial stored")]
            regs = [int(j) for j in re.findall(r"dst\[(\d+)\]", stores)]
            assert regs == [j for g in w.vectors for j in g], (name, regs)
            call = ("detail::st(scratch" if w.vec == 1 else "detail::st(reinterpret_cast<" if p.target == "hip"
                    else f"detail::{_wrappers(p)[-2].name}<0>(detail::smem_u32(scratch")
            assert stores.count(call) == n, (name, call)
        if w is not None and not w.spread:
            assert n_st == n and n_ld == n * w.parts, name
        if w is not None and w.spread:
            assert n_st == n + 1 and n_ld == w.parts + n, name
            loop = (f"for (unsigned o = static_cast<unsigned>(tid); o < {w.outputs}u; o += {w.stride}u) {{"
                    if w.outputs > w.stride else "{  // output o = tid" if w.outputs == w.stride else
                    f"if (static_cast<unsigned>(tid) < {w.outputs}u) {{  // output o = tid")
            assert loop in body, name
            combine = body[body.index(loop):body.index("__syncthreads();  // every result stored")]
            assert body.index("__syncthreads();  // every partial stored") < body.index(loop), name
            assert re.findall(r"detail::ld\(scratch \+ (?:(\d+) \+ )?o\)", combine) == \
                [str(q * w.outputs) if q else "" for q in range(w.parts)], name
            assert "detail::st(scratch + o, r);" in combine and w.results == 0
            after = body[body.index("__syncthreads();  // every result stored"):]
            assert after.count("(scratch + e") == n and "detail::st(" not in after
            assert "Barriers: 3 __syncthreads()" in text
        elif w is not None:
            assert "Barriers: 2 __syncthreads()" in text
        if w is not None:
            assert body.index("__syncthreads()") > max([body.rfind("shfl_xor")] + [0])
            assert f"scratch + {w.outputs}" in body or w.parts == 1
        else:
            assert "(void)smem;" in body and "(void)tid;" in body
        bc = re.findall(r"out\[(\d+)\] = red\[(\d+)\];", text)
        assert [(int(r), int(j)) for r, j in bc] == list(enumerate(p.dst_of_src)), name


def test_rendering_is_deterministic(items):
    for name, p in items[:6]:
        for kind in ("header", "harness"):
            assert render(p, kind, name) == render(p, kind, name)


def test_harness_follows_the_data_contract(items):
    for name, p in items:
        text = render(p, "harness", name)
        raw = {2: "uint16_t", 4: "uint32_t"}[p.elem_bytes]
        assert re.search(rf'extern "C" __global__ void __launch_bounds__\({name}::kThreads\)\n{name}_harness\('
                         rf"const {raw}\* __restrict__ in, {raw}\* __restrict__ out, {raw}\* __restrict__ regs,\s*"
                         rf"{raw}\* __restrict__ back\)", text), name
        t = {"f32": "float", "i32": "int32_t", "f16": "__half",
             "bf16": "__nv_bfloat16" if p.target == "cuda" else "hip_bfloat16"}[p.dtype]
        assert f"using T = {t};" in text
        for line in (f"{name}::reduce(src, dst, smem);", f"d[tid * {name}::kDstRegs + i] = dst[i];",
                     f"y[{name}::dst_index(i, lane, warp)] = dst[i];", f"{name}::broadcast(dst, bc);",
                     f"b[tid * {name}::kSrcRegs + r] = bc[r];"):
            assert line in text, (name, line)


# ------------------------------------------------------------------ compilers
def _write(tmp, items, target: str, per_tu: int = 12) -> list[str]:
    mine = [(n, p) for n, p in items if p.target == target]
    tus = []
    for k in range(0, len(mine), per_tu):
        for n, p in mine[k:k + per_tu]:
            write_files(p, str(tmp), n)
        tu = f"tu{k // per_tu}.{'cu' if target == 'cuda' else 'hip'}"
        with open(os.path.join(tmp, tu), "w") as fh:
            fh.writelines(f'#include "{file_names(target, n)["harness"]}"\n' for n, _ in mine[k:k + per_tu])
        tus.append(tu)
    return tus


@pytest.mark.compile
def test_cuda_compiles(items, tmp_path):
    """Every CUDA harness for sm_80 and sm_90a.  sm_90's device pass differs from sm_90a's only by the
    arch-specific feature macros (``instructions.FEATURE_MACROS``), which no reduce header tests: it
    would compile the same text."""
    nvcc = need("nvcc")
    jobs = []
    tus = _write(tmp_path, items, "cuda")
    text = "".join(p.read_text() for p in tmp_path.iterdir() if p.suffix in (".cuh", ".cu"))
    assert not any(m in text for m in FEATURE_MACROS.values()), "a reduce header tests an arch feature"
    for tu in tus:
        for flags in (["-arch=sm_80"], ["-arch=sm_90a"]):
            jobs.append((f"{tu} {flags[0]}", [nvcc, "-std=c++17", *flags, "-cubin", "-o",
                                               f"{tu}.{flags[0][6:]}.cubin", tu]))
    bad = failures(run_all(jobs, str(tmp_path)))
    assert not bad, f"{len(bad)} of {len(jobs)} nvcc runs failed or warned; first:\n{bad[0][:3000]}"


@pytest.mark.compile
def test_hip_compiles(items, tmp_path):
    hipcc = need("hipcc")
    jobs = []
    for wave, arch in ((64, "gfx90a"), (32, "gfx1030")):
        sub = tmp_path / arch
        sub.mkdir()
        for tu in _write(sub, [(n, p) for n, p in items if p.warp_size == wave], "hip"):
            jobs.append((f"{arch}/{tu}", [hipcc, f"--offload-arch={arch}", "--genco", "-o", f"{arch}/{tu}.co",
                                          f"{arch}/{tu}"]))
    assert jobs
    bad = failures(run_all(jobs, str(tmp_path), HIP_ENV))
    assert not bad, f"{len(bad)} of {len(jobs)} hipcc runs failed or warned; first:\n{bad[0][:3000]}"


def _host_or_skip():
    if host.compiler() is None:
        if os.environ.get("LLGEN_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail("LLGEN_REQUIRE_TOOLCHAINS=1 but no clang++ for the host SIMT runtime", pytrace=False)
        pytest.skip("no clang++ for the host SIMT runtime (apt-get install clang)")


@pytest.mark.compile
def test_host_runs_bit_exact(items):
    _host_or_skip()
    results = host.verify_host(items, seed=20261202)
    bad = [r.message for r in results if not r.ok]
    assert not bad, f"{len(bad)} of {len(items)} failed; first: {bad[0]}"


@pytest.mark.compile
def test_host_run_catches_a_wrong_shuffle_mask():
    """A lane round over a kept lane bit instead of a reduced one (and a round dropped) is caught."""
    _host_or_skip()
    good = plan_reduce(WGMMA, 1, "sum", "f32", "cuda", "sm_90a")
    assert good.lane_xors == (1, 2)
    wrong = replace(good, lane_xors=(1, 4))
    dropped = replace(good, lane_xors=(1,))
    results = host.verify_host([("mut_ok", good), ("mut_mask", wrong), ("mut_drop", dropped)], seed=3)
    assert [r.ok for r in results] == [True, False, False], [r.message for r in results]
    assert "result register" in results[1].message


# ------------------------------------------------------------------ the command
def _run(args):
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    return runner.invoke(cli.main, [str(a) for a in args], catch_exceptions=False)


def test_cli_writes_header_and_harness(tmp_path):
    r = _run(["reduce", "--src", WGMMA, "--dim", "1", "--op", "max", "--dtype", "f32", "--arch", "sm_90a",
              "-o", tmp_path])
    assert r.exit_code == 0, r.stderr
    names = ["wgmma_128x128_max1.cuh", "wgmma_128x128_max1_harness.cu"]
    assert r.stdout.splitlines() == [str(tmp_path / n) for n in names]
    assert sorted(os.listdir(tmp_path)) == names
    text = (tmp_path / names[0]).read_text()
    assert f"// Command: llgen reduce --src {WGMMA} --dim 1 --op max --dtype f32 --target cuda --arch sm_90a\n" in text
    assert "template <class T, class Op = Max>" in text


def test_cli_dims_comma_list_name_and_hip(tmp_path):
    r = _run(["reduce", "--src", WAVE64, "--dim", "1", "--op", "min", "--dtype", "bf16", "--target", "hip",
              "--name", "rowmin", "-o", tmp_path])
    assert r.exit_code == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["rowmin.h", "rowmin_harness.hip"]
    g = reduce_files(MMA, [0], "sum", "f16")
    assert g.command == f"llgen reduce --src {MMA} --dim 0 --op sum --dtype f16 --target cuda --arch sm_90"
    assert g.name == "mma_v2_64x64_sum0"


def test_cli_plan_and_json():
    r = _run(["reduce", "--src", MMA, "--dim", "0", "--plan"])
    assert r.exit_code == 0 and r.stdout.startswith("reduce sum over dim(s) 0: smem  (f32, cuda sm_90")
    assert "lane xor 0x4, 0x8, 0x10" in r.stdout and "candidates" in r.stdout
    r = _run(["reduce", "--src", MMA, "--dim", "0", "--plan", "--json"])
    d = json.loads(r.stdout)
    assert d["operation"] == "reduce" and d["dims"] == [0] and d["lane_xors"] == [4, 8, 16]


def _one_error_line(r, *fragments) -> str:
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    err = r.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith("llgen: error: "), r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr
    for f in fragments:
        assert f in err[0], (f, err[0])
    return err[0]


@pytest.mark.parametrize("args, fragments", [
    (["--src", MMA, "--dim", "x"], ("--dim 'x'", "an integer")),
    (["--src", MMA, "--dim", "2"], ("--dim", "rank-2")),
    (["--src", MMA, "--dim", "0,1"], ("keeps at least one dim",)),
    (["--src", MMA, "--dim", "0", "--dim", "0"], ("distinct",)),
    (["--src", MMA, "--dim", "0", "--op", "prod"], ("--op", "prod")),
    (["--src", MMA, "--dim", "0", "--dtype", "f64"], ("--dtype",)),
    (["--src", SHARED, "--dim", "0"], ("memory",)),
    (["--src", MMA, "--dim", "0", "--target", "hip"], ("32 lanes", "warp size 64")),
    (["--src", WAVE64, "--dim", "0"], ("64 lanes", "warp size 32")),
    (["--src", MMA], ("missing option --dim",)),
    (["--dim", "0"], ("missing option --src",)),
    (["--src", MMA, "--dim", "0", "--emit", "bench"], ("no bench",)),
    (["--src", MMA, "--dim", "0", "--json"], ("--json needs --plan",)),
])
def test_cli_errors_are_one_line_and_write_nothing(tmp_path, args, fragments):
    out = tmp_path / "out"
    _one_error_line(_run(["reduce", *args, "-o", out]), *fragments)
    assert not out.exists()
