"""Names of generated code: every default name ``llgen`` derives is one ``--name`` would accept, and
every identifier a generated header declares in its namespace is refused as ``--name`` (the harness
says ``using namespace NAME;``, so a namespace named like one of its own functions or constants makes
``NAME`` ambiguous and the harness does not compile).  CPU only: headers of generated/ and a few
rendered in memory are read, nothing is compiled."""
from __future__ import annotations

import glob
import os
import re
import shutil
import sys

import pytest
from click.testing import CliRunner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ll_codegen import cli  # noqa: E402
from ll_codegen.api import mma_files, reduce_files  # noqa: E402
from ll_codegen.emit.names import check_name, default_name, gather_name, mma_name, reduce_name  # noqa: E402

EX = os.path.join(ROOT, "examples")
HOPPER = os.path.join(EX, "hopper")
WGMMA = ["--acc", os.path.join(HOPPER, "wgmma_acc_128x128.yaml"), "--a", os.path.join(HOPPER, "a_smem_128x64.yaml"),
         "--b", os.path.join(HOPPER, "b_smem_64x128.yaml")]

#: a declaration at namespace scope: a device function, a constexpr constant (several per line), a nested
#: namespace or struct; template parameters (``template <class T>``) are not declarations of the namespace
FUNCTION = re.compile(r"(?:__forceinline__|\bconstexpr)\s+(?:[\w:<>,]+[\s&*]+)*?([A-Za-z_]\w*)\s*\(")
CONSTANT = re.compile(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*=(?!=)")
SCOPE = re.compile(r"^\s*(?:namespace|struct)\s+([A-Za-z_]\w*)")


def namespace_names(text: str) -> set[str]:
    """The identifiers a generated header declares directly in its namespace (brace depth 1;
    ``detail`` and nested namespaces' insides excluded, their names included)."""
    names: set[str] = set()
    depth = 0
    for raw in text.splitlines():
        line = raw.split("//", 1)[0]
        if depth == 1 and not line.lstrip().startswith("#"):
            names.update(m.group(1) for m in FUNCTION.finditer(line))
            if re.match(r"\s*(?:__attribute__\(\(unused\)\)\s*)?(?:static\s+|inline\s+)?constexpr\b", line):
                names.update(m.group(1) for m in CONSTANT.finditer(line))
            m = SCOPE.match(line)
            if m:
                names.add(m.group(1))
        depth += line.count("{") - line.count("}")
    return names


def _rendered_headers() -> dict[str, str]:
    """Headers of every operation family: generated/ (conversions, stores, loads, copies, TMA, relayouts,
    gathers, reductions, wgmma and mma.sync) and, rendered here, AMD MFMA and mma.sync with pack_operand."""
    out = {os.path.basename(p): open(p, encoding="utf-8").read()
           for p in sorted(glob.glob(os.path.join(ROOT, "generated", "*.cuh")))}
    amd = os.path.join(EX, "amd")
    g = mma_files(os.path.join(amd, "mfma_acc_64x64.yaml"), os.path.join(amd, "a_dot_64x32.yaml"),
                  os.path.join(amd, "b_dot_32x64.yaml"), target="hip", name="mfma_names", emit="header")
    out.update(g.files)
    g = reduce_files(os.path.join(EX, "specs", "blocked_wave64_64x64.yaml"), ("1",), "max", "f32", "hip", None,
                     "reduce_names",
                     "header")
    out.update(g.files)
    return out


def test_parser_finds_declarations():
    text = ("namespace x {\nconstexpr int kM = 1, kN = 2;  // c\n__device__ __forceinline__ void mma(float (&a)[4]) {\n"
            "    const int local = 3;\n}\nnamespace detail {\n__device__ __forceinline__ void hidden() {}\n}\n"
            "template <class T> __device__ __forceinline__ T word(T a) { return a; }\n}\n")
    assert namespace_names(text) == {"kM", "kN", "mma", "detail", "word"}


def test_every_declared_name_is_refused():
    headers = _rendered_headers()
    assert len(headers) > 40
    declared = {}
    for fname, text in headers.items():
        for n in namespace_names(text):
            declared.setdefault(n, fname)
    for must in ("mma", "fence", "wait_acc", "acc_index", "kAccRegs", "convert", "store", "via", "coalesced"):
        assert must in declared, must
    accepted = []
    for n, fname in sorted(declared.items()):
        if n == "cvt":          # the API's default name; only a relayout nests it, and refuses it itself (below)
            continue
        try:
            check_name(n)
            accepted.append((n, fname))
        except ValueError:
            pass
    assert not accepted, f"--name accepts identifiers generated headers declare: {accepted[:10]}"


def _run(args):
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    return runner.invoke(cli.main, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("name", ["mma", "fence", "wait_acc", "acc_index", "kAccRegs"])
def test_colliding_name_is_one_error_line(tmp_path, name):
    r = _run(["mma", *WGMMA, "--name", name, "-o", tmp_path])
    assert r.exit_code == 2, (r.stdout, r.stderr)
    err = r.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith("llgen: error: --name ") and name in err[0]
    assert os.listdir(tmp_path) == []


HOSTILE_STEMS = ["__init__", "_Acc", "__", "_", "9acc", "int", "mma", "fence", "a b-c", "_Z9", "template"]


@pytest.mark.parametrize("stem", HOSTILE_STEMS)
def test_default_names_are_usable(stem):
    path = f"/somewhere/{stem}.yaml"
    for name in (mma_name(path), gather_name(path, 1), reduce_name(path, [0], "sum"), default_name(path, path),
                 default_name("/x/ok.yaml", path), default_name(path, "/x/ok.yaml")):
        assert check_name(name) == name


def test_mma_default_name_of_a_reserved_stem(tmp_path):
    acc = tmp_path / "__init__.yaml"
    shutil.copy(os.path.join(HOPPER, "wgmma_acc_128x128.yaml"), acc)
    out = tmp_path / "out"
    r = _run(["mma", "--acc", acc, *WGMMA[2:], "-o", out])
    assert r.exit_code == 0, r.stderr
    header = [f for f in os.listdir(out) if f.endswith(".cuh")]
    assert header == ["mma___init___mma.cuh"]
    assert "namespace mma___init___mma {" in (out / header[0]).read_text()


def test_relayout_refuses_the_names_of_its_nested_namespaces(tmp_path):
    ex = os.path.join(ROOT, "examples")
    r = _run(["convert", "--src", os.path.join(ex, "swizzled_shared_64x64.yaml"), "--dst",
              os.path.join(ex, "nvmma_shared_64x64.yaml"), "--name", "cvt", "-o", tmp_path / "out"])
    assert r.exit_code == 2 and r.stderr.splitlines() == [
        "llgen: error: --name cvt: a relayout's header nests the namespaces src, cvt and dst; pick another"]
    assert not (tmp_path / "out").exists()
