"""Suite-wide rules for the CPU tests.

The ``compile`` marker is what ``pytest -m "not compile"`` (the fast subset) relies on, so it must
be complete: a test that starts a compiler, a build tool or the host runtime's toolchain without
it fails here, naming the command.  Two nets catch such a test:

* in this process, every child process goes through ``subprocess.Popen._execute_child``; a
  command whose program is a compiler (``COMPILERS``: nvcc, hipcc, clang++, cmake, ...) is refused
  while a test without the marker runs (set up, called or torn down);
* for a child process that looks a compiler up on ``PATH`` itself (``python -m ll_codegen ...``),
  ``PATH`` starts, during such a test, with a folder of stand-ins of the same names that record
  the call in a file and exit 97.

Either way the offending phase of the test is reported failed with the command line.

``--cpu-durations=N`` lists the N tests that spent the most CPU time (this process, its threads
and the child processes it waited for: compilers, host drivers), with the session's total -- the
numbers that say what a 2-core CI machine has to spend, whatever else loads this one -- and the N
modules that spent the most (``--dist loadscope`` keeps a module on one worker).
"""
from __future__ import annotations

import os
import re
import resource
import shlex
import stat
import subprocess
import threading
from typing import Sequence

import pytest

# the compilers' paths (toolchain.NVCC, HIPCC) resolved now, on the real PATH: a test module that first
# imports toolchain inside a test without the 'compile' marker would otherwise resolve the stand-ins below
import toolchain
from ll_codegen.run.host import PCH_DIR_ENV

# Host SIMT builds at -O0 unless told (``ll_codegen.run.host.OPT_ENV``): a quarter of -O1's compile
# time, and the runtime's fiber switches dominate the runs either way; tests/test_host_run.py builds
# the generated files at -O1, so optimised builds of the same templates are checked too.  Child
# processes (``llgen verify --host``) inherit it.
os.environ.setdefault("LLGEN_HOST_OPT", "-O0")

#: program names (the basename of a command's first word) that compile, assemble or build
COMPILERS = re.compile(r"(nvcc|hipcc|ptxas|cuobjdump|nvdisasm|fatbinary|clang|clang\+\+|amdclang\+\+|gcc|g\+\+|cc|c\+\+|"
                       r"cmake|ctest|make|ninja|ld|ld\.lld|llc)(-\d+(\.\d+)*)?")
#: the exit status of a stand-in compiler on PATH
STAND_IN_STATUS = 97


def compiler_in(args: str | Sequence[str | bytes | os.PathLike]) -> str | None:
    """The compiler ``args`` (a ``Popen`` argument: a sequence or a shell string) runs, or None.
    A shell command line (``sh -c "..."``) counts when any of its words names a compiler."""
    words = shlex.split(args) if isinstance(args, str) else [os.fsdecode(a) for a in args]
    if not words:
        return None
    prog = os.path.basename(words[0])
    if COMPILERS.fullmatch(prog):
        return prog
    if prog in ("sh", "bash", "dash") and "-c" in words[1:]:
        script = words[words.index("-c", 1) + 1] if words.index("-c", 1) + 1 < len(words) else ""
        for w in re.split(r"[\s;&|()]+", script):
            if w and COMPILERS.fullmatch(os.path.basename(w)):
                return os.path.basename(w)
    return None


class _Guard:
    """The test now running and whether it may compile; the compiler calls it made though it may not."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.test: str | None = None
        self.allowed = True
        self.calls: list[str] = []
        self.stand_ins: str | None = None


GUARD = _Guard()
_EXECUTE_CHILD = subprocess.Popen._execute_child


def _guarded_execute_child(self, args, *rest, **kw):
    if not GUARD.allowed:
        prog = compiler_in(args)
        if prog is not None:
            line = args if isinstance(args, str) else " ".join(map(os.fsdecode, args))
            with GUARD.lock:
                GUARD.calls.append(line[:300])
            raise RuntimeError(f"{GUARD.test} runs {prog} without the 'compile' marker: {line[:300]}")
    return _EXECUTE_CHILD(self, args, *rest, **kw)


def _stand_ins(tmp: str) -> str:
    """A folder of executables named like the common compilers that append their command line to
    ``calls.log`` beside them and exit ``STAND_IN_STATUS``."""
    folder = os.path.join(tmp, "compile-marker-stand-ins")
    os.makedirs(folder, exist_ok=True)
    log = os.path.join(folder, "calls.log")
    script = (f"#!/bin/sh\nprintf '%s\\n' \"$0 $*\" >> {shlex.quote(log)}\n"
              f"echo \"compiler called by a test without the 'compile' marker: $0\" >&2\nexit {STAND_IN_STATUS}\n")
    for name in ("nvcc", "hipcc", "ptxas", "clang", "clang++", "clang++-14", "clang++-15", "clang++-16", "gcc", "g++",
                 "cc", "c++", "cmake", "make", "ninja"):
        path = os.path.join(folder, name)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(script)
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


def _child_calls() -> list[str]:
    """Command lines the PATH stand-ins recorded (and clears them)."""
    if GUARD.stand_ins is None:
        return []
    log = os.path.join(GUARD.stand_ins, "calls.log")
    if not os.path.exists(log):
        return []
    with open(log, encoding="utf-8", errors="replace") as fh:
        lines = [ln.strip() for ln in fh if ln.strip()]
    os.remove(log)
    return lines


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-durations", type=int, default=None, metavar="N",
                     help="list the N tests with the most CPU time (self + waited-for children) and the total")


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds (user + system) of this process, and of the child processes it has waited for."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


#: test -> (CPU seconds of this process, of its waited-for children)
CPU: dict[str, tuple[float, float]] = {}


#: the folders of the run's compiled modules and precompiled headers, where this process made them
#: (``pytest_configure``)
RUN_FOLDERS: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    subprocess.Popen._execute_child = _guarded_execute_child
    # one folder per process (xdist workers too); PATH is changed only while an unmarked test runs
    import tempfile
    GUARD.stand_ins = _stand_ins(tempfile.mkdtemp(prefix="llgen_tests_"))
    # The child Python processes (a hundred-odd ``llgen`` runs: CLI, README, CMake tests) compile the
    # package's modules once, into one folder of the run that the xdist workers inherit, not once each
    # (~0.4 s a start where the environment turns bytecode writing off); the checkout stays clean.
    if "PYTHONPYCACHEPREFIX" not in os.environ:
        RUN_FOLDERS.append(tempfile.mkdtemp(prefix="llgen_tests_pycache_"))
        os.environ["PYTHONPYCACHEPREFIX"] = RUN_FOLDERS[-1]
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    # The host SIMT runtime's precompiled headers (~4 CPU-s each), likewise made once per run for every
    # worker and every ``llgen verify --host`` they start, not once per process
    if PCH_DIR_ENV not in os.environ:
        RUN_FOLDERS.append(tempfile.mkdtemp(prefix="llgen_tests_host_pch_"))
        os.environ[PCH_DIR_ENV] = RUN_FOLDERS[-1]


def pytest_unconfigure(config: pytest.Config) -> None:
    subprocess.Popen._execute_child = _EXECUTE_CHILD
    import shutil
    if GUARD.stand_ins is not None:
        shutil.rmtree(os.path.dirname(GUARD.stand_ins), ignore_errors=True)
    for folder in RUN_FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    allowed = item.get_closest_marker("compile") is not None
    GUARD.test, GUARD.allowed, GUARD.calls = item.nodeid, allowed, []
    path = os.environ.get("PATH", "")
    if not allowed and GUARD.stand_ins is not None:
        os.environ["PATH"] = GUARD.stand_ins + os.pathsep + path
    start = cpu_seconds()
    try:
        return (yield)
    finally:
        CPU[item.nodeid] = tuple(b - a for a, b in zip(start, cpu_seconds()))
        os.environ["PATH"] = path
        GUARD.test, GUARD.allowed = None, True
        _child_calls()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if GUARD.allowed:
        return report
    with GUARD.lock:
        calls, GUARD.calls = GUARD.calls, []
    calls += _child_calls()
    if calls:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} starts a compiler without @pytest.mark.compile "
                           f"(pytest -m 'not compile' must not compile); mark the test or module:\n  "
                           + "\n  ".join(calls[:5]))
    return report



#: CPU seconds of the heaviest modules (``--cpu-durations`` on 2 cores, rounded): they run first, so that
#: under ``-n auto --dist loadscope`` (a module stays on one worker) no long module starts last and
#: leaves the other workers idle at the end (longest first: the wall time is near total / workers)
HEAVY_MODULES = {
    "test_compile_generated.py": 176, "test_attention_fwd.py": 135, "test_gemm_wgmma.py": 83, "test_ptx_text.py": 80,
    "test_gemm_fp8.py": 76, "test_host_run.py": 74, "test_cmake_example.py": 66, "test_compile.py": 64,
    "test_reduce_plans.py": 42, "test_gemm_w4a16.py": 40, "test_reduce_headers.py": 39, "test_upcast.py": 38,
    "test_readme.py": 37, "test_plans_property.py": 34, "test_mma.py": 33, "test_gather.py": 32,
    "test_bench_key.py": 32, "test_named_barriers.py": 29, "test_chain_preshuffle.py": 26, "test_fuzz_cli.py": 24,
    "test_triton_parity.py": 23, "test_tma.py": 23, "test_chain.py": 22, "test_shared_relayout.py": 22,
    "test_cli_plan_convert.py": 22, "test_render.py": 18, "test_ttgir.py": 17, "test_mma_mixed.py": 17,
}


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The heaviest modules first (``HEAVY_MODULES``), every module's tests in their own order."""
    weight = {id(it): HEAVY_MODULES.get(os.path.basename(str(it.path)), 0) for it in items}
    items.sort(key=lambda it: -weight[id(it)])        # stable: the collection order within a weight


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workeroutput"):           # a pytest-xdist worker: hand the numbers over
        session.config.workeroutput["llgen_cpu"] = dict(CPU)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist (controller): a worker's per-test CPU seconds."""
    CPU.update(getattr(node, "workeroutput", {}).get("llgen_cpu", {}))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    n = config.getoption("--cpu-durations")
    if n is None or not CPU:
        return
    tr = terminalreporter
    own, kids = (sum(v) for v in zip(*CPU.values()))
    tr.write_sep("=", f"CPU time: {own + kids:.1f} s in {len(CPU)} tests (self {own:.1f} s + waited-for "
                      f"children {kids:.1f} s, all workers)")

    def table(rows: dict[str, tuple[float, float]]) -> None:
        for key, (a, b) in sorted(rows.items(), key=lambda kv: -sum(kv[1]))[:n]:
            tr.write_line(f"{a + b:9.2f}s  (self {a:7.2f}s, children {b:7.2f}s)  {key}")
    table(CPU)
    # per module: ``--dist loadscope`` runs a module on one worker, so the largest bounds the wall time
    modules: dict[str, tuple[float, float]] = {}
    for nodeid, (a, b) in CPU.items():
        m = modules.get(nodeid.split("::", 1)[0], (0.0, 0.0))
        modules[nodeid.split("::", 1)[0]] = (m[0] + a, m[1] + b)
    tr.write_sep("-", f"CPU time by module ({len(modules)} modules)")
    table(modules)


@pytest.fixture(scope="session")
def manifest_build(tmp_path_factory):
    """``generated/manifest.yaml`` planned and rendered as ``llgen regenerate`` does it
    (``regenerate.build``): (its entries, file name -> text), once per test run: the first process to
    ask builds and pickles it (``core.files.made_once``), every other -- another module, another xdist
    worker -- reads that (planning the manifest costs ~9 CPU-s)."""
    import pickle
    from ll_codegen.cli import MANIFEST_COMMANDS
    from ll_codegen.core.files import made_once
    from ll_codegen.regenerate import build, load_manifest
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "generated", "manifest.yaml")

    def make() -> bytes:
        entries = load_manifest(path)
        return pickle.dumps((entries, build(entries, path, MANIFEST_COMMANDS)))
    return pickle.loads(made_once(root / "manifest.pickle", make))


@pytest.fixture(scope="session")
def example_build(tmp_path_factory):
    """``example_build(path)``: the example kernel at ``path`` built with the flags users type, once per
    test run (``toolchain.users_build``): (exit status, output, keep dir).  The root is the run's
    temporary directory, which the xdist workers share (each worker's own is a folder in it)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = root / "users_build"
    root.mkdir(exist_ok=True)
    generated = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "generated")
    return lambda path: toolchain.users_build(path, str(root), generated)
