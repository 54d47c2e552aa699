"""Every generated CUDA file and every example kernel compiles with the nvcc flags a user types.

``nvcc -arch=sm_90a`` runs two device passes: compute_90a (the sm_90a code an H100 runs, with
``__CUDA_ARCH_FEAT_SM90_ALL``) and compute_90 (PTX kept for later GPUs, without it), and ptxas
rejects wgmma and setmaxnreg in the second.  The instruction wrappers' arch guards
(``ll_codegen/emit/instructions.py``) keep that pass compiling (a trap in place of the
instruction), so a generated header needs no special flags.

* Every example kernel is compiled alone with ``-arch=sm_90a`` and, unless it includes a header
  planned for sm_90a, with ``-arch=sm_80`` (the guards also keep a newer instruction's wrapper out
  of an older arch's code).  ``tests/test_compile_generated.py`` builds every generated source so,
  several to a translation unit, the intermediate files kept.
* ``-arch=sm_90a`` runs the sm_90a pass alone (``-gencode arch=compute_90a,code=sm_90a``) and the
  front end of ``-arch=sm_90 -cubin``, command for command (``nvcc --dryrun`` of each is compared):
  the users' build is the sm_90a and (with ``ptxas -arch=sm_90`` of the PTX it keeps) the sm_90
  build of every source.

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

from toolchain import PTXAS_SM90, failures, need, run_all

pytestmark = pytest.mark.compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATED = os.path.join(ROOT, "generated")
KERNELS = os.path.join(ROOT, "examples", "kernels")
FLAGS = {"sm_90a": ["-arch=sm_90a"], "sm_80": ["-arch=sm_80"]}
#: the sm_90a pass alone, which the ``-arch=sm_90a`` build runs too (``test_users_sm_90a_runs_the_sm_90a_pass_alone``)
GENCODE_90A = ["-gencode", "arch=compute_90a,code=sm_90a"]
_INCLUDE = re.compile(r'^#include "(?:\.\./\.\./generated/)?([^"/]+\.cuh)"', re.M)


def planned_archs(manifest_build) -> dict[str, str]:
    """Generated header name (``<name>.cuh``) -> the arch ``generated/manifest.yaml`` plans it for (a
    chain's headers: its steps' arch, planned as ``llgen regenerate`` plans them: the run's
    ``manifest_build``)."""
    path = os.path.join(GENERATED, "manifest.yaml")
    with open(path) as f:
        entries = yaml.safe_load(f)
    out = {}
    for e in entries:
        args = shlex.split(e["args"])
        if e.get("command") != "chain" and args[args.index("--target") + 1] == "cuda":
            out[args[args.index("--name") + 1] + ".cuh"] = args[args.index("--arch") + 1]
    for e in (e for e in manifest_build[0] if e.command == "chain"):
        archs = {p.arch for p in e.conv.plan.plans if p.target == "cuda"}
        for name in e.conv.files:
            if name.endswith(".cuh") and archs:
                out[name] = "sm_90a" if "sm_90a" in archs else max(archs)
    return out


def sources() -> list[str]:
    """The CUDA translation units: generated harnesses and benches, the example kernels."""
    return sorted(glob.glob(os.path.join(GENERATED, "*.cu"))) + sorted(glob.glob(os.path.join(KERNELS, "*.cu")))


def headers_of(path: str) -> list[str]:
    with open(path) as f:
        return _INCLUDE.findall(f.read())


def test_every_generated_header_is_compiled(manifest_build):
    """Each generated .cuh is included by a compiled source; each source's headers are planned in the manifest."""
    archs = planned_archs(manifest_build)
    included = {h for s in sources() for h in headers_of(s)}
    assert {os.path.basename(p) for p in glob.glob(os.path.join(GENERATED, "*.cuh"))} <= included
    assert included <= set(archs), sorted(included - set(archs))
    assert len(glob.glob(os.path.join(KERNELS, "*.cu"))) >= 3


@pytest.mark.parametrize("flags", sorted(FLAGS))
def test_examples_compile_with(tmp_path, flags, example_build, manifest_build):
    """Each example kernel compiles alone, as a user builds one, with ``-arch=sm_90a`` and, unless it
    includes a header planned for sm_90a, with ``-arch=sm_80``.  (The generated sources are built so,
    several to a translation unit, by tests/test_compile_generated.py.)  The sm_90a builds are the
    run's shared ones (``toolchain.users_build``), whose PTX and ptxas report the kernels' own tests read."""
    nvcc = need("nvcc")
    archs = planned_archs(manifest_build)
    units = [src for src in sorted(glob.glob(os.path.join(KERNELS, "*.cu")))
             if not (flags == "sm_80" and any(archs[h] == "sm_90a" for h in headers_of(src)))]
    assert len(units) >= {"sm_80": 1, "sm_90a": 3}[flags]
    if flags == "sm_90a":
        results = [(os.path.relpath(src, ROOT), ["nvcc", *FLAGS[flags]], *example_build(src)[:2]) for src in units]
    else:
        results = run_all([(os.path.relpath(src, ROOT), [nvcc, "-std=c++17", *FLAGS[flags], "-I", GENERATED, "-c",
                                                         src, "-o", str(tmp_path / f"{k}.o")])
                           for k, src in enumerate(units)], str(tmp_path))
    bad = failures(results)
    assert not bad, f"{len(bad)} of {len(results)} units fail with {' '.join(FLAGS[flags])}:\n" + "\n".join(bad)


#: nvcc's temporary file names (``/tmp/tmpxft_<id>_<n>-<step>_``) and the arch part of an intermediate's
#: name: what differs between two runs of the same steps
_TEMP = re.compile(r"\S*tmpxft_[0-9a-f]+_[0-9a-f]+-\d+_")
_ARCH_PART = re.compile(r"\.compute_90a?(?:\.sm_90a)?(?=\.)")


def compile_steps(nvcc: str, flags: list[str], src: str, output: str = "-c") -> list[str]:
    """The preprocessor, front-end, ptxas and host-compiler commands ``nvcc -c`` (or ``output``:
    ``-cubin``) runs for ``src`` (``--dryrun``), temporary names normalised."""
    r = subprocess.run([nvcc, "-std=c++17", *flags, "-I", GENERATED, output, src, "-o", "x.o", "--dryrun"],
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
    users' build of tests/test_compile_generated.py compiles every generated source with those flags
    too (a failure or warning of that pass fails it there)."""
    nvcc = need("nvcc")
    src = sorted(glob.glob(os.path.join(KERNELS, "*.cu")))[0]
    alone, users = compile_steps(nvcc, GENCODE_90A, src), compile_steps(nvcc, FLAGS["sm_90a"], src)
    assert any(" -arch compute_90a " in s for s in alone) and any("ptxas -arch=sm_90a " in s for s in alone), alone
    missing = [s for s in alone if s not in users]
    assert not missing, "steps of the sm_90a pass alone that -arch=sm_90a does not run:\n" + "\n".join(missing)


def test_users_sm_90a_runs_the_sm_90_device_pass():
    """``-arch=sm_90 -cubin`` is preprocessing, cicc for compute_90 and ``ptxas -arch=sm_90 -m64`` of
    that PTX.  The first two are steps of ``-arch=sm_90a -c`` with the same arguments (its compute_90
    pass, whose PTX it embeds for later GPUs), and tests/test_compile_generated.py runs the third,
    ptxas with ``toolchain.PTXAS_SM90``, on the PTX that pass keeps: together the sm_90 build of every generated source."""
    nvcc = need("nvcc")
    src = sorted(glob.glob(os.path.join(KERNELS, "*.cu")))[0]
    sm90, users = compile_steps(nvcc, ["-arch=sm_90"], src, "-cubin"), compile_steps(nvcc, FLAGS["sm_90a"], src)
    # --gen_module_id_file: cicc writes the module id file, which the -c build's cudafe++ step has
    # written already (the name is passed either way); it changes nothing cicc compiles
    front = [s.replace(" --gen_module_id_file ", " ") for s in sm90 if not s.startswith("ptxas ")]
    assert any(" -arch compute_90 " in s for s in front) and any("-D__CUDA_ARCH__=900 " in s for s in front), sm90
    missing = [s for s in front if s not in users]
    assert not missing, "steps of -arch=sm_90 -cubin that -arch=sm_90a -c does not run:\n" + "\n".join(missing)
    assembler = [s for s in sm90 if s.startswith("ptxas ")]       # the PTX, then the cubin
    assert len(assembler) == 1, sm90
    assert re.fullmatch(r"ptxas " + re.escape(" ".join(PTXAS_SM90)) + r'\s+\S+\s+-o "?x\.o"?', assembler[0]), assembler
