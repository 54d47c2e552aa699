"""The hostile-input limits (``ll_codegen/core/limits.py``): one test per
reproducer -- special files, oversized files, deep or aliased YAML, huge
numbers, too many warps, registers or elements, non-integer fields.  Each
must fail with one ``llgen: error:`` line, exit 2, in well under a second of CPU time
(asserted < ``CPU_S`` of CPU time, not wall time, so a busy machine does not flake; a
child process that blocks is stopped by a timeout); the Python API raises
SpecError (or ValueError) for the same inputs.  CPU only and fast."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ll_codegen import cli, plan_conversion
from ll_codegen.core import limits  # noqa: E402
from ll_codegen.spec import SpecError, load_spec, spec_from_dict  # noqa: E402

BLOCKED = os.path.join(ROOT, "examples", "blocked_64x64.yaml")
MMA = os.path.join(ROOT, "examples", "mma_v2_64x64.yaml")
CPU_S = 5.0        # CPU seconds per refusal; real refusals take milliseconds
HANG_S = 120       # a child that has not answered by then blocks

# 323 bytes: 9^7 = 4.8 million strings once expanded (the "billion laughs")
LAUGHS = """a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
kind: blocked
"""

BLOCKED_TEXT = """kind: blocked
size_per_thread: [1, 4]
threads_per_warp: [4, 8]
warps_per_cta: [4, 1]
order: [1, 0]
shape: [64, 64]
"""


def _runner() -> CliRunner:
    try:  # click < 8.2 mixes stderr into stdout unless told not to
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def _fails(args: list[str], *fragments: str) -> str:
    """Run llgen in-process: exit 2, one error line naming ``fragments``, within ``CPU_S`` of CPU time."""
    t = time.process_time()
    r = _runner().invoke(cli.main, args)
    cpu = time.process_time() - t
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("llgen: error: "), r.stderr
    assert "Traceback" not in r.stdout + r.stderr and len(lines[0]) < 500
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    assert cpu < CPU_S, cpu
    return lines[0]


def _spec(tmp_path, text: str, name: str = "s.yaml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# ------------------------------------------------------------ files and YAML
def _subprocess_fails(args: list[str], *fragments: str) -> None:
    """In a child process with a timeout (a regression must not hang the suite); the child's CPU time,
    interpreter start-up included, within ``CPU_S`` + 5 s."""
    t = _children_cpu()
    r = subprocess.run([sys.executable, "-m", "ll_codegen", *args], capture_output=True, text=True, timeout=HANG_S,
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("llgen: error: "), r.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    assert _children_cpu() - t < CPU_S + 5       # interpreter start-up included


def _children_cpu() -> float:
    """CPU seconds (user + system) of the child processes this process has waited for."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def test_dev_zero():
    _subprocess_fails(["show", "/dev/zero"], "/dev/zero", "not a regular file")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_does_not_block(tmp_path):
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    _subprocess_fails(["show", str(fifo)], "a FIFO, not a regular file")


def test_file_over_one_mib(tmp_path):
    p = _spec(tmp_path, BLOCKED_TEXT + "#" * limits.MAX_SPEC_BYTES)
    _fails(["show", p], "at most 1048576")
    with pytest.raises(SpecError, match="at most 1048576"):
        load_spec(p)


def test_deep_nesting(tmp_path):
    _fails(["show", _spec(tmp_path, "[" * 500)], "nested more than 64 levels deep")
    _fails(["show", _spec(tmp_path, "a: " + "{b: " * 200)], "nested more than 64")


def test_billion_laughs(tmp_path):
    assert len(LAUGHS.encode()) < 400
    _fails(["show", _spec(tmp_path, LAUGHS)], "anchors and aliases")


def test_alias_in_shape(tmp_path):
    text = BLOCKED_TEXT.replace("shape: [64, 64]", "x: &x [64, 64]\nshape: *x")
    _fails(["show", _spec(tmp_path, text)], "anchors and aliases")


def test_too_many_values(tmp_path):
    _fails(["show", _spec(tmp_path, "[" + ",".join(["1"] * (limits.MAX_YAML_NODES + 10)) + "]")],
           f"more than {limits.MAX_YAML_NODES} values")


def test_number_with_too_many_digits(tmp_path):
    _fails(["show", _spec(tmp_path, BLOCKED_TEXT.replace("[4, 1]", "[" + "9" * 5000 + ", 1]"))],
           "s.yaml: YAML: malformed YAML: cannot read a value: a number with too many digits")
    _fails(["show", _spec(tmp_path, BLOCKED_TEXT.replace("[4, 1]", "[" + "9" * 4000 + ", 1]"))],
           "warps_per_cta[0]: an integer of 13288 bits is out of range")


def test_long_value_is_cut(tmp_path):
    path = _spec(tmp_path, BLOCKED_TEXT.replace("kind: blocked", "kind: " + "x" * 100_000))
    line = _fails(["show", path], "unknown kind")
    assert len(line) < 300 + len(path)          # the line names the file; the value is cut, whatever the path


# ------------------------------------------------------- warps, registers
@pytest.mark.parametrize("warps, most", [("[1048576, 1]", "at most 32 warps"),
                                         ("[4611686018427387904, 1]", "out of range"),
                                         ("[64, 1]", "at most 32 warps of 32 threads")])
def test_warps_per_cta(tmp_path, warps, most):
    _fails(["show", _spec(tmp_path, BLOCKED_TEXT.replace("[4, 1]", warps))], "warps_per_cta", most)


def test_wave64_warps(tmp_path):
    text = ("kind: amd_mfma\nversion: 3\ninstr_shape: [32, 32]\ntransposed: true\n"
            "warps_per_cta: [8, 4]\nshape: [256, 256]\n")
    _fails(["show", _spec(tmp_path, text)], "at most 16 warps of 64 threads")


def test_shape_elements():
    _fails(["show", BLOCKED, "--shape", "65536,65536"], "--shape", "at most 1048576")
    with pytest.raises(SpecError, match="at most 1048576"):
        plan_conversion(BLOCKED, BLOCKED, shape=(65536, 65536))


def test_linear_zero_register_bases(tmp_path):
    text = "kind: linear\nregister: [" + ",".join(["[0]"] * 28) + "]\nlane: [[1],[2],[4],[8],[16]]\nshape: [32]\n"
    _fails(["show", _spec(tmp_path, text)], "register", "at most 4096")


def test_registers_per_thread(tmp_path):
    _fails(["show", _spec(tmp_path, BLOCKED_TEXT.replace("[1, 4]", "[64, 128]"))],
           "size_per_thread", "registers per thread")
    # one warp over a 1024x1024 tile: 32768 registers per thread
    text = BLOCKED_TEXT.replace("[4, 1]", "[1, 1]").replace("[64, 64]", "[1024, 1024]")
    _fails(["show", _spec(tmp_path, text)], "shape", "registers per thread")


def test_api_same_limits():
    spec = {"kind": "blocked", "size_per_thread": [1, 4], "threads_per_warp": [4, 8],
            "warps_per_cta": [1 << 20, 1], "order": [1, 0], "shape": [64, 64]}
    with pytest.raises(SpecError, match="warps_per_cta"):
        spec_from_dict(spec)
    deep: dict = {"kind": "slice", "dim": 0}
    d = deep
    for _ in range(5000):          # nested without end from Python: no RecursionError
        d["parent"] = {"kind": "slice", "dim": 0}
        d = d["parent"]
    with pytest.raises(SpecError, match="nested more than"):
        spec_from_dict(deep)


# ------------------------------------------------------------------- types
@pytest.mark.parametrize("old, new, field", [
    ("[4, 1]", "[4.0, 1]", "warps_per_cta[0]"),
    ("[4, 1]", "[true, 1]", "warps_per_cta[0]"),
    ("[4, 1]", "['4', 1]", "warps_per_cta[0]"),
    ("[4, 1]", "[-4, 1]", "out of range"),
    ("[4, 1]", "[0, 1]", "power of two"),
])
def test_ints_are_ints(tmp_path, old, new, field):
    _fails(["show", _spec(tmp_path, BLOCKED_TEXT.replace(old, new))], field)


@pytest.mark.parametrize("text, field", [
    ("kind: nvmma_shared\nswizzle_byte_width: 128.0\nelement_bitwidth: 16\nshape: [64, 64]\n",
     "swizzle_byte_width: expected an integer, got 128.0"),
    ("kind: nvidia_mma\nversion: [2, 1099511627776]\nwarps_per_cta: [2, 2]\ninstr_shape: [16, 8]\n"
     "shape: [64, 64]\n", "version[1]: 1099511627776 is out of range"),
    ("kind: amd_mfma\nversion: 3.0\ninstr_shape: [32, 32]\ntransposed: true\nwarps_per_cta: [2, 2]\n"
     "shape: [64, 64]\n", "version: expected an integer, got 3.0"),
    ("kind: amd_wmma\nversion: true\ntransposed: false\nwarps_per_cta: [2, 2]\nshape: [32, 32]\n",
     "version: expected an integer, got the boolean true"),
    ("kind: global\norder: [1, 0]\nalignment: 16.0\nshape: [64, 64]\n", "alignment: expected an integer"),
    ("kind: cute\ndescriptor: '<(64,64),(64,1)>'\nelement_bitwidth: '16'\nshape: [64, 64]\n",
     "element_bitwidth: expected an integer"),
    ("kind: cute\ndescriptor: '<(99999999999,64),(64,1)>'\nshape: [64, 64]\n", "out of range"),
    ("kind: cute\ndescriptor: '<" + "(" * 100 + "'\nshape: [64, 64]\n", "nested more than"),
])
def test_field_types(tmp_path, text, field):
    _fails(["show", _spec(tmp_path, text)], field)


# ----------------------------------------------------------- CLI integers
@pytest.mark.parametrize("budget", ["1", "0", "-1", str(1 << 40)])
def test_smem_budget(budget):
    line = _fails(["plan", "--src", BLOCKED, "--dst", MMA, "--smem-budget", budget], "--smem-budget")
    if budget == "1":
        assert "too small: this conversion needs at least 1024 bytes" in line
    else:
        assert "from 1 to 1073741824" in line


@pytest.mark.parametrize("args, fragment", [
    (["bench", "--iters", "0"], "--iters"),
    (["bench", "--ctas", "-1"], "--ctas"),
    (["verify", "--runs", "100000"], "--runs"),
    (["verify", "--seed", "-1"], "--seed"),
    (["plan", "--shape", "64.0,64"], "--shape"),
    (["plan", "--shape", "9" * 5000], "--shape"),
    (["plan", "--stride", "1e3,1"], "--stride"),
])
def test_cli_ints(args, fragment):
    line = _fails(args[:1] + ["--src", BLOCKED, "--dst", BLOCKED] + args[1:], fragment)
    assert len(line) < 300


# ------------------------------------------------- refused before the expensive work (work counted, not timed)
MMA_ACC_8BIT = """kind: nvidia_mma
version: [3, 0]
warps_per_cta: [8, 1]
instr_shape: [16, 256, 32]
shape: [{m}, {n}]
"""
NVMMA_8BIT = """kind: nvmma_shared
swizzle_byte_width: 128
element_bitwidth: 8
transposed: {t}
shape: [{r}, {c}]
"""


@pytest.mark.parametrize("size", [128, 1024])
def test_mma_wrong_majorness_refused_before_the_fragment_walk(tmp_path, monkeypatch, size):
    """An 8-bit MN-major B (wgmma reads 8-bit operands K-major only) is refused on its first
    instruction slice: the fragment walk over every register of every thread (seconds on a
    1024 x 1024 tile) is never entered."""
    from ll_codegen.plan import mma as mma_planner

    def walk(*a, **k):
        raise AssertionError("the fragment walk ran before the operand checks")
    monkeypatch.setattr(mma_planner, "fragment_instructions", walk)
    acc = _spec(tmp_path, MMA_ACC_8BIT.format(m=size, n=size), "acc.yaml")
    a = _spec(tmp_path, NVMMA_8BIT.format(t="false", r=size, c=128), "a.yaml")
    b = _spec(tmp_path, NVMMA_8BIT.format(t="false", r=128, c=size), "b.yaml")   # N contiguous: MN-major
    _fails(["mma", "--acc", acc, "--a", a, "--b", b, "--dtype", "f8e4m3", "-o", str(tmp_path / "out")],
           "B operand", "MN-major", "K-major")
    assert not (tmp_path / "out").exists()


def test_mma_precheck_keeps_legal_tiles(tmp_path):
    """The same tiles with B K-major plan (the first-slice check refuses nothing legal)."""
    from ll_codegen.api import plan_mma
    acc = _spec(tmp_path, MMA_ACC_8BIT.format(m=128, n=256), "acc.yaml")
    a = _spec(tmp_path, NVMMA_8BIT.format(t="false", r=128, c=128), "a.yaml")
    b = _spec(tmp_path, NVMMA_8BIT.format(t="true", r=128, c=256), "b.yaml")
    p = plan_mma(acc, a, b, dtype="f8e4m3")
    assert p.instr.startswith("wgmma.mma_async.sync.aligned.m64n256k32") and p.b.descriptor.k_major


@pytest.mark.parametrize("src,dst,what", [("blocked_64x64.yaml", "global_64x64.yaml", "store"),
                                          ("nvmma_shared_64x64.yaml", "blocked_64x64.yaml", "load")])
def test_convert_bench_of_a_memory_pair_refused_before_planning(tmp_path, monkeypatch, src, dst, what):
    """``--emit bench`` names a file a store, load, copy or TMA does not have: refused from the specs'
    spaces, before the planner is called (a 1024 x 1024 copy plans for seconds)."""
    import ll_codegen.api as api

    def planner(*a, **k):
        raise AssertionError("planned before refusing --emit bench")
    monkeypatch.setattr(api, "plan_conversion", planner)
    ex = os.path.join(ROOT, "examples")
    line = _fails(["convert", "--src", os.path.join(ex, src), "--dst", os.path.join(ex, dst),
                   "--emit", "header,bench", "-o", str(tmp_path / "out")], "--emit bench", what)
    assert "register conversions" in line
    _fails(["convert", "--src", os.path.join(ex, "global_64x64.yaml"), "--dst",
            os.path.join(ex, "nvmma_shared_64x64.yaml"), "--arch", "sm_90a", "--emit", "bench",
            "-o", str(tmp_path / "out")], "--emit bench", "copy")
    assert not (tmp_path / "out").exists()
