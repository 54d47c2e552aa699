"""Every generated CUDA file and every example kernel compiles with the nvcc flags a user types.

``nvcc -arch=sm_90a`` runs two device passes: compute_90a (the sm_90a code an H100 runs, with
``__CUDA_ARCH_FEAT_SM90_ALL``) and compute_90 (PTX kept for later GPUs, without it), and ptxas
rejects wgmma and setmaxnreg in the second.  The instruction wrappers' arch guards
(``ll_codegen/emit/instructions.py``) keep that pass compiling (a trap in place of the
instruction), so a generated header needs no special flags.  Each file is compiled

* with ``-arch=sm_90a``, as users type it (the generated sources several to a translation unit: the
  host pass is the same for all, and each is compiled alone, device code only, by ``tests/test_compile.py``);
* with ``-gencode arch=compute_90a,code=sm_90a`` (the sm_90a pass alone): ``-arch=sm_90a`` runs that
  pass, command for command (``nvcc --dryrun`` of both is compared), so the ``-arch=sm_90a`` build
  compiles each source so too; the generated files planned for sm_90a are also compiled so, alone and
  device code only, by ``tests/test_compile.py``;
* with ``-arch=sm_80`` unless it is planned for sm_90a (or, for an example, includes a header
  that is): the guards also keep a newer instruction's wrapper out of an older arch's code; a
  generated file without stmatrix is compiled so by ``tests/test_compile.py`` already.

Files: every ``.cu`` in ``generated/`` (each harness and bench includes its header; every ``.cuh``
must be included by one of them) and every example under ``examples/kernels/``.
"""
from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess

import pytest
import yaml

from toolchain import failures, need, run_all

pytestmark = pytest.mark.compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATED = os.path.join(ROOT, "generated")
KERNELS = os.path.join(ROOT, "examples", "kernels")
FLAGS = {"sm_90a": ["-arch=sm_90a"], "sm_80": ["-arch=sm_80"]}
#: the sm_90a pass alone, which the ``-arch=sm_90a`` build runs too (``test_users_sm_90a_runs_the_sm_90a_pass_alone``)
GENCODE_90A = ["-gencode", "arch=compute_90a,code=sm_90a"]
_INCLUDE = re.compile(r'^#include "(?:\.\./\.\./generated/)?([^"/]+\.cuh)"', re.M)


def planned_archs() -> dict[str, str]:
    """Generated header name (``<name>.cuh``) -> the arch ``generated/manifest.yaml`` plans it for."""
    with open(os.path.join(GENERATED, "manifest.yaml")) as f:
        entries = yaml.safe_load(f)
    out = {}
    for e in entries:
        args = shlex.split(e["args"])
        if args[args.index("--target") + 1] == "cuda":
            out[args[args.index("--name") + 1] + ".cuh"] = args[args.index("--arch") + 1]
    return out


def sources() -> list[str]:
    """The CUDA translation units: generated harnesses and benches, the example kernels."""
    return sorted(glob.glob(os.path.join(GENERATED, "*.cu"))) + sorted(glob.glob(os.path.join(KERNELS, "*.cu")))


def uses_stmatrix(path: str) -> bool:
    """Whether a source's generated headers issue stmatrix (sm_90): tests/test_compile.py then builds
    it for sm_90 only, and only this test compiles it for sm_80 (where the guard must keep it out)."""
    for h in headers_of(path):
        with open(os.path.join(GENERATED, h)) as f:
            if re.search(r"\bstmatrix\.sync", f.read()):
                return True
    return False


def headers_of(path: str) -> list[str]:
    with open(path) as f:
        return _INCLUDE.findall(f.read())


def test_every_generated_header_is_compiled():
    """Each generated .cuh is included by a compiled source; each source's headers are planned in the manifest."""
    archs = planned_archs()
    included = {h for s in sources() for h in headers_of(s)}
    assert {os.path.basename(p) for p in glob.glob(os.path.join(GENERATED, "*.cuh"))} <= included
    assert included <= set(archs), sorted(included - set(archs))
    assert len(glob.glob(os.path.join(KERNELS, "*.cu"))) >= 3


#: generated sources per translation unit of the ``-arch=sm_90a`` build: nvcc's host pass (gcc over
#: cuda_runtime.h, fatbinary) costs ~1.5 s per unit whatever it holds, the device passes scale with the code
BATCH = 8
_SHARED_DECL = re.compile(r"^\s*extern\s+__shared__[^;]*;", re.M)


def batches(paths: list[str]) -> list[list[str]]:
    """Generated sources grouped so that one translation unit can include them all: sources that
    declare the dynamic shared array alike (nvcc warns when two declarations differ in alignment),
    ``BATCH`` at a time."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for p in paths:
        with open(p) as f:
            groups.setdefault(tuple(sorted(set(_SHARED_DECL.findall(f.read())))), []).append(p)
    return [g[k:k + BATCH] for _, g in sorted(groups.items()) for k in range(0, len(g), BATCH)]


def test_batches_hold_every_source_once():
    gen = [s for s in sources() if s.startswith(GENERATED)]
    got = [p for b in batches(gen) for p in b]
    assert sorted(got) == sorted(gen) and all(0 < len(b) <= BATCH for b in batches(gen))


@pytest.mark.parametrize("flags", sorted(FLAGS))
def test_compiles_with(tmp_path, flags):
    """Example kernels compile alone, as a user builds one; generated sources with ``-arch=sm_90a``
    several to a translation unit (each is also compiled alone, device code only, by test_compile)."""
    nvcc = need("nvcc")
    archs = planned_archs()
    units: list[tuple[str, str]] = []               # (what, translation unit)
    generated = []
    for src in sources():
        if flags == "sm_80" and any(archs[h] == "sm_90a" for h in headers_of(src)):
            continue                                   # wgmma, TMA: planned for sm_90a only
        if flags == "sm_80" and src.startswith(GENERATED) and not uses_stmatrix(src):
            continue                                   # test_compile's generated build compiles it with -arch=sm_80
        if flags == "sm_90a" and src.startswith(GENERATED):
            generated.append(src)
        else:
            units.append((os.path.relpath(src, ROOT), src))
    files = len(units) + len(generated)
    for k, batch in enumerate(batches(generated)):
        tu = tmp_path / f"batch{k:02d}.cu"
        tu.write_text("".join(f'#include "{p}"\n' for p in batch))
        units.append((" + ".join(os.path.relpath(p, ROOT) for p in batch), str(tu)))
    jobs = [(what, [nvcc, "-std=c++17", *FLAGS[flags], "-I", GENERATED, "-c", tu, "-o", str(tmp_path / f"{k}.o")])
            for k, (what, tu) in enumerate(units)]
    assert files >= {"sm_80": 2, "sm_90a": 60}[flags]
    bad = failures(run_all(jobs, str(tmp_path)))
    assert not bad, f"{len(bad)} of {len(jobs)} units fail with {' '.join(FLAGS[flags])}:\n" + "\n".join(bad)


#: nvcc's temporary file names (``/tmp/tmpxft_<id>_<n>-<step>_``) and the arch part of an intermediate's
#: name: what differs between two runs of the same steps
_TEMP = re.compile(r"\S*tmpxft_[0-9a-f]+_[0-9a-f]+-\d+_")
_ARCH_PART = re.compile(r"\.compute_90a(?:\.sm_90a)?(?=\.)")


def compile_steps(nvcc: str, flags: list[str], src: str) -> list[str]:
    """The preprocessor, front-end, ptxas and host-compiler commands ``nvcc -c`` runs for ``src``
    (``--dryrun``), temporary names normalised."""
    r = subprocess.run([nvcc, "-std=c++17", *flags, "-I", GENERATED, "-c", src, "-o", "x.o", "--dryrun"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    steps = []
    for line in r.stderr.splitlines():
        cmd = line.removeprefix("#$ ").strip()
        prog = os.path.basename(shlex.split(cmd)[0].replace('"$CICC_PATH/cicc"', "cicc"))
        if prog in ("gcc", "cicc", "cudafe++", "ptxas") or cmd.startswith('"$CICC_PATH/cicc"'):
            steps.append(_ARCH_PART.sub("", _TEMP.sub("TMP_", cmd)))
    return steps


def test_users_sm_90a_runs_the_sm_90a_pass_alone():
    """Every step of ``-gencode arch=compute_90a,code=sm_90a -c`` (preprocessing, cicc for compute_90a,
    ptxas for sm_90a, the host pass) is a step of ``-arch=sm_90a -c`` with the same arguments: the
    ``-arch=sm_90a`` build of ``test_compiles_with`` compiles every source with those flags too (a
    failure or warning of that pass fails it there)."""
    nvcc = need("nvcc")
    src = sorted(glob.glob(os.path.join(KERNELS, "*.cu")))[0]
    alone, users = compile_steps(nvcc, GENCODE_90A, src), compile_steps(nvcc, FLAGS["sm_90a"], src)
    assert any(" -arch compute_90a " in s for s in alone) and any("ptxas -arch=sm_90a " in s for s in alone), alone
    missing = [s for s in alone if s not in users]
    assert not missing, "steps of the sm_90a pass alone that -arch=sm_90a does not run:\n" + "\n".join(missing)
