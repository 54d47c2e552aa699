"""``command: chain`` entries of ``generated/manifest.yaml``: ``llgen regenerate`` runs ``llgen chain``.

* An entry writes every step's header and harness and the index header, exactly the files ``llgen
  chain FILE --name N`` writes from the checkout's root (byte for byte: the spec paths in the headers'
  layout comments are relative to the checkout, whatever folder regenerate runs from), ``--check``
  is clean afterwards, and a second run rewrites them (every file carries llgen's stamp: a pre-shuffled
  tensor's chosen spec and its numpy reorder too, `#` comments).
* ``expect`` is each step's strategy in step order, comma-separated: the FA3 chain's S -> P must be a
  register permutation (``register``: no shuffle) and its V transpose a relayout; a manifest expecting
  anything else is one error line (exit status 2), nothing written; an unknown strategy and a chain file
  outside the checkout are one error line too.
"""
from __future__ import annotations

import os
import shutil

import pytest
import yaml
from click.testing import CliRunner

from ll_codegen import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHAINS = os.path.join(ROOT, "examples", "chains")
FA3 = ["fa3_fp8.yaml", "fa3_s_acc.yaml", "fa3_p_operand.yaml", "fa3_v_tma.yaml", "fa3_v_kmajor.yaml"]


def run_llgen(args, cwd=None):
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    old = os.getcwd()
    try:
        if cwd:
            os.chdir(cwd)
        return runner.invoke(cli.main, [str(a) for a in args], catch_exceptions=False)
    finally:
        os.chdir(old)


def one_error_line(r, *fragments) -> None:
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    err = r.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith("llgen: error: ") and "Traceback" not in r.stderr, r.stderr
    for f in fragments:
        assert f in err[0], (f, err[0])


def checkout(tmp_path, entry: dict) -> str:
    """A checkout in ``tmp_path``: examples/chains/ with the FA3 chain, generated/manifest.yaml with ``entry``."""
    (tmp_path / "examples" / "chains").mkdir(parents=True)
    for f in FA3:
        shutil.copy(os.path.join(CHAINS, f), tmp_path / "examples" / "chains")
    gen = tmp_path / "generated"
    gen.mkdir()
    (gen / "manifest.yaml").write_text(yaml.safe_dump([entry], sort_keys=False))
    return str(gen)


ENTRY = {"command": "chain", "args": "examples/chains/fa3_fp8.yaml --name fa3", "expect": "register, relayout",
         "note": "FA3's fp8 chain"}


def test_chain_entry_writes_what_llgen_chain_writes(tmp_path):
    gen = checkout(tmp_path, ENTRY)
    other = tmp_path / "elsewhere"
    other.mkdir()
    r = run_llgen(["regenerate", gen], cwd=str(other))           # run from another folder: paths stay relative
    assert r.exit_code == 0, (r.stdout, r.stderr)
    direct = tmp_path / "direct"
    r = run_llgen(["chain", "examples/chains/fa3_fp8.yaml", "--name", "fa3", "-o", str(direct)], cwd=str(tmp_path))
    assert r.exit_code == 0, (r.stdout, r.stderr)
    written = sorted(os.listdir(direct))
    assert written == ["fa3_0_S_to_P.cuh", "fa3_0_S_to_P_harness.cu", "fa3_1_Vm_to_Vk.cuh",
                       "fa3_1_Vm_to_Vk_harness.cu", "fa3_indices.cuh"]
    for f in written:
        with open(direct / f) as a, open(os.path.join(gen, f)) as b:
            text = b.read()
            assert a.read() == text, f
            assert str(tmp_path) not in text, f
    with open(os.path.join(gen, "fa3_0_S_to_P.cuh")) as f:
        header = f.read()
    assert "strategy: register" in header and "__shfl_sync" not in header
    with open(os.path.join(gen, "README.md")) as f:
        assert "register, relayout" in f.read()
    assert run_llgen(["regenerate", gen, "--check"]).exit_code == 0
    assert run_llgen(["regenerate", gen]).exit_code == 0        # its own files (the index header too) rewritten


def test_chain_entry_expect_is_checked_per_step(tmp_path):
    gen = checkout(tmp_path, dict(ENTRY, expect="shuffle, relayout"))
    one_error_line(run_llgen(["regenerate", gen]), "entry 1", "the planner chose register, relayout",
                   "expects shuffle, relayout")
    assert sorted(os.listdir(gen)) == ["manifest.yaml"]


@pytest.mark.parametrize("entry,fragment", [
    (dict(ENTRY, expect="register, bogus"), "entry 1.expect"),
    (dict(ENTRY, args="../fa3_fp8.yaml --name fa3"), "stay inside it"),
    (dict(ENTRY, args="examples/chains/fa3_fp8.yaml --name fa3 --plan"), "leave out --plan"),
    (dict(ENTRY, args="--name fa3"), "entry 1: args")])
def test_chain_entry_errors_are_one_line(tmp_path, entry, fragment):
    gen = checkout(tmp_path, entry)
    one_error_line(run_llgen(["regenerate", gen]), fragment)
    assert sorted(os.listdir(gen)) == ["manifest.yaml"]


def test_preshuffle_entry_rewrites_its_spec_and_reorder_files(tmp_path):
    """A chain with a pre-shuffled (free global) tensor also writes its chosen spec and the numpy / CUDA
    reorder; each carries llgen's stamp, so a second run rewrites them and --check is clean."""
    w4 = os.path.join(ROOT, "examples", "w4a16")
    (tmp_path / "examples" / "w4a16").mkdir(parents=True)
    for f in ("w4a16_preshuffle.yaml", "a_frag_64x64.yaml"):
        shutil.copy(os.path.join(w4, f), tmp_path / "examples" / "w4a16")
    gen = tmp_path / "generated"
    gen.mkdir()
    entry = {"command": "chain", "args": "examples/w4a16/w4a16_preshuffle.yaml --name w4", "expect": "upcast"}
    (gen / "manifest.yaml").write_text(yaml.safe_dump([entry], sort_keys=False))
    for _ in range(2):
        r = run_llgen(["regenerate", str(gen)])
        assert r.exit_code == 0, (r.stdout, r.stderr)
    written = sorted(os.listdir(gen))
    for f in ("w4_W.yaml", "w4_W_reorder.py", "w4_W_reorder.cuh"):
        assert f in written, written
        with open(gen / f) as fh:
            assert "generated by ll_codegen" in fh.readline().lower(), f
    assert run_llgen(["regenerate", str(gen), "--check"]).exit_code == 0
