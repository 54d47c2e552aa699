"""``llgen plan``, ``llgen convert``, ``llgen verify`` (its input checks), the
Python API (``ll_codegen.plan_conversion``, ``Transfer.render/write``)
and ``llgen regenerate`` / ``python -m ll_codegen.regenerate`` (reproduces ``generated/`` byte for
byte: the CI diff check).  CPU only and fast."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import cli  # noqa: E402
from ll_codegen import Transfer, LinearLayout, load_spec, plan_conversion  # noqa: E402
from ll_codegen.api import default_name, parse_emit  # noqa: E402

S = "examples/specs/"
ROW, COL = S + "blocked_row_64x64.yaml", S + "blocked_col_64x64.yaml"
MMA22, MMA41 = S + "mma_v2_2x2_64x64.yaml", S + "mma_v2_4x1_64x64.yaml"
STORE = S + "blocked_store_64x64.yaml"
PAIRS = {  # strategy -> (src, dst, dtype, extra args)
    "smem": (ROW, MMA22, "f16", []),
    "shuffle": (MMA41, S + "dot_a_4x1_kw4_64x64.yaml", "f8e4m3", []),
    "register": (S + "blocked_row4_64x64.yaml", S + "regperm_64x64.yaml", "bf16", []),
    "noop": (MMA41, S + "dot_a_4x1_kw2_64x64.yaml", "f16", ["--arch", "sm_80"]),
}


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def _runner():
    try:  # click < 8.2 mixes stderr into stdout unless told not to
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def _run(args):
    return _runner().invoke(cli.main, [str(a) for a in args], catch_exceptions=False)


def _one_error_line(r, *fragments):
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("llgen: error: "), r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    for f in fragments:
        assert f in err[0], (f, err[0])
    return err[0]


# --------------------------------------------------------------------- plan
def test_plan_text_smem():
    r = _run(["plan", "--src", ROW, "--dst", MMA22, "--dtype", "f16"])
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert out.startswith("strategy: smem")
    for frag in ("smem: 8192 bytes", "vector width 16 B", "offset bases", "store:", "load:",
                 "wavefronts/instr", "bank conflicts/instr", "candidate*smem"):
        assert frag in out, frag
    assert sum(line.startswith("candidate") for line in out.splitlines()) >= 2
    assert all(" score " in line for line in out.splitlines() if line.startswith("candidate"))


def test_plan_text_shuffle_register_noop():
    src, dst, dt, extra = PAIRS["shuffle"]
    out = _run(["plan", "--src", src, "--dst", dst, "--dtype", dt, "--strategy", "shuffle", *extra]).stdout
    assert out.startswith("strategy: shuffle") and "shuffle: 8 rounds" in out and "round 7: send src" in out
    src, dst, dt, extra = PAIRS["register"]
    out = _run(["plan", "--src", src, "--dst", dst, "--dtype", dt, *extra]).stdout
    assert out.startswith("strategy: register") and "registers: dst[i] = src[" in out
    src, dst, dt, extra = PAIRS["noop"]
    out = _run(["plan", "--src", src, "--dst", dst, "--dtype", dt, *extra]).stdout
    assert out.startswith("strategy: noop")


@pytest.mark.parametrize("strategy", sorted(PAIRS))
def test_plan_json_keys(strategy):
    src, dst, dt, extra = PAIRS[strategy]
    r = _run(["plan", "--src", src, "--dst", dst, "--dtype", dt, "--json", *extra])
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["strategy"] == strategy
    assert "shuffle" in d and "smem" in d and "candidates" in d
    if strategy == "shuffle":
        assert isinstance(d["shuffle"]["rounds"], list) and d["shuffle"]["rounds"]
    else:
        assert d["shuffle"] is None
    if strategy == "smem":
        m = d["smem"]
        assert m["bytes"] == 8192 and m["vector_bytes"] == 16
        for side in ("store", "load"):
            assert set(m[side]) >= {"wavefronts", "bank_conflicts"}
            assert m[side]["bank_conflicts"] == 0
    else:
        assert d["smem"] is None


def test_plan_options_change_the_plan():
    base = json.loads(_run(["plan", "--src", MMA22, "--dst", STORE, "--dtype", "f32", "--json"]).stdout)
    small = json.loads(_run(["plan", "--src", MMA22, "--dst", STORE, "--dtype", "f32", "--json",
                             "--smem-budget", "4096"]).stdout)
    assert len(base["smem"]["rounds"]) == 1 and len(small["smem"]["rounds"]) == 4 and small["smem"]["bytes"] == 4096
    ns = json.loads(_run(["plan", "--src", ROW, "--dst", COL, "--dtype", "i8", "--json", "--swizzle", "none",
                          "--arch", "sm_80"]).stdout)
    assert ns["smem"]["swizzle"] == "none" and ns["smem"]["load"]["bank_conflicts"] > 0
    hip = json.loads(_run(["plan", "--src", S + "wmma_2x2_32x32.yaml", "--dst", S + "blocked_wave32_32x32.yaml",
                           "--target", "hip", "--arch", "gfx1030", "--json"]).stdout)
    assert (hip["target"], hip["arch"], hip["warp_size"]) == ("hip", "gfx1030", 32)
    forced = json.loads(_run(["plan", "--src", PAIRS["shuffle"][0], "--dst", PAIRS["shuffle"][1], "--dtype", "f8e4m3", "--strategy", "smem",
                              "--json"]).stdout)
    assert forced["strategy"] == "smem"
    shaped = json.loads(_run(["plan", "--src", ROW, "--dst", COL, "--shape", "32,32", "--json"]).stdout)
    assert shaped["shape"] == [32, 32]


# ------------------------------------------------------------------ convert
def _header_of(paths):
    return next(p for p in paths if p.endswith((".cuh", ".h")))


def test_convert_writes_printed_paths_byte_identical(tmp_path):
    args = ["convert", "--src", ROW, "--dst", MMA22, "--dtype", "f16"]
    a, b = tmp_path / "a", tmp_path / "deeper" / "b"
    ra, rb = _run(args + ["-o", a]), _run(args + ["-o", b, "--emit", "harness,header"])
    assert ra.exit_code == rb.exit_code == 0, (ra.stderr, rb.stderr)
    pa, pb = ra.stdout.splitlines(), rb.stdout.splitlines()
    assert [os.path.basename(p) for p in pa] == ["blocked_row_64x64_to_mma_v2_2x2_64x64.cuh",
                                                "blocked_row_64x64_to_mma_v2_2x2_64x64_harness.cu"]
    assert [os.path.basename(p) for p in pa] == [os.path.basename(p) for p in pb]
    assert sorted(os.listdir(a)) == sorted(os.path.basename(p) for p in pa)
    for p, q in zip(pa, pb):
        assert os.path.isfile(p) and open(p, "rb").read() == open(q, "rb").read()
    ra2 = _run(args + ["-o", a])
    assert ra2.stdout == ra.stdout
    for p in pa:
        assert open(p, "rb").read() == open(p.replace(str(a), str(b)), "rb").read()
    head = open(_header_of(pa)).read().splitlines()
    assert head[1] == ("// Command: llgen convert --src examples/specs/blocked_row_64x64.yaml "
                       "--dst examples/specs/mma_v2_2x2_64x64.yaml --dtype f16 --target cuda --arch sm_90")
    text = "\n".join(head[:80])
    assert "Source layout" in text and "Destination layout" in text and "register=1 -> " in text
    assert "nvidia_mma version=[2, 0]" in text and "bank conflicts" in text


def test_convert_default_dir_name_and_emit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = _run(["convert", "--src", os.path.join(ROOT, ROW), "--dst", os.path.join(ROOT, COL), "--emit", "all",
              "--name", "tr", "--target", "cuda", "--arch", "sm_80"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == [os.path.join(".", f) for f in ("tr.cuh", "tr_harness.cu", "tr_bench.cu")]
    assert sorted(os.listdir(tmp_path)) == ["tr.cuh", "tr_bench.cu", "tr_harness.cu"]
    assert "namespace tr {" in open("tr.cuh").read() and "tr_back" in open("tr_bench.cu").read()
    r = _run(["convert", "--src", os.path.join(ROOT, S + "wmma_2x2_32x32.yaml"),
              "--dst", os.path.join(ROOT, S + "blocked_wave32_32x32.yaml"), "--target", "hip", "--arch", "gfx1030",
              "-o", "hip", "--emit", "header", "--emit", "bench"])
    assert r.exit_code == 0, r.stderr
    assert [os.path.basename(p) for p in r.stdout.splitlines()] == [
        "wmma_2x2_32x32_to_blocked_wave32_32x32.h", "wmma_2x2_32x32_to_blocked_wave32_32x32_bench.hip"]
    assert "hip/hip_runtime.h" in open(r.stdout.splitlines()[0]).read()


def test_default_name_and_emit_parsing():
    assert default_name("a/b-c.d.yaml", "x/1st.yaml") == "b_c_d_to_1st"
    assert default_name("9x.yaml", "y.yaml") == "cvt_9x_to_y"
    assert parse_emit(None) == ("header", "harness")
    assert parse_emit(["bench", "header"]) == ("header", "bench")
    assert parse_emit(["all"]) == ("header", "harness", "bench")
    with pytest.raises(ValueError, match="unknown kind"):
        parse_emit(["headers"])


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


BLOCKED_8W = """kind: blocked
size_per_thread: [1, 4]
threads_per_warp: [4, 8]
warps_per_cta: [8, 1]
order: [1, 0]
shape: [64, 64]
"""

BAD_CASES = {
    # id: (args after src/dst, src, dst, fragments of the message)
    "name_not_identifier": (["--name", "my-cvt"], ROW, COL, ["not a C identifier"]),
    "name_starts_with_digit": (["--name", "1cvt"], ROW, COL, ["not a C identifier"]),
    "name_keyword": (["--name", "namespace"], ROW, COL, ["keyword"]),
    "name_builtin": (["--name", "threadIdx"], ROW, COL, ["built-in"]),
    "name_type": (["--name", "uint32_t"], ROW, COL, ["standard type"]),
    "name_generated": (["--name", "convert"], ROW, COL, ["generated code uses"]),
    "name_reserved": (["--name", "__device__"], ROW, COL, ["reserved for the compiler"]),
    "name_reserved_capital": (["--name", "_Foo"], ROW, COL, ["reserved for the compiler"]),
    "shapes_differ": ([], "examples/slice_64.yaml", MMA22, ["shapes differ"]),
    "shape_override_bad": (["--shape", "48,64"], ROW, COL, ["--shape", "power of two"]),
    "warp_counts_differ": ([], "@8warps", MMA22, ["warp counts differ"]),
    "warp_size_vs_target_cuda": ([], S + "mfma_32x32_2x2_64x64.yaml", S + "blocked_wave64_64x64.yaml",
                                 ["64 lanes", "warp size 32"]),
    "warp_size_vs_target_hip": (["--target", "hip"], ROW, COL, ["32 lanes", "gfx90a", "warp size 64"]),
    "memory_both": ([], "examples/nvmma_shared_64x64.yaml", "examples/global_64x64.yaml",
                    ["both layouts are memory layouts", "shared -> global"]),
    "copy_strategy": (["--strategy", "smem"], "examples/global_64x64.yaml", "examples/nvmma_shared_64x64.yaml",
                      ["strategy smem does not apply", "copy"]),
    "copy_warps": (["--warps", "3"], "examples/global_64x64.yaml", "examples/nvmma_shared_64x64.yaml",
                   ["--warps 3", "power of two"]),
    "warps_not_copy": (["--warps", "4"], ROW, COL, ["--warps", "copy"]),
    "memory_dtype_width": (["--dtype", "f32"], ROW, "examples/nvmma_shared_64x64.yaml",
                           ["16-bit elements", "f32"]),
    "memory_strategy": (["--strategy", "load"], ROW, "examples/swizzled_shared_64x64.yaml",
                        ["strategy load does not apply", "store"]),
    "memory_swizzle": (["--swizzle", "none"], "examples/swizzled_shared_64x64.yaml", ROW, ["--swizzle", "given"]),
    "memory_shape": ([], ROW, "examples/cute_128x64.yaml", ["shapes differ"]),
    "stride_not_global": (["--stride", "72,1"], ROW, COL, ["--stride", "global"]),
    "stride_bad": (["--stride", "72,x"], ROW, "examples/global_64x64.yaml", ["--stride", "positive integers"]),
    "stride_contiguous": (["--stride", "72,2"], ROW, "examples/global_64x64.yaml", ["1 for the contiguous dim"]),
    "stride_unaligned": (["--stride", "68,1", "--dtype", "f16"], ROW, "examples/global_64x64.yaml",
                         ["not multiples of the alignment"]),
    "unknown_dtype": (["--dtype", "f17"], ROW, COL, ["--dtype", "'f17' is not one of", "'f16'"]),
    "illegal_register": (["--strategy", "register"], ROW, COL, ["strategy register is illegal"]),
    "illegal_noop": (["--strategy", "noop"], ROW, COL, ["strategy noop is illegal"]),
    "illegal_shuffle": (["--strategy", "shuffle"], ROW, MMA22, ["illegal"]),
    "unknown_strategy": (["--strategy", "fast"], ROW, COL, ["--strategy", "'fast' is not one of", "'smem'"]),
    "unknown_target": (["--target", "metal"], ROW, COL, ["--target", "'metal' is not one of 'cuda', 'hip'"]),
    "unknown_arch": (["--arch", "sm_70"], ROW, COL, ["--arch", "'sm_70' is not one of", "'sm_90'"]),
    "arch_of_other_target": (["--arch", "gfx90a"], ROW, COL, ["unknown CUDA arch 'gfx90a'"]),
    "unknown_swizzle": (["--swizzle", "xor"], ROW, COL, ["--swizzle", "'xor' is not one of 'optimal', 'none'"]),
    "bad_budget": (["--smem-budget", "0"], ROW, COL, ["budget"]),
    "missing_spec": ([], "examples/nope.yaml", COL, ["examples/nope.yaml", "cannot read"]),
    "bad_spec": ([], "examples/bad/bad_parent.yaml", COL, ["parent.warps_per_cta"]),
}


@pytest.mark.parametrize("command", ["plan", "convert"])
@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, command, case):
    extra, src, dst, frags = BAD_CASES[case]
    if src == "@8warps":
        src = _write(tmp_path, "blocked_8warps.yaml", BLOCKED_8W)
    if command == "plan" and case.startswith("name_"):
        pytest.skip("--name is a convert option")
    out = tmp_path / "out"
    args = [command, "--src", src, "--dst", dst, *extra] + (["-o", out, "--emit", "all"] if command == "convert" else [])
    r = _run(args)
    _one_error_line(r, *frags)
    assert r.stdout == ""
    assert not out.exists()


def test_bad_input_subprocess_no_traceback(tmp_path):
    """The real entry point: one line on stderr, exit 2, nothing written."""
    out = tmp_path / "o"
    p = subprocess.run([sys.executable, "cli.py", "convert", "--src", ROW, "--dst", COL, "--strategy", "register",
                        "-o", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("llgen: error: strategy register is illegal")
    assert not out.exists()


def test_missing_src_is_an_error():
    _one_error_line(_run(["plan", "--dst", COL]), "--src")
    _one_error_line(_run(["convert", "--src", ROW]), "--dst")


# ------------------------------------------------------------------- verify
CORPUS_BAD = {
    "not_a_list": ("src: a.yaml\n", ["top level", "list"]),
    "empty": ("[]\n", ["top level"]),
    "entry_not_mapping": ("- 3\n", ["entry 1", "mapping"]),
    "missing_dst": (f"- src: {ROOT}/{ROW}\n", ["entry 1.dst", "missing"]),
    "unknown_field": (f"- src: {ROOT}/{ROW}\n  dst: {ROOT}/{COL}\n  dtype_list: [f16]\n", ["entry 1.dtype_list"]),
    "bad_dtype": (f"- src: {ROOT}/{ROW}\n  dst: {ROOT}/{COL}\n  dtypes: [f16, f99]\n", ["entry 1.dtypes", "f99"]),
    "dtypes_not_list": (f"- src: {ROOT}/{ROW}\n  dst: {ROOT}/{COL}\n  dtypes: {{a: 1}}\n", ["entry 1.dtypes"]),
    "bad_name": (f"- src: {ROOT}/{ROW}\n  dst: {ROOT}/{COL}\n  name: two words\n", ["entry 1.name"]),
    "missing_spec_file": ("- src: nowhere.yaml\n  dst: nowhere.yaml\n", ["nowhere.yaml", "cannot read"]),
    "bad_inline_spec": (f"- src: {{kind: blocked}}\n  dst: {ROOT}/{COL}\n", ["entry 1.src", "missing"]),
    "memory_layout": (f"- src: {ROOT}/examples/swizzled_shared_64x64.yaml\n  dst: {ROOT}/{COL}\n",
                      ["entry 1.src", "memory layout"]),
    "unknown_strategy": (f"- src: {ROOT}/{ROW}\n  dst: {ROOT}/{COL}\n- src: {ROOT}/{ROW}\n  dst: {ROOT}/{COL}\n"
                         f"  strategy: shufle\n", ["entry 2.strategy", "unknown strategy"]),
    "unknown_arch": (f"- src: {ROOT}/{ROW}\n  dst: {ROOT}/{COL}\n  target: hip\n  arch: sm_90\n",
                     ["entry 1.arch", "unknown HIP arch"]),
    "malformed_yaml": ("- src: [a\n", ["line", "malformed YAML"]),
}


@pytest.mark.parametrize("case", sorted(CORPUS_BAD))
def test_verify_corpus_errors(tmp_path, case):
    text, frags = CORPUS_BAD[case]
    path = _write(tmp_path, "corpus.yaml", text)
    _one_error_line(_run(["verify", "--corpus", path]), "corpus.yaml" if case != "missing_spec_file" else "", *frags)


def test_verify_corpus_example_is_valid():
    from ll_codegen.jobs import load_corpus, plan_jobs
    jobs = load_corpus(os.path.join(ROOT, "examples", "verify", "corpus.yaml"))
    rows = plan_jobs(jobs)
    assert len(jobs) >= 10 and {p.strategy for _, _, p in rows} == {"noop", "register", "shuffle", "smem", "shuffle+smem"}
    assert any(p.operation == "convert" and p.smem is not None and len(p.smem.rounds) > 1 for _, _, p in rows)


def test_verify_usage_errors():
    _one_error_line(_run(["verify", "--corpus", "examples/verify/corpus.yaml", "--src", ROW]), "not both")
    _one_error_line(_run(["verify", "--src", ROW, "--dst", COL, "--dtype", "f16,q3"]), "--dtype", "'q3' is not one of")


def test_verify_without_gpu_says_why():
    from ll_codegen.run import gpu
    reason = gpu.available()
    if reason is None:
        pytest.skip("a GPU is present: llgen verify would run")
    for args in (["verify", "--src", ROW, "--dst", COL, "--dtype", "f16,f32"],
                 ["verify", "--corpus", "examples/verify/corpus.yaml"]):
        line = _one_error_line(_run(args), "cannot verify: ")
        assert line == f"llgen: error: cannot verify: {reason} (--host runs on the CPU)"


def test_verify_on_the_host_without_clang_says_why(monkeypatch):
    """No clang++: one error line and status 2, not a table of FAIL rows (the row count once said
    they had "passed or skipped")."""
    from ll_codegen.run import host
    monkeypatch.setattr(host, "compiler", lambda: None)
    for args in (["verify", "--host", "--src", ROW, "--dst", COL], ["verify", "--src", ROW, "--dst", COL,
                                                                     "--target", "hip", "--arch", "gfx1030"]):
        line = _one_error_line(_run(args), "cannot verify: ")
        assert line == ("llgen: error: cannot verify: the host SIMT runtime (HIP rows, --host) needs clang++ "
                        "(apt-get install clang)")


def test_bench_checks_inputs_then_says_why_without_gpu():
    from ll_codegen.run import gpu
    _one_error_line(_run(["bench", "--src", ROW, "--dst", "examples/slice_64.yaml"]), "shapes differ")
    _one_error_line(_run(["bench", "--src", ROW, "--dst", COL, "--iters", "0"]), "--iters")
    reason = gpu.available()
    if reason is None:
        pytest.skip("a GPU is present: llgen bench would run")
    line = _one_error_line(_run(["bench", "--src", ROW, "--dst", COL]), "cannot bench: ")
    assert line == f"llgen: error: cannot bench: {reason}"


# --------------------------------------------------------------- Python API
def test_python_api_accepts_specs_paths_and_layouts(tmp_path):
    a, b = load_spec(ROW), load_spec(MMA22)
    from ll_codegen.spec import parse_yaml
    d = parse_yaml(open(MMA22).read(), MMA22)
    p1 = plan_conversion(ROW, MMA22, dtype="f16")
    p2 = plan_conversion(a.linear, b.linear, dtype="f16")
    p3 = plan_conversion(a, d, dtype="f16")
    assert isinstance(p1, Transfer) and isinstance(a.linear, LinearLayout)
    assert p1 == p2 == p3 and p1.to_json() == p3.to_json()
    assert p1.summary().startswith("strategy: smem")
    header = p1.render("header", name="cvt")
    assert "namespace cvt {" in header and "Command: (library call)" in header
    assert p1.render(kind="header", name="cvt") == header
    assert "cvt_back" in p1.render("bench", name="cvt")
    paths = p1.write(str(tmp_path / "w"), name="cvt", emit="all")
    assert [os.path.basename(x) for x in paths] == ["cvt.cuh", "cvt_harness.cu", "cvt_bench.cu"]
    assert open(paths[0]).read() == header
    with pytest.raises(ValueError, match="keyword"):
        p1.render("header", name="int")
    with pytest.raises(ValueError, match="memory"):
        plan_conversion("examples/swizzled_shared_64x64.yaml", "examples/global_64x64.yaml")


# -------------------------------------------------------------- generated/
# the manifest's entries and files: tests/conftest.py's ``manifest_build``
def test_regenerate_reproduces_generated_byte_for_byte(manifest_build):
    """The files ``llgen regenerate`` writes for the manifest -- ``regenerate.build``'s, which the command
    writes as they are (run from the command line, writing, by test_regenerate_only_writes_the_matching_entries
    and tests/test_cli_output.py) -- are generated/, byte for byte, and nothing else is there."""
    files = manifest_build[1]
    gen = os.path.join(ROOT, "generated")
    want = sorted(f for f in os.listdir(gen) if f != "manifest.yaml")
    assert sorted(files) == want, "generated/ is stale: run python -m ll_codegen.regenerate"
    for f in want:
        assert open(os.path.join(gen, f), "rb").read() == files[f].encode("utf-8"), \
            f"generated/{f} is stale: run python -m ll_codegen.regenerate"


def test_regenerate_only_writes_the_matching_entries(tmp_path):
    """--only REGEX: the entries whose --name matches, into -o (the files generated/ holds for them,
    byte for byte, and the README); without -o, into the manifest's own folder, or matching nothing:
    one error line, exit 2, nothing written."""
    def llgen(*args):
        return subprocess.run([sys.executable, "-m", "ll_codegen", "regenerate", *args], cwd=ROOT,
                              capture_output=True, text=True)
    out = tmp_path / "rows"
    p = llgen("--only", "^attention_row_", "-o", str(out))
    assert p.returncode == 0, p.stderr
    made = sorted(os.listdir(out))
    assert made == ["README.md"] + sorted(f"attention_row_{op}{n}{ext}" for op in ("max", "sum") for n in ("", "_n64")
                                          for ext in (".cuh", "_harness.cu"))
    for f in made[1:]:
        assert (out / f).read_bytes() == open(os.path.join(ROOT, "generated", f), "rb").read(), f
    for args, fragment in ((("--only", "^attention_"), "give -o OUTDIR"),
                           (("--only", "x[", "-o", str(tmp_path / "a")), "not a regular expression"),
                           (("--only", "^nothing_", "-o", str(tmp_path / "b")), "no entry of")):
        p = llgen(*args)
        assert p.returncode == 2 and fragment in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_generated_coverage(manifest_build):
    entries, files = manifest_build
    gathers = {e.conv.name: e.conv.plan for e in entries if e.command == "gather"}
    assert {(p.strategy, p.target) for p in gathers.values()} >= {("shuffle", "cuda"), ("smem", "cuda"),
                                                                  ("smem", "hip")}
    mmas = {e.conv.name: e.conv.plan for e in entries if e.command == "mma"}
    assert {p.strategy for p in mmas.values()} == {"wgmma", "mma.sync", "mfma"}
    reduces = {e.conv.name: e.conv.plan for e in entries if e.command == "reduce"}
    assert {(p.strategy, p.target) for p in reduces.values()} >= {("shuffle", "cuda"), ("smem", "cuda"),
                                                                  ("shuffle", "hip")}
    chain_headers = sum(len(e.conv.plan.plans) + 1 for e in entries if e.command == "chain")  # steps, indices
    entries = [e for e in entries if e.command == "convert"]
    plans = {e.conv.name: e.conv.plan for e in entries}
    assert len(plans) >= 14 and sum(f.endswith((".cuh", ".h")) for f in files) == (
        len(plans) + len(gathers) + len(mmas) + len(reduces) + chain_headers)
    assert {p.strategy for p in plans.values()} == {"noop", "register", "shuffle", "smem", "shuffle+smem", "butterfly", "store",
                                                    "load", "copy", "tma", "relayout", "upcast"}
    assert {(p.memory.space, p.strategy) for p in plans.values() if p.operation in ("store", "load")} == {
        (sp, d) for sp in ("shared", "global") for d in ("store", "load")}
    assert {(p.target, p.arch) for p in plans.values()} >= {("cuda", "sm_90"), ("cuda", "sm_80"),
                                                             ("hip", "gfx90a"), ("hip", "gfx1030")}
    assert {p.elem_bytes for p in plans.values()} == {1, 2, 4, 8}
    assert any(p.operation == "convert" and p.smem is not None and p.arch == "sm_90" and "matrix" in (p.smem.store_instr + p.smem.load_instr)
               for p in plans.values())
    assert any(p.operation == "convert" and p.smem is not None and len(p.smem.rounds) > 1
               and p.smem.bytes < 48 * 1024 for p in plans.values())
    assert plans["flash_attn_acc_to_dot_a_f16"].strategy == "noop"
    assert plans["flash_attn_acc_to_dot_a_f8"].strategy == "shuffle"
    assert any(len(p.shape) == 1 for p in plans.values())          # slice layouts
    for e in entries:                      # header, harness and (register conversions) the bench
        assert len(e.conv.files) == (3 if e.conv.plan.operation == "convert" else 2)


def test_generated_mma_acc_to_blocked_contract(manifest_build):
    """The conversion the hand-written example kernel includes."""
    entries, files = manifest_build
    e = next(e for e in entries if e.conv.name == "mma_acc_to_blocked")
    p = e.conv.plan
    assert (p.dtype, p.target, p.arch, p.num_warps, p.shape) == ("f32", "cuda", "sm_80", 4, (64, 64))
    mma = load_spec(MMA41)
    blk = load_spec(STORE)
    assert mma.layout.warps_per_cta == (4, 1) or list(mma.layout.warps_per_cta) == [4, 1]
    assert list(blk.layout.size_per_thread) == [1, 4] and list(blk.layout.threads_per_warp) == [2, 16]
    assert e.params["src"] == MMA41 and e.params["dst"] == STORE
    assert set(e.conv.files) == {"mma_acc_to_blocked.cuh", "mma_acc_to_blocked_harness.cu",
                                 "mma_acc_to_blocked_bench.cu"}
    assert "README.md" in files and "`mma_acc_to_blocked`" in files["README.md"]


@pytest.mark.parametrize("args,frag", [
    (["plan", "--bogus"], "No such option '--bogus'"),
    (["nosuch"], "No such command 'nosuch'"),
    (["show"], "Missing argument 'SPEC'"),
    (["show", "examples"], "is a directory"),
    (["plan", "--smem-budget", "x", "--src", ROW, "--dst", COL], "'x' is not a valid integer"),
    (["convert", "--src", ROW, "--dst", COL, "-o", "README.md"], "is a file"),
])
def test_usage_errors_are_one_line(args, frag):
    """click's own usage errors follow the same rule as ours: one line, exit 2."""
    r = subprocess.run([sys.executable, "-m", "ll_codegen", *args], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    assert r.stdout == "" and r.stderr.count("\n") == 1 and r.stderr.startswith("llgen: error: "), r.stderr
    assert frag in r.stderr and "Traceback" not in r.stderr


def test_no_arguments_prints_the_help():
    r = subprocess.run([sys.executable, "-m", "ll_codegen"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.startswith("Usage: llgen") and "convert" in r.stdout
