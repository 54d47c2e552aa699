"""The CMake module (``cmake/LLGen.cmake``) and its example project
(``examples/cmake/``) build with cmake and nvcc -- no GPU needed.

The example is copied with the module and the spec files it reads into a
temporary folder (so that touching a spec changes nothing in the checkout),
configured with this checkout's ``cli.py`` as ``LLGEN_EXECUTABLE`` and built:
the headers ``llgen_convert()`` generates must equal what ``llgen convert
--emit header`` writes for the same arguments, a second build must not run
llgen again, and touching one spec must regenerate only its headers.

Needs ``cmake`` (the ``test`` extra installs it from the package index) and
``nvcc``; skipped without them unless ``LLGEN_REQUIRE_TOOLCHAINS=1``.
"""
from __future__ import annotations

import glob
import re
import os
import shutil
import subprocess
import sys
import time

import pytest

from toolchain import REQUIRE, need

pytestmark = pytest.mark.compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADERS = {  # name -> the llgen convert arguments examples/cmake/CMakeLists.txt gives it
    "load_tile": ["--src", "../global_64x64.yaml", "--dst", "../blocked_64x64.yaml", "--dtype", "f16",
                  "--target", "cuda", "--arch", "sm_90"],
    "to_mma": ["--src", "../blocked_64x64.yaml", "--dst", "../mma_v2_64x64.yaml", "--dtype", "f16",
               "--target", "cuda", "--arch", "sm_90", "--strategy", "auto"],
}


def need_cmake() -> str:
    path = shutil.which("cmake")
    if path:
        return path
    msg = "cmake not found: pip install cmake (the test extra) for the CMake example build"
    if REQUIRE:
        pytest.fail(msg + " (LLGEN_REQUIRE_TOOLCHAINS=1)", pytrace=False)
    pytest.skip(msg)


def _run(cmd, cwd=None):
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r.stdout + r.stderr


def _exports(build, stem: str, names) -> None:
    """The shared library ``*<stem>*.so`` in ``build`` defines the host entry points ``names``."""
    lib = next(iter(glob.glob(str(build / f"*{stem}*.so"))), None)
    assert lib, os.listdir(build)
    syms = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True).stdout
    for name in names:
        assert re.search(rf"\bT {name}$", syms, re.M), name


def test_cmake_example_builds(tmp_path):
    cmake = need_cmake()
    nvcc = need("nvcc")
    # the layout of the checkout, as far as the example reads it
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "cmake"), src / "cmake")
    shutil.copytree(os.path.join(ROOT, "examples", "cmake"), src / "examples" / "cmake")
    for spec in glob.glob(os.path.join(ROOT, "examples", "*.yaml")):
        shutil.copy(spec, src / "examples")
    example, build = src / "examples" / "cmake", tmp_path / "build"
    llgen = f"{sys.executable};{os.path.join(ROOT, 'cli.py')}"

    _run([cmake, "-S", example, "-B", build, f"-DCMAKE_CUDA_COMPILER={nvcc}", f"-DLLGEN_EXECUTABLE={llgen}"])
    out = _run([cmake, "--build", build, "-j", "2"])
    assert out.count("llgen: ") == 2, out
    assert (build / "tile_to_mma").is_file() or (build / "tile_to_mma.exe").is_file()

    # the headers are exactly what `llgen convert --emit header` writes for the same arguments
    ref = tmp_path / "ref"
    for name, args in HEADERS.items():
        _run([sys.executable, os.path.join(ROOT, "cli.py"), "convert", *args, "--emit", "header", "--name", name,
              "-o", ref], cwd=example)
        got = (build / "llgen" / f"{name}.cuh").read_text()
        assert got == (ref / f"{name}.cuh").read_text(), name
        assert f"namespace {name} {{" in got

    # up to date: nothing runs again; a touched spec regenerates the one header that reads it
    assert "llgen: " not in _run([cmake, "--build", build, "-j", "2"])
    headers = {name: build / "llgen" / f"{name}.cuh" for name in HEADERS}
    before = {name: os.stat(h).st_mtime_ns for name, h in headers.items()}
    # "touched" means newer than every header make compares it with: the spec's own mtime plus a
    # constant is not (the build between the copy and here can take longer than any constant)
    touched = max(time.time(), max(before.values()) / 1e9 + 1.0)
    spec = src / "examples" / "mma_v2_64x64.yaml"
    os.utime(spec, (touched, touched))
    out = _run([cmake, "--build", build, "-j", "2"])
    assert out.count("llgen: ") == 1 and "llgen: to_mma.cuh" in out, out
    assert os.stat(headers["load_tile"]).st_mtime_ns == before["load_tile"]      # not rewritten
    assert os.stat(headers["to_mma"]).st_mtime_ns != before["to_mma"]


def test_cmake_hopper_gemm_builds(tmp_path):
    """examples/cmake_hopper: the Hopper GEMM as its own project, its 26 headers generated at build
    time (llgen_convert and llgen_mma); each equals the copy in generated/ that the manifest makes
    (but for the paths in its comments), and the library exports the host entry points."""
    cmake = need_cmake()
    nvcc = need("nvcc")
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "cmake"), src / "cmake")
    for sub in ("cmake_hopper", "hopper", "gemm", "kernels"):
        shutil.copytree(os.path.join(ROOT, "examples", sub), src / "examples" / sub)
    build = tmp_path / "build"
    llgen = f"{sys.executable};{os.path.join(ROOT, 'cli.py')}"
    # the headers' element-by-element agreement checks are skipped (half of this compile): the users'
    # build of the same file checks them (tests/test_gemm_wgmma.py), and the headers are compared below
    _run([cmake, "-S", src / "examples" / "cmake_hopper", "-B", build, f"-DCMAKE_CUDA_COMPILER={nvcc}",
          f"-DLLGEN_EXECUTABLE={llgen}", "-DCMAKE_CUDA_FLAGS=-DLLGEN_GEMM_SKIP_AGREEMENT_CHECKS=1"])
    out = _run([cmake, "--build", build, "-j", "2"])
    assert out.count("llgen: ") == 26, out
    _exports(build, "gemm_wgmma", ("llgen_gemm_wgmma", "llgen_gemm_wgmma_prepare", "llgen_gemm_wgmma_launch"))
    made = sorted(glob.glob(str(build / "llgen" / "*.cuh")))
    assert len(made) == 26
    strip = lambda text: re.sub(r"^// Command: .*\n", "", text, flags=re.M)  # noqa: E731
    for path in made:
        with open(path) as f, open(os.path.join(ROOT, "generated", os.path.basename(path))) as g:
            ours = strip(g.read()).replace("(examples/hopper/", "(../hopper/").replace("(examples/gemm/", "(../gemm/")
            assert strip(f.read()) == ours, os.path.basename(path)


def test_cmake_attention_builds(tmp_path):
    """examples/cmake_attention: forward attention as its own project, its headers generated at build
    time by llgen_manifest() -- one llgen run over the manifest's attention_* entries -- each
    byte-identical to the copy in generated/; the library exports the host entry points; a second
    build runs nothing, a touched spec reruns the one llgen command.  The f16 d 64 kernels alone are
    compiled (the others' knobs off): the users' build of the whole file is tests/test_attention_fwd.py's."""
    cmake = need_cmake()
    nvcc = need("nvcc")
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "cmake"), src / "cmake")
    for sub in ("cmake_attention", "attention", "chains", "kernels"):
        shutil.copytree(os.path.join(ROOT, "examples", sub), src / "examples" / sub)
    (src / "generated").mkdir()
    shutil.copy(os.path.join(ROOT, "generated", "manifest.yaml"), src / "generated")
    build = tmp_path / "build"
    llgen = f"{sys.executable};{os.path.join(ROOT, 'cli.py')}"
    knobs = " ".join(f"-DLLGEN_ATTENTION_DISABLE_{k}=1" for k in ("BF16", "FP8", "D128", "D256"))
    _run([cmake, "-S", src / "examples" / "cmake_attention", "-B", build, f"-DCMAKE_CUDA_COMPILER={nvcc}",
          f"-DLLGEN_EXECUTABLE={llgen}", f"-DCMAKE_CUDA_FLAGS={knobs}"])
    out = _run([cmake, "--build", build, "-j", "2"])
    assert out.count("llgen: ") == 1, out
    _exports(build, "attention_fwd", ("llgen_attention_fwd", "llgen_attention_fwd_prepare", "llgen_attention_fwd_launch"))
    made = sorted(os.path.basename(p) for p in glob.glob(str(build / "llgen" / "attention_*")))
    shipped = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "generated", "attention_*")))
    assert made == shipped
    for name in made:
        with open(build / "llgen" / name) as f, open(os.path.join(ROOT, "generated", name)) as g:
            assert f.read() == g.read(), name
    assert "llgen: " not in _run([cmake, "--build", build, "-j", "2"])
    stamp = build / "llgen" / "llgen_manifest_attention_fwd.stamp"
    touched = max(time.time(), os.stat(stamp).st_mtime + 1.0)
    os.utime(src / "examples" / "attention" / "s_acc.yaml", (touched, touched))
    assert _run([cmake, "--build", build, "-j", "2"]).count("llgen: ") == 1
