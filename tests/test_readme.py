"""The README's samples, run against the repository (issue 13 item 7), so the
README cannot drift from the tool:

* every ``$ llgen ...`` line of a fenced block is run (``python -m
  ll_codegen``, from the repository root) and its stdout+stderr compared with
  the lines shown under it; ``...`` stands for any text (doctest's ELLIPSIS),
  nothing else is normalised.  A sample whose output starts with ``llgen:
  error:`` must exit 2, any other 0;
* every ``llgen show|plan|convert|regenerate --check`` command line of a
  ```sh block must exit 0 (``-o DIR`` is redirected into a temp folder);
* every ```python block is executed (in a temp folder that sees the
  repository's ``examples/``), and a bare expression commented with a
  Python literal (``plan.strategy  # 'smem'``) or a repr
  (``s.layout  # NVMMADistributedLayout(version=(2, 0), ...)``) must
  evaluate to it;
* every ```yaml block under a paragraph starting with an ``examples/...yaml``
  file name ("One example per kind") equals that file (as YAML data).
"""
from __future__ import annotations

import ast
import contextlib
import doctest
import io
import os
import re
import shlex
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
sys.path.insert(0, ROOT)


def blocks(text: str) -> list[tuple[str, str, str, int]]:
    """(language, body, the paragraph before it, line number) of every fenced block."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, j = i, i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        before = "\n".join(lines[max(0, start - 3):start])
        out.append((m.group(1), "\n".join(lines[start + 1:j]), before, start + 1))
        i = j + 1
    return out


README_BLOCKS = blocks(open(README, encoding="utf-8").read())


def shell_samples() -> list[tuple[str, str, int]]:
    """(command, expected output, line) for every ``$ llgen ...`` line."""
    out = []
    for _, body, _, line in README_BLOCKS:
        lines = body.splitlines()
        for k, text in enumerate(lines):
            if not text.startswith("$ llgen "):
                continue
            want = []
            for nxt in lines[k + 1:]:
                if nxt.startswith("$ "):
                    break
                want.append(nxt)
            out.append((text[2:], "\n".join(want) + "\n", line + 1 + k))
    return out


def sh_commands() -> list[tuple[str, int]]:
    """``llgen`` command lines of ```sh blocks that run without a GPU or a placeholder."""
    out = []
    for lang, body, _, line in README_BLOCKS:
        if lang != "sh":
            continue
        for k, text in enumerate(body.splitlines()):
            for part in text.split("&&"):
                cmd = part.split("  #")[0].split(" # ")[0].strip()
                words = cmd.split()
                if len(words) < 2 or words[0] != "llgen":
                    continue
                if words[1] in ("show", "plan", "convert") or (words[1] == "regenerate" and "--check" in words
                                                                 and not any("~" in w for w in words)):
                    out.append((cmd, line + 1 + k))
    return out


def _llgen(args: list[str], cwd: str = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), COLUMNS="80")
    return subprocess.run([sys.executable, "-m", "ll_codegen", *args], cwd=cwd, env=env, capture_output=True,
                          text=True)


def _matches(want: str, got: str) -> bool:
    return doctest.OutputChecker().check_output(want, got, doctest.ELLIPSIS)


def test_readme_has_samples():
    assert len(shell_samples()) >= 4 and len(sh_commands()) >= 5
    assert sum(lang == "python" for lang, *_ in README_BLOCKS) >= 2
    assert any(cmd.startswith("llgen plan ") for cmd, _, _ in shell_samples())


@pytest.mark.parametrize("cmd, want, line", shell_samples(), ids=[f"line{n}" for _, _, n in shell_samples()])
def test_shell_sample_output(cmd, want, line):
    p = _llgen(shlex.split(cmd)[1:])
    got = p.stdout + p.stderr
    assert p.returncode == (2 if want.startswith("llgen: error:") else 0), (line, p.stderr)
    assert _matches(want, got), f"README.md line {line}: `{cmd}` prints\n{got}\nbut the README shows\n{want}"


@pytest.mark.parametrize("cmd, line", sh_commands(), ids=[f"line{n}" for _, n in sh_commands()])
def test_sh_command_runs(tmp_path, cmd, line):
    args = shlex.split(cmd)[1:]
    if "-o" in args:                           # a temp folder instead of the README's `-o out`
        args[args.index("-o") + 1] = str(tmp_path / "out")
    p = _llgen(args)
    assert p.returncode == 0, f"README.md line {line}: `{cmd}` failed: {p.stderr}"
    if args[0] == "convert":
        assert p.stdout and all(os.path.isfile(x) for x in p.stdout.split()), p.stdout


_LITERAL = re.compile(r"""^('[^']*'|"[^"]*"|-?\d+(?:\.\d+)?|True|False|None)(?=\s|$|\()""")
_REPR = re.compile(r"^[A-Za-z_]\w*\(.*\)$")


def _with_checks(code: str) -> str:
    """Bare expressions with a literal or repr comment become checks."""
    out = []
    for text in code.splitlines():
        m = re.match(r"^(?P<expr>[^#]*?\S)\s+#\s*(?P<want>.+)$", text)
        if m and not text.startswith((" ", "\t")):
            expr, want = m.group("expr"), m.group("want").strip()
            try:
                is_expr = isinstance(ast.parse(expr).body[0], ast.Expr) and "(" not in expr.split(".")[0]
            except SyntaxError:
                is_expr = False
            lit = _LITERAL.match(want)
            if is_expr and lit:
                text = f"__check_value({expr}, {lit.group(1)}, {text!r})"
            elif is_expr and _REPR.match(want) and "." not in want.split("(")[0]:
                text = f"__check_repr({expr}, {want!r}, {text!r})"
        out.append(text)
    return "\n".join(out)


def _check_value(value, want, line):
    assert value == want, f"README.md: `{line}`: the value is {value!r}"


def _check_repr(value, want, line):
    assert _matches(want, repr(value)), f"README.md: `{line}`: the repr is {value!r}"


@pytest.mark.parametrize("code, line", [(b, n) for lang, b, _, n in README_BLOCKS if lang == "python"],
                         ids=[f"line{n}" for lang, _, _, n in README_BLOCKS if lang == "python"])
def test_python_block_runs(tmp_path, monkeypatch, code, line):
    os.symlink(os.path.join(ROOT, "examples"), tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    checked = _with_checks(code)
    env = {"__name__": "__readme__", "__check_value": _check_value, "__check_repr": _check_repr}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(checked, f"README.md:{line}", "exec"), env)


def test_python_blocks_check_their_comments():
    """The checks are real: the API block's literal comments turn into checks."""
    api = next(b for lang, b, _, _ in README_BLOCKS if lang == "python" and "plan_conversion(" in b)
    assert _with_checks(api).count("__check_value(") >= 3
    assert "__check_value(plan.strategy, 'smem'" in _with_checks(api)
    spec_block = next(b for lang, b, _, _ in README_BLOCKS if lang == "python" and "load_spec(" in b
                      and "spec_from_dict" in b)
    assert "__check_repr(s.layout" in _with_checks(spec_block)
    with pytest.raises(AssertionError):
        _check_value("shuffle", "smem", "x")


def yaml_examples() -> list[tuple[str, str]]:
    """(path, body) of the ```yaml blocks under a paragraph that starts with an example's file name."""
    out = []
    for lang, body, before, _ in README_BLOCKS:
        m = re.search(r"^`(examples/[\w/.-]+\.yaml)` \u2014 ", before, re.M)
        if lang == "yaml" and m:
            out.append((m.group(1), body))
    return out


def test_every_kind_has_its_example():
    assert len(yaml_examples()) >= 12


@pytest.mark.parametrize("path, body", yaml_examples(), ids=[p for p, _ in yaml_examples()])
def test_yaml_example_is_the_file(path, body):
    with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
        assert yaml.safe_load(body) == yaml.safe_load(fh), path


def test_sample_mismatch_is_caught():
    """The comparison fails when the README's output differs (what keeps it from drifting)."""
    cmd, want, _ = next(s for s in shell_samples() if s[0].startswith("llgen plan "))
    got = _llgen(shlex.split(cmd)[1:]).stdout
    assert _matches(want, got)
    assert not _matches(want.replace("score    42.00", "score    41.00"), got)
