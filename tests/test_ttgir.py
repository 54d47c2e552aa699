"""TTGIR dumps read as layouts (``ll_codegen/ttgir.py``, ``spec.ttgir_spec``, ``llgen show FILE.ttgir``).

* Hand-written snippets of every attribute kind become the spec mappings written out here by hand
  (Triton's camelCase parameters renamed, parents resolved, CTA layouts kept); shapes come from the
  tensor and memdesc types; bad text is one line naming the line or the alias.
* The CLI: the listing, ``--src FILE#ALIAS[@SHAPE]`` in plan/convert, errors exit 2 in one line.
* Against Triton (``crosscheck``, ``compile``: Triton runs its ptxas and lld): kernels compiled on the CPU for sm_90, sm_80, gfx942 and gfx1200
  (``examples/triton/dump_ttgir.py``) are dumped, every attribute read back at every shape, and
  its bases compared with Triton's own ``to_linear_layout`` of the same attribute text, which Triton
  parses itself.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from ll_codegen.spec import SpecError, load_spec, spec_from_dict, ttgir_listing
from ll_codegen.ttgir import TtgirError, read_ttgir, split_selector

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "triton"
sys.path.insert(0, str(ROOT / "tests"))
from triton_oracle import triton_available  # noqa: E402

MODULE = '''module attributes {"ttg.num-warps" = 4 : i32} {
  tt.func public @k(%p: !tt.ptr<f16>) {
    %0 = tt.splat %p : !tt.ptr<f16> -> tensor<128x64x!tt.ptr<f16>, #blocked>
    %1 = tt.load %0 : tensor<128x64x!tt.ptr<f16>, #blocked>
    %2 = ttg.convert_layout %1 : tensor<128x64xf16, #blocked> -> tensor<128x64xf16, #ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 2}>>
    %3 = tt.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32, #ttg.slice<{dim = 1, parent = #blocked}>>
    %4 = ttg.local_alloc %1 : (tensor<128x64xf16, #blocked>) -> !ttg.memdesc<128x64xf16, #shared, #smem, mutable>
    %5 = tt.splat %p : !tt.ptr<f16> -> tensor<64x1x!tt.ptr<f16>, #blocked>
    tt.return
  }
}
'''
HEADER = '''#blocked = #ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
#mma = #ttg.nvidia_mma<{versionMajor = 2, versionMinor = 0, warpsPerCTA = [2, 2], instrShape = [16, 8]}>
#shared = #ttg.swizzled_shared<{vec = 8, perPhase = 1, maxPhase = 8, order = [1, 0]}>
#smem = #ttg.shared_memory
#loc = loc("k.py":1:1)
'''
BLOCKED = {"kind": "blocked", "size_per_thread": [1, 8], "threads_per_warp": [4, 8], "warps_per_cta": [4, 1],
           "order": [1, 0]}
MMA2 = {"kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": [2, 2], "instr_shape": [16, 8]}

#: (attribute text, the spec mapping a user would write for it) -- one per kind and CTA form
CASES = [
    ("#ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>", BLOCKED),
    ("#ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0], "
     "CGALayout = [[1, 0]]}>", dict(BLOCKED, cga_layout=[[1, 0]])),
    ("#triton_gpu.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0], "
     "CTAsPerCGA = [2, 1], CTASplitNum = [2, 1], CTAOrder = [1, 0]}>",
     dict(BLOCKED, ctas_per_cga=[2, 1], cta_split_num=[2, 1], cta_order=[1, 0])),
    ("#ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], CGALayout = [[1, 0]], "
     "instrShape = [16, 128, 16]}>", {"kind": "nvidia_mma", "version": [3, 0], "warps_per_cta": [4, 1],
                                      "cga_layout": [[1, 0]], "instr_shape": [16, 128, 16]}),
    ("#ttg.dot_op<{opIdx = 1, parent = #ttg.nvidia_mma<{versionMajor = 2, versionMinor = 0, warpsPerCTA = [2, 2], "
     "instrShape = [16, 8]}>, kWidth = 2}>", {"kind": "dot_operand", "operand_index": 1, "parent": MMA2, "k_width": 2}),
    ("#ttg.slice<{dim = 0, parent = #ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], "
     "warpsPerCTA = [4, 1], order = [1, 0]}>}>", {"kind": "slice", "dim": 0, "parent": BLOCKED}),
    ("#ttg.linear<{register = [[0, 1], [0, 2]], lane = [[1, 0], [2, 0], [4, 0], [8, 0], [0, 4]], "
     "warp = [[16, 0], [32, 0]], block = []}>",
     {"kind": "linear", "register": [[0, 1], [0, 2]], "lane": [[1, 0], [2, 0], [4, 0], [8, 0], [0, 4]],
      "warp": [[16, 0], [32, 0]], "block": []}),
    ("#ttg.nvmma_shared<{swizzlingByteWidth = 128, transposed = false, elementBitWidth = 16}>",
     {"kind": "nvmma_shared", "swizzle_byte_width": 128, "transposed": False, "element_bitwidth": 16}),
    ("#ttg.nvmma_shared<{swizzlingByteWidth = 128, transposed = true, elementBitWidth = 8, fp4Padded = true}>",
     {"kind": "nvmma_shared", "swizzle_byte_width": 128, "transposed": True, "element_bitwidth": 8,
      "fp4_padded": True}),
    ("#ttg.swizzled_shared<{vec = 8, perPhase = 1, maxPhase = 8, order = [1, 0]}>",
     {"kind": "swizzled_shared", "vec": 8, "per_phase": 1, "max_phase": 8, "order": [1, 0]}),
    ("#ttg.shared_linear<{offset = [[0, 1], [0, 2], [1, 0], [2, 0]]}, alignment = 16>",
     {"kind": "shared_linear", "offset": [[0, 1], [0, 2], [1, 0], [2, 0]]}),
    ("#ttg.amd_mfma<{version = 4, warpsPerCTA = [4, 1], instrShape = [16, 16, 16], isTransposed = false, "
     "tilesPerWarp = [1, 2], elementBitWidth = 64}>",
     {"kind": "amd_mfma", "version": 4, "warps_per_cta": [4, 1], "instr_shape": [16, 16, 16], "transposed": False,
      "tiles_per_warp": [1, 2], "element_bitwidth": 64}),
    ("#ttg.amd_wmma<{version = 2, isTranspose = true, ctaLayout = {warp = [[0, 1], [1, 0]]}}>",
     {"kind": "amd_wmma", "version": 2, "transposed": True, "warps_per_cta": [2, 2]}),
    ("#ttg.amd_wmma<{version = 3, isTranspose = false, ctaLayout = {warp = [[1, 0], [2, 0]], block = [[0, 1]]}, "
     "instrShape = [16, 16, 32]}>",
     {"kind": "amd_wmma", "version": 3, "transposed": False, "warps_per_cta": [4, 1], "cga_layout": [[0, 1]],
      "instr_shape": [16, 16, 32]}),
]


def doc_of(header: str, body: str = MODULE):
    return read_ttgir(header + body, "k.ttgir")


def write(tmp_path: pathlib.Path, text: str, name: str = "k.ttgir") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# ------------------------------------------------------------------ reading
@pytest.mark.parametrize("text,want", CASES, ids=[c[1]["kind"] + str(i) for i, c in enumerate(CASES)])
def test_every_kind_reads_as_its_spec(text, want):
    doc = read_ttgir(f"#a = {text}\n")
    (entry,) = doc.entries
    assert entry.name == "a" and entry.line == 1 and entry.llgen_kind == want["kind"]
    assert doc.spec_of(entry, 2) == want


def test_parents_resolve_through_aliases_and_shapes_come_from_types():
    doc = doc_of(HEADER)
    by = {e.name: e for e in doc.entries}
    assert list(by) == ["blocked", "mma", "shared", "dot_op.1", "slice.1"]     # #smem, #loc: not layouts
    assert by["blocked"].shapes == ((128, 64), (64, 1))                         # largest first, each once
    assert by["shared"].shapes == ((128, 64),)                                   # from the memdesc
    assert by["mma"].shapes == ()
    assert by["dot_op.1"].inline and by["dot_op.1"].line == 10
    assert doc.spec_of(by["dot_op.1"], 2) == {"kind": "dot_operand", "operand_index": 0, "parent": MMA2,
                                              "k_width": 2}
    assert doc.spec_of(by["slice.1"], 1) == {"kind": "slice", "dim": 1, "parent": BLOCKED}


def test_nvmma_shared_takes_its_rank_from_the_shape():
    doc = read_ttgir("#s = #ttg.nvmma_shared<{swizzlingByteWidth = 64, transposed = false, elementBitWidth = 16}>\n"
                     "%0 = x : !ttg.memdesc<2x64x64xf16, #s, #smem, mutable, 2x64x64>\n")
    (e,) = doc.entries
    assert e.shapes == ((2, 64, 64),) and doc.spec_of(e, 3)["rank"] == 3


def test_types_inside_types_give_their_own_shapes():
    doc = read_ttgir("#b = #ttg.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>\n"
                     "%0 = tt.make_tensor_ptr : !tt.ptr<tensor<256xf16, #b>>\n"
                     "%1 = tt.splat %p : !tt.ptr<f16> -> tensor<128x!tt.ptr<f16>, #b>\n"
                     "%2 = x : !tt.tensordesc<tensor<64xf16, #b>>\n")
    assert doc.entries[0].shapes == ((256,), (128,), (64,))


def test_hostile_dumps_are_refused_or_bounded(tmp_path, monkeypatch):
    from ll_codegen import spec as S
    from ll_codegen.core import limits
    many = "".join(f"#b{i} = #ttg.blocked<{{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], "
                   f"order = [0]}}>\n" for i in range(limits.MAX_TTGIR_LAYOUTS + 1))
    with pytest.raises(TtgirError, match=f"more than {limits.MAX_TTGIR_LAYOUTS} layout attributes"):
        read_ttgir(many)
    big = tmp_path / "big.ttgir"
    big.write_text("// " + "x" * limits.MAX_TTGIR_BYTES)
    with pytest.raises(SpecError, match=f"at most {limits.MAX_TTGIR_BYTES}"):
        ttgir_listing(str(big))
    # the listing lays out at most MAX_TTGIR_LISTED (attribute, shape) pairs, however many the dump has
    n = limits.MAX_TTGIR_LISTED + 40
    text = "".join(f"#b{i} = #ttg.blocked<{{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], "
                   f"order = [0]}}>\n%{i} = x : tensor<128xf16, #b{i}>\n" for i in range(n))
    calls = []
    real = S.spec_from_dict
    monkeypatch.setattr(S, "spec_from_dict", lambda *a, **k: calls.append(1) or real(*a, **k))
    items = ttgir_listing(write(tmp_path, text))
    assert len(items) == n and len(calls) == limits.MAX_TTGIR_LISTED
    assert items[-1]["bases"]["128"].startswith("not computed")


def test_selection_and_shapes(tmp_path):
    path = write(tmp_path, HEADER + MODULE)
    assert load_spec(f"{path}#shared").shape == (128, 64)                       # one shape: implied
    assert load_spec(f"{path}#blocked@64x1").shape == (64, 1)
    assert load_spec(f"{path}#mma@64x64").shape == (64, 64)                      # unused: the selector's shape
    assert load_spec(f"{path}#blocked", shape_override="32,64").shape == (32, 64)
    s = load_spec(f"{path}#dot_op.1")
    assert s.source == f"{path}#dot_op.1" and s.kind == "dot_operand"
    with pytest.raises(SpecError, match=r"#blocked: shape: used with 2 shapes \(128x64, 64x1\); choose one as "
                                        r"#blocked@128x64"):
        load_spec(f"{path}#blocked")
    with pytest.raises(SpecError, match="no tensor or memdesc type uses it"):
        load_spec(f"{path}#mma")
    with pytest.raises(SpecError, match="holds 5 layout attributes; choose one"):
        load_spec(path)


def test_the_saved_yaml_spec_is_the_same_layout(tmp_path):
    """The spec ``llgen show`` prints, saved as a file, loads to the same bases."""
    path = str(EXAMPLES / "matmul_sm80.ttgir")
    for item in ttgir_listing(path):
        if item["spec"] is None or "shape" not in item["spec"]:
            continue
        saved = write(tmp_path, yaml.safe_dump(item["spec"]), "saved.yaml")
        shape = item["shapes"][0]
        assert load_spec(saved).linear == load_spec(f"{path}#{item['name']}@{shape}").linear, item["name"]


def test_split_selector():
    assert split_selector("a/k.ttgir#blocked2@128x64") == ("a/k.ttgir", "blocked2", "128x64")
    assert split_selector("k.ttgir##mma") == ("k.ttgir", "mma", None)
    assert split_selector("k.mlir") == ("k.mlir", "", None)
    assert split_selector("a#b.yaml") is None and split_selector("spec.yaml") is None


BAD = [
    ("#a = #ttg.blocked<{sizePerThread = [1, 8], order = [1, 0}>\n", r"line 1: malformed attribute"),
    ("#a = #ttg.slice<{dim = 0, parent = #nope}>\n", r"line 1: #a refers to #nope, which is not defined"),
    ("#a = #ttg.slice<{dim = 0, parent = #a}>\n", r"line 1: #a: #a is its own parent"),
    ("\n%0 = x : tensor<16xf16, #gone>\n", r"line 2: #gone is used but not defined"),
    ("#a = #ttg.blocked<{order = [0]}>\n#a = #ttg.blocked<{order = [0]}>\n", r"line 2: #a is defined twice"),
    ("#a = #ttg.blocked<{x = " + "[" * 40 + "]" * 40 + "}>\n", r"line 1: attribute nested more than 32"),
    ("#a = #ttg.blocked<{x = 123456789012345678901234}>\n", r"line 1: number .* has too many digits"),
    ("%0 = x : tensor<16xf16, #ttg.blocked<{order = [0]}>\n", r"line 1: malformed"),
]


@pytest.mark.parametrize("text,message", BAD)
def test_bad_text_is_one_line_naming_the_line(text, message):
    with pytest.raises(TtgirError, match=message) as e:
        read_ttgir(text)
    assert "\n" not in str(e.value)


UNSUPPORTED = [
    ("#ttg.amd_rotating_shared<{vec = 4, perPhase = 1, maxPhase = 16, order = [0, 1]}>",
     r"#a \(line 1\): #ttg.amd_rotating_shared has no llgen layout kind"),
    ("#ttg.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0], fancy = 1}>",
     r"parameter 'fancy' is not understood"),
    ("#ttg.amd_wmma<{version = 2, isTranspose = true, ctaLayout = {warp = [[1, 0], [0, 1]]}}>",
     r"not a row-major warp tiling"),
    ("#ttg.amd_wmma<{version = 2, isTranspose = true, ctaLayout = {register = [[0, 16]], warp = []}}>",
     r"register bases \(tile repetitions\) have no llgen field"),
]


@pytest.mark.parametrize("text,message", UNSUPPORTED)
def test_unsupported_attributes_are_listed_and_refused_when_chosen(tmp_path, text, message):
    path = write(tmp_path, f"#a = {text}\n%0 = x : tensor<64x64xf16, #a>\n")
    (item,) = ttgir_listing(path)
    assert item["spec"] is None and item["problem"]
    with pytest.raises(SpecError, match=message):
        load_spec(f"{path}#a")


def test_a_layout_class_error_names_the_attribute(tmp_path):
    path = write(tmp_path, "#b = #ttg.blocked<{sizePerThread = [1, 3], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], "
                           "order = [1, 0]}>\n%0 = x : tensor<64x64xf16, #b>\n")
    with pytest.raises(SpecError, match=r"k.ttgir#b: size_per_thread: 3 is not a power of two"):
        load_spec(f"{path}#b")
    (item,) = ttgir_listing(path)
    assert item["bases"]["64x64"].startswith("error: size_per_thread")


# ----------------------------------------------------------------------- CLI
def llgen(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ll_codegen.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_cli_show_lists_every_attribute():
    path = str(EXAMPLES / "matmul_sm80.ttgir")
    r = llgen("show", path)
    assert r.returncode == 0, r.stderr
    for name in ("#blocked ", "#blocked1 ", "#mma ", "#shared ", "#dot_op.1 ", "#dot_op.2 ", "#slice.1 "):
        assert f"\n{name} " in r.stdout
    assert "kind: dot_operand" in r.stdout and "bases at 128x64:" in r.stdout
    j = json.loads(llgen("show", "--json", path).stdout)
    mma = next(i for i in j["layouts"] if i["name"] == "mma")
    assert mma["spec"] == dict(MMA2, warps_per_cta=[2, 2], shape=[128, 128])
    assert mma["bases"]["128x128"]["lane"] == [[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]]   # mma.sync's quads


def test_cli_uses_a_ttgir_layout_wherever_a_spec_is_taken(tmp_path):
    path = str(EXAMPLES / "matmul_sm80.ttgir")
    r = llgen("plan", "--src", f"{path}#blocked1@128x64", "--dst", f"{path}#dot_op.1", "--target", "cuda",
              "--arch", "sm_80")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("strategy:")
    r = llgen("convert", "--src", f"{path}#blocked1@128x64", "--dst", f"{path}#dot_op.1", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "blocked1_to_dot_op_1.cuh").exists(), os.listdir(tmp_path)
    r = llgen("show", f"{path}#mma")
    assert r.returncode == 0 and r.stdout.startswith("nvidia_mma layout, shape [128, 128]")


@pytest.mark.parametrize("args,message", [
    (["show", "{ex}#nope"], "#nope: no such layout attribute in the file"),
    (["show", "{ex}#blocked"], "#blocked: shape: used with 5 shapes"),
    (["show", "{ex}#blocked@12x64"], "size 12 is not a power of two"),
    (["show", "{ex}#blocked@big"], "@big: expected a shape such as 128x64"),
    (["show", "--svg", "{tmp}/x.svg", "{ex}"], "--svg draws one layout: choose one as"),
    (["plan", "--src", "{ex}", "--dst", "{ex}#mma"], "holds 10 layout attributes; choose one as"),
    (["show", "{tmp}/bad.ttgir"], "bad.ttgir: line 2: malformed attribute"),
    (["show", "{tmp}/missing.ttgir"], "cannot read the TTGIR file"),
    (["show", "{tmp}/ttir.ttir"], "no layout attributes (a TTIR dump"),
    (["plan", "--src", "{gfx}#shared1", "--dst", "{gfx}#mma"], "#shared1 (line 8): #ttg.amd_rotating_shared has no"),
])
def test_cli_errors_are_one_line_exit_2(tmp_path, args, message):
    (tmp_path / "bad.ttgir").write_text("#ok = #ttg.blocked<{order = [0]}>\n#a = #ttg.blocked<{order = [1, 0}>\n")
    (tmp_path / "ttir.ttir").write_text("tt.func @k(%p: !tt.ptr<f16>) {\n  %0 = tt.splat %p : tensor<128xf16>\n}\n")
    ex, gfx = EXAMPLES / "matmul_sm80.ttgir", EXAMPLES / "matmul_gfx942.ttgir"
    r = llgen(*[a.format(ex=ex, gfx=gfx, tmp=tmp_path) for a in args])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert message in r.stderr, r.stderr


def test_every_example_dump_reads():
    """Every attribute of the dumps in examples/triton is read, except the AMD rotating shared layout."""
    for path in sorted(EXAMPLES.glob("*.ttgir")):
        for item in ttgir_listing(str(path)):
            if item["kind"] == "ttg.amd_rotating_shared":
                continue
            assert item["problem"] is None, (path.name, item)
            assert item["bases"] and all(isinstance(b, dict) for b in item["bases"].values()), (path.name, item)


# ------------------------------------------------------------- against Triton
WORKER = r"""
import json, re, sys, tempfile
from triton._C.libtriton import ir
from triton._C.libtriton.gluon_ir import GluonOpBuilder
ctx = ir.context(); ir.load_dialects(ctx)
b = GluonOpBuilder(ctx)
job = json.load(sys.stdin)
text = open(job["file"]).read()
aliases = "\n".join(l for l in text.splitlines() if l.startswith("#") and not l.startswith("#loc"))
module = re.search(r"^module attributes \{.*\} \{$", text, re.M).group(0)
items = job["items"]
args = ", ".join(f"%a{i}: " + (f"!ttg.memdesc<{'x'.join(map(str, it['shape']))}xf16, {it['type']}, #smem>"
                               if it["memdesc"] else f"tensor<{'x'.join(map(str, it['shape']))}xf16, {it['type']}>")
                 for i, it in enumerate(items))
src = f"{aliases}\n{module}\n  tt.func public @f({args}) {{\n    tt.return\n  }}\n}}\n"
with tempfile.NamedTemporaryFile("w", suffix=".ttgir", delete=False) as fh:
    fh.write(src)
fn = ir.parse_mlir_module(fh.name, ctx).get_function("f")
out = []
for i, it in enumerate(items):
    v = fn.args(i)
    layout = (b.get_gluon_layout_from_memdesc if it["memdesc"] else b.get_gluon_layout_from_tensor)(v)
    ll = b.to_linear_layout(layout._to_ir(b), it["shape"])
    if hasattr(ll, "offset_bases"):
        res = {"offset": ll.offset_bases, "block": ll.block_bases}
    else:
        res = {"register": ll.reg_bases, "lane": ll.lane_bases, "warp": ll.warp_bases, "block": ll.block_bases}
    out.append({k: [list(map(int, x)) for x in bs] for k, bs in res.items()})
sys.__stdout__.write(json.dumps(out) + "\n")
"""


def triton_bases(path: str, items: list[dict]) -> list[dict]:
    """Triton's own bases of each item's attribute text at its shape (a worker process: Triton's
    nanobind leak report and LLVM noise stay out of the test's output)."""
    r = subprocess.run([sys.executable, "-c", WORKER], input=json.dumps({"file": path, "items": items}),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    if not triton_available():
        pytest.skip("triton is not installed (pip install '.[crosscheck]' to compare with Triton)")
    out = tmp_path_factory.mktemp("ttgir")
    # a cache of its own: the dumps are what this Triton writes now, not what an earlier run left
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path_factory.mktemp("triton_cache")))
    r = subprocess.run([sys.executable, str(EXAMPLES / "dump_ttgir.py"), str(out)], capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return sorted(out.glob("*.ttgir"))


@pytest.mark.crosscheck
@pytest.mark.compile          # triton.compile runs ptxas and ld.lld (Triton's own copies)
def test_the_example_dumps_are_what_triton_writes(dumps):
    assert [p.name for p in dumps] == sorted(p.name for p in EXAMPLES.glob("*.ttgir"))
    for p in dumps:
        assert p.read_text() == (EXAMPLES / p.name).read_text(), f"{p.name}: rerun examples/triton/dump_ttgir.py"


@pytest.mark.crosscheck
@pytest.mark.compile          # triton.compile runs ptxas and ld.lld (Triton's own copies)
def test_every_attribute_has_tritons_bases(dumps):
    """Each attribute of each fresh dump (sm_90, sm_80, 2-CTA sm_90, gfx942, gfx1200), at each of
    its shapes: our bases (read, built by the layout classes) == Triton's to_linear_layout."""
    seen: dict[str, int] = {}
    for path in dumps:
        doc = read_ttgir(path.read_text(), str(path))
        listing = {i["name"]: i for i in ttgir_listing(str(path), most_shapes=64)}
        items, ours = [], []
        for e in doc.entries:
            if e.kind == "ttg.amd_rotating_shared":
                continue
            for shape in e.shapes:
                spec = spec_from_dict(dict(doc.spec_of(e, len(shape)), shape=list(shape)), f"{path}#{e.name}")
                items.append({"type": e.attr.text if e.inline else f"#{e.name}", "shape": list(shape),
                              "memdesc": spec.is_memory})
                ours.append((spec.linear.bases, listing[e.name]["bases"]["x".join(map(str, shape))]))
                seen[e.llgen_kind] = seen.get(e.llgen_kind, 0) + 1
        theirs = triton_bases(str(path), items)
        assert len(theirs) == len(items)
        for it, (a, shown), t in zip(items, ours, theirs):
            assert {k: [list(b) for b in v] for k, v in a.items()} == t, (path.name, it)
            assert shown == t, (path.name, it, "llgen show's bases")
    assert set(seen) == {"blocked", "slice", "nvidia_mma", "dot_operand", "linear", "nvmma_shared",
                         "swizzled_shared", "shared_linear", "amd_mfma", "amd_wmma"}, seen
