"""The shape of the package (docs/ARCHITECTURE.md), read from its source with ``ast``.

* One direction: a module imports only modules of its own stage or of stages before it
  (core -> layouts -> spec, plan -> emit -> verify -> the registry (operations) -> the
  drivers (run) -> the API and CLI on top), so the import graph has no cycle.  Function-local imports count: they hide circles, they do
  not remove them.
* No module imports another module's underscore name (seams where they belong).
* No GPU timing code in the library (it lives under bench/); the library does not import the
  bench package except in ``llgen bench`` (lazily, behind a one-line error).
* No module over 600 lines.
* One home for target instructions: inline asm only in ``emit/instructions.py`` (no other module,
  template or example kernel writes ``asm(``).
* One registry (``operations.py``): every operation's record has every field; no other module
  keeps a table keyed by operation or probes a plan's payloads to learn what it is; the API
  asks the registry and never branches on an operation by name.

The checkers run on synthetic packages too, so a test here can fail: a planted cycle,
an upward import and a borrowed private name must each be reported.
"""
from __future__ import annotations

import ast
import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = "ll_codegen"

#: stage of each top-level module or subpackage; a module may import stages <= its own
STAGES = {"core": 0, "layouts": 1, "spec": 2, "mma_specs": 2, "ttgir": 2, "plan": 2, "emit": 3, "verify": 4, "operations": 5, "run": 6,
          "api": 7, "jobs": 8, "regenerate": 8, "chain": 8, "cli": 9, "__main__": 10, "__init__": 10, "testing": 10}

#: the parts of verify/, in the same one-direction order: the vendor models, the emulators
#: (numpy references, counters), the compilers' output read back
VERIFY_PARTS = {"models": 0, "emulate": 1, "ptx": 2}

#: the one place the library may import the bench package: ``llgen bench``, lazily
BENCH_IMPORTS = {("ll_codegen.cli.conversion", "bench")}

TIMING = re.compile(r"gluon\.jit|cudaEventElapsedTime|torch\.cuda\.Event|Event\(\)\.record|do_bench|cuda\.Event\(")


def modules(root: pathlib.Path, pkg: str = PKG) -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every .py file of the package (``__init__`` named by its package)."""
    out = {}
    for p in sorted((root / pkg).rglob("*.py")):
        parts = p.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def imports(root: pathlib.Path, pkg: str = PKG) -> tuple[dict[str, set[str]], list[str]]:
    """(module -> modules of the package it imports, anywhere in its body; 'a takes b._x' lines)."""
    mods = modules(root, pkg)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    private = []
    for m, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base_parts = m.split(".") if is_pkg else m.split(".")[:-1]
                    base_parts = base_parts[:len(base_parts) - node.level + 1]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
                private += [f"{m} takes {base}.{a.name}" for a in node.names
                            if a.name.startswith("_") and not a.name.startswith("__") and base in mods and base != m]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != m and t != pkg:
                    edges[m].add(t)
    return edges, private


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def stage(module: str) -> int:
    """The stage a module belongs to; a ``__main__`` (``python -m ...``) is an entry point, above all."""
    parts = module.split(".")
    return STAGES["__main__" if parts[-1] == "__main__" else parts[1] if len(parts) > 1 else "__init__"]


def upward(edges: dict[str, set[str]]) -> list[str]:
    """Imports of a later stage than the importer's own."""
    return sorted(f"{m} imports {t}" for m, ts in edges.items() for t in ts if stage(t) > stage(m))


# ------------------------------------------------------------------ the package
EDGES, PRIVATE = imports(ROOT)


def test_no_import_cycle():
    assert cycles(EDGES) == []


def test_one_direction():
    assert upward(EDGES) == []


def test_verify_parts_one_direction():
    """Inside verify/: models <- emulate <- ptx, never backwards."""
    def part(m):
        parts = m.split(".")
        return VERIFY_PARTS[parts[2]] if len(parts) > 3 and parts[1] == "verify" else None
    assert all(part(m) is not None for m in EDGES if m.count(".") > 2 and m.split(".")[1] == "verify")
    assert sorted(f"{m} imports {t}" for m, ts in EDGES.items() for t in ts
                  if part(m) is not None and part(t) is not None and part(t) > part(m)) == []


def bench_imports(root: pathlib.Path, pkg: str = PKG) -> set[tuple[str, str]]:
    """(module, enclosing function or '') of every import of ``llgen_bench`` in the package."""
    out = set()
    for m, path in modules(root, pkg).items():
        def visit(node, func):
            for child in ast.iter_child_nodes(node):
                f = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
                names = ([a.name for a in child.names] if isinstance(child, ast.Import) else
                         [child.module or ""] if isinstance(child, ast.ImportFrom) and not child.level else [])
                if any(n == "llgen_bench" or n.startswith("llgen_bench.") for n in names):
                    out.add((m, func))
                visit(child, f)
        visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return out


def test_library_does_not_import_the_bench_package():
    assert bench_imports(ROOT) <= BENCH_IMPORTS


def test_a_planted_bench_import_is_found(tmp_path):
    root = _package(tmp_path, {"__init__.py": "", "testing/__init__.py": "",
                               "testing/corpus.py": "def f():\n    from llgen_bench.corpus import NAMED\n",
                               "cli.py": "import llgen_bench.convert\n"})
    assert bench_imports(root) == {("ll_codegen.testing.corpus", "f"), ("ll_codegen.cli", "")}


def test_every_module_has_a_stage():
    assert all(m.split(".")[1] in STAGES for m in EDGES if m != PKG), sorted(EDGES)


def test_no_private_name_borrowed():
    assert PRIVATE == []


def test_no_timing_code_in_the_library():
    assert [m for m, p in modules(ROOT).items() if TIMING.search(p.read_text(encoding="utf-8"))] == []


def test_modules_under_600_lines():
    sizes = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in modules(ROOT).items()}
    assert {m: n for m, n in sizes.items() if n > 600} == {}


def test_every_operation_has_every_record_field():
    from dataclasses import fields
    from ll_codegen.operations import OPERATIONS, Operation
    assert set(OPERATIONS) >= {"convert", "store", "load", "copy", "tma", "gather", "mma"}
    for name, op in OPERATIONS.items():
        assert op.name == name and op.plan_type.operation == name
        assert all(getattr(op, f.name) is not None for f in fields(Operation)), name
        assert {"header", "harness"} <= set(op.files) and op.endpoints and op.command


#: payloads that once told which operation a plan was (``plan.copy is not None`` ...)
PROBE = re.compile(r"\.(memory|copy|tma|register|shuffle|smem)\s+is\s+(not\s+)?None|"
                   r"\b(memory|copy|tma|register|shuffle|smem)\s*=\s*None\)\s*$")
def probes(root: pathlib.Path = ROOT) -> list[str]:
    """Payload probes on a Transfer plan outside the plan types' own module (a gather's own
    ``shuffle``/``smem`` are its strategy's parts: the gather modules may look at them)."""
    own = {"plan/plans.py", "plan/gather.py", "emit/gather.py", "verify/emulate/gather.py"}
    out = []
    for m, p in modules(root).items():
        rel = p.relative_to(root / PKG).as_posix()
        if rel in own:
            continue
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if PROBE.search(line.split("#")[0]):
                out.append(f"{rel}:{n}: {line.strip()}")
    return out


def test_no_payload_probes():
    """What a plan is, is its type: ``plan.operation``, never which optional payload is set."""
    assert probes() == []


def test_a_planted_payload_probe_is_found(tmp_path):
    root = _package(tmp_path, {"__init__.py": "", "emit/__init__.py": "",
                               "emit/x.py": "def f(plan):\n    if plan.copy is not None:\n        return 1\n"})
    assert probes(root) == ["emit/x.py:2: if plan.copy is not None:"]


def operation_tables(root: pathlib.Path = ROOT) -> list[str]:
    """Dict literals keyed by two or more operation names, one of them an operation only (store,
    load, copy, tma: ``convert``, ``gather`` and ``mma`` are commands too), outside the registry."""
    ops, only = {"convert", "store", "load", "copy", "tma", "gather", "mma"}, {"store", "load", "copy", "tma"}
    out = []
    for m, p in modules(root).items():
        if m == f"{PKG}.operations":
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in ops}
                if len(keys) >= 2 and keys & only:
                    out.append(f"{m}:{node.lineno}: {sorted(keys)}")
    return out


def test_no_table_keyed_by_operation_outside_the_registry():
    assert operation_tables() == []


def test_a_planted_operation_table_is_found(tmp_path):
    root = _package(tmp_path, {"__init__.py": "", "emit/__init__.py": "",
                               "emit/render.py": 'TABLE = {"convert": 1, "store": 2}\nCMD = {"convert": 1, "mma": 2}\n'})
    assert operation_tables(root) == ["ll_codegen.emit.render:1: ['convert', 'store']"]


def test_api_has_no_per_operation_branch():
    """The API asks the registry: no comparison of a plan's or a record's operation with a name."""
    text = (ROOT / PKG / "api.py").read_text(encoding="utf-8")
    assert re.findall(r"\.operation\s*[!=]=|\.name\s*[!=]=\s*\"|\bisinstance\([^)]*Plan", text) == []


# ------------------------------------------------ the checkers can fail
def _package(tmp_path: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for rel, text in files.items():
        p = tmp_path / PKG / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_a_planted_cycle_is_found(tmp_path):
    """plan.model imports emit.render only inside a function; emit.render imports plan.model."""
    root = _package(tmp_path, {
        "__init__.py": "",
        "plan/__init__.py": "", "emit/__init__.py": "",
        "plan/model.py": "def render(self):\n    from ll_codegen.emit.render import render\n    return render(self)\n",
        "emit/render.py": "from ll_codegen.plan.model import render as _r\n",
    })
    edges, private = imports(root)
    assert cycles(edges) == [["ll_codegen.emit.render", "ll_codegen.plan.model"]]
    assert upward(edges) == ["ll_codegen.plan.model imports ll_codegen.emit.render"]


def test_relative_and_private_imports_are_seen(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "", "core/__init__.py": "",
        "core/f2.py": "def _rank(x):\n    return x\n",
        "core/layout.py": "from .f2 import _rank\nfrom . import f2\n",
    })
    edges, private = imports(root)
    assert edges["ll_codegen.core.layout"] == {"ll_codegen.core.f2"}
    assert private == ["ll_codegen.core.layout takes ll_codegen.core.f2._rank"]


@pytest.mark.parametrize("text", ["import torch\nstart = torch.cuda.Event(enable_timing=True)\n",
                                  "ms = triton.testing.do_bench(fn)\n"])
def test_timing_code_is_recognised(text):
    assert TIMING.search(text)


def test_architecture_doc_names_every_package():
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    subpackages = {p.parent.name for p in (ROOT / PKG).glob("*/__init__.py")}
    assert {s for s in subpackages if f"{s}/" not in doc} == set()
    assert os.path.exists(ROOT / "docs" / "ARCHITECTURE.md")


def test_every_package_is_installed():
    """``pip install .`` (not editable) ships only the packages pyproject.toml lists."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    listed = set(re.findall(r'"([\w.]+)"', re.search(r"^packages = \[(.*?)\]", text, re.S | re.M).group(1)))
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / PKG).rglob("__init__.py")}
    assert found - listed == set()


#: where the project's history may not be cited: code, templates, tests, benches, examples, docs
HISTORY_SCANNED = ("ll_codegen", "templates", "tests", "gpu_tests", "bench", "examples", "docs", "generated",
                   "cmake", ".ci", "README.md")
HISTORY = re.compile(r"\b(?:[Ii]ssues?|[Ss]essions?) #?\d")


def history_citations(root: pathlib.Path = ROOT) -> list[str]:
    """``path:line: text`` of every "issue N" / "session N" in a text file of HISTORY_SCANNED;
    recorded results (``RESULTS*``, ``results*.json``) may keep their dates and commits."""
    out = []
    for top in HISTORY_SCANNED:
        base = root / top
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for p in files:
            if "__pycache__" in p.parts or p.name.upper().startswith("RESULTS"):
                continue
            try:
                text = p.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue                                     # binary files (plots, caches)
            for n, line in enumerate(text.splitlines(), 1):
                if HISTORY.search(line):
                    out.append(f"{p.relative_to(root)}:{n}: {line.strip()[:100]}")
    return out


def test_no_history_citations():
    """A reader meets what the code does, not the tickets it came from: no "issue N" or
    "session N" in code, comments, docstrings, test names, templates or docs."""
    assert history_citations() == []


def test_history_citations_are_found(tmp_path):
    issue, session = "issue", "Session"                 # spelled apart so this file does not cite them
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(f'"""Checks ({issue} 12)."""\n# from {session} 28\nx = 1\n')
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "RESULTS.md").write_text(f"run of {session} 28\n")
    assert history_citations(tmp_path) == [f'tests/test_x.py:1: """Checks ({issue} 12)."""',
                                           f"tests/test_x.py:2: # from {session} 28"]


def test_readme_is_short():
    """The README is read in ten minutes; the manual lives in docs/."""
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 300


#: where inline asm may appear: the instruction home (one record per target instruction)
INSTRUCTION_HOME = ("ll_codegen/emit/instructions.py",)
#: the trees scanned for inline asm: the library, its templates, the examples.  Not scanned:
#: bench/ and gpu_tests/, measurement code that times or profiles raw PTX itself (llgen_bench/timing.py
#: reads %globaltimer in its clock probe, gpu_tests/ncu_phases.py issues one bare shared-memory
#: instruction per probe kernel for Nsight Compute; llgen_bench/gluon.py's lop3 is Triton's
#: inline_asm_elementwise, not C++), and tests/, which plant asm to check the host runtime rejects it.
ASM_TREES = ("ll_codegen", "templates", "examples")
_ASM = re.compile(r"\b(?:asm|__asm__)\s*(?:volatile\s*|__volatile__\s*)?\(")


def inline_asm(root: pathlib.Path = ROOT) -> list[str]:
    """``path:line: text`` of every inline-asm statement outside the instruction home."""
    out = []
    for tree in ASM_TREES:
        for p in sorted((root / tree).rglob("*")):
            rel = p.relative_to(root).as_posix()
            if not p.is_file() or rel in INSTRUCTION_HOME or p.suffix not in (".py", ".j2", ".cu", ".cuh", ".h",
                                                                                ".hip", ".cpp"):
                continue
            for no, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                if _ASM.search(line if p.suffix == ".py" else line.split("//")[0]):   # C++: not in comments
                    out.append(f"{rel}:{no}: {line.strip()}")
    return out


def test_inline_asm_only_in_the_instruction_home():
    """Every target instruction is one wrapper of ``emit/instructions.py`` (device asm, host branch,
    arch guard); templates, emitters and the example kernels call wrappers."""
    assert inline_asm() == []


def test_planted_inline_asm_is_found(tmp_path):
    for tree in ASM_TREES:
        (tmp_path / tree).mkdir()
    (tmp_path / "templates" / "x.j2").write_text('    asm volatile("bar.sync 0;");\n')
    (tmp_path / "examples" / "k.cu").write_text('int f() { __asm__ __volatile__ ("trap;"); }\n'
                                                'int g();  // no asm (here)\n')
    (tmp_path / "ll_codegen" / "emit").mkdir()
    (tmp_path / "ll_codegen" / "emit" / "instructions.py").write_text("ASM = 'asm(\"x\")'\n")
    assert inline_asm(tmp_path) == ['templates/x.j2:1: asm volatile("bar.sync 0;");',
                                    'examples/k.cu:1: int f() { __asm__ __volatile__ ("trap;"); }']
