"""The samples of the README and of every page of ``docs/``, run against the
repository, so the documentation cannot drift from the tool.  The same rules
hold on every page:

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
  evaluate to it; a block that calls a GPU kernel (it imports ``torch`` or ``cupy``) is compiled
  here and run where those import and a GPU answers;
* every ```yaml block under a paragraph starting with an ``examples/...yaml``
  file name ("One example per kind") equals that file (as YAML data);
* every relative link (``[text](page.md#anchor)``) names a file of the
  repository and, for a Markdown page, one of its headings; every page of
  ``docs/`` is linked from the README.
"""
from __future__ import annotations

import ast
import contextlib
import doctest
import glob
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
#: the pages whose samples are run: the README and every page of docs/ (paths relative to ROOT)
PAGES = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
sys.path.insert(0, ROOT)


def blocks(text: str) -> list[tuple[str, str, str, int]]:
    """(language, body, the paragraph before it, line number) of every fenced block."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = re.match(r"^```([\w+-]*)\s*$", lines[i])
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


def _read(page: str) -> str:
    with open(os.path.join(ROOT, page), encoding="utf-8") as fh:
        return fh.read()


#: (page, language, body, the paragraph before it, line number) of every fenced block of every page
BLOCKS = [(page, *b) for page in PAGES for b in blocks(_read(page))]
README_BLOCKS = [b[1:] for b in BLOCKS if b[0] == "README.md"]


def shell_samples(page: str | None = None) -> list[tuple[str, str, str, int]]:
    """(page, command, expected output, line) for every ``$ llgen ...`` line (of one page, or all)."""
    out = []
    for where, _, body, _, line in BLOCKS:
        if page is not None and where != page:
            continue
        lines = body.splitlines()
        for k, text in enumerate(lines):
            if not text.startswith("$ llgen "):
                continue
            want = []
            for nxt in lines[k + 1:]:
                if nxt.startswith("$ "):
                    break
                want.append(nxt)
            out.append((where, text[2:], "\n".join(want) + "\n", line + 1 + k))
    return out


def sh_commands(page: str | None = None) -> list[tuple[str, str, int]]:
    """(page, command, line): ``llgen`` command lines of ```sh blocks that run without a GPU or a placeholder."""
    out = []
    for where, lang, body, _, line in BLOCKS:
        if lang != "sh" or (page is not None and where != page):
            continue
        for k, text in enumerate(body.splitlines()):
            for part in text.split("&&"):
                cmd = part.split("  #")[0].split(" # ")[0].strip()
                words = cmd.split()
                if len(words) < 2 or words[0] != "llgen":
                    continue
                if words[1] in ("show", "plan", "convert") or (words[1] == "regenerate" and "--check" in words
                                                                 and not any("~" in w for w in words)):
                    out.append((where, cmd, line + 1 + k))
    return out


def python_blocks(page: str | None = None) -> list[tuple[str, str, int]]:
    """(page, code, line) of every ```python block."""
    return [(where, body, line) for where, lang, body, _, line in BLOCKS
            if lang == "python" and (page is None or where == page)]


def _llgen(args: list[str], cwd: str = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), COLUMNS="80")
    return subprocess.run([sys.executable, "-m", "ll_codegen", *args], cwd=cwd, env=env, capture_output=True,
                          text=True)


def _visible(folder: str) -> set[str]:
    """The names in ``folder`` that are not hidden (caches such as .pytest_cache come and go)."""
    return {n for n in os.listdir(folder) if not n.startswith(".")}


def _matches(want: str, got: str) -> bool:
    return doctest.OutputChecker().check_output(want, got, doctest.ELLIPSIS)


def test_readme_has_samples():
    assert len(shell_samples("README.md")) >= 4 and len(sh_commands("README.md")) >= 3
    assert len(python_blocks("README.md")) >= 1
    assert any(cmd.startswith("llgen plan ") for _, cmd, _, _ in shell_samples("README.md"))


def test_docs_have_samples():
    """The manual's pages are there and their samples are collected."""
    assert {"docs/specs.md", "docs/commands.md", "docs/headers.md", "docs/hopper.md", "docs/hip.md",
            "docs/host-runtime.md", "docs/verification.md", "docs/python-api.md"} <= set(PAGES)
    assert len(shell_samples()) >= 10 and len(sh_commands()) >= 10 and len(python_blocks()) >= 3
    for page in ("docs/specs.md", "docs/commands.md", "docs/hopper.md", "docs/hip.md"):
        assert shell_samples(page), page


def _ids(rows) -> list[str]:
    return [f"{row[0]}:{row[-1]}" for row in rows]


@pytest.mark.parametrize("page, cmd, want, line", shell_samples(), ids=_ids(shell_samples()))
def test_shell_sample_output(page, cmd, want, line):
    before = _visible(ROOT)
    p = _llgen(shlex.split(cmd)[1:])
    got = p.stdout + p.stderr
    assert _visible(ROOT) <= before, f"{page} line {line}: `{cmd}` wrote into the checkout (a sample runs in the root)"
    assert p.returncode == (2 if want.startswith("llgen: error:") else 0), (page, line, p.stderr)
    assert _matches(want, got), f"{page} line {line}: `{cmd}` prints\n{got}\nbut {page} shows\n{want}"


@pytest.mark.parametrize("page, cmd, line", sh_commands(), ids=_ids(sh_commands()))
def test_sh_command_runs(tmp_path, page, cmd, line):
    args = shlex.split(cmd)[1:]
    if "-o" in args:                           # a temp folder instead of the page's `-o out`
        args[args.index("-o") + 1] = str(tmp_path / "out")
    p = _llgen(args)
    assert p.returncode == 0, f"{page} line {line}: `{cmd}` failed: {p.stderr}"
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
    assert value == want, f"`{line}`: the value is {value!r}"


def _check_repr(value, want, line):
    assert _matches(want, repr(value)), f"`{line}`: the repr is {value!r}"


@pytest.mark.parametrize("page, code, line", python_blocks(), ids=_ids(python_blocks()))
def test_python_block_runs(tmp_path, monkeypatch, page, code, line):
    os.symlink(os.path.join(ROOT, "examples"), tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    checked = compile(_with_checks(code), f"{page}:{line}", "exec")
    if re.search(r"^import .*\b(torch|cupy)\b", code, re.M):
        pytest.importorskip("torch" if "torch" in code else "cupy", reason="a GPU kernel's call (compiled above)")
        from ll_codegen.run import gpu
        if gpu.available() is not None:
            pytest.skip(f"a GPU kernel's call (compiled above): {gpu.available()}")
    env = {"__name__": "__readme__", "__check_value": _check_value, "__check_repr": _check_repr}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(checked, env)


def test_python_blocks_check_their_comments():
    """The checks are real: the API block's literal comments turn into checks."""
    api = next(b for _, b, _ in python_blocks("docs/python-api.md") if "plan_conversion(" in b)
    assert _with_checks(api).count("__check_value(") >= 3
    assert "__check_value(plan.strategy, 'smem'" in _with_checks(api)
    spec_block = next(b for _, b, _ in python_blocks() if "load_spec(" in b and "spec_from_dict" in b)
    assert "__check_repr(s.layout" in _with_checks(spec_block)
    with pytest.raises(AssertionError):
        _check_value("shuffle", "smem", "x")


def yaml_examples() -> list[tuple[str, str, str]]:
    """(page, path, body) of the ```yaml blocks under a paragraph that starts with an example's file name."""
    out = []
    for page, lang, body, before, _ in BLOCKS:
        m = re.search(r"^`(examples/[\w/.-]+\.yaml)` \u2014 ", before, re.M)
        if lang == "yaml" and m:
            out.append((page, m.group(1), body))
    return out


def test_every_kind_has_its_example():
    assert len(yaml_examples()) >= 12


@pytest.mark.parametrize("page, path, body", yaml_examples(), ids=[f"{pg}:{p}" for pg, p, _ in yaml_examples()])
def test_yaml_example_is_the_file(page, path, body):
    with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
        assert yaml.safe_load(body) == yaml.safe_load(fh), (page, path)


def test_sample_mismatch_is_caught():
    """The comparison fails when a page's output differs (what keeps it from drifting)."""
    _, cmd, want, _ = next(s for s in shell_samples("docs/commands.md") if s[1].startswith("llgen plan "))
    got = _llgen(shlex.split(cmd)[1:]).stdout
    assert _matches(want, got)
    assert not _matches(want.replace("score    42.00", "score    41.00"), got)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _headings(page: str) -> set[str]:
    text = re.sub(r"^```.*?^```", "", _read(page), flags=re.M | re.S)      # no '#' lines of code blocks
    return {_anchor(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+)$", text, re.M)}


def links() -> list[tuple[str, str, str]]:
    """(page, target file relative to ROOT, anchor or '') of every relative Markdown link."""
    out = []
    for page in PAGES:
        text = re.sub(r"^```.*?^```", "", _read(page), flags=re.M | re.S)
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            path = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            out.append((page, path, anchor))
    return out


def test_links_resolve():
    assert len(links()) >= 20
    for page, path, anchor in links():
        assert os.path.exists(os.path.join(ROOT, path)), f"{page}: link to a missing file {path}"
        if anchor and path.endswith(".md"):
            assert anchor in _headings(path), f"{page}: link to a missing heading {path}#{anchor}"


def test_named_files_exist():
    """A source path the manual names (`verify/ptx/check.py`, `examples/kernels/gemm_mma.cu`) is there,
    from the repository root or from ``ll_codegen/``; outputs of a command (`out/...`) are not checked.
    docs/ARCHITECTURE.md names files relative to the package it describes and is left out."""
    missing = []
    for page in PAGES:
        if page == "docs/ARCHITECTURE.md":
            continue
        for m in re.finditer(r"`([\w.-]+(?:/[\w.-]+)+\.(?:py|h|cuh|cu|hip|yaml|md|cmake|sh|j2))`", _read(page)):
            path = m.group(1)
            if path.startswith(("out/", "build/")):
                continue
            if not any(os.path.exists(os.path.join(ROOT, base, path)) for base in ("", "ll_codegen")):
                missing.append(f"{page}: {path}")
    assert not missing, missing


def test_every_docs_page_is_linked_from_the_readme():
    linked = {path for page, path, _ in links() if page == "README.md"}
    assert set(PAGES) - {"README.md"} <= linked
