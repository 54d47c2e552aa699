"""Named barriers (``--barrier ID``): the block barriers of a plan that synchronises -- a conversion
through shared memory (smem, shuffle+smem), a store or load via one, a reduction's warp stage --
as ``bar.sync ID, kThreads`` over the calling warps only, for warp-specialised kernels whose other
warps (a producer warp group) never call the header.

Checked independently of the code that renders them:

* the rendered headers put the named barrier exactly where ``__syncthreads()`` was (the same code
  otherwise), and the PTX the compiler makes of them issues ``bar.sync ID, kThreads`` at those
  points (the PTX check, ``run/ptx_check.py``);
* the host SIMT runtime's model of ``bar.sync`` (``simt/simt_host.h``, from the PTX ISA): a kernel
  whose producer warps exit early, or synchronise among themselves, runs the named-barrier headers
  bit-exact, and the block-wide ones deadlock there -- reported as such; its one-line reports of a
  wrong count, mismatched counts, too many arrivals and a missing warp; its ordering of exactly
  the participating threads (a thread outside the barrier reading what a member wrote is a race);
* mutations of a generated header (the barrier removed, the wrong count, another id) fail the run;
* the CLI and manifest options, and their one-line refusals.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess

import pytest
import yaml
from click.testing import CliRunner

from ll_codegen import cli
from ll_codegen.api import plan_conversion, plan_reduce
from ll_codegen.emit.render import file_names
from ll_codegen.operations import render, write_files
from ll_codegen.plan.model import Barrier
from ll_codegen.run import host
from ll_codegen.testing.corpus import MMA, blocked

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "examples", "specs")
ROW = blocked([1, 8], [4, 8], [4, 1], [1, 0], [64, 64])
ROW4 = blocked([1, 4], [4, 8], [4, 1], [1, 0], [64, 64])
COL = blocked([8, 1], [8, 4], [1, 4], [0, 1], [64, 64])
COLUMN_SUM = os.path.join(SPECS, "blocked_row_64x64.yaml")          # 64 x 64, dim 0 spans the 4 warps
KERNEL = os.path.join(ROOT, "tests", "data", "warp_specialised_kernel.cuh")
BAR = re.compile(r"detail::bar_sync\((\d+), (\d+)\)")


def code_lines(text: str, bid: int, threads: int) -> list[str]:
    """The statements of a header's functions (4-space indented, comments and the bar_sync wrapper's
    own body dropped), with the named barrier written as ``__syncthreads()``."""
    out = []
    for line in text.splitlines():
        if not line.startswith("    ") or "llgen_host::named_barrier" in line or 'asm volatile("bar.sync' in line:
            continue
        out.append(line.split("//")[0].rstrip().replace(f"detail::bar_sync({bid}, {threads})", "__syncthreads()"))
    return out


def via_store_plan(barrier=None):
    return plan_conversion(os.path.join(SPECS, "mma_v2_2x2_64x64.yaml"), os.path.join(ROOT, "examples", "global_64x64.yaml"),
                           "f16", arch="sm_80", barrier=barrier)


CASES = {
    "smem": lambda b: plan_conversion(ROW, COL, "f16", barrier=b),
    "smem_rounds": lambda b: plan_conversion(MMA, ROW, "f32", strategy="smem", smem_budget=4096, barrier=b),
    "warp_local": lambda b: plan_conversion(ROW, ROW4, "f16", strategy="smem", barrier=b),
    "two_buffers": lambda b: plan_conversion(ROW, COL, "f32", strategy="smem", scratch_buffers=2, barrier=b),
    "staged": lambda b: plan_conversion(ROW, COL, "i8", strategy="shuffle+smem", barrier=b),
    "via_store": via_store_plan,
    "reduce": lambda b: plan_reduce(COLUMN_SUM, 0, barrier=b),
}


# ------------------------------------------------------------------ plans and rendered headers
@pytest.mark.parametrize("case", sorted(CASES))
def test_named_barrier_replaces_exactly_the_block_barriers(case):
    plain, named = CASES[case](None), CASES[case](5)
    a, b = render(plain, "header", "h"), render(named, "header", "h")
    blocks = a.count("__syncthreads();")
    assert blocks > 0 and "__syncthreads();" not in b
    threads = named.threads
    assert BAR.findall(b) == [("5", str(threads))] * blocks
    assert code_lines(a, 5, threads) == code_lines(b, 5, threads)
    assert a.count("__syncwarp();") == b.count("__syncwarp();")      # warp barriers stay as they are
    assert f"bar.sync 5, {threads}" in b and "the block's other warps do not take part" in b
    assert "--barrier 5" not in a and (case == "reduce" or '"named_barrier": null' in plain.to_json())


def test_the_barrier_is_plan_data():
    p = CASES["staged"](7)
    assert p.smem.named_barrier == Barrier(7, 128) and p.via.smem is None
    assert '"named_barrier": {\n      "id": 7,\n      "threads": 128' in p.to_json()
    v = via_store_plan(3)
    assert v.via.smem.named_barrier == Barrier(3, v.threads)
    r = CASES["reduce"](2)
    assert r.warps.named_barrier == Barrier(2, 128)
    for form in ("direct", "spread"):
        from ll_codegen.plan.reduce import plan_reduce as plan_form
        from ll_codegen.spec import load_spec
        rp = plan_form(load_spec(COLUMN_SUM).linear, (0,), form=form, barrier=4)
        text = render(rp, "header", "h")
        assert len(BAR.findall(text)) == rp.warps.barriers and "__syncthreads();" not in text


@pytest.mark.parametrize("make, why", [
    (lambda: plan_conversion(ROW, ROW4, "f16", strategy="shuffle", barrier=1), "this convert (shuffle) issues no block"),
    (lambda: plan_conversion(ROW, ROW, "f16", barrier=1), "issues no block barrier"),
    (lambda: plan_conversion(ROW, ROW4, "f16", strategy="smem", scratch_per_warp=True, barrier=1),
     "issues no block barrier"),
    (lambda: plan_reduce(os.path.join(SPECS, "wgmma_4x1_128x128.yaml"), 1, "max", arch="sm_90a", barrier=1),
     "this reduction (shuffle) issues no block barrier"),
    (lambda: plan_conversion(ROW, COL, "f16", barrier=0), "1..15 (0 is __syncthreads()'s barrier)"),
    (lambda: plan_conversion(ROW, COL, "f16", barrier=16), "a named barrier id is 1..15"),
    (lambda: plan_conversion(ROW, COL, "f16", barrier="1:256"), "ID:THREADS is not offered"),
    (lambda: plan_conversion(ROW, COL, "f16", target="hip", arch="gfx90a", barrier=1),
     "named barriers are not on hip targets"),
])
def test_refusals(make, why):
    with pytest.raises(ValueError, match=re.escape(why)):
        make()


# ------------------------------------------------------------------ the host SIMT runtime
needs_host = pytest.mark.skipif(host.compiler() is None, reason="no clang++ for the host SIMT runtime")


def build_driver(tmp_path, source: str) -> str:
    src = tmp_path / "driver.cpp"
    src.write_text(source)
    exe = str(tmp_path / "driver")
    r = subprocess.run([host.compiler(), *host.flags(), "-I", host.SIMT_DIR, "-I", str(tmp_path), "-I",
                        os.path.dirname(KERNEL), "-include", "llgen_host.h", str(src), "-o", exe],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return exe


def run_lines(exe: str, *args) -> list[str]:
    r = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


WS_DRIVER = """
#include "CVT.cuh"
#include "RED.cuh"
#include <cstdio>
#include <cstdlib>
extern "C" { LLGEN_HOST_SHARED(smem, 65536); }  // the kernels are extern "C"
#include "warp_specialised_kernel.cuh"
int main(int argc, char** argv) {
    const bool reduce = argv[1][0] == 'r';
    const int threads = LLGEN_PRODUCER_THREADS + (reduce ? RED::kThreads : CVT::kThreads);
    unsigned* wrong = static_cast<unsigned*>(llgen_host::device_malloc(4 * threads));
    unsigned* flags = static_cast<unsigned*>(llgen_host::device_malloc(8));
    for (int i = 0; i < threads; ++i) wrong[i] = 1u;
    flags[0] = flags[1] = 0;
    const size_t bytes = reduce ? RED::kSmemBytes : CVT::kSmemBytes;
    auto errors = llgen_host::launch_grid({1, 1, 1}, threads, smem, bytes, [&] {
        if (reduce) ws_reduce(wrong, flags, flags + 1, 64, 64);
        else ws_convert(wrong, flags, flags + 1);
    });
    for (auto& e : errors) std::printf("error: %s\\n", e.c_str());
    unsigned bad = 0;
    for (int i = 0; i < threads - LLGEN_PRODUCER_THREADS; ++i) bad += wrong[i];
    std::printf("wrong %u\\n", bad);
}
"""


def ws_exe(tmp_path, barrier, mode: int, mutate=None):
    """The warp-specialised kernel around the transpose and the column sum, with ``barrier`` (None:
    ``__syncthreads()``); ``mutate(text) -> text`` edits the conversion header first."""
    write_files(CASES["smem"](barrier), str(tmp_path), "CVT", emit=("header",))
    write_files(CASES["reduce"](barrier), str(tmp_path), "RED", emit=("header",))
    if mutate is not None:
        p = tmp_path / "CVT.cuh"
        p.write_text(mutate(p.read_text()))
    return build_driver(tmp_path, f"#define LLGEN_PRODUCER_MODE {mode}\n" + WS_DRIVER)


@needs_host
@pytest.mark.compile
@pytest.mark.parametrize("mode", [0, 1])
def test_producer_warps_need_not_take_part(tmp_path, mode):
    """Producers exit early (mode 0) or synchronise among themselves (mode 1, named barrier 15)."""
    exe = ws_exe(tmp_path, 2, mode)
    assert run_lines(exe, "convert") == ["wrong 0"]
    assert run_lines(exe, "reduce") == ["wrong 0"]


@needs_host
@pytest.mark.compile
def test_block_barriers_deadlock_without_the_producers(tmp_path):
    exits, busy = tmp_path / "exits", tmp_path / "busy"
    exits.mkdir(), busy.mkdir()
    out = run_lines(ws_exe(exits, None, 0), "convert")
    assert out[0] == "error: __syncthreads() reached by 128 threads while 128 have exited", out
    out = run_lines(ws_exe(busy, None, 1), "reduce")
    assert out[0] == ("error: deadlock: named barrier 15 (bar.sync 15, 256) waits for 256 threads: 128 arrived "
                      "(warps 0-3), 128 missing; warps 4-7 in __syncthreads()"), out
    assert len([x for x in out if x.startswith("error:")]) == 1


def line_edit(marker: str, new: str):
    """Replace the first header line holding ``marker`` (its statement and comment) by ``new``."""
    return lambda text: re.sub(r"^ *" + re.escape(marker) + r".*$", "    " + new, text, count=1, flags=re.M)


@pytest.mark.parametrize("edit, report", [
    (line_edit("detail::bar_sync(2, 128);  // stores visible", "// (removed)"), "race: |before any thread wrote"),
    (line_edit("detail::bar_sync(2, 128);  // stores visible", "detail::bar_sync(2, 64);"),
     "named barrier 2 \\(bar.sync 2, 64\\): 128 threads \\(warps 4-7\\) arrive for a count of 64"),
    (line_edit("detail::bar_sync(2, 128);  // scratch free", "detail::bar_sync(2, 256);"),
     "deadlock: named barrier 2 \\(bar.sync 2, 256\\) waits for 256 threads: 128 arrived \\(warps 4-7\\), 128 missing; "
     "warps 0-3 exited"),
    (line_edit("detail::bar_sync(2, 128);  // stores visible", "__syncwarp();"), "race: "),
])
@needs_host
@pytest.mark.compile
def test_mutated_header_fails_on_the_host(tmp_path, edit, report):
    out = run_lines(ws_exe(tmp_path, 2, 0, mutate=edit), "convert")
    assert out[-1] != "wrong 0" or out[0].startswith("error:"), out
    assert re.search(report, out[0]), out


RT_DRIVER = """
#include <cstdio>
#include <cstdlib>
LLGEN_HOST_SHARED(smem, 4096);
int MODE = 0;
// 12 warps; warps 0-3 and 4-11 play the roles each mode gives them
__global__ void kern(unsigned* out) {
    extern __shared__ __align__(16) unsigned char smem[];
    const unsigned t = threadIdx.x, w = t / 32;
    unsigned* s = reinterpret_cast<unsigned*>(smem);
    unsigned v = t * 7 + 1, r = 0;
    switch (MODE) {
    case 0:   // consumers 4-11 meet at barrier 1, producers exit: clean
        if (w < 4) return;
        llgen_host::st_lds(&s[t], &v, 4);
        llgen_host::named_barrier(1, 256);
        llgen_host::ld_lds(&s[128 + (t - 128 + 32) % 256], &r, 4);
        break;
    case 1:   // two consumer groups give different counts for barrier 1
        if (w < 4) return;
        llgen_host::named_barrier(1, w < 8 ? 256 : 128);
        break;
    case 2:   // a count that is not a multiple of the warp size
        llgen_host::named_barrier(3, 100);
        break;
    case 3:   // a count larger than the block
        llgen_host::named_barrier(3, 512);
        break;
    case 4:   // warps 8-11 exit: barrier 1 never completes
        if (w < 4 || w >= 8) return;
        llgen_host::named_barrier(1, 256);
        break;
    case 5:   // every warp arrives at a barrier of 256
        llgen_host::named_barrier(1, 256);
        break;
    case 6:   // barrier 1 orders warps 0-3 only: warp 4 (barrier 2) reading what warp 0 wrote races
        llgen_host::st_lds(&s[t], &v, 4);
        llgen_host::named_barrier(w < 4 ? 1 : 2, w < 4 ? 128 : 256);
        llgen_host::ld_lds(&s[w < 4 ? (t + 32) % 128 : t - 128], &r, 4);
        break;
    case 7:   // the same with __syncthreads(): ordered
        llgen_host::st_lds(&s[t], &v, 4);
        __syncthreads();
        llgen_host::ld_lds(&s[t < 128 ? (t + 32) % 128 : t - 128], &r, 4);
        break;
    case 8:   // barrier id 16 does not exist
        llgen_host::named_barrier(16, 128);
        break;
    }
    out[t] = r;
}
int main(int argc, char** argv) {
    MODE = std::atoi(argv[1]);
    unsigned* out = static_cast<unsigned*>(llgen_host::device_malloc(384 * 4));
    auto errors = llgen_host::launch_grid({1, 1, 1}, 384, smem, 4096, [&] { kern(out); });
    for (auto& e : errors) std::printf("error: %s\\n", e.c_str());
    if (MODE == 0) {
        unsigned bad = 0;
        for (unsigned c = 0; c < 256; ++c) bad += out[128 + c] != (128 + (c + 32) % 256) * 7 + 1;
        std::printf("wrong %u\\n", bad);
    }
}
"""


@pytest.fixture(scope="module")
def rt_exe(tmp_path_factory):
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    return build_driver(tmp_path_factory.mktemp("rt"), RT_DRIVER)


@pytest.mark.compile
@pytest.mark.parametrize("mode, lines", [
    (0, ["wrong 0"]),
    (1, ["error: named barrier 1: threads give different counts in one phase: 128 (warps 8-11), 256 (warps 4-7)"]),
    (2, ["error: named barrier 3 (bar.sync 3, 100): the thread count must be a nonzero multiple of the warp size "
         "32 and at most the block's 384 threads"]),
    (3, ["error: named barrier 3 (bar.sync 3, 512): the thread count must be a nonzero multiple of the warp size "
         "32 and at most the block's 384 threads"]),
    (4, ["error: deadlock: named barrier 1 (bar.sync 1, 256) waits for 256 threads: 128 arrived (warps 4-7), "
         "128 missing; warps 0-3, 8-11 exited"]),
    (5, ["error: named barrier 1 (bar.sync 1, 256): 384 threads (warps 0-11) arrive for a count of 256"]),
    (7, []),
    (8, ["error: named barrier 16 (bar.sync 16, 128): barrier ids are 0..15"]),
])
def test_runtime_reports_one_line(rt_exe, mode, lines):
    assert run_lines(rt_exe, mode) == lines


@pytest.mark.compile
def test_runtime_orders_exactly_the_participants(rt_exe):
    out = run_lines(rt_exe, 6)
    assert out and all(x.startswith("error: race: thread 128 (warp 4, lane 0) reads shared byte 0 that thread 0 "
                                    "(warp 0, lane 0) wrote in the same barrier interval") for x in out[:1]), out
    assert not any("warp 1," in x.split("reads")[0] for x in out), out          # members are ordered


# ------------------------------------------------------------------ the PTX the compiler makes
@pytest.mark.compile
@pytest.mark.parametrize("case", ["smem", "reduce", "via_store"])
def test_ptx_issues_the_named_barrier(case):
    import shutil
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    from test_ptx_text import check_text
    plan = CASES[case](6)
    assert check_text(plan) == []
    # the barrier between stores and loads (a store harness trims barriers around the call itself)
    visible = r"detail::bar_sync\(6, (\d+)\);  // (stores visible|every partial stored).*"
    wrong = check_text(plan, [(visible, r"detail::bar_sync(7, \1);")])
    assert wrong and "extra=('0x7'" in wrong[0], wrong


# ------------------------------------------------------------------ CLI and manifest
RUNNER = CliRunner()


def llgen(*args):
    return RUNNER.invoke(cli.main, [str(a) for a in args])


@pytest.mark.parametrize("args, message", [
    (["--barrier", "0"], "--barrier 0: a named barrier id is 1..15 (0 is __syncthreads()'s barrier)"),
    (["--barrier", "16"], "--barrier 16: a named barrier id is 1..15"),
    (["--barrier", "1:100"], "ID:THREADS is not offered"),
    (["--barrier", "1", "--target", "hip", "--arch", "gfx90a"], "named barriers are not on hip targets"),
    (["--barrier", "1", "SAME"], "this convert (noop) issues no block barrier"),
])
def test_cli_refuses_in_one_line(tmp_path, args, message):
    src, dst = os.path.join(SPECS, "blocked_row_64x64.yaml"), os.path.join(SPECS, "blocked_col_64x64.yaml")
    if "SAME" in args:
        args, dst = [a for a in args if a != "SAME"], src
    r = llgen("convert", "--src", src, "--dst", dst, "-o", tmp_path, *args)
    assert r.exit_code == 2 and r.output.count("\n") == 1 and message in r.output, r.output
    assert os.listdir(tmp_path) == []


def test_cli_refuses_operations_that_do_not_synchronise(tmp_path):
    copy = llgen("convert", "--src", os.path.join(ROOT, "examples", "hopper", "gemm_a_global.yaml"),
                 "--dst", os.path.join(ROOT, "examples", "hopper", "a_smem_128x64.yaml"), "--arch", "sm_80",
                 "--barrier", "1", "-o", tmp_path)
    assert copy.exit_code == 2 and "--barrier names the block barrier" in copy.output, copy.output
    red = llgen("reduce", "--src", os.path.join(SPECS, "wgmma_4x1_128x128.yaml"), "--dim", "1", "--arch", "sm_90a",
                "--barrier", "1", "-o", tmp_path)
    assert red.exit_code == 2 and "issues no block barrier" in red.output and red.output.count("\n") == 1


def test_cli_plan_and_convert_carry_the_barrier(tmp_path):
    src, dst = os.path.join(SPECS, "blocked_row_64x64.yaml"), os.path.join(SPECS, "blocked_col_64x64.yaml")
    r = llgen("plan", "--src", src, "--dst", dst, "--barrier", "4", "--json")
    assert r.exit_code == 0 and '"named_barrier": {' in r.output
    r = llgen("plan", "--src", src, "--dst", dst, "--barrier", "4")
    assert r.exit_code == 0 and "barriers: 2 block as named barrier 4 (bar.sync 4, 128" in r.output
    r = llgen("convert", "--src", src, "--dst", dst, "--barrier", "4", "--name", "t", "--emit", "header", "-o", tmp_path)
    text = (tmp_path / "t.cuh").read_text()
    assert r.exit_code == 0 and "--barrier 4 --name t" in text and "detail::bar_sync(4, 128);" in text
    r = llgen("reduce", "--src", COLUMN_SUM, "--dim", "0", "--barrier", "block", "--name", "s", "-o", tmp_path)
    assert r.exit_code == 0 and "--barrier" not in (tmp_path / "s.cuh").read_text()


def test_manifest_entries_with_named_barriers_are_up_to_date(tmp_path):
    """The manifest's --barrier entries (a conversion, a via store, a reduction), rendered by their own
    command lines, are the files in generated/ byte for byte, and name their barrier."""
    entries = [e for e in yaml.safe_load(open(os.path.join(ROOT, "generated", "manifest.yaml")))
               if "--barrier" in e["args"]]
    assert {e.get("command", "convert") for e in entries} == {"convert", "reduce"} and len(entries) >= 3
    for e in entries:
        args = shlex.split(e["args"])
        r = RUNNER.invoke(cli.main, [e.get("command", "convert"), *args, "--emit", "all", "-o", str(tmp_path)])
        assert r.exit_code == 0, r.output
        name = args[args.index("--name") + 1]
        for kind, fname in file_names("cuda", name).items():
            p = tmp_path / fname
            if p.exists():
                assert p.read_text() == open(os.path.join(ROOT, "generated", fname)).read(), fname
        assert BAR.search((tmp_path / file_names("cuda", name)["header"]).read_text())
