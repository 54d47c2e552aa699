"""The command line's options and output files: enumerated options are click Choices (one
error line, shell completion), --src/--dst required, ``llgen regenerate``
from any folder, plan candidates cheapest first, and output files: every
target checked first, all written or none, paths quoted in the one error
line, the symlink policy.  CPU only and fast."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ll_codegen import cli, plan_conversion  # noqa: E402
from ll_codegen.core.files import check_targets, quote_path, write_all  # noqa: E402

S = "examples/specs/"
ROW, COL, MMA22 = S + "blocked_row_64x64.yaml", S + "blocked_col_64x64.yaml", S + "mma_v2_2x2_64x64.yaml"
PAIR = ["--src", ROW, "--dst", MMA22]


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def _run(args):
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    return runner.invoke(cli.main, [str(a) for a in args], catch_exceptions=False)


def _one_error_line(r, *fragments):
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    err = r.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith("llgen: error: "), r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    for f in fragments:
        assert f in err[0], (f, err[0])
    return err[0]


def _listing(folder):
    """Every path under ``folder`` (temp files included), to compare before/after."""
    out = []
    for d, dirs, files in os.walk(folder):
        out += [os.path.relpath(os.path.join(d, x), folder) for x in dirs + files]
    return sorted(out)


# -------------------------------------------------------------- Choice options
@pytest.mark.parametrize("command", ["plan", "convert", "verify"])
@pytest.mark.parametrize("option, value", [("--target", "metal"), ("--arch", "sm_70"), ("--strategy", "fast"),
                                           ("--swizzle", "xor"), ("--dtype", "f17")])
def test_choice_errors_are_one_line(tmp_path, command, option, value):
    extra = ["-o", tmp_path / "o"] if command == "convert" else []
    line = _one_error_line(_run([command, *PAIR, option, value, *extra]), option, f"'{value}' is not one of")
    assert "llgen --help" in line
    assert not (tmp_path / "o").exists()


def test_emit_choice_and_choices_listed_in_help():
    _one_error_line(_run(["convert", *PAIR, "--emit", "header,bnch"]), "--emit", "'bnch' is not one of")
    _one_error_line(_run(["bench", *PAIR, "--dtype", "f17"]), "--dtype")
    out = _run(["plan", "--help"]).stdout
    for frag in ("[cuda|hip]", "[optimal|none]", "smem|store|load|copy", "[required]"):
        assert frag in out, frag


@pytest.mark.parametrize("command", ["plan", "convert", "verify", "bench", "show", "gather", "regenerate"])
def test_every_command_prints_its_help(command):
    """--help renders every option's metavar (CommaChoice's get_metavar gets ctx from click >= 8.2)."""
    r = _run([command, "--help"])
    assert r.exit_code == 0 and "Usage:" in r.stdout and not r.stderr, r.stderr


@pytest.mark.parametrize("command", ["plan", "convert", "bench"])
def test_missing_src_or_dst_is_one_line(command):
    _one_error_line(_run([command, "--dst", COL]), "Missing option '--src'")
    _one_error_line(_run([command, "--src", ROW]), "Missing option '--dst'")
    _one_error_line(_run([command, "--src", "", "--dst", COL]), "--src '': an empty path")


def test_shell_completion_offers_choices():
    env = dict(os.environ, _LLGEN_COMPLETE="bash_complete", COMP_WORDS="llgen plan --target ", COMP_CWORD="3")
    p = subprocess.run([sys.executable, "-m", "ll_codegen"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.split() == ["plain,cuda", "plain,hip"], (p.stdout, p.stderr)
    env.update(COMP_WORDS="llgen convert --emit header,b", COMP_CWORD="3")
    p = subprocess.run([sys.executable, "-m", "ll_codegen"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert p.stdout.split() == ["plain,header,bench"], p.stdout
    env = dict(os.environ, _LLGEN_COMPLETE="bash_source")
    p = subprocess.run([sys.executable, "-m", "ll_codegen"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert p.returncode == 0 and "_llgen_completion" in p.stdout


# -------------------------------------------------------------------- regenerate
def test_regenerate_check_from_another_folder(tmp_path):
    """A checkout's ``generated/`` regenerated and checked from elsewhere: a checkout of two manifest
    entries (the whole ``generated/`` is reproduced from the root by test_cli_plan_convert.py)."""
    import shutil
    checkout = tmp_path / "checkout"
    (checkout / "generated").mkdir(parents=True)
    (checkout / "examples" / "specs").mkdir(parents=True)
    for spec in ("mma_v2_4x1_64x64.yaml", "blocked_store_64x64.yaml", "blocked_row_64x64.yaml",
                 "blocked_col_64x64.yaml"):
        shutil.copy(os.path.join(ROOT, "examples", "specs", spec), checkout / "examples" / "specs" / spec)
    (checkout / "generated" / "manifest.yaml").write_text(
        "- args: --name acc_to_store --src examples/specs/mma_v2_4x1_64x64.yaml --dst "
        "examples/specs/blocked_store_64x64.yaml --dtype f32 --target cuda --arch sm_80\n"
        "  expect: smem\n"
        "- args: --name transpose_i8 --src examples/specs/blocked_row_64x64.yaml --dst "
        "examples/specs/blocked_col_64x64.yaml --dtype i8 --target hip --arch gfx1030\n")
    gen = str(checkout / "generated")
    here = tmp_path / "elsewhere"
    here.mkdir()
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-m", "ll_codegen", "regenerate", gen], cwd=here, env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert {"acc_to_store.cuh", "transpose_i8.h", "README.md"} <= set(os.listdir(gen))
    p = subprocess.run([sys.executable, "-m", "ll_codegen", "regenerate", "--check", gen], cwd=here, env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout == "" and os.listdir(here) == []
    # the alias, and -o into a fresh folder, from elsewhere
    out = here / "regen"
    p = subprocess.run([sys.executable, "-m", "ll_codegen.regenerate", gen, "-o", str(out)], cwd=here, env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(out)) == sorted(f for f in os.listdir(gen) if f != "manifest.yaml")
    # --check of a folder that differs: exit 1 and the stale file named
    (out / "README.md").write_text("stale\n")
    p = subprocess.run([sys.executable, "-m", "ll_codegen", "regenerate", "--check", gen, "-o", str(out)],
                       cwd=here, env=env, capture_output=True, text=True)
    assert p.returncode == 1 and p.stdout.strip() == f"out of date: {out / 'README.md'}"


def test_regenerate_bad_dir_is_one_line(tmp_path):
    _one_error_line(_run(["regenerate", "--check", tmp_path]), "manifest.yaml", "no manifest here")
    _one_error_line(_run(["regenerate", ""]), "DIR '': an empty path")
    _one_error_line(_run(["regenerate", "generated", "--manifest", "generated/manifest.yaml"]), "not both")


# ------------------------------------------------------------ sorted candidates
@pytest.mark.parametrize("src, dst, extra", [
    (ROW, MMA22, []), (ROW, COL, []), (S + "mma_v2_4x1_64x64.yaml", S + "dot_a_4x1_kw4_64x64.yaml",
                                       ["--dtype", "f8e4m3"]),
    (S + "mma_v2_4x1_64x64.yaml", "examples/global_64x64.yaml", ["--dtype", "f16"]),
    ("examples/global_64x64.yaml", "examples/nvmma_shared_64x64.yaml", []),
])
def test_plan_candidates_sorted_by_score(src, dst, extra):
    r = _run(["plan", "--src", src, "--dst", dst, *extra])
    assert r.exit_code == 0, r.stderr
    scores = [float(line.split(" score ")[1].split()[0]) for line in r.stdout.splitlines()
              if line.startswith("candidate")]
    assert scores and scores == sorted(scores), scores
    assert r.stdout.splitlines()[-len(scores)].startswith("candidate*")        # the chosen one is the cheapest
    data = json.loads(_run(["plan", "--src", src, "--dst", dst, *extra, "--json"]).stdout)
    assert [c["score"] for c in data["candidates"]] == sorted(c["score"] for c in data["candidates"])


def test_to_json_is_text_to_dict_is_data():
    p = plan_conversion(ROW, MMA22)
    assert isinstance(p.to_json(), str) and isinstance(p.to_dict(), dict)
    assert json.loads(p.to_json()) == json.loads(json.dumps(p.to_dict()))


# --------------------------------------------------------- output files and paths
def test_long_name_writes_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    line = _one_error_line(_run(["convert", *PAIR, "-o", out, "--name", "n" * 250]),
                           str(out / ("n" * 250 + "_harness.cu")), "file name too long")
    assert "the file system allows" in line
    assert _listing(tmp_path) == ["out"]
    # a name that still fits: written, with no temp file left behind
    r = _run(["convert", *PAIR, "-o", out, "--name", "n" * 230])
    assert r.exit_code == 0, r.stderr
    assert _listing(out) == sorted(["n" * 230 + ".cuh", "n" * 230 + "_harness.cu"])


def test_directory_in_the_way_writes_nothing(tmp_path):
    (tmp_path / "cvt_harness.cu").mkdir()
    before = _listing(tmp_path)
    _one_error_line(_run(["convert", *PAIR, "-o", tmp_path, "--name", "cvt"]),
                    f"{tmp_path / 'cvt_harness.cu'}: a folder is in the way")
    assert _listing(tmp_path) == before                    # no cvt.cuh, no temp file


def test_non_regular_target_is_refused(tmp_path):
    fifo = tmp_path / "fifo.svg"
    os.mkfifo(fifo)
    before = _listing(tmp_path)
    _one_error_line(_run(["show", "examples/blocked_64x64.yaml", "--svg", fifo]), str(fifo), "not a regular file")
    _one_error_line(_run(["show", "examples/blocked_64x64.yaml", "--svg", os.devnull]), os.devnull,
                    "not a regular file")
    _one_error_line(_run(["show", "examples/blocked_64x64.yaml", "--svg", tmp_path]), "is a directory")
    assert _listing(tmp_path) == before
    assert os.path.exists(os.devnull) and not os.path.isfile(os.devnull)


def test_symlink_is_followed(tmp_path):
    real = tmp_path / "real" / "cvt.cuh"
    real.parent.mkdir()
    real.write_text("old\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "cvt.cuh").symlink_to(real)
    r = _run(["convert", *PAIR, "-o", out, "--name", "cvt"])
    assert r.exit_code == 0, r.stderr
    assert os.path.islink(out / "cvt.cuh") and os.readlink(out / "cvt.cuh") == str(real)    # the link stays
    assert real.read_text().startswith("// ") and "namespace cvt" in real.read_text()        # its target replaced
    assert _listing(tmp_path / "real") == ["cvt.cuh"]                                         # no temp file left
    # a link to a device, and a dangling link: refused, nothing written
    (tmp_path / "null.svg").symlink_to(os.devnull)
    (tmp_path / "dangling.svg").symlink_to(tmp_path / "nowhere" / "x.svg")
    before = _listing(tmp_path)
    _one_error_line(_run(["show", "examples/blocked_64x64.yaml", "--svg", tmp_path / "null.svg"]),
                    "null.svg", "not a regular file")
    _one_error_line(_run(["show", "examples/blocked_64x64.yaml", "--svg", tmp_path / "dangling.svg"]),
                    "dangling.svg", "dangling symbolic link")
    assert _listing(tmp_path) == before


def test_empty_paths(tmp_path):
    _one_error_line(_run(["convert", *PAIR, "-o", ""]), "-o '': an empty path")
    _one_error_line(_run(["show", "examples/blocked_64x64.yaml", "--svg", ""]), "--svg '': an empty path")
    assert _listing(tmp_path) == []


def test_newline_in_path_is_quoted_and_nothing_written(tmp_path):
    bad = tmp_path / "a\nb"
    line = _one_error_line(_run(["show", "examples/blocked_64x64.yaml", "--svg", bad / "x.svg"]),
                           repr(str(bad / "x.svg")), "does not exist")
    assert "\n" not in line
    _one_error_line(_run(["show", tmp_path / "no\nspec.yaml"]), repr(str(tmp_path / "no\nspec.yaml")))
    (tmp_path / "file").write_text("x")
    _one_error_line(_run(["convert", *PAIR, "-o", tmp_path / "file" / "x\ny"]), repr(str(tmp_path / "file" / "x\ny")),
                    "is not a folder")
    assert _listing(tmp_path) == ["file"]
    # a newline is a legal file name character: with a folder that exists the file is written
    bad.mkdir()
    r = _run(["show", "examples/blocked_64x64.yaml", "--svg", bad / "x\ny.svg"])
    assert r.exit_code == 0 and (bad / "x\ny.svg").read_text().startswith("<svg")


def test_output_folder_is_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    _one_error_line(_run(["convert", *PAIR, "-o", tmp_path / "f"]), str(tmp_path / "f"), "is a file")
    assert (tmp_path / "f").read_text() == "x"


def test_write_error_names_the_users_path_and_removes_temps(tmp_path, monkeypatch):
    """A failure while writing (here: the second rename) names the target, not the temp file."""
    a, b = tmp_path / "a.cuh", tmp_path / "b.cu"
    real_replace = os.replace

    def failing_replace(src, dst):
        if str(dst) == str(b):
            raise PermissionError(13, "Permission denied", src)
        return real_replace(src, dst)
    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError) as e:
        write_all({a: "1", b: "2"})
    assert e.value.filename == str(b) and cli.error_line(e.value) == f"{b}: Permission denied"
    assert not any(f.endswith(".tmp") for f in os.listdir(tmp_path))


def test_failed_write_removes_created_folders(tmp_path, monkeypatch):
    import tempfile
    calls = []
    real = tempfile.mkstemp

    def failing_mkstemp(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(*a, **k)
    monkeypatch.setattr(tempfile, "mkstemp", failing_mkstemp)
    out = tmp_path / "new" / "deeper"
    r = _run(["convert", *PAIR, "-o", out, "--name", "cvt"])
    _one_error_line(r, f"{out / 'cvt_harness.cu'}: No space left on device")
    assert _listing(tmp_path) == []


def test_quote_path_and_check_targets():
    assert quote_path("a/b.cuh") == "a/b.cuh" and quote_path("") == "''" and quote_path("a\nb") == "'a\\nb'"
    with pytest.raises(ValueError, match="--svg '': an empty path"):
        check_targets([""], "--svg")
    with pytest.raises(OSError, match="written twice"):
        check_targets(["x.cuh", "./x.cuh"])
