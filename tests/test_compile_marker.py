"""The ``compile`` marker is complete: ``tests/conftest.py`` fails a test that starts a compiler
without it (``pytest -m "not compile"`` is the fast subset and must not compile anything).

The guard runs here on a small inner test file (a pytest child process with a copy of the
conftest): a test without the marker that runs a program named like a compiler -- by path, through
``sh -c``, or from a child process that finds it on ``PATH`` -- fails, naming the command; the same
call under the marker, and a test without the marker that runs no compiler, pass.  The "compiler"
is a script named ``nvcc`` that exits 0, so no toolchain is needed.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import conftest

HERE = os.path.dirname(os.path.abspath(__file__))

INNER = '''
import subprocess
import sys

import pytest

FAKE = {fake!r}


def test_by_path():
    subprocess.run([FAKE, "--version"], check=True)


def test_through_a_shell():
    subprocess.run(["sh", "-c", f"cd / && {{FAKE}} --version"], check=True)


def test_child_finds_it_on_path():
    subprocess.run([sys.executable, "-c", "import subprocess; subprocess.run(['nvcc', '--version'])"])


@pytest.mark.compile
def test_marked_by_path():
    subprocess.run([FAKE, "--version"], check=True)


def test_no_compiler():
    assert subprocess.run(["true"]).returncode == 0
'''


def test_compiler_names():
    assert conftest.compiler_in(["/usr/local/cuda/bin/nvcc", "-ptx"]) == "nvcc"
    assert conftest.compiler_in(["clang++-15", "-c"]) == "clang++-15"
    assert conftest.compiler_in(["sh", "-c", "cd b && cmake --build ."]) == "cmake"
    assert conftest.compiler_in("hipcc --version") == "hipcc"
    for harmless in (["git", "status"], [sys.executable, "-m", "ll_codegen", "show"], ["/tmp/llgen_host_1/driver0"],
                     ["nm", "-D", "lib.so"], []):
        assert conftest.compiler_in(harmless) is None, harmless


def test_unmarked_compiler_calls_fail(tmp_path):
    fake = tmp_path / "bin" / "nvcc"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    inner = tmp_path / "inner"
    inner.mkdir()
    for name in ("conftest.py", "toolchain.py"):        # the conftest resolves the compilers through toolchain
        shutil.copy(os.path.join(HERE, name), inner / name)
    (inner / "pytest.ini").write_text("[pytest]\nmarkers =\n    compile: compiles\n")
    (inner / "test_inner.py").write_text(INNER.format(fake=str(fake)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LLGEN_"))}
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-q", "test_inner.py"],
                       cwd=inner, capture_output=True, text=True, env=env, timeout=300)
    out = r.stdout + r.stderr
    outcome = dict((name, word) for word, name in re.findall(r"^(PASSED|FAILED|ERROR) test_inner\.py::(\w+)", out, re.M))
    assert outcome == {"test_by_path": "FAILED", "test_through_a_shell": "FAILED",
                       "test_child_finds_it_on_path": "FAILED", "test_marked_by_path": "PASSED",
                       "test_no_compiler": "PASSED"}, out[-3000:]
    assert r.returncode == 1
    assert out.count("without @pytest.mark.compile") >= 3, out[-3000:]
    assert f"{fake} --version" in out and "nvcc --version" in out
