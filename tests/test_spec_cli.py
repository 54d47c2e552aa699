"""Spec loading (ll_codegen/spec.py), ``llgen show`` (cli.py, ll_codegen/layouts/show.py)
and the CLI's error contract: a bad input is ONE ``llgen: error:`` line on
stderr, exit status 2, no traceback, no output file."""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import cli  # noqa: E402
from ll_codegen.core.layout import LinearLayout  # noqa: E402
from ll_codegen.layouts.kinds import LAYOUT_KINDS  # noqa: E402
from ll_codegen.layouts.show import layout_json, owner_grid, render_svg, render_text  # noqa: E402
from ll_codegen.spec import Spec, SpecError, load_spec, parse_shape, spec_from_dict  # noqa: E402

EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.yaml")))
BAD = os.path.join(ROOT, "examples", "bad")

# bad spec -> (a field/fragment the message must name, a fragment saying what is wrong)
BAD_CASES = {
    "malformed_yaml.yaml": ("line 3", "malformed YAML"),
    "not_mapping.yaml": ("top level", "expected a mapping"),
    "empty.yaml": ("top level", "empty"),
    "duplicate_key.yaml": ("line 5", "duplicate key 'warps_per_cta'"),
    "missing_kind.yaml": ("kind: missing", "blocked"),
    "unknown_kind.yaml": ("kind:", "known kinds"),
    "unknown_field.yaml": ("size_per_threads:", "allowed fields"),
    "missing_field.yaml": ("order:", "missing"),
    "wrong_type.yaml": ("warps_per_cta:", "list of integers"),
    "not_power_of_two.yaml": ("size_per_thread:", "power of two"),
    "bad_thread_product.yaml": ("threads_per_warp:", "16"),
    "wrong_rank.yaml": ("shape:", "rank"),
    "bad_cute.yaml": ("descriptor:", "expected"),
    "bad_parent.yaml": ("parent.warps_per_cta:", "power of two"),
    "missing_shape.yaml": ("shape:", "missing"),
    "bad_shape.yaml": ("shape:", "power of two"),
}


def _runner():
    try:  # click < 8.2 mixes stderr into stdout unless told not to
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def _run(args):
    return _runner().invoke(cli.main, args, catch_exceptions=False)


# ------------------------------------------------------------------ examples
def test_every_kind_has_an_example():
    kinds = {load_spec(p).kind for p in EXAMPLES}
    assert kinds == set(LAYOUT_KINDS)
    versions = {tuple(load_spec(p).layout.version) for p in EXAMPLES if load_spec(p).kind == "nvidia_mma"}
    assert {(2, 0), (3, 0)} <= versions


def test_every_bad_file_is_covered():
    assert sorted(os.listdir(BAD)) == sorted(BAD_CASES)


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_load_example(path):
    s = load_spec(path)
    assert isinstance(s, Spec) and isinstance(s.linear, LinearLayout)
    assert s.linear == s.layout.to_linear(s.shape)
    assert list(s.linear.out_dim_sizes.values()) == list(s.shape)
    assert s.linear.is_surjective()


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_show_json(path):
    r = _run(["show", path, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert list(d) == ["in_dims", "out_dims"]
    s = load_spec(path)
    want_ins = ["offset", "block"] if s.is_memory else ["register", "lane", "warp", "block"]
    assert list(d["in_dims"]) == want_ins
    assert d["out_dims"] == {f"dim{i}": n for i, n in enumerate(s.shape)}
    for name, bases in d["in_dims"].items():
        assert bases == s.linear.bases.get(name, [])
        assert all(len(b) == len(s.shape) for b in bases)
    # the JSON rebuilds the same layout
    rebuilt = LinearLayout({k: v for k, v in d["in_dims"].items()}, d["out_dims"])
    assert rebuilt.equal_ignoring_trivial_dims(s.linear)


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_show_text(path):
    r = _run(["show", path])
    assert r.exit_code == 0, r.output
    s = load_spec(path)
    assert r.stdout.startswith(f"{s.kind} layout, shape {list(s.shape)}")
    assert repr(s.linear) in r.stdout
    rows = s.shape[0] if len(s.shape) == 2 else 1
    if max(s.shape) <= 64:
        assert "grid:" in r.stdout
        grid_lines = [ln for ln in r.stdout.splitlines() if ln[:1] == " " or ln[:1].isdigit()]
        assert sum(1 for ln in grid_lines if ln.split(":")[0].strip().isdigit()) >= rows
    else:
        assert "no grid" in r.stdout


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_show_svg(path, tmp_path):
    out = tmp_path / "x.svg"
    s = load_spec(path)
    args = ["show", path, "--svg", str(out)]
    if max(s.shape) > 128:
        args += ["--shape", ",".join("64" for _ in s.shape)]
    r = _run(args)
    assert r.exit_code == 0, r.output
    # ElementTree (expat in C) rather than minidom: the same well-formedness check, a tenth of the time
    root = ET.parse(str(out)).getroot()
    texts = [t.text for t in root.iter() if t.tag.rsplit("}", 1)[-1] == "text" and t.text]
    if s.is_memory:
        assert "0" in texts
    else:
        assert any(t.startswith("t0:r0") for t in texts)
    assert os.listdir(tmp_path) == ["x.svg"]  # no temp file left behind


def test_text_grid_matches_layout():
    s = load_spec(os.path.join(ROOT, "examples", "linear_16x16.yaml"))
    text = render_text(s.linear, s.kind, s.shape)
    # paper 000 layout A: element (0, 2) is thread 1 register 0 of warp 0; (8, 0) is warp 1
    row0 = next(ln for ln in text.splitlines() if ln.startswith(" 0:"))
    assert row0.split()[1:4] == ["w0:t0:r0", "w0:t0:r1", "w0:t1:r0"]
    row8 = next(ln for ln in text.splitlines() if ln.startswith(" 8:"))
    assert row8.split()[1] == "w1:t0:r0"


def test_broadcast_marks_lowest_owner():
    # slice of a blocked layout: every element held by several lanes/warps
    s = load_spec(os.path.join(ROOT, "examples", "slice_64.yaml"), shape_override="16")
    owner, count = owner_grid(s.linear)
    assert count.min() > 1
    L = s.linear
    for j in range(16):
        holders = [(w, t, r) for w in range(L.in_dim_size("warp")) for t in range(L.in_dim_size("lane"))
                   for r in range(L.in_dim_size("register"))
                   if L.apply(register=r, lane=t, warp=w)["dim0"] == j]
        w, t, r = min(holders)
        assert (owner["warp"][0, j], owner["lane"][0, j], owner["register"][0, j]) == (w, t, r)
        assert count[0, j] == len(holders)
    assert "*" in render_text(L, s.kind, s.shape)


def test_memory_grid_shows_offsets():
    s = load_spec(os.path.join(ROOT, "examples", "shared_linear_16x16.yaml"))
    owner, count = owner_grid(s.linear)
    assert (count == 1).all()
    inv = s.linear.invert()
    for i, j in [(0, 0), (1, 4), (3, 9), (15, 15)]:
        assert owner["offset"][i, j] == inv.apply(dim0=i, dim1=j)["offset"]
    svg = render_svg(s.linear, "t", element_bits=16)
    assert "bank" in svg


def test_json_distributed_dims_always_listed():
    s = spec_from_dict({"kind": "linear", "register": [[1]], "lane": [[2], [4], [8], [16], [32]]},
                       shape_override=(64,))
    d = layout_json(s.linear)
    assert list(d["in_dims"]) == ["register", "lane", "warp", "block"]
    assert d["in_dims"]["warp"] == [] and d["in_dims"]["block"] == []


# ---------------------------------------------------------------- spec API
def test_spec_from_dict_and_shape_override():
    d = {"kind": "blocked", "size_per_thread": [1, 4], "threads_per_warp": [4, 8],
         "warps_per_cta": [4, 1], "order": [1, 0], "shape": [64, 64]}
    s = spec_from_dict(d)
    assert s.shape == (64, 64) and s.source == "<dict>"
    assert spec_from_dict(d, shape_override="32,128").shape == (32, 128)
    assert spec_from_dict(d, shape_override=(16, 16)).linear.out_dim_sizes == {"dim0": 16, "dim1": 16}
    with pytest.raises(SpecError) as e:
        spec_from_dict(d, source="x.yaml", shape_override="64,48")
    assert str(e.value) == "x.yaml: --shape: size 48 is not a power of two"


def test_nested_parent_field_paths():
    d = {"kind": "slice", "dim": 0, "shape": [32],
         "parent": {"kind": "slice", "dim": 0,
                    "parent": {"kind": "blocked", "size_per_thread": [1, 1, 1], "threads_per_warp": [1, 4, 8],
                               "warps_per_cta": [1, 1, 6], "order": [2, 1, 0]}}}
    with pytest.raises(SpecError) as e:
        spec_from_dict(d, "n.yaml")
    assert e.value.field == "parent.parent.warps_per_cta"
    assert str(e.value).startswith("n.yaml: parent.parent.warps_per_cta: ")
    d["parent"]["parent"]["warps_per_cta"] = [1, 1, 4]
    d["parent"]["parent"]["bogus"] = 1
    with pytest.raises(SpecError, match=r"parent\.parent\.bogus: unknown field"):
        spec_from_dict(d, "n.yaml")
    del d["parent"]["parent"]["bogus"]
    d["parent"]["shape"] = [4, 4]
    with pytest.raises(SpecError, match=r"parent\.shape: give shape at the top level only"):
        spec_from_dict(d, "n.yaml")
    del d["parent"]["shape"]
    assert spec_from_dict(d).linear.out_dim_sizes == {"dim0": 32}
    d["parent"] = [1, 2]
    with pytest.raises(SpecError, match=r": parent: expected a mapping"):
        spec_from_dict(d)


@pytest.mark.parametrize("text,want", [("64,64", (64, 64)), ("64x32", (64, 32)), ("[16, 8]", (16, 8)),
                                       ("128", (128,)), ((4, 2), (4, 2))])
def test_parse_shape(text, want):
    assert parse_shape(text) == want


@pytest.mark.parametrize("text", ["", "64,", "a,b", "0,4", "3", "64,-64", (4.0,), "64,,64"])
def test_parse_shape_bad(text):
    with pytest.raises(ValueError):
        parse_shape(text)


@pytest.mark.parametrize("name", sorted(BAD_CASES))
def test_bad_spec_api(name):
    with pytest.raises(SpecError) as e:
        load_spec(os.path.join(BAD, name))
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(os.path.join(BAD, name) + ": ")
    field, what = BAD_CASES[name]
    assert field in msg and what in msg


# ------------------------------------------------------------ error contract
def _assert_one_error_line(r, *fragments):
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("llgen: error: ")
    assert "Traceback" not in r.stderr + r.stdout
    for f in fragments:
        assert f in lines[0]
    assert r.stdout == ""


@pytest.mark.parametrize("name", sorted(BAD_CASES))
@pytest.mark.parametrize("mode", ["text", "json", "svg"])
def test_bad_spec_cli(name, mode, tmp_path):
    out = tmp_path / "out.svg"
    args = ["show", os.path.join(BAD, name)]
    if mode == "json":
        args.append("--json")
    if mode == "svg":
        args += ["--svg", str(out)]
    r = _run(args)
    _assert_one_error_line(r, *BAD_CASES[name])
    assert os.listdir(tmp_path) == []  # no output file, no temp file


@pytest.mark.parametrize("args,fragment", [
    (["show", "does/not/exist.yaml"], "cannot read"),
    (["show", "{ex}", "--shape", "64,48"], "--shape: size 48"),
    (["show", "{ex}", "--shape", "64"], "--shape: [64] has rank 1"),
    (["show", "{ex}", "--shape", "sixty"], "--shape:"),
    (["show", "{ex}", "--svg", "no/such/dir/x.svg"], "no/such/dir/x.svg: the folder no/such/dir does not exist"),
    (["show", "{ex}", "--shape", "256,256", "--svg", "{tmp}/big.svg"], "--svg draws grids up to"),
])
def test_cli_errors(args, fragment, tmp_path):
    ex = os.path.join(ROOT, "examples", "blocked_64x64.yaml")
    args = [a.format(ex=ex, tmp=tmp_path) for a in args]
    r = _run(args)
    _assert_one_error_line(r, fragment)
    assert os.listdir(tmp_path) == []


def test_directory_as_spec(tmp_path):
    r = _run(["show", str(tmp_path)])
    assert r.exit_code == 2 and "Traceback" not in r.output


def test_svg_replaces_existing_file_atomically(tmp_path):
    out = tmp_path / "x.svg"
    out.write_text("old")
    ex = os.path.join(ROOT, "examples", "blocked_64x64.yaml")
    assert _run(["show", ex, "--svg", str(out)]).exit_code == 0
    assert out.read_text().startswith("<svg")
    # a failing run leaves the old file untouched
    r = _run(["show", os.path.join(BAD, "bad_shape.yaml"), "--svg", str(out)])
    assert r.exit_code == 2 and out.read_text().startswith("<svg")
    assert sorted(os.listdir(tmp_path)) == ["x.svg"]


def test_error_wrapper_for_new_commands(tmp_path):
    """Commands the lead adds to ``cli.main`` get the same contract."""
    import click

    @cli.main.command("_boom_test")
    @click.argument("what")
    def boom(what):
        if what == "value":
            raise ValueError("bad value\nsecond line")
        if what == "os":
            open(os.path.join(str(tmp_path), "missing", "f"))
        if what == "cli":
            raise cli.CLIError("plain message")
        raise RuntimeError("a bug")
    try:
        _assert_one_error_line(_run(["_boom_test", "value"]), "llgen: error: bad value")
        _assert_one_error_line(_run(["_boom_test", "os"]), "No such file or directory")
        _assert_one_error_line(_run(["_boom_test", "cli"]), "plain message")
        r = _run(["_boom_test", "bug"])
        assert r.exit_code == 1 and r.stderr.startswith("llgen: internal error: RuntimeError: a bug")
        assert len(r.stderr.splitlines()) == 1
    finally:
        del cli.main.commands["_boom_test"]


def test_write_atomic(tmp_path):
    p = tmp_path / "f.txt"
    cli.write_atomic(p, "hello\n")
    assert p.read_text() == "hello\n"
    cli.write_atomic(p, b"bytes")
    assert p.read_bytes() == b"bytes"
    umask = os.umask(0)
    os.umask(umask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600
    assert os.listdir(tmp_path) == ["f.txt"]


# -------------------------------------------------------- real subprocess
def _llgen_cmd():
    exe = shutil.which("llgen")
    if exe and os.path.dirname(exe) == os.path.dirname(sys.executable):
        return [exe]
    # not installed in this interpreter's environment: run the entry point
    return [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv.pop(1)); import cli; cli.main()", ROOT]


def test_subprocess_llgen(tmp_path):
    cmd = _llgen_cmd()
    ex = os.path.join(ROOT, "examples", "wgmma_128x128.yaml")
    ok = subprocess.run(cmd + ["show", ex, "--json"], capture_output=True, text=True, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["out_dims"] == {"dim0": 128, "dim1": 128}
    svg = tmp_path / "w.svg"
    ok = subprocess.run(cmd + ["show", ex, "--shape", "64,64", "--svg", str(svg)],
                        capture_output=True, text=True, cwd=tmp_path)
    assert ok.returncode == 0 and ok.stderr == "" and ok.stdout == f"{svg}\n"     # the path, not the grid too
    assert svg.read_text().startswith("<svg")
    for name in ("malformed_yaml.yaml", "bad_parent.yaml"):
        bad = subprocess.run(cmd + ["show", os.path.join(BAD, name), "--svg", str(tmp_path / "b.svg")],
                             capture_output=True, text=True, cwd=tmp_path)
        assert bad.returncode == 2
        assert bad.stdout == ""
        assert len(bad.stderr.splitlines()) == 1 and bad.stderr.startswith("llgen: error: ")
        assert "Traceback" not in bad.stderr
        assert not (tmp_path / "b.svg").exists()


# ------------------------------------------------------------- robustness
def _field_paths(d, pre=()):
    for k, v in d.items():
        yield pre + (k,)
        if isinstance(v, dict):
            yield from _field_paths(v, pre + (k,))


def test_mutated_specs_only_raise_spec_error():
    """Any value in any field of any example gives a Spec or a one-line
    SpecError naming that field -- never another exception."""
    import copy

    import yaml
    from hypothesis import given, settings
    from hypothesis import strategies as st

    docs = [(p, yaml.safe_load(open(p))) for p in EXAMPLES]
    cases = [(p, d, path) for p, d in docs for path in _field_paths(d)]
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.floats(allow_nan=False),
                        st.text(max_size=6))
    values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(st.sampled_from(["kind", "x", "dim"]), inner, max_size=2),
                          max_leaves=8)

    @settings(max_examples=300, deadline=None, database=None)
    @given(st.sampled_from(cases), values)
    def check(case, value):
        p, d, path = case
        e = copy.deepcopy(d)
        t = e
        for k in path[:-1]:
            t = t[k]
        t[path[-1]] = value
        try:
            spec_from_dict(e, p)
        except SpecError as err:
            assert "\n" not in str(err) and str(err).startswith(p + ": ")
    check()
