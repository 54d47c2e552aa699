"""Fuzz the command line with hostile input, one test per class.

Every generated case must end with exit status 2, exactly one output line
starting with ``llgen: error:``, no traceback, nothing on stdout, nothing
written in the output folder, within ``CASE_CPU_S`` seconds of CPU time (a wide bound: real cases
take milliseconds; CPU time, not wall time, so a loaded machine cannot fail it), and the process's
peak memory may not grow by more than ``GROWTH_MIB`` over the whole run
(the billion-laughs file took 8 GB).  A few valid
inputs (``test_valid_inputs_succeed``) must exit 0, so the harness can fail;
so must a valid spec under a hostile file name (``control_chars_in_file_names``,
which checks the SVG is well-formed XML).  The classes from
``hostile_field_names`` down cover field names, manifest keys and arguments,
failing stdout, long dtype lists and hostile file names; SIGINT/SIGTERM during the
write phase are tested by ``tests/test_cli_errors_and_writes.py``, which needs a process.

Hypothesis runs derandomized (a fixed seed, no example database), so every
run draws the same cases; llgen runs in-process through click's CliRunner.
Cases per class (``CASES``; 3,168 in all), measured at 25 s for the first
2,500 on a shared 2-core machine (a budget, not asserted):

========================  =====  ==========================================
class                     cases  what
========================  =====  ==========================================
malformed_yaml            300    YAML-ish text and random bytes
wrong_types               300    a field of a valid spec of every kind
                                 replaced by a float, bool, string, null,
                                 list or mapping
huge_numbers              250    an integer field out of range (> 2^20 or
                                 negative)
non_power_of_two_shapes   250    spec shape or --shape with a size that is
                                 not a power of two
mismatched                150    valid blocked pairs that differ in shape,
                                 warps or lanes
unknown_kinds             150    kind names that are not kinds
aliases                   200    anchors and aliases anywhere in a valid spec
deep_nesting              150    65 to 5000 levels of [, {, - or mappings
bad_names                 200    --name values that are not usable names
bad_cute                  300    broken CuTe descriptors
bad_cli_ints              250    --smem-budget, --iters, --ctas, --runs,
                                 --seed, --warps, --shape, --stride
hostile_field_names       200    spec (top or parent), corpus and manifest
                                 keys with newlines, CRs, line separators,
                                 control characters, or not strings
mixed_type_manifest_keys  100    manifest entries with unknown keys of mixed
                                 types (1, zz, 1.5, true, null)
manifest_not_conversion   120    manifest args with --help, -h, --plan, -o,
                                 --emit, stray words; with and without --check
stdout_fails               48    convert, gather, show --svg, regenerate whose
                                 stdout fails (ENOSPC, EPIPE, EIO), every
                                 combination: nothing written
long_dtype_lists          100    verify --dtype lists and corpus dtypes of 65
                                 to 19,000 items, corpora over the work bound:
                                 refused before any row is planned
control_chars_in_names    100    valid and invalid specs under file names with
                                 control characters: SVG parses, errors one line
========================  =====  ==========================================
"""
from __future__ import annotations

import copy
import os
import re
import shutil
import sys
import time
from unittest import mock

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings, strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ll_codegen import api, cli  # noqa: E402
from ll_codegen.core import limits  # noqa: E402
from ll_codegen.jobs import corpus as jobs  # noqa: E402
from ll_codegen.layouts.kinds import LAYOUT_KINDS  # noqa: E402
from ll_codegen.core.dtypes import DTYPE_BYTES  # noqa: E402
from ll_codegen.core.files import quote_path  # noqa: E402
from ll_codegen.spec import SpecError, spec_from_dict  # noqa: E402

EX = os.path.join(ROOT, "examples")
BLOCKED = os.path.join(EX, "blocked_64x64.yaml")
MMA = os.path.join(EX, "mma_v2_64x64.yaml")
GLOBAL = os.path.join(EX, "global_64x64.yaml")
NVMMA_SHARED = os.path.join(EX, "nvmma_shared_64x64.yaml")
CASE_CPU_S = 5.0      # CPU seconds per case; real cases take milliseconds
GROWTH_MIB = 512      # peak RSS growth allowed over the module

CASES = {"malformed_yaml": 300, "wrong_types": 300, "huge_numbers": 250, "non_power_of_two_shapes": 250,
         "mismatched": 150, "unknown_kinds": 150, "aliases": 200, "deep_nesting": 150, "bad_names": 200,
         "bad_cute": 300, "bad_cli_ints": 250, "hostile_field_names": 200, "mixed_type_manifest_keys": 100,
         "manifest_not_conversion": 120, "stdout_fails": 48, "long_dtype_lists": 100,
         "control_chars_in_names": 100}


def _settings(cls: str):
    return settings(max_examples=CASES[cls], derandomize=True, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck))


def _runner() -> CliRunner:
    try:  # click < 8.2 mixes stderr into stdout unless told not to
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


RUNNER = _runner()


def _peak_mib() -> float:
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return 0.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024     # KiB on Linux


PEAK_AT_START = _peak_mib()


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _out(work) -> str:
    out = os.path.join(work, "out")
    shutil.rmtree(out, ignore_errors=True)
    return out


def _assert_error(args: list[str], out: str | None = None, *fragments: str) -> str:
    """llgen ``args`` fails with one ``llgen: error:`` line, exit 2, nothing written, within ``CASE_CPU_S``
    of CPU time; returns the error line."""
    t = time.process_time()
    r = RUNNER.invoke(cli.main, args)
    cpu = time.process_time() - t
    lines = (r.stdout + r.stderr).splitlines()
    assert r.exit_code == 2, (args, r.exit_code, r.stdout[-500:], r.stderr[-500:], r.exception)
    assert len(lines) == 1 and lines[0].startswith("llgen: error: "), (args, lines[:5])
    assert "Traceback" not in lines[0] and len(lines[0]) < 1000, lines[0][:200]
    assert r.stdout == "", r.stdout[:200]
    if out is not None:
        assert not os.path.exists(out), (args, os.listdir(out))
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    assert cpu < CASE_CPU_S, (args, cpu)
    assert _peak_mib() - PEAK_AT_START < GROWTH_MIB, (args, _peak_mib(), PEAK_AT_START)
    return lines[0]


def _write(work, text: str | bytes, name: str = "spec.yaml") -> str:
    p = os.path.join(work, name)
    with open(p, "wb") as fh:
        fh.write(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    return p


COMMANDS = st.sampled_from(["show", "plan", "convert"])


def _spec_args(cmd: str, spec: str, out: str) -> list[str]:
    """``cmd`` on ``spec`` (as --src, with a valid --dst) writing into ``out``."""
    if cmd == "show":
        return ["show", spec]
    if cmd == "plan":
        return ["plan", "--src", spec, "--dst", BLOCKED]
    return ["convert", "--src", spec, "--dst", BLOCKED, "-o", out, "--emit", "all"]


# ------------------------------------------------------------- valid specs
VALID: dict[str, dict] = {
    "blocked": {"kind": "blocked", "size_per_thread": [1, 4], "threads_per_warp": [4, 8],
                "warps_per_cta": [4, 1], "order": [1, 0], "shape": [64, 64]},
    "slice": {"kind": "slice", "dim": 1, "parent": {"kind": "blocked", "size_per_thread": [1, 4],
              "threads_per_warp": [4, 8], "warps_per_cta": [4, 1], "order": [1, 0]}, "shape": [64]},
    "mma": {"kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": [2, 2], "instr_shape": [16, 8],
            "shape": [64, 64]},
    "wgmma": {"kind": "nvidia_mma", "version": [3, 0], "warps_per_cta": [4, 1], "instr_shape": [16, 64, 16],
              "shape": [128, 128]},
    "dot": {"kind": "dot_operand", "operand_index": 0, "k_width": 2, "parent": {
        "kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": [4, 1], "instr_shape": [16, 8]},
        "shape": [64, 64]},
    "mfma": {"kind": "amd_mfma", "version": 3, "instr_shape": [32, 32, 8], "transposed": True,
             "warps_per_cta": [2, 2], "element_bitwidth": 32, "tiles_per_warp": [1, 1], "shape": [64, 64]},
    "wmma": {"kind": "amd_wmma", "version": 2, "transposed": False, "warps_per_cta": [2, 2],
             "instr_shape": [16, 16, 16], "shape": [32, 32]},
    "swizzled_shared": {"kind": "swizzled_shared", "vec": 8, "per_phase": 1, "max_phase": 8, "order": [1, 0],
                        "shape": [64, 64]},
    "nvmma_shared": {"kind": "nvmma_shared", "swizzle_byte_width": 128, "element_bitwidth": 16, "rank": 2,
                     "transposed": False, "fp4_padded": False, "shape": [64, 64]},
    "shared_linear": {"kind": "shared_linear", "offset": [[0, 1], [0, 2], [0, 4], [0, 8], [1, 4], [2, 8],
                                                         [4, 0], [8, 0]], "block": [], "shape": [16, 16]},
    "linear": {"kind": "linear", "register": [[0, 1], [1, 0]], "lane": [[0, 2], [0, 4], [0, 8], [2, 0], [4, 0]],
               "warp": [[8, 0]], "block": [], "shape": [16, 16]},
    "cute": {"kind": "cute", "descriptor": "<(64,64),(64,1),swizzle<3,4,3>,elem=f16>", "element_bitwidth": 16,
             "shape": [64, 64]},
    "global": {"kind": "global", "order": [1, 0], "alignment": 16, "shape": [64, 64]},
}


def _leaves(d, path=()):
    """(path, value) of every scalar and list field (nested parents included;
    not ``kind``, whose wrong values have their own class)."""
    for k, v in d.items():
        if k == "kind":
            continue
        if isinstance(v, dict):
            yield from _leaves(v, path + (k,))
        else:
            yield path + (k,), v
            if isinstance(v, list):
                for i, x in enumerate(v):
                    if isinstance(x, list):
                        for j, y in enumerate(x):
                            yield path + (k, i, j), y
                    else:
                        yield path + (k, i), x


LEAVES = [(kind, path, v) for kind, spec in VALID.items() for path, v in _leaves(spec)]


def _replace(spec: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(spec)
    node = out
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return out


def _dump(d) -> str:
    return yaml.safe_dump(d, default_flow_style=None, sort_keys=False)


# --------------------------------------------------------------- the classes
YAML_CHARS = "[]{}:,-?&*!|>'\"#%@` \n\t\\abkz019.=<>"


@_settings("malformed_yaml")
@given(text=st.one_of(st.text(alphabet=YAML_CHARS, max_size=120),
                      st.binary(max_size=120),
                      st.text(max_size=60).map(lambda t: "kind: blocked\n" + t)),
       cmd=COMMANDS)
def test_malformed_yaml(work, text, cmd):
    out = _out(work)
    _assert_error(_spec_args(cmd, _write(work, text), out), out)


BAD_TYPES = st.one_of(st.floats(allow_nan=True), st.booleans(), st.text(max_size=30), st.none(),
                      st.just([]), st.lists(st.text(max_size=3), min_size=1, max_size=3),
                      st.dictionaries(st.text(max_size=3), st.integers(), min_size=1, max_size=2),
                      st.lists(st.floats(min_value=1, max_value=8), min_size=1, max_size=3))


def _wrong_for(value, bad) -> bool:
    """Whether ``bad`` is a wrong value where ``value`` is right."""
    if isinstance(value, bool):
        return not isinstance(bad, bool)
    if isinstance(value, int):
        return not (isinstance(bad, int) and not isinstance(bad, bool))
    if isinstance(value, str):
        return not isinstance(bad, str)
    if isinstance(value, list):
        return not (isinstance(bad, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in bad))
    return True


@_settings("wrong_types")
@given(leaf=st.sampled_from(LEAVES), bad=BAD_TYPES, cmd=COMMANDS)
def test_wrong_types(work, leaf, bad, cmd):
    kind, path, value = leaf
    assume(_wrong_for(value, bad))
    spec = _replace(VALID[kind], path, bad)
    if bad is None or bad == []:     # null / [] are fine for optional fields and empty bases
        try:
            spec_from_dict(spec)
            assume(False)
        except SpecError:
            pass
    out = _out(work)
    name = next(p for p in reversed(path) if isinstance(p, str))
    # null / [] read as "absent" or "no bases": the error may then be about what is missing (e.g. the
    # bases no longer cover the shape) rather than name the field
    _assert_error(_spec_args(cmd, _write(work, _dump(spec)), out), out, *(() if bad is None or bad == [] else (name,)))


@_settings("huge_numbers")
@given(leaf=st.sampled_from([lf for lf in LEAVES if isinstance(lf[2], int) and not isinstance(lf[2], bool)]),
       n=st.one_of(st.integers(min_value=(1 << 20) + 1, max_value=1 << 300),
                   st.integers(min_value=-(1 << 70), max_value=-1)),
       cmd=COMMANDS)
def test_huge_numbers(work, leaf, n, cmd):
    kind, path, _ = leaf
    out = _out(work)
    _assert_error(_spec_args(cmd, _write(work, _dump(_replace(VALID[kind], path, n))), out), out)


def _bad_sizes():
    size = st.one_of(st.integers(min_value=-(1 << 40), max_value=1 << 40), st.integers(min_value=0, max_value=300))
    return st.lists(size, min_size=1, max_size=4).filter(lambda s: any(v < 1 or v & (v - 1) for v in s))


@_settings("non_power_of_two_shapes")
@given(kind=st.sampled_from(sorted(VALID)), sizes=_bad_sizes(), via_option=st.booleans(), cmd=COMMANDS)
def test_non_power_of_two_shapes(work, kind, sizes, via_option, cmd):
    out = _out(work)
    if via_option:
        args = _spec_args(cmd, _write(work, _dump(VALID[kind])), out) + ["--shape", ",".join(map(str, sizes))]
    else:
        args = _spec_args(cmd, _write(work, _dump(dict(VALID[kind], shape=sizes))), out)
    _assert_error(args, out, "shape")


def _blocked():
    """A valid rank-2 blocked spec: (spec, warps)."""
    def make(spt0, spt1, lanes0, warps_log, w0, order, s0, s1, wave64):
        warp_size = 64 if wave64 else 32
        l0 = 1 << min(lanes0, warp_size.bit_length() - 1)
        w = 1 << warps_log
        wa = 1 << min(w0, warps_log)
        return {"kind": "blocked", "size_per_thread": [1 << spt0, 1 << spt1],
                "threads_per_warp": [l0, warp_size // l0], "warps_per_cta": [wa, w // wa],
                "order": order, "shape": [1 << s0, 1 << s1]}
    return st.builds(make, st.integers(0, 2), st.integers(0, 2), st.integers(0, 6), st.integers(0, 3),
                     st.integers(0, 3), st.sampled_from([[1, 0], [0, 1]]), st.integers(4, 7), st.integers(4, 7),
                     st.booleans())


def _mismatch(a: dict, b: dict) -> bool:
    import math
    return (a["shape"] != b["shape"] or math.prod(a["warps_per_cta"]) != math.prod(b["warps_per_cta"])
            or math.prod(a["threads_per_warp"]) != math.prod(b["threads_per_warp"]))


@_settings("mismatched")
@given(a=_blocked(), b=_blocked(), convert=st.booleans())
def test_mismatched(work, a, b, convert):
    assume(_mismatch(a, b))
    out = _out(work)
    src, dst = _write(work, _dump(a), "a.yaml"), _write(work, _dump(b), "b.yaml")
    args = (["convert", "-o", out] if convert else ["plan"]) + ["--src", src, "--dst", dst]
    if a["threads_per_warp"][0] * a["threads_per_warp"][1] == 64:
        args += ["--target", "hip"]
    _assert_error(args, out, "differ")


@_settings("unknown_kinds")
@given(kind=st.one_of(st.text(max_size=40), st.sampled_from(sorted(LAYOUT_KINDS)).map(str.upper),
                      st.sampled_from(sorted(LAYOUT_KINDS)).map(lambda k: k.replace("_", "-")),
                      st.integers(), st.floats(), st.booleans(), st.none()),
       cmd=COMMANDS)
def test_unknown_kinds(work, kind, cmd):
    assume(kind not in LAYOUT_KINDS)
    out = _out(work)
    _assert_error(_spec_args(cmd, _write(work, _dump(dict(VALID["blocked"], kind=kind))), out), out, "kind")


@_settings("aliases")
@given(kind=st.sampled_from(sorted(VALID)), data=st.data(), anchor=st.from_regex(r"[a-z]{1,8}", fullmatch=True),
       cmd=COMMANDS)
def test_aliases(work, kind, data, anchor, cmd):
    text = _dump(VALID[kind])
    keys = [m.end() for m in re.finditer(r"^\s*[a-z_]+:", text, re.M)]
    at = data.draw(st.sampled_from(keys))
    how = data.draw(st.sampled_from(["anchor", "alias", "merge"]))
    if how == "anchor":                 # an anchor alone is refused too
        text = text[:at] + f" &{anchor}" + text[at:]
    elif how == "alias":                # anchor the first value, use it again further down
        text = text[:keys[0]] + f" &{anchor}" + text[keys[0]:] + f"extra: *{anchor}\n"
    else:
        text = f"base: &{anchor} {{kind: blocked}}\n<<: *{anchor}\n" + text
    out = _out(work)
    _assert_error(_spec_args(cmd, _write(work, text), out), out, "anchors and aliases")


@_settings("deep_nesting")
@given(depth=st.integers(65, 5000), style=st.sampled_from(["[", "{a: ", "- ", "map", "parent"]), closed=st.booleans(),
       cmd=COMMANDS)
def test_deep_nesting(work, depth, style, closed, cmd):
    if style == "[":
        text = "[" * depth + ("]" * depth if closed else "")
    elif style == "{a: ":
        text = "{a: " * depth + ("1" + "}" * depth if closed else "")
    elif style == "- ":
        text = "- " * depth + "1\n"
    elif style == "map":
        text = "".join(" " * i + "a:\n" for i in range(min(depth, 400))) + " " * min(depth, 400) + "b: 1\n"
    else:                               # slice of slice of ... (YAML depth grows by one per parent)
        text = "".join("  " * i + "kind: slice\n" + "  " * i + "dim: 0\n" + "  " * i + "parent:\n"
                       for i in range(min(depth, 200)))
    out = _out(work)
    _assert_error(_spec_args(cmd, _write(work, text), out), out, "nested more than")


def _usable_name(name: str) -> bool:
    try:
        api.check_name(name)
    except ValueError:
        return False
    return len(name) < 240          # + "_harness.cu": longer is refused by the file system


@_settings("bad_names")
@given(name=st.one_of(st.sampled_from(sorted(api.RESERVED_NAMES | set(api.C_KEYWORDS))),
                      st.text(max_size=30), st.from_regex(r"__[a-z]{1,10}|_[A-Z][a-z]{0,5}|[0-9][a-z]{0,5}",
                                                            fullmatch=True),
                      st.integers(250, 2000).map(lambda n: "n" * n)))
def test_bad_names(work, name):
    assume(not _usable_name(name) and "\x00" not in name)
    out = _out(work)
    _assert_error(["convert", "--src", BLOCKED, "--dst", MMA, "-o", out, "--name", name], out)


DESCRIPTORS = ["<(64,64),(64,1)>", "<(64,64),(1,64)>", "<(64,64),(64,1),swizzle<3,4,3>,elem=f16>",
               "<((8,8),64),((8,512),1)>", "<(64,64),(64,1),elem=f16>"]
CUTE_CHARS = "<>(),0123456789 swizleme=f16x"


def _mutate(draw_text, ops):
    text = draw_text
    for op, i, c in ops:
        i %= len(text) + 1
        if op == "delete" and text:
            text = text[:i] + text[i + 1:]
        elif op == "insert":
            text = text[:i] + c + text[i:]
        elif op == "truncate":
            text = text[:i]
        elif op == "number":
            text = re.sub(r"\d+", str(c), text, count=1 + i % 3)
    return text


@_settings("bad_cute")
@given(desc=st.one_of(
    st.builds(_mutate, st.sampled_from(DESCRIPTORS),
              st.lists(st.tuples(st.sampled_from(["delete", "insert", "truncate", "number"]), st.integers(0, 60),
                                 st.one_of(st.sampled_from(CUTE_CHARS), st.integers(0, 1 << 40))
                                 .map(str)), min_size=1, max_size=4)),
    st.text(alphabet=CUTE_CHARS, max_size=60),
    st.integers(1, 200).map(lambda n: "<" + "(" * n + "64" + ")" * n + ",1>")),
    cmd=COMMANDS)
def test_bad_cute(work, desc, cmd):
    spec = dict(VALID["cute"], descriptor=desc)
    try:
        spec_from_dict(spec)
        assume(False)                   # a mutation that is still a valid 64x64 descriptor
    except SpecError:
        pass
    out = _out(work)
    _assert_error(_spec_args(cmd, _write(work, _dump(spec)), out), out, "descriptor")


def _bad_int(lo: int, hi: int):
    return st.one_of(st.integers(max_value=lo - 1, min_value=lo - (1 << 70)).map(str),
                     st.integers(min_value=hi + 1, max_value=hi + (1 << 70)).map(str),
                     st.floats(allow_nan=True).map(repr), st.sampled_from(["", "x", "1e3", "0x10", "4.0", "9" * 5000]))


CLI_INTS = {
    # option: (command line before it, bad values)
    "--smem-budget": (["plan", "--src", BLOCKED, "--dst", MMA], st.one_of(_bad_int(1, 1 << 30),
                                                                        st.integers(1, 1023).map(str))),
    "--iters": (["bench", "--src", BLOCKED, "--dst", MMA], _bad_int(1, 1 << 20)),
    "--ctas": (["bench", "--src", BLOCKED, "--dst", MMA], _bad_int(0, 1 << 20)),
    "--runs": (["verify", "--src", BLOCKED, "--dst", MMA], _bad_int(1, 1000)),
    "--seed": (["verify", "--src", BLOCKED, "--dst", MMA], _bad_int(0, (1 << 32) - 1)),
    "--warps": (["plan", "--src", GLOBAL, "--dst", NVMMA_SHARED],
                st.one_of(_bad_int(1, 32), st.sampled_from(["3", "5", "6", "7", "12", "24"]))),
    "--shape": (["convert", "--src", BLOCKED, "--dst", MMA],
                st.one_of(st.text(alphabet="0123456789,x.- ", max_size=20), _bad_int(1, 1 << 20),
                          st.just("65536,65536"), st.just("1024,1024,1024"))),
    "--stride": (["plan", "--src", GLOBAL, "--dst", NVMMA_SHARED],
                 st.one_of(_bad_int(1, 1 << 31), st.tuples(st.integers(-5, 0), st.integers(-5, 70))
                           .map(lambda t: f"{t[0]},{t[1]}"))),
}


@_settings("bad_cli_ints")
@given(option=st.sampled_from(sorted(CLI_INTS)), data=st.data())
def test_bad_cli_ints(work, option, data):
    head, values = CLI_INTS[option]
    value = data.draw(values)
    if option == "--shape":
        try:
            from ll_codegen.spec import parse_shape
            assume(parse_shape(value) != (64, 64))       # 64,64 is the specs' own shape
        except ValueError:
            pass
    out = _out(work)
    args = head + ([option, value] if not value.startswith("-") else [f"{option}={value}"])
    if head[0] == "convert":
        args += ["-o", out]
    _assert_error(args, out)


# ------------------------------------------------ field names, manifests, stdout, long lists, file names
#: Characters that end a line for str.splitlines (and so for a reader of the error line), other
#: control characters, and plain ones around them.
LINE_BREAKERS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
HOSTILE_CHARS = LINE_BREAKERS + "\x00\x01\x1b\x7f\t ab_.:'\"\\"
HOSTILE_KEYS = st.one_of(
    st.text(alphabet=HOSTILE_CHARS, min_size=1, max_size=12).filter(lambda k: any(c in LINE_BREAKERS for c in k)),
    st.text(alphabet=HOSTILE_CHARS, max_size=80),
    st.integers(-5, 5), st.floats(allow_nan=False, width=16), st.booleans(), st.none())
CORPUS_FIELDS = {"src", "dst", "dtypes", "dtype", "target", "arch", "strategy", "swizzle", "smem_budget", "shape",
                 "name"}
MANIFEST_FIELDS = {"args", "expect", "note", "command"}
GOOD_ARGS = "--src examples/blocked_64x64.yaml --dst examples/mma_v2_64x64.yaml --name cvt"


def _yaml_with_key(data: dict, key) -> str:
    """``data`` as YAML with one more key (any type) at the end, written by PyYAML (escaped)."""
    return _dump({**data, key: 1})


@pytest.fixture(scope="module")
def checkout(work):
    """A checkout: examples/ with the two specs of ``GOOD_ARGS`` and a generated/ folder."""
    root = os.path.join(work, "checkout")
    os.makedirs(os.path.join(root, "examples"), exist_ok=True)
    os.makedirs(os.path.join(root, "generated"), exist_ok=True)
    for f in (BLOCKED, MMA):
        shutil.copy(f, os.path.join(root, "examples"))
    return root


def _manifest(checkout: str, entries: str) -> str:
    gen = os.path.join(checkout, "generated")
    for f in os.listdir(gen):
        os.unlink(os.path.join(gen, f))
    with open(os.path.join(gen, "manifest.yaml"), "w", encoding="utf-8") as fh:
        fh.write(entries)
    return gen


@_settings("hostile_field_names")
@given(key=HOSTILE_KEYS, where=st.sampled_from(["spec", "parent", "corpus", "manifest"]))
def test_hostile_field_names(work, checkout, key, where):
    """Item 6: a field name with a newline or CR is quoted like a value; the error stays one line."""
    out = _out(work)
    if where in ("spec", "parent"):
        assume(key not in VALID["slice"] and key not in VALID["slice"]["parent"])
        spec = VALID["slice"] if where == "parent" else VALID["blocked"]
        if where == "parent":
            text = _dump(dict(spec, parent=yaml.safe_load(_yaml_with_key(spec["parent"], key))))
        else:
            text = _yaml_with_key(spec, key)
        args = ["convert", "--src", _write(work, text), "--dst", BLOCKED if where == "spec" else _write(
            work, _dump(dict(VALID["slice"])), "b.yaml"), "-o", out]
    elif where == "corpus":
        assume(key not in CORPUS_FIELDS)
        text = "- " + _yaml_with_key({"src": BLOCKED, "dst": MMA}, key).replace("\n", "\n  ").rstrip() + "\n"
        args = ["verify", "--corpus", _write(work, text, "corpus.yaml")]
    else:
        assume(key not in MANIFEST_FIELDS)
        text = "- " + _yaml_with_key({"args": GOOD_ARGS}, key).replace("\n", "\n  ").rstrip() + "\n"
        args = ["regenerate", _manifest(checkout, text)]
    line = _assert_error(args, out)
    assert not any(c in line for c in LINE_BREAKERS + "\x00\x1b\x7f"), repr(line)
    assert any(f in line for f in ("unknown field", "field names must be strings", "duplicate key")), line


MIXED_KEYS = st.lists(st.one_of(st.integers(-3, 3), st.text(alphabet="az_1", min_size=1, max_size=4),
                                st.floats(allow_nan=True, width=16), st.booleans(), st.none()),
                      min_size=1, max_size=4)


@_settings("mixed_type_manifest_keys")
@given(keys=MIXED_KEYS, check=st.booleans())
def test_mixed_type_manifest_keys(work, checkout, keys, check):
    """Item 7: unknown keys of mixed types (1 and zz) are an error line, not an internal error."""
    assume(not any(k in MANIFEST_FIELDS for k in keys if isinstance(k, str)))
    lines = [f"- args: \"{GOOD_ARGS}\""] + [f"  {yaml.safe_dump({k: i}).strip()}" for i, k in enumerate(keys)]
    gen = _manifest(checkout, "\n".join(lines) + "\n")
    _assert_error(["regenerate", gen] + (["--check"] if check else []))
    assert os.listdir(gen) == ["manifest.yaml"]


NOT_A_CONVERSION = ["--help", "-h", "--help=yes", "--version", "--plan", "--json", "-o x", "--output=x",
                    "--emit all", "--emit=header", "--check", "extra", "-", "--no-such-option", "--manifest m"]


@_settings("manifest_not_conversion")
@given(extra=st.lists(st.sampled_from(NOT_A_CONVERSION), min_size=1, max_size=3), data=st.data(),
       check=st.booleans(), command=st.sampled_from(["convert", "gather"]))
def test_manifest_not_conversion(work, checkout, extra, data, check, command):
    """Item 8: an entry's args are one conversion; anything else is exit 2 (--check never passes)."""
    tokens = GOOD_ARGS.split() if command == "convert" else \
        "--src examples/blocked_64x64.yaml --index examples/blocked_64x64.yaml --axis 1 --name g".split()
    for x in extra:     # between option/value pairs, so no value is taken away from its option
        at = 2 * data.draw(st.integers(0, len(tokens) // 2))
        tokens[at:at] = x.split()
    entry = {"args": " ".join(tokens)} | ({"command": "gather"} if command == "gather" else {})
    gen = _manifest(checkout, _dump([entry]))
    _assert_error(["regenerate", gen] + (["--check"] if check else []), None, "entry 1")
    assert os.listdir(gen) == ["manifest.yaml"]


def _failing_echo(code: int):
    """click.echo whose writes to stdout fail with ``code`` (stderr works): stdout on a full disk, a
    closed pipe, an I/O error, in-process."""
    import click
    real = click.echo

    def echo(message=None, file=None, nl=True, err=False, color=None):
        if not err and file is None:
            raise OSError(code, os.strerror(code))
        return real(message, file=file, nl=nl, err=err, color=color)
    return echo


@_settings("stdout_fails")
@given(command=st.sampled_from(["convert", "gather", "show", "regenerate"]),
       emit=st.sampled_from([[], ["--emit", "all"], ["--emit", "header"], ["--emit", "harness,bench"]]),
       code=st.sampled_from([28, 32, 5]))
def test_stdout_fails(work, checkout, command, emit, code):
    """Item 9: when the listing cannot be printed, nothing is written (the listing is part of the commit)."""
    from unittest import mock
    import click
    out = _out(work)
    svg = os.path.join(work, "x.svg")
    if os.path.exists(svg):
        os.unlink(svg)
    args = {"convert": ["convert", "--src", BLOCKED, "--dst", MMA, "-o", out] + emit,
            "gather": ["gather", "--src", BLOCKED, "--index", BLOCKED, "--axis", "1", "-o", out] + emit,
            "show": ["show", BLOCKED, "--svg", svg],
            "regenerate": ["regenerate", _manifest(checkout, _dump([{"args": GOOD_ARGS}])), "-o", out]}[command]
    with mock.patch.object(click, "echo", _failing_echo(code)):
        _assert_error(args, out, "cannot write to standard output", "nothing was written")
    assert not os.path.exists(svg)


DTYPE_NAMES = sorted(DTYPE_BYTES)


@_settings("long_dtype_lists")
@given(n=st.integers(65, 5000), how=st.sampled_from(["comma", "repeat", "corpus", "rows"]), data=st.data())
def test_long_dtype_lists(work, n, how, data):
    """A hostile list is refused before any row is planned (planning 1,000 rows took 6-25 s): the planner
    is never called."""
    dts = [data.draw(st.sampled_from(DTYPE_NAMES)) for _ in range(3)] * (n // 3 + 1)
    if how == "comma":
        args = ["verify", "--src", BLOCKED, "--dst", MMA, "--dtype", ",".join(dts[:n])]
    elif how == "repeat":
        args = ["verify", "--src", BLOCKED, "--dst", MMA] + [a for d in dts[:n] for a in ("--dtype", d)]
    elif how == "corpus":
        n = n * 4 if n < 4750 else n     # up to 19,000 items, under the YAML value cap
        args = ["verify", "--corpus", _write(work, f"- src: {BLOCKED}\n  dst: {MMA}\n  dtypes: [{', '.join(dts[:n])}]\n"
                                                   * 1, "corpus.yaml")]
    else:                                # over the work bound: entries x dtypes x 512 x 1024 elements
        per = data.draw(st.integers(1, 12))
        entries = limits.MAX_VERIFY_WORK // (per << 19) + 1
        entry = (f"- src: {BLOCKED}\n  dst: {MMA}\n  shape: [512, 1024]\n"
                 f"  dtypes: [{', '.join(DTYPE_NAMES[:per])}]\n")
        args = ["verify", "--corpus", _write(work, entry * entries, "corpus.yaml")]
    planned = []
    real = jobs.plan_conversion

    def counted(*a, **k):
        planned.append(a)
        return real(*a, **k)
    with mock.patch.object(jobs, "plan_conversion", counted):
        _assert_error(args, None, "at most")
    assert planned == [], (how, n, len(planned))


NAME_CHARS = "".join(chr(c) for c in range(1, 32)) + "\x7f\x85\u2028\udcff&<>'\" ab.-"


@_settings("control_chars_in_names")
@given(name=st.text(alphabet=NAME_CHARS, min_size=1, max_size=40).filter(
           lambda t: not t.isprintable() and t not in (".", "..")), valid=st.booleans())
def test_control_chars_in_names(work, name, valid):
    """Item 12: a control character in a spec's (or the picture's) file name: the SVG is well-formed XML,
    the listing and any error stay one line."""
    import xml.etree.ElementTree as ET
    folder = os.path.join(work, "names")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    spec = os.path.join(folder, name + ".yaml")
    svg = os.path.join(folder, name + ".svg")
    _write(folder, _dump(VALID["linear"]) if valid else "kind: linear\n", name + ".yaml")
    if not valid:
        _assert_error(["show", spec, "--svg", svg])
        assert os.listdir(folder) == [os.path.basename(spec)]
        return
    r = RUNNER.invoke(cli.main, ["show", spec, "--svg", svg])
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert r.stdout.splitlines() == [quote_path(svg)], r.stdout
    root = ET.parse(svg).getroot()                      # well-formed
    title = root.find("{http://www.w3.org/2000/svg}text").text
    assert title.isprintable(), repr(title)


# ------------------------------------------------------------- valid input
def test_valid_inputs_succeed(work):
    """The harness can fail: valid inputs of every class exit 0."""
    for kind, spec in VALID.items():
        r = RUNNER.invoke(cli.main, ["show", _write(work, _dump(spec))])
        assert r.exit_code == 0, (kind, r.stderr)
    out = _out(work)
    r = RUNNER.invoke(cli.main, ["convert", "--src", BLOCKED, "--dst", MMA, "-o", out, "--name", "cvt_ok",
                                 "--smem-budget", "1024"])
    assert r.exit_code == 0, r.stderr
    assert sorted(os.listdir(out)) == ["cvt_ok.cuh", "cvt_ok_harness.cu"]
    for option, value in (("--iters", "1"), ("--warps", "8")):
        head = CLI_INTS[option][0]
        if head[0] == "plan":
            assert RUNNER.invoke(cli.main, head + [option, value]).exit_code == 0
    r = RUNNER.invoke(cli.main, ["plan", "--src", GLOBAL, "--dst", NVMMA_SHARED, "--stride", "128,1"])
    assert r.exit_code == 0, r.stderr
