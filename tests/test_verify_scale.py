"""``llgen verify`` at scale: the machine checked before anything is planned, rows streamed in
batches, the work bound, the JUnit report, rows sharded over devices and merged in row order.

Everything here but the last test runs without a GPU or a compiler: the device runs are replaced
by fake workers (pure Python) that plan each row for real and report an outcome; the ordering
tests count the planner's calls.  ``test_host_corpus_end_to_end`` runs a small corpus on the host
SIMT runtime (clang++, marker ``compile``); ``gpu_tests/test_verify_gpus.py`` runs one over two GPUs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

import click
import pytest
from click.testing import CliRunner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ll_codegen import cli  # noqa: E402
from ll_codegen.cli.app import CLIError  # noqa: E402
from ll_codegen.cli.verify import parse_gpus, run_rows  # noqa: E402
from ll_codegen.core import limits  # noqa: E402
from ll_codegen import jobs as jobs_package  # noqa: E402
from ll_codegen.jobs import corpus, report, stream  # noqa: E402
from ll_codegen.jobs.stream import Outcome, Settings  # noqa: E402
from ll_codegen.run import gpu  # noqa: E402
from ll_codegen.run import host as host_runtime  # noqa: E402
from ll_codegen.spec import SpecError, spec_from_dict  # noqa: E402

EXAMPLE = os.path.join(ROOT, "examples", "verify", "corpus.yaml")
SPECS = os.path.join(ROOT, "examples", "specs")
ROW, COL = os.path.join(SPECS, "blocked_row_64x64.yaml"), os.path.join(SPECS, "blocked_col_64x64.yaml")
SMALL_A = {"kind": "blocked", "size_per_thread": [1, 2], "threads_per_warp": [4, 8], "warps_per_cta": [2, 1],
           "order": [1, 0], "shape": [16, 16]}
SMALL_B = {"kind": "blocked", "size_per_thread": [2, 1], "threads_per_warp": [8, 4], "warps_per_cta": [1, 2],
           "order": [0, 1], "shape": [16, 16]}


def _run(args):
    return CliRunner().invoke(cli.main, [str(a) for a in args], catch_exceptions=False)


def _one_error_line(r, *fragments):
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("llgen: error: "), r.stderr
    for f in fragments:
        assert f in err[0], (f, err[0])
    return err[0]


def _corpus(tmp_path, entries, name="corpus.yaml"):
    path = tmp_path / name
    path.write_text(json.dumps(entries))         # JSON is YAML without anchors (a corpus may not have them)
    return str(path)


@pytest.fixture
def planned(monkeypatch):
    """Every call of the planner ``llgen verify`` makes, counted (the real planner still runs)."""
    calls = []
    real = corpus.plan_conversion

    def counted(*a, **k):
        calls.append(k.get("dtype"))
        return real(*a, **k)
    monkeypatch.setattr(corpus, "plan_conversion", counted)
    return calls


def _planning_worker(log=None, verdict=None):
    """A fake device: plans each row for real, then passes it (or ``verdict(row)`` -> (status, message))."""
    def work(part):
        out = []
        for r in part:
            try:
                p = corpus.plan_row(r)
            except ValueError as e:
                out.append(Outcome(r.index, "error", "", str(e).splitlines()[0], 0.01, "fake"))
                continue
            status, msg = verdict(r) if verdict else ("passed", "bit-exact, fake device")
            out.append(Outcome(r.index, status, stream.strategy_text(p), msg, 0.01, "fake"))
        if log is not None:
            log.append([r.index for r in part])
        return out
    return work


# ------------------------------------------------------------ the machine before any planning
def test_gpu_is_looked_for_before_planning(monkeypatch, planned):
    monkeypatch.setattr(gpu, "available", lambda: "no CUDA device (test)")
    line = _one_error_line(_run(["verify", "--corpus", EXAMPLE]), "cannot verify: no CUDA device (test)")
    assert line.endswith("(--host runs on the CPU)")
    _one_error_line(_run(["verify", "--src", ROW, "--dst", COL, "--dtype", "f16,f32,f64"]), "no CUDA device")
    assert planned == []


def test_too_many_gpus_is_refused_before_planning(monkeypatch, planned):
    monkeypatch.setattr(gpu, "available", lambda: None)
    monkeypatch.setattr(gpu, "visible_devices", lambda: ["0", "1"])
    _one_error_line(_run(["verify", "--corpus", EXAMPLE, "--gpus", "3"]), "--gpus 3: 2 GPU(s) visible")
    _one_error_line(_run(["verify", "--corpus", EXAMPLE, "--gpus", "two"]), "--gpus", "'two'")
    _one_error_line(_run(["verify", "--corpus", EXAMPLE, "--gpus", "0"]), "--gpus")
    _one_error_line(_run(["verify", "--corpus", EXAMPLE, "--host", "--gpus", "2"]), "--gpus", "--host")
    assert planned == []
    assert parse_gpus("all", 2) == 2 and parse_gpus(None, 2) == 1 and parse_gpus(" 2 ", 2) == 2


def test_missing_clang_is_refused_before_planning(monkeypatch, planned):
    monkeypatch.setattr(host_runtime, "compiler", lambda: None)
    _one_error_line(_run(["verify", "--corpus", EXAMPLE, "--host"]), "needs clang++")
    assert planned == []


def test_junit_target_is_checked_before_planning(tmp_path, monkeypatch, planned):
    monkeypatch.setattr(gpu, "available", lambda: None)
    (tmp_path / "report.xml").mkdir()
    _one_error_line(_run(["verify", "--corpus", EXAMPLE, "--junit", tmp_path / "report.xml"]),
                    "--junit", "report.xml", "directory")
    _one_error_line(_run(["verify", "--corpus", EXAMPLE, "--junit", tmp_path / "no" / "r.xml"]), "does not exist")
    assert planned == []


def test_corpus_fields_are_checked_without_planning(tmp_path, planned):
    bad = [{"src": ROW, "dst": COL}, {"src": ROW, "dst": COL, "strategy": "shufle"}]
    with pytest.raises(SpecError, match="entry 2.strategy: unknown strategy"):
        corpus.load_corpus(_corpus(tmp_path, bad))
    jobs = corpus.load_corpus(EXAMPLE)
    assert planned == [] and len(corpus.rows_of(jobs)) == sum(len(j.dtypes) for j in jobs) >= 20


# ------------------------------------------------------------------------------ the work bound
def test_work_bound_counts_tile_elements(tmp_path, planned):
    """64 rows of the largest tile are accepted, the 65th refused naming its entry; a small tile
    counts as ``MIN_ROW_WORK``; nothing is planned either way."""
    big = {"kind": "blocked", "size_per_thread": [1, 4], "threads_per_warp": [4, 8], "warps_per_cta": [8, 1],
           "order": [1, 0], "shape": [1024, 1024]}
    assert corpus.row_work(spec_from_dict(big)) == limits.MAX_TILE_ELEMENTS
    assert corpus.row_work(spec_from_dict(SMALL_A)) == limits.MIN_ROW_WORK > 16 * 16
    n = limits.MAX_VERIFY_WORK // limits.MAX_TILE_ELEMENTS
    entries = [{"src": big, "dst": big, "dtypes": ["f16"]} for _ in range(n)]
    assert len(corpus.load_corpus(_corpus(tmp_path, entries))) == n
    with pytest.raises(SpecError, match=f"entry {n + 1}: the rows add up to over {limits.MAX_VERIFY_WORK}"):
        corpus.load_corpus(_corpus(tmp_path, entries + [{"src": SMALL_A, "dst": SMALL_B}]))
    # the same work as element types of fewer entries
    per = [{"src": big, "dst": big, "dtypes": ["f16", "f32", "i8", "f64"]} for _ in range(n // 4)]
    assert len(corpus.load_corpus(_corpus(tmp_path, per))) == n // 4
    with pytest.raises(SpecError, match=f"entry {n // 4}"):
        corpus.load_corpus(_corpus(tmp_path, per[:-1] + [dict(per[-1], dtypes=["f16", "f32", "i8", "f64", "u8"])]))
    assert planned == []


def test_many_small_rows_are_not_capped(tmp_path, monkeypatch, planned):
    """Over 256 rows of small tiles pass the bound (it is on elements, not rows) and reach the GPU check."""
    entries = [{"src": SMALL_A, "dst": SMALL_B, "dtypes": ["f16", "f32", "i8", "u8"]} for _ in range(80)]
    path = _corpus(tmp_path, entries)
    assert len(corpus.rows_of(corpus.load_corpus(path))) == 320
    monkeypatch.setattr(gpu, "available", lambda: "no CUDA device (test)")
    _one_error_line(_run(["verify", "--corpus", path]), "cannot verify")
    assert planned == []


# ------------------------------------------------------------------------------------ streaming
def test_batches_are_cut_lazily():
    """``stream`` takes a batch from its source only when a worker is free for it."""
    cut = []

    def parts():
        for k in range(50):
            cut.append(k)
            yield [corpus.Row(k, None, "f16")]
    gate = threading.Event()

    def worker(part):
        if part[0].index > 0:
            gate.wait(10)
        return [Outcome(r.index, "passed", "s", "ok") for r in part]
    it = stream.stream_rows(parts(), [worker])
    first = next(it)
    time.sleep(0.2)                        # a worker that ran ahead would cut more batches now
    assert first.index == 0 and len(cut) <= 2, cut
    gate.set()
    assert [o.index for o in it] == list(range(1, 50)) and len(cut) == 50


def test_first_rows_print_before_later_batches_are_planned(tmp_path, monkeypatch, planned):
    """The table's first row is printed after one batch has been planned, not the whole corpus."""
    entries = [{"src": SMALL_A, "dst": SMALL_B, "dtypes": ["f16", "f32", "i8", "u8"]} for _ in range(10)]
    rows = corpus.rows_of(corpus.load_corpus(_corpus(tmp_path, entries)))
    seen = []
    real_echo = click.echo

    def echo(message=None, *a, **k):
        seen.append((str(message), len(planned)))
        return real_echo(message, *a, **k)
    monkeypatch.setattr(click, "echo", echo)
    run_rows(rows, [], Settings(), 4, None, "t", workers=[_planning_worker()])
    body = [n for line, n in seen[1:-1]]
    assert len(body) == 40 and 4 <= body[0] <= 8, body[:6]          # one batch planned (two if the worker ran ahead)
    assert len(planned) == 40 and seen[-1][0].startswith("40 row(s): 40 passed, 0 failed")


def test_progress_only_on_a_terminal():
    class Stream:
        def __init__(self, tty):
            self.tty, self.text = tty, ""

        def isatty(self):
            return self.tty

        def write(self, s):
            self.text += s

        def flush(self):
            pass
    for tty in (True, False):
        s = Stream(tty)
        p = report.Progress(s, 3)
        p.show()
        p.add(Outcome(0, "failed", "x", "bad"))
        p.clear()
        p.show()
        p.clear()
        if tty:
            assert "verify: 0/3 rows" in s.text and "1/3 rows, 1 failed" in s.text and s.text.endswith("\r\x1b[K")
        else:
            assert s.text == ""


# ----------------------------------------------------------------------------- sharding
def test_rows_sharded_over_devices_merge_in_row_order():
    """Two fake devices of different speeds share the batches; every row comes back once, in order."""
    rows = [corpus.Row(k, None, "f16") for k in range(37)]
    taken = {"a": [], "b": []}

    def device(name, delay):
        def work(part):
            time.sleep(delay * (1 + part[0].index % 3))
            taken[name].append([r.index for r in part])
            return [Outcome(r.index, "passed", "s", f"on {name}", device=name) for r in part]
        return work
    out = list(stream.stream_rows(stream.batches(rows, 3), [device("a", 0.003), device("b", 0.011)]))
    assert [o.index for o in out] == list(range(37))
    assert taken["a"] and taken["b"], taken                       # both devices worked
    assert sorted(k for b in taken["a"] + taken["b"] for k in b) == list(range(37))
    assert all(o.device == ("a" if any(o.index in b for b in taken["a"]) else "b") for o in out)


def test_a_failing_worker_is_reported():
    took = threading.Event()

    def broken(part):
        took.set()
        raise RuntimeError("device lost")

    def fine(part):
        took.wait(10)                   # the broken device has a batch before this one finishes
        return [Outcome(r.index, "passed", "s", "ok") for r in part]
    with pytest.raises(RuntimeError, match="device lost"):
        list(stream.stream_rows(stream.batches([corpus.Row(k, None, "f16") for k in range(5)], 2), [fine, broken]))


def report_device(part, settings, device):
    """A device runner for spawned worker processes: says which device the process sees."""
    return [Outcome(r.index, "passed", "-", f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}",
                    device=device) for r in part]


def test_device_workers_pin_their_process():
    """Each worker process sees only its own device (``CUDA_VISIBLE_DEVICES``, set before CuPy loads)."""
    workers, pools = stream.device_workers(["3", "GPU-7"], Settings(), run=report_device)
    try:
        rows = [corpus.Row(k, None, "f16") for k in range(8)]
        out = list(stream.stream_rows(stream.batches(rows, 1), workers))
    finally:
        for p in pools:
            p.shutdown()
    assert [o.index for o in out] == list(range(8))
    assert {(o.device, o.message) for o in out} <= {("3", "CUDA_VISIBLE_DEVICES=3"),
                                                     ("GPU-7", "CUDA_VISIBLE_DEVICES=GPU-7")}


def with_compile_pool(part, settings, device):
    """A device runner that starts its process's compile pool (as a GPU batch does) and uses it."""
    assert stream.compile_pool(2).submit(abs, -3).result() == 3
    return [Outcome(r.index, "passed", "-", "ok", device=device) for r in part]


def test_device_workers_with_compile_pools_exit():
    """A worker process holding a compile pool exits when the run ends (its pool is shut down
    before the process joins its children; otherwise that join waits forever)."""
    script = ("import sys; sys.path[:0] = [%r, %r]\n"
              "from ll_codegen.jobs import stream, corpus\n"
              "from test_verify_scale import with_compile_pool\n"
              "if __name__ == '__main__':\n"
              "    workers, pools = stream.device_workers(['0', '1'], stream.Settings(), run=with_compile_pool)\n"
              "    rows = [corpus.Row(k, None, 'f16') for k in range(4)]\n"
              "    print(len(list(stream.stream_rows(stream.batches(rows, 1), workers))))\n"
              "    for p in pools:\n"
              "        p.shutdown(wait=True)\n") % (ROOT, os.path.join(ROOT, "tests"))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "4", p.stdout + p.stderr


def test_visible_devices_follow_the_parent(monkeypatch):
    """The k-th device a worker is pinned to is the parent's k-th visible one."""
    class Runtime:
        @staticmethod
        def getDeviceCount():
            return 2
    fake = type(sys)("cupy")
    fake.cuda = type(sys)("cupy.cuda")
    fake.cuda.runtime = Runtime
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,2")
    assert gpu.visible_devices() == ["5", "2"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpu.visible_devices() == ["0", "1"]


# ---------------------------------------------------------------------------------- JUnit, exit
HOSTILE = "bad <bits> & \"quotes\" ]]> \x00\x1b[31m\x7f \ud800 line\nbreak"


def _mixed(tmp_path):
    entries = [{"name": "good", "src": SMALL_A, "dst": SMALL_B, "dtypes": ["f16", "f32"]},
               {"src": ROW, "dst": COL, "dtypes": ["f16", "i8"]},
               {"src": ROW, "dst": COL, "strategy": "shuffle"}]       # illegal for this pair: refused
    return corpus.rows_of(corpus.load_corpus(_corpus(tmp_path, entries)))


def test_junit_report_parses_back(tmp_path):
    rows = _mixed(tmp_path)
    path = tmp_path / "out" / "report.xml"
    path.parent.mkdir()
    path.write_text("old report")
    verdict = lambda r: ("failed", HOSTILE) if r.dtype == "i8" else ("passed", "bit-exact, fake device")  # noqa: E731
    with pytest.raises(CLIError, match="entry 3: strategy shuffle is illegal"):
        run_rows(rows, [], Settings(), 2, str(path), "corpus", workers=[_planning_worker(verdict=verdict)])
    suites = ET.parse(path).getroot()
    assert suites.tag == "testsuites" and (suites.get("tests"), suites.get("failures"), suites.get("errors")) == ("5", "1", "1")
    (suite,) = suites
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [(r.job.pair, r.dtype) for r in rows]
    fail = [c for c in cases if c.find("failure") is not None]
    err = [c for c in cases if c.find("error") is not None]
    assert [c.get("name") for c in fail] == ["i8"] and len(err) == 1
    msg = fail[0].find("failure").get("message")
    assert msg.startswith("bad <bits> & \"quotes\" ]]>") and "\x00" not in msg and "\x1b" not in msg
    assert "illegal" in err[0].find("error").get("message") and "entry 3" in err[0].find("error").text
    assert all(float(c.get("time")) >= 0 for c in cases)
    assert os.listdir(path.parent) == ["report.xml"]                      # replaced whole, no temp file left


def test_exit_status_follows_the_worst_row(tmp_path):
    rows = _mixed(tmp_path)[:4]
    run_rows(rows, [], Settings(), 2, None, "t", workers=[_planning_worker()])            # all pass: returns
    with pytest.raises(click.exceptions.Exit) as e:
        run_rows(rows, [], Settings(), 2, None, "t",
                 workers=[_planning_worker(verdict=lambda r: ("failed", "wrong bits"))])
    assert e.value.exit_code == 1


def test_refused_rows_end_with_one_error_line(tmp_path, monkeypatch):
    """Through the command: the refused row is an ERROR line of the table, the others run, then one
    error line naming the entry and exit status 2."""
    path = _corpus(tmp_path, [{"src": ROW, "dst": COL}, {"src": ROW, "dst": COL, "strategy": "shuffle"},
                              {"src": ROW, "dst": COL, "strategy": "register", "dtypes": ["f32"]}])
    monkeypatch.setattr(gpu, "available", lambda: None)
    monkeypatch.setattr(gpu, "visible_devices", lambda: ["0"])
    monkeypatch.setattr(jobs_package, "local_worker", lambda settings, device="": _planning_worker())
    r = _run(["verify", "--corpus", path])
    line = _one_error_line(r, "corpus.yaml: entry 2: strategy shuffle is illegal", "(2 rows refused)")
    assert "Traceback" not in r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["pair", "dtype", "strategy", "result"]
    assert "ok (bit-exact, fake device)" in lines[1] and lines[2].split("ERROR: ")[1] in line
    assert "ERROR: strategy register is illegal" in lines[3]
    assert lines[4].startswith("3 row(s): 1 passed, 0 failed, 2 refused")


# ------------------------------------------------------------------------ end to end, host runtime
@pytest.mark.compile
def test_host_corpus_end_to_end(tmp_path):
    """A small corpus on the host SIMT runtime through the real command: rows bit-exact, the refused
    one reported, the JUnit file written."""
    if host_runtime.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    path = _corpus(tmp_path, [{"name": "small", "src": SMALL_A, "dst": SMALL_B, "dtypes": ["u8", "f16"]},
                              {"src": SMALL_A, "dst": SMALL_B, "strategy": "register"}])
    junit = tmp_path / "r.xml"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "cli.py"), "verify", "--host", "--corpus", path,
                        "--batch", "2", "--junit", str(junit), "--runs", "1"],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stdout.count("ok (bit-exact, host SIMT wave32)") == 2, p.stdout
    assert p.stderr.count("\n") == 1 and "entry 2: strategy register is illegal" in p.stderr
    cases = ET.parse(junit).getroot().find("testsuite").findall("testcase")
    assert [(c.get("name"), c.find("error") is not None) for c in cases] == [("u8", False), ("f16", False),
                                                                           ("f16", True)]
