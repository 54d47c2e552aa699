"""What ``llgen verify`` prints and writes: the table (a line per row as it finishes), the progress
line on a terminal, the summary line, and the JUnit XML report a CI system reads.

JUnit: one ``<testsuite>`` (named for the corpus) of one ``<testcase>`` per row -- a conversion at
one element type, ``classname`` the conversion, ``name`` the element type -- with ``<failure>``
for a row that ran and was wrong (or did not compile or launch) and ``<error>`` for a row whose
inputs the planner refused; the message is the row's result, the body adds the strategy, the
device and the corpus entry.  Text is cleaned of what XML 1.0 cannot hold (control characters),
and the file is written atomically (``core.files.write_atomic``): a CI step reading it sees the
old report or the whole new one.
"""
from __future__ import annotations

import os
import re
import time
import xml.etree.ElementTree as ET
from typing import Sequence, TextIO

from ll_codegen.core.files import write_atomic
from ll_codegen.core.target import get_target
from ll_codegen.jobs.corpus import CONVERT_STRATEGIES, Row
from ll_codegen.jobs.stream import Outcome

__all__ = ["Table", "Progress", "summary", "junit_xml", "write_junit", "xml_text"]

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold (control characters, lone surrogates)
    replaced by ``?``."""
    return _NOT_XML.sub("?", str(text))


def result_text(o: Outcome) -> str:
    """The result column: ``ok (...)``, ``FAIL: ...`` or ``ERROR: ...`` (the planner refused the row)."""
    return {"passed": f"ok ({o.message})", "failed": f"FAIL: {o.message}"}.get(o.status, f"ERROR: {o.message}")


class Table:
    """The verify table, ``pair  dtype  strategy  result``, a line per row.  Its column widths are
    fixed from the rows before any is planned (the strategy column fits the longest strategy of
    each row's target and arch)."""

    HEADS = ("pair", "dtype", "strategy", "result")

    def __init__(self, rows: Sequence[Row]):
        longest = max(CONVERT_STRATEGIES + ("store", "load", "copy"), key=len)
        archs = {(r.job.target, get_target(r.job.target, r.job.arch).arch) for r in rows}
        self.w = [max([len(self.HEADS[0])] + [len(r.job.pair) for r in rows]),
                  max([len(self.HEADS[1])] + [len(r.dtype) for r in rows]),
                  max([len(self.HEADS[2])] + [len(f"{longest} ({t} {a})") for t, a in archs])]

    def line(self, *cells: str) -> str:
        a, b, c, d = cells
        return f"{a:<{self.w[0]}}  {b:<{self.w[1]}}  {c:<{self.w[2]}}  {d}".rstrip()

    def head(self) -> str:
        return self.line(*self.HEADS)

    def row(self, row: Row, o: Outcome) -> str:
        return self.line(row.job.pair, row.dtype, o.strategy or "-", result_text(o))


def summary(outcomes: Sequence[Outcome], seconds: float, devices: int) -> str:
    """The closing line: ``412 row(s): 410 passed, 1 failed, 1 refused (2 GPUs, 3m05s)``."""
    n = len(outcomes)
    failed = sum(o.status == "failed" for o in outcomes)
    refused = sum(o.status == "error" for o in outcomes)
    where = f"{devices} GPUs, " if devices > 1 else ""
    return (f"{n} row(s): {n - failed - refused} passed, {failed} failed"
            + (f", {refused} refused" if refused else "") + f" ({where}{clock(seconds)})")


def clock(seconds: float) -> str:
    """``1h02m03s``, ``4m05s``, ``12.3s``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


class Progress:
    """One progress line on ``stream`` (standard error), rewritten in place as rows finish -- only
    when ``stream`` is a terminal; ``clear`` takes it away before a table line is printed."""

    def __init__(self, stream: TextIO | None, total: int):
        self.stream = stream
        try:
            self.on = stream is not None and stream.isatty()
        except (ValueError, OSError):                  # a closed stream
            self.on = False
        self.total, self.done, self.failed, self.refused = total, 0, 0, 0
        self.start = time.monotonic()
        self.shown = False

    def add(self, o: Outcome) -> None:
        self.done += 1
        self.failed += o.status == "failed"
        self.refused += o.status == "error"

    def text(self) -> str:
        el = time.monotonic() - self.start
        eta = f", ~{clock(el / self.done * (self.total - self.done))} left" if 0 < self.done < self.total else ""
        bad = f", {self.failed} failed" if self.failed else ""
        bad += f", {self.refused} refused" if self.refused else ""
        return f"verify: {self.done}/{self.total} rows{bad}, {clock(el)}{eta}"

    def show(self) -> None:
        if self.on:
            self.stream.write("\r\x1b[K" + self.text())
            self.stream.flush()
            self.shown = True

    def clear(self) -> None:
        if self.on and self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


def junit_xml(rows: Sequence[Row], outcomes: Sequence[Outcome], suite: str, seconds: float) -> bytes:
    """The JUnit XML report of ``outcomes`` (``rows[o.index]`` each), UTF-8 bytes."""
    by_index = {r.index: r for r in rows}
    failures = sum(o.status == "failed" for o in outcomes)
    errors = sum(o.status == "error" for o in outcomes)
    top = ET.Element("testsuites", name="llgen verify", tests=str(len(outcomes)), failures=str(failures),
                     errors=str(errors), time=f"{seconds:.3f}")
    ts = ET.SubElement(top, "testsuite", name=xml_text(suite), tests=str(len(outcomes)), failures=str(failures),
                       errors=str(errors), skipped="0", time=f"{seconds:.3f}",
                       timestamp=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()))
    for o in outcomes:
        r = by_index[o.index]
        tc = ET.SubElement(ts, "testcase", classname=xml_text(r.job.pair), name=xml_text(r.dtype),
                           time=f"{o.seconds:.3f}")
        detail = [f"row {o.index + 1}", f"strategy {o.strategy or '-'}"]
        if r.job.source:
            detail.append(f"{r.job.source}: entry {r.job.entry}")
        if o.device:
            detail.append(f"device {o.device}")
        if o.status != "passed":
            el = ET.SubElement(tc, "failure" if o.status == "failed" else "error",
                               message=xml_text(o.message[:1000]), type="failed" if o.status == "failed" else "refused")
            el.text = xml_text("\n".join([o.message] + detail))
        else:
            ET.SubElement(tc, "system-out").text = xml_text("\n".join([result_text(o)] + detail))
    ET.indent(top)
    return ET.tostring(top, encoding="utf-8", xml_declaration=True) + b"\n"


def write_junit(path: str | os.PathLike, rows: Sequence[Row], outcomes: Sequence[Outcome], suite: str,
                seconds: float) -> None:
    """Write the JUnit report atomically to ``path``."""
    write_atomic(path, junit_xml(rows, outcomes, suite, seconds))
