"""The command line's error messages and its all-or-nothing writes: a spec says
its shape once (a CuTe descriptor), layouts that do not fit are named with the
option that fixes them, ``show --svg`` prints a path, one error line always (hostile field names,
mixed-type manifest keys), a manifest entry is a conversion, nothing written on
an error (stdout that fails), all files or none on SIGINT/SIGTERM, hostile
lists refused at once, well-formed SVG, ``regenerate`` deleting and overwriting only what
llgen made and reading specs only inside the checkout, each spec option's own metavar,
``--include-dir``, a closed stdout, ``llgen mma``'s instr_shape K and the register operand spec
it writes, and the K^T global tile TMA loads.  CPU only; the signal and ``/dev/full`` tests run ``llgen`` as a
process, the rest in-process through click's CliRunner."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest
import yaml
from click.testing import CliRunner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ll_codegen import cli  # noqa: E402
from ll_codegen.jobs import corpus as jobs  # noqa: E402
from ll_codegen.core import files as F, limits  # noqa: E402
from ll_codegen.jobs import load_corpus  # noqa: E402
from ll_codegen.regenerate import GENERATED_STAMP, is_generated  # noqa: E402
from ll_codegen.spec import load_spec, spec_from_dict  # noqa: E402

EX = os.path.join(ROOT, "examples")
BLOCKED, MMA = os.path.join(EX, "blocked_64x64.yaml"), os.path.join(EX, "mma_v2_64x64.yaml")
WAVE64 = os.path.join(EX, "specs", "blocked_wave64_64x64.yaml")
PAIR = ["--src", BLOCKED, "--dst", MMA]
CUTE = {"kind": "cute", "descriptor": "<(128,64),(64,1),swizzle<3,4,3>,elem=f16>"}
BLOCKED_SPEC = {"kind": "blocked", "size_per_thread": [1, 4], "threads_per_warp": [4, 8], "warps_per_cta": [4, 1],
                "order": [1, 0], "shape": [64, 64]}


def _run(args, **kw):
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    return runner.invoke(cli.main, [str(a) for a in args], catch_exceptions=False, **kw)


def _one_error_line(r, *fragments) -> str:
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    err = r.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith("llgen: error: "), r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr
    for f in fragments:
        assert f in err[0], (f, err[0])
    return err[0]


def _dump(path, data) -> str:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=False))
    return str(path)


def _tree(folder) -> list[str]:
    """Every name under ``folder``, temp and backup files included."""
    out = []
    for d, dirs, files in os.walk(folder):
        out += [os.path.relpath(os.path.join(d, x), folder) for x in dirs + files]
    return sorted(out)


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


LLGEN = [sys.executable, "-m", "ll_codegen"]


# -------------------------------------------------------------------- say it once
def test_cute_spec_takes_its_shape_from_the_descriptor(tmp_path):
    s = spec_from_dict(dict(CUTE))
    assert s.shape == (128, 64) and s.linear.out_dim_sizes == {"dim0": 128, "dim1": 64}
    # a shape (or --shape) still tiles it larger; smaller is still an error
    assert spec_from_dict(dict(CUTE, shape=[256, 64])).shape == (256, 64)
    assert load_spec(_dump(tmp_path / "c.yaml", CUTE), shape_override="128,128").shape == (128, 128)
    assert load_spec(os.path.join(EX, "cute_128x64.yaml")).shape == (128, 64)     # the example says it once
    r = _run(["plan", "--src", os.path.join(EX, "specs", "blocked_store_128x128.yaml"), "--dst",
              _dump(tmp_path / "c.yaml", CUTE), "--shape", "128,128"])
    assert r.exit_code == 0, r.stderr
    # kinds whose shape the layout does not state still need it
    _one_error_line(_run(["show", _dump(tmp_path / "b.yaml", {k: v for k, v in BLOCKED_SPEC.items() if k != "shape"})]),
                    "shape: missing")


def test_mismatched_shapes_name_each_spec_and_suggest_shape(tmp_path):
    small = _dump(tmp_path / "small.yaml", dict(BLOCKED_SPEC, shape=[32, 64]))
    line = _one_error_line(_run(["plan", "--src", small, "--dst", MMA]), "shapes differ")
    assert f"source {small} is [32, 64]" in line and f"destination {MMA} is [64, 64]" in line, line
    assert "--shape 64,64" in line
    cute = _dump(tmp_path / "cute.yaml", CUTE)
    line = _one_error_line(_run(["plan", "--src", BLOCKED, "--dst", cute]), "shapes differ")
    assert cute in line and "--shape 128,64" in line


def test_warp_size_errors_name_the_spec_and_suggest_target(tmp_path):
    line = _one_error_line(_run(["plan", *PAIR, "--target", "hip"]), "32 lanes", "warp size 64")
    assert f"({BLOCKED})" in line and "--target cuda" in line
    line = _one_error_line(_run(["plan", "--src", WAVE64, "--dst", WAVE64]), "64 lanes", "warp size 32")
    assert f"({WAVE64})" in line and "--target hip" in line
    line = _one_error_line(_run(["plan", "--src", WAVE64, "--dst", MMA]), "lane counts differ")
    assert WAVE64 in line and MMA in line
    line = _one_error_line(_run(["gather", "--src", BLOCKED, "--index", BLOCKED, "--axis", "0", "--target", "hip",
                                 "--plan"]), "warp size 64")
    assert f"({BLOCKED})" in line and "--target cuda" in line


# --------------------------------------------------------------- show --svg
def test_show_svg_prints_only_the_path(tmp_path):
    out = tmp_path / "x.svg"
    r = _run(["show", BLOCKED, "--svg", out])
    assert r.exit_code == 0 and r.stdout == f"{out}\n" and r.stderr == ""
    ET.parse(out)
    _one_error_line(_run(["show", BLOCKED, "--svg", tmp_path / "y.svg", "--json"]), "--svg", "--json")
    assert os.listdir(tmp_path) == ["x.svg"]


# -------------------------------------------------------------- hostile field names
HOSTILE_KEYS = ["a\nb", "a\rb", "x\r\ny", "a\u2028b", "a\x85b", "\x1b[31mred", "tab\there"]


@pytest.mark.parametrize("key", HOSTILE_KEYS, ids=repr)
def test_field_names_are_quoted_in_errors(tmp_path, key):
    spec = _dump(tmp_path / "s.yaml", dict(BLOCKED_SPEC, **{key: 1}))
    _one_error_line(_run(["show", spec]), repr(key), "unknown field")
    nested = dict(kind="slice", dim=1, parent=dict({k: v for k, v in BLOCKED_SPEC.items() if k != "shape"}, **{key: 1}),
                  shape=[64])
    _one_error_line(_run(["show", _dump(tmp_path / "n.yaml", nested)]), "parent." + repr(key))
    corpus = _dump(tmp_path / "c.yaml", [{"src": BLOCKED, "dst": MMA, key: 1}])
    _one_error_line(_run(["verify", "--corpus", corpus]), "entry 1." + repr(key))
    manifest = _dump(tmp_path / "m.yaml", [{"args": "--src a --dst b", key: 1}])
    _one_error_line(_run(["regenerate", "--manifest", manifest]), "entry 1." + repr(key))


def test_one_line_guard_for_any_message():
    assert limits.printable("a\nb\u2028c") == "a\\nb\\u2028c" and limits.printable("plain") == "plain"
    assert limits.field_name("ok_name") == "ok_name" and limits.field_name(1) == "1"
    assert limits.field_name("a\nb") == "'a\\nb'" and limits.field_name("x" * 100).endswith("...")


# -------------------------------------------------------- mixed-type manifest keys
def test_manifest_keys_of_mixed_types_are_a_clean_error(tmp_path):
    m = tmp_path / "m.yaml"
    m.write_text('- args: "--src a --dst b"\n  1: 2\n  zz: 3\n')
    _one_error_line(_run(["regenerate", "--manifest", m]), "entry 1.1: unknown field")
    m.write_text('- args: "--src a --dst b"\n  zz: 3\n  1: 2\n  null: 4\n')
    _one_error_line(_run(["regenerate", "--manifest", m]), "entry 1.zz: unknown field")


# -------------------------------------------------- an entry is a conversion
def _checkout(tmp_path, args: list[str]) -> str:
    """A checkout in ``tmp_path``: examples/ with two specs, generated/manifest.yaml with ``args``."""
    (tmp_path / "examples").mkdir(exist_ok=True)
    for f in (BLOCKED, MMA):
        shutil.copy(f, tmp_path / "examples")
    gen = tmp_path / "generated"
    gen.mkdir(exist_ok=True)
    _dump(gen / "manifest.yaml", [{"args": a} for a in args])
    return str(gen)


GOOD_ARGS = "--src examples/blocked_64x64.yaml --dst examples/mma_v2_64x64.yaml --name cvt"


@pytest.mark.parametrize("extra", ["--help", "-h", "--help=x", "--version", "--plan", "-o elsewhere", "--emit header",
                                   "extra_positional"])
def test_manifest_args_must_be_a_conversion(tmp_path, extra):
    gen = _checkout(tmp_path, [f"{GOOD_ARGS} {extra}"])
    for check in ([], ["--check"]):
        r = _run(["regenerate", gen, *check])
        _one_error_line(r, "entry 1: args")              # exit 2: --check never passes with nothing generated
    assert sorted(os.listdir(gen)) == ["manifest.yaml"]


# -------------------------------------------------------- stdout that fails
DEV_FULL = "/dev/full"
needs_dev_full = pytest.mark.skipif(not os.path.exists(DEV_FULL), reason="no /dev/full")


def _to_dev_full(args, cwd) -> subprocess.CompletedProcess:
    with open(DEV_FULL, "w") as full:
        return subprocess.run(LLGEN + [str(a) for a in args], cwd=cwd, env=_env(), stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)


@needs_dev_full
@pytest.mark.parametrize("command", ["convert", "gather", "mma", "show-svg", "regenerate"])
def test_nothing_written_when_stdout_fails(tmp_path, command):
    out = tmp_path / "out"
    checkout = tmp_path / "co"
    checkout.mkdir()
    gen = _checkout(checkout, [GOOD_ARGS])
    args = {"convert": ["convert", *PAIR, "-o", out, "--emit", "all"],
            "gather": ["gather", "--src", BLOCKED, "--index", BLOCKED, "--axis", "1", "-o", out],
            "mma": ["mma", "--acc", os.path.join(EX, "hopper", "wgmma_acc_128x128.yaml"),
                    "--a", os.path.join(EX, "hopper", "a_smem_128x64.yaml"),
                    "--b", os.path.join(EX, "hopper", "b_smem_64x128.yaml"), "-o", out],
            "show-svg": ["show", BLOCKED, "--svg", tmp_path / "x.svg"],
            "regenerate": ["regenerate", gen, "-o", out]}[command]
    before = _tree(tmp_path)
    p = _to_dev_full(args, ROOT)
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines() == [p.stderr.strip()] and "cannot write to standard output" in p.stderr, p.stderr
    assert "nothing was written" in p.stderr
    assert _tree(tmp_path) == before                     # no output, no temp file, no -o folder


def test_listing_failure_rolls_back_in_process(tmp_path):
    """``write_all``'s announce runs before the commit: when it raises, nothing is written and old files stay."""
    a, b = tmp_path / "a.cuh", tmp_path / "b.cu"
    a.write_text("old")

    def announce(paths):
        raise OSError(28, "No space left on device")
    with pytest.raises(OSError):
        F.write_all({a: "new a", b: "new b"}, announce=announce)
    assert a.read_text() == "old" and _tree(tmp_path) == ["a.cuh"]


# -------------------------------------------------- all or none, also on a signal
def test_failed_rename_puts_every_old_file_back(tmp_path, monkeypatch):
    a, b, c = tmp_path / "a.cuh", tmp_path / "b.cu", tmp_path / "c.cu"
    a.write_text("old a")
    c.write_text("old c")
    real = os.replace

    def replace(src, dst):
        if str(dst) == str(c) and str(src).endswith(".tmp"):
            raise PermissionError(13, "Permission denied")
        return real(src, dst)
    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError) as e:
        F.write_all({a: "new a", b: "new b", c: "new c"})
    assert e.value.filename == str(c)
    assert a.read_text() == "old a" and c.read_text() == "old c" and not b.exists()
    assert _tree(tmp_path) == ["a.cuh", "c.cu"]          # no temp, no backup left


def test_remove_is_part_of_the_commit(tmp_path):
    stale, keep = tmp_path / "stale.cu", tmp_path / "new.cu"
    stale.write_text("s")
    F.write_all({keep: "n"}, remove=[stale])
    assert _tree(tmp_path) == ["new.cu"]


def test_write_all_tolerates_a_folder_made_meanwhile(tmp_path, monkeypatch):
    """Two llgen runs of a parallel build (cmake -j) both create a missing output folder: the one that
    loses the race writes its file into the folder the other made (seen in CI: 'File exists')."""
    real_mkdir = os.mkdir

    def racing_mkdir(path, *args):
        real_mkdir(path, *args)             # the other process wins
        real_mkdir(path, *args)             # ours: FileExistsError
    monkeypatch.setattr(os, "mkdir", racing_mkdir)
    target = tmp_path / "llgen" / "to_mma.cuh"
    F.write_all({target: "x"}, make_dirs=True)
    assert target.read_text() == "x"


def _interrupt(tmp_path, phase: str, sig: int, out, old: bool) -> tuple[subprocess.CompletedProcess, dict]:
    """Run ``convert --emit all`` into ``out`` paused (LLGEN_TEST_WRITE_PAUSE) after the 2nd temp file or
    the 1st rename, send ``sig``, and return the process and the files as they were before."""
    marker = tmp_path / "paused"
    if old:
        out.mkdir()
        for name in ("cvt.cuh", "cvt_harness.cu", "cvt_bench.cu"):
            (out / name).write_text("old\n")
    before = {n: (out / n).read_text() for n in os.listdir(out)} if out.exists() else {}
    env = dict(_env(), **{F.PAUSE_ENV: f"{phase}:{2 if phase == 'temp' else 1}:{marker}"})
    # SIGINT back to its default in the child: a background job (CI runners, `cmd &`) or a pytest-xdist
    # worker may have inherited it ignored, and Python then never raises KeyboardInterrupt
    p = subprocess.Popen(LLGEN + ["convert", *PAIR, "-o", str(out), "--emit", "all", "--name", "cvt"], cwd=ROOT,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    end = time.monotonic() + 600        # a hang guard only: the child normally gets there in a second
    while not marker.exists():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < end, "the write phase was never reached"
        time.sleep(0.02)
    p.send_signal(sig)
    stdout, stderr = p.communicate(timeout=60)
    return subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr), before


def _reference(tmp_path) -> dict:
    ref = tmp_path / "ref"
    assert _run(["convert", *PAIR, "-o", ref, "--emit", "all", "--name", "cvt"]).exit_code == 0
    return {n: (ref / n).read_text() for n in os.listdir(ref)}


@pytest.mark.parametrize("old", [False, True], ids=["fresh", "replacing"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_before_the_commit_writes_nothing(tmp_path, sig, old):
    out = tmp_path / "out"
    p, before = _interrupt(tmp_path, "temp", sig, out, old)
    if sig == signal.SIGINT:
        assert p.returncode == 130 and p.stderr == "llgen: aborted\n", (p.returncode, p.stderr)
    else:
        assert p.returncode == -signal.SIGTERM, (p.returncode, p.stderr)     # a shell reports 143
    assert p.stdout == ""                                # nothing listed: nothing written
    if old:
        assert {n: (out / n).read_text() for n in os.listdir(out)} == before
    else:
        assert not out.exists()                          # the folder this run created is gone too
    assert _tree(tmp_path) == sorted(["paused"] + ([f"out/{n}" for n in before] + ["out"] if old else []))


@pytest.mark.parametrize("old", [False, True], ids=["fresh", "replacing"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_during_the_renames_writes_everything(tmp_path, sig, old):
    out = tmp_path / "out"
    p, _ = _interrupt(tmp_path, "rename", sig, out, old)
    assert p.returncode == (130 if sig == signal.SIGINT else -signal.SIGTERM), (p.returncode, p.stderr)
    if sig == signal.SIGINT:
        assert p.stderr == "llgen: aborted\n"
    ref = _reference(tmp_path)
    assert {n: (out / n).read_text() for n in os.listdir(out)} == ref          # all, complete, as listed
    assert sorted(p.stdout.splitlines()) == sorted(str(out / n) for n in ref)
    assert not [f for f in _tree(tmp_path) if ".llgen-" in f]                  # no temp or backup file


# -------------------------------------------------------- refused before any work
def test_long_dtype_lists_are_refused_at_once(tmp_path, monkeypatch):
    """Refused before any row is planned (planning 20,000 rows took > 60 s): the planner is never called."""
    planned = []
    monkeypatch.setattr(jobs, "plan_conversion", lambda *a, **k: planned.append(a))
    _one_error_line(_run(["verify", *PAIR, "--dtype", ",".join(["f16"] * 1000)]), "--dtype", "1000", "at most 64")
    corpus = tmp_path / "c.yaml"
    corpus.write_text(f"- src: {BLOCKED}\n  dst: {MMA}\n  dtypes: [{', '.join(['f16'] * 19990)}]\n")
    _one_error_line(_run(["verify", "--corpus", corpus]), "entry 1.dtypes", "at most 64")
    many = [{"src": BLOCKED, "dst": MMA, "shape": [512, 1024], "dtypes": ["f16", "f32"]}
            for _ in range(limits.MAX_VERIFY_WORK // (2 << 19) + 1)]
    _one_error_line(_run(["verify", "--corpus", _dump(tmp_path / "many.yaml", many)]),
                    f"entry {len(many)}", f"at most {limits.MAX_VERIFY_WORK}")
    assert planned == []


def test_dtype_lists_are_deduplicated(tmp_path):
    assert limits.dtype_list(["f16", "f32", "f16"], "--dtype") == ["f16", "f32"]
    jobs = load_corpus(_dump(tmp_path / "c.yaml", [{"src": BLOCKED, "dst": MMA, "dtypes": ["f16", "f16", "f32"]}]))
    assert jobs[0].dtypes == ("f16", "f32")


@pytest.mark.parametrize("command", ["convert", "gather", "mma"])
def test_output_targets_are_checked_before_planning(tmp_path, monkeypatch, command):
    from ll_codegen import api

    def no_work(*a, **k):
        raise AssertionError("planned before the output target was checked")
    for f in ("conversion_files", "gather_files", "mma_files"):
        monkeypatch.setattr(api, f, no_work)
    out = tmp_path / "out"
    out.mkdir()
    header = {"convert": "big.cuh", "gather": "big.cuh", "mma": "big.cuh"}[command]
    (out / header).mkdir()                               # a folder in the way of the header
    args = {"convert": ["convert", *PAIR, "--shape", "1024,1024"],
            "gather": ["gather", "--src", BLOCKED, "--index", BLOCKED, "--axis", "0"],
            "mma": ["mma", "--acc", MMA, "--a", MMA, "--b", MMA]}[command]
    _one_error_line(_run(args + ["-o", out, "--name", "big"]), str(out / header), "folder is in the way")
    (out / header).rmdir()
    os.mkfifo(out / "big_harness.cu")                    # a FIFO in the way of the harness
    _one_error_line(_run(args + ["-o", out, "--name", "big"]), "not a regular file")
    assert sorted(os.listdir(out)) == ["big_harness.cu"]


# ---------------------------------------------------------------- valid SVG
@pytest.mark.parametrize("name", ["a\x01b.yaml", "esc\x1b[31m.yaml", "nl\nx.yaml", "cr\rx.yaml", "amp&<x>.yaml",
                                  "del\x7f.yaml"], ids=repr)
def test_control_characters_in_a_spec_name_keep_the_svg_well_formed(tmp_path, name):
    spec = _dump(tmp_path / name, BLOCKED_SPEC)
    svg = tmp_path / "x.svg"
    r = _run(["show", spec, "--svg", svg])
    assert r.exit_code == 0, r.stderr
    title = ET.parse(svg).getroot().find("{http://www.w3.org/2000/svg}text").text
    assert title.startswith("blocked 64x64") and not any(ord(c) < 32 or c == "\x7f" for c in title), title
    assert _one_error_line(_run(["show", _dump(tmp_path / name, {"kind": "blocked"}), "--svg", svg]), "missing")


# --------------------------------------------------- regenerate deletes its own only
def test_regenerate_deletes_only_stamped_files(tmp_path):
    gen = _checkout(tmp_path, [GOOD_ARGS])
    g = tmp_path / "generated"
    (g / "my_kernel.cu").write_text("// my own kernel\n__global__ void k() {}\n")
    (g / "notes.h").write_text("#pragma once\n")
    (g / "old_cvt.cuh").write_text("// Generated by ll_codegen. Do not edit.\nstale\n")
    (g / "old_cvt_harness.cu").write_text("// Test harness for old_cvt.cuh (generated by ll_codegen; do not edit).\n")
    (g / "fake.cu").write_text("int x; // Generated by ll_codegen. Do not edit.\n")   # not the first line
    r = _run(["regenerate", gen, "--check"])
    assert r.exit_code == 1 and "old_cvt.cuh" in r.stdout and "my_kernel" not in r.stdout + r.stderr
    r = _run(["regenerate", gen])
    assert r.exit_code == 0 and "removed 2 stale file(s)" in r.stdout, r.stdout + r.stderr
    assert sorted(os.listdir(g)) == ["README.md", "cvt.cuh", "cvt_bench.cu", "cvt_harness.cu", "fake.cu",
                                     "manifest.yaml", "my_kernel.cu", "notes.h"]
    assert _run(["regenerate", gen, "--check"]).exit_code == 0
    # a manifest named *.h (given with --manifest) is not a stale source either
    shutil.copy(g / "manifest.yaml", g / "list.h")
    assert _run(["regenerate", "--manifest", g / "list.h"]).exit_code == 0 and (g / "list.h").exists()


def test_every_generated_file_carries_the_stamp():
    gen = os.path.join(ROOT, "generated")
    sources = [f for f in os.listdir(gen) if f.endswith((".cu", ".cuh", ".h", ".hip"))]
    assert sources and all(is_generated(os.path.join(gen, f)) for f in sources), \
        [f for f in sources if not is_generated(os.path.join(gen, f))]
    assert not GENERATED_STAMP.match("// my own file")


# -------------------------------------------------------------- help, headers, closed stdout
def test_spec_options_have_their_own_metavars():
    for command, flags in (("mma", ("--acc", "--a", "--b")), ("convert", ("--src", "--dst")),
                           ("bench", ("--src", "--dst")), ("reduce", ("--src",))):
        r = _run([command, "--help"])
        assert r.exit_code == 0
        for flag in flags:
            assert f"{flag} {flag.lstrip('-').upper()}.yaml" in r.stdout, (command, flag, r.stdout)


def test_include_dir_holds_the_host_runtime_headers():
    r = _run(["--include-dir"])
    assert r.exit_code == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert len(lines) == 1 and os.path.isabs(lines[0])
    d = lines[0]
    for f in ("llgen_host.h", "simt_host.h", "hopper.h", "cuda_fp16.h", os.path.join("hip", "hip_runtime.h")):
        assert os.path.isfile(os.path.join(d, f)), f
    # the folder is package data: what `pip install .` copies next to the installed module
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as fh:
        pyproject = fh.read()
    rel = os.path.relpath(d, os.path.join(ROOT, "ll_codegen"))
    assert f'"{rel}/*.h"' in pyproject and f'"{rel}/hip/*.h"' in pyproject


@pytest.mark.parametrize("args", [["show", BLOCKED], ["--version"], ["convert", *PAIR, "-o", "{out}"]])
def test_closed_stdout_is_an_error(tmp_path, args):
    """``llgen ... >&-``: the listing (or text) would be lost, and a file opened next would take
    descriptor 1: one error line, exit 2, nothing written."""
    out = tmp_path / "out"
    argv = [str(a).replace("{out}", str(out)) for a in args]
    r = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", *LLGEN, *argv], cwd=tmp_path, env=_env(),
                       stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == ["llgen: error: standard output is closed (nothing was done)"]
    assert not out.exists()


# ----------------------------------------------------------------- llgen mma: instr_shape K, operand spec
HOPPER = os.path.join(EX, "hopper")
WGMMA_ACC = os.path.join(HOPPER, "wgmma_acc_128x128.yaml")


def _acc(tmp_path, k: int, name: str = "acc.yaml") -> str:
    return _dump(tmp_path / name, {"kind": "nvidia_mma", "version": [3, 0], "warps_per_cta": [4, 1],
                                   "instr_shape": [16, 128, k], "shape": [128, 128]})


def _kmajor_b(tmp_path, bits: int, k: int) -> str:
    return _dump(tmp_path / f"b{bits}.yaml", {"kind": "nvmma_shared", "swizzle_byte_width": 128,
                                              "element_bitwidth": bits, "transposed": True, "shape": [k, 128]})


@pytest.mark.parametrize("dtype,k,wrong", [("f8e4m3", 32, 16), ("f16", 16, 32), ("tf32", 8, 16), ("i8", 32, 8)])
def test_wgmma_instr_shape_k_must_match_the_dtype(tmp_path, dtype, k, wrong):
    bits = {"f8e4m3": 8, "i8": 8, "f16": 16, "tf32": 32}[dtype]
    b = _kmajor_b(tmp_path, bits, 4 * k)
    a = _dump(tmp_path / "a.yaml", {"kind": "nvmma_shared", "swizzle_byte_width": 128, "element_bitwidth": bits,
                                    "shape": [128, 4 * k]})
    acc_dtype = "i32" if dtype == "i8" else "f32"
    line = _one_error_line(_run(["mma", "--acc", _acc(tmp_path, wrong), "--a", a, "--b", b, "--dtype", dtype,
                                 "--acc-dtype", acc_dtype, "--plan"]), "instr_shape", f"K = {wrong}")
    assert f"[16, 128, {k}]" in line
    r = _run(["mma", "--acc", _acc(tmp_path, k), "--a", a, "--b", b, "--dtype", dtype, "--acc-dtype", acc_dtype,
              "--plan"])
    assert r.exit_code == 0 and f"k{k}." in r.stdout.splitlines()[0], r.stderr


@pytest.mark.parametrize("dtype,bits,k_width", [("f16", 16, 2), ("bf16", 16, 2), ("tf32", 32, 1),
                                                ("f8e4m3", 8, 4), ("i8", 8, 4)])
def test_write_operand_spec_is_the_register_a_of_wgmma(tmp_path, dtype, bits, k_width):
    """The printed spec is a dot_operand of the accumulator with the dtype's k_width, and the
    planner (its fragment walk, independent of the writer) accepts it as wgmma's register A; the
    same spec with another k_width is refused, so the check can fail."""
    from ll_codegen.api import plan_mma
    k_i = 256 // bits
    acc, b = _acc(tmp_path, k_i), _kmajor_b(tmp_path, bits, 4 * k_i)
    r = _run(["mma", "--acc", acc, "--b", b, "--dtype", dtype, "--write-operand-spec", "-"])
    assert r.exit_code == 0, r.stderr
    spec = yaml.safe_load(r.stdout)
    assert spec == {"kind": "dot_operand", "operand_index": 0, "k_width": k_width,
                    "parent": {"kind": "nvidia_mma", "version": [3, 0], "warps_per_cta": [4, 1],
                               "instr_shape": [16, 128, k_i]}, "shape": [128, 4 * k_i]}
    a = tmp_path / "a_regs.yaml"
    r = _run(["mma", "--acc", acc, "--b", b, "--dtype", dtype, "--write-operand-spec", a])
    assert r.exit_code == 0 and r.stdout.splitlines() == [str(a)]
    acc_dtype = "i32" if dtype == "i8" else "f32"
    p = plan_mma(acc, str(a), b, dtype=dtype, acc_dtype=acc_dtype)
    assert p.a.space == "registers" and len(p.steps) == 2 * 4
    other = dict(spec, k_width=2 if k_width != 2 else 4)
    with pytest.raises(ValueError):
        plan_mma(acc, other, b, dtype=dtype, acc_dtype=acc_dtype)


def test_write_operand_spec_of_mma_sync(tmp_path):
    """mma.sync's A: the spec written equals examples/gemm/a_dot.yaml (less its comment)."""
    gemm = os.path.join(EX, "gemm")
    out = tmp_path / "a.yaml"
    r = _run(["mma", "--acc", os.path.join(gemm, "acc.yaml"), "--b", os.path.join(gemm, "b_dot.yaml"),
              "--write-operand-spec", out])
    assert r.exit_code == 0, r.stderr
    with open(os.path.join(gemm, "a_dot.yaml"), encoding="utf-8") as fh:
        assert yaml.safe_load(out.read_text()) == yaml.safe_load(fh)


@pytest.mark.parametrize("extra,fragment", [(["--a", "x.yaml"], "no --a"), (["--plan"], "no --a"),
                                            (["--target", "hip"], "--target cuda"), ([], None)])
def test_write_operand_spec_refusals(tmp_path, extra, fragment):
    b = os.path.join(HOPPER, "b_smem_kmajor_64x128.yaml")
    if fragment is None:       # the accumulator's K made for another dtype, and a missing --b
        _one_error_line(_run(["mma", "--acc", WGMMA_ACC, "--b", b, "--dtype", "f8e4m3", "--write-operand-spec", "-"]),
                        "instr_shape", "K = 16")
        _one_error_line(_run(["mma", "--acc", WGMMA_ACC, "--write-operand-spec", "-"]), "missing option --b")
        return
    _one_error_line(_run(["mma", "--acc", WGMMA_ACC, "--b", b, *extra, "--write-operand-spec", tmp_path / "o.yaml"]),
                    fragment)
    assert not (tmp_path / "o.yaml").exists()


def test_kt_global_tile_loads_by_tma():
    """examples/hopper/b_global_kt_64x128.yaml (B^T row-major: K contiguous) into the K-major tile
    wgmma reads: one TMA box, the 128-byte swizzle (docs/hopper.md)."""
    r = _run(["plan", "--src", os.path.join(HOPPER, "b_global_kt_64x128.yaml"), "--dst",
              os.path.join(HOPPER, "b_smem_kmajor_64x128.yaml"), "--arch", "sm_90a", "--json"])
    assert r.exit_code == 0, r.stderr
    import json
    p = json.loads(r.stdout)
    assert p["strategy"] == "tma" and p["tma"]["swizzle_bytes"] == 128 and len(p["tma"]["boxes"]) == 1
    with open(os.path.join(ROOT, "docs", "hopper.md"), encoding="utf-8") as fh:
        assert "examples/hopper/b_global_kt_64x128.yaml" in fh.read()


# ------------------------------------------------------- regenerate writes over its own files only
def test_regenerate_keeps_a_users_readme(tmp_path):
    gen = _checkout(tmp_path, [GOOD_ARGS])
    readme = tmp_path / "generated" / "README.md"
    readme.write_text("# my notes\n")
    _one_error_line(_run(["regenerate", gen]), "README.md", "not written by llgen regenerate")
    assert readme.read_text() == "# my notes\n" and sorted(os.listdir(gen)) == ["README.md", "manifest.yaml"]
    readme.unlink()
    assert _run(["regenerate", gen]).exit_code == 0
    assert _run(["regenerate", gen]).exit_code == 0          # its own README (the marker line) is rewritten
    (tmp_path / "generated" / "cvt.cuh").write_text("// my own cvt.cuh\n")
    _one_error_line(_run(["regenerate", gen]), "cvt.cuh", "not written by llgen regenerate")
    assert (tmp_path / "generated" / "cvt.cuh").read_text() == "// my own cvt.cuh\n"


def test_regenerate_refuses_a_manifest_named_like_an_output(tmp_path):
    _checkout(tmp_path, [GOOD_ARGS])
    g = tmp_path / "generated"
    for name in ("cvt.cuh", "README.md"):
        m = g / name
        shutil.copy(g / "manifest.yaml", m)
        _one_error_line(_run(["regenerate", "--manifest", m]), "is named like an output")
        assert m.read_text() == (g / "manifest.yaml").read_text()
        m.unlink()


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside.yaml", "examples/../../outside.yaml", "link/x.yaml"])
def test_manifest_spec_paths_stay_in_the_checkout(tmp_path, path):
    co = tmp_path / "co"
    co.mkdir()
    (tmp_path / "outside.yaml").write_text("SECRET-CONTENT: 1\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.yaml").write_text("SECRET-CONTENT: 1\n")
    os.symlink(tmp_path / "elsewhere", co / "link")
    gen = _checkout(co, [f"--src {path} --dst examples/mma_v2_64x64.yaml --name cvt"])
    line = _one_error_line(_run(["regenerate", gen]), "entry 1", "--src", "inside")
    assert "SECRET" not in line and "root:" not in line
    assert sorted(os.listdir(gen)) == ["manifest.yaml"]
