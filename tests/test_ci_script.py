"""``.ci/run`` runs exactly the README's test command, installs from the repository's own files,
and the tools that command needs come with the ``test`` extra."""
from __future__ import annotations

import os
import re
import shlex

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(*parts: str) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as fh:
        return fh.read()


def readme_test_command() -> list[str]:
    """The pytest command of the README's ``pip install '.[test]' && python -m pytest ...`` line."""
    lines = [ln for ln in _read("README.md").splitlines() if ln.startswith("pip install '.[test]' && ")]
    assert len(lines) == 1, lines
    return shlex.split(lines[0].split(" && ", 1)[1])


def ci_commands() -> list[list[str]]:
    """The command lines of ``.ci/run`` (comments and blank lines dropped; no line continuations)."""
    out = []
    for ln in _read(".ci", "run").splitlines():
        ln = ln.strip()
        if ln and not ln.startswith("#"):
            out.append(shlex.split(ln, comments=True))
    return out


def test_ci_runs_the_readme_test_command():
    cmd = readme_test_command()
    assert cmd[:3] == ["python", "-m", "pytest"] and cmd[-1] == "tests", cmd
    assert ci_commands()[-1] == cmd


def test_ci_installs_from_the_repository():
    installs = [c for c in ci_commands() if c[:4] == ["python", "-m", "pip", "install"]]
    targets = [a for c in installs for a in c[4:] if not a.startswith("-")]
    assert targets == ["pip", ".[test,crosscheck]"], targets       # pip itself, then this checkout (editable)
    assert any(c[:5] == ["python", "-m", "pip", "install", "--quiet"] and "-e" in c for c in installs)


def test_the_test_extra_brings_what_the_command_uses():
    """``-n``/``--dist`` are pytest-xdist's options: the ``test`` extra must install it."""
    extra = re.search(r"^test = \[(.*?)\]", _read("pyproject.toml"), re.M).group(1)
    names = set(re.findall(r'"([\w.-]+)', extra))
    assert {"pytest", "hypothesis", "cmake"} <= names
    if any(a == "-n" or a.startswith(("-n", "--dist", "--numprocesses")) for a in readme_test_command()):
        assert "pytest-xdist" in names
