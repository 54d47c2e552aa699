"""``llgen verify``: generated harnesses compiled, run and checked bit for bit -- one conversion
or a corpus of them, on one GPU, every visible GPU, or the host SIMT runtime.

The order is the contract: every option, the corpus (entries, layouts, enumerated fields) and the
work bound are checked, then the machine (CuPy and enough GPUs, or clang++ for the host
runtime), and only then is anything planned -- batch by batch, as the rows stream
(``jobs/stream.py``).  A row the planner refuses is an ``ERROR`` row; the others still run; the
command then ends with one error line for it and exit status 2.  Otherwise exit status 1 on any
failed row, 0 when every row is bit-exact.
"""
from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Optional, Sequence, TextIO

import click

from ll_codegen.cli.app import CLIError, main
from ll_codegen.cli.options import DTYPES, CommaChoice, conversion_options, need
from ll_codegen.core import limits
from ll_codegen.core.files import check_targets, quote_path
from ll_codegen.core.target import get_target
from ll_codegen.spec import load_spec

if TYPE_CHECKING:                # the jobs package is imported when the command runs (llgen starts fast)
    from ll_codegen.jobs import Row, Settings
    from ll_codegen.jobs.stream import Worker

__all__ = ["verify", "parse_gpus", "DEFAULT_BATCH"]

#: rows planned, built and run together by one worker (the first results come after one batch)
DEFAULT_BATCH = 32
MAX_BATCH = 4096


def parse_gpus(text: Optional[str], visible: int | None = None) -> int | None:
    """``--gpus N|all``: how many workers (None for ``all`` while ``visible`` is unknown);
    with ``visible`` (the devices seen), ``all`` is that many and N may not exceed it.  Raises CLIError."""
    if text is None:
        return 1
    t = text.strip().lower()
    if t == "all":
        n = visible
    elif t.isdigit() and 0 < int(t) <= limits.MAX_CTAS:
        n = int(t)
    else:
        raise CLIError(f"--gpus: expected a number of GPUs or 'all', got {limits.short(text)}")
    if visible is not None and n > visible:
        raise CLIError(f"--gpus {n}: {visible} GPU(s) visible")
    return n


@main.command()
@conversion_options(required=False)
@click.option("--dtype", "dtypes", multiple=True, type=CommaChoice(DTYPES),
              help="Element type(s): repeatable or a comma list (default f16).")
@click.option("--corpus", default=None, metavar="FILE", type=click.Path(dir_okay=False),
              help="YAML list of conversions to verify instead of --src/--dst.")
@click.option("--runs", default=2, show_default=True, type=click.IntRange(1, limits.MAX_RUNS),
              help="Random tensors per conversion.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, limits.MAX_SEED), help="Random seed.")
@click.option("--host", is_flag=True, help="Run CUDA harnesses on the host SIMT runtime instead of a GPU.")
@click.option("--gpus", "gpus", default=None, metavar="N|all",
              help="Shard the rows over N visible GPUs (or all), one worker process per GPU  [default: 1]")
@click.option("--batch", "batch", default=DEFAULT_BATCH, show_default=True, type=click.IntRange(1, MAX_BATCH),
              help="Rows planned, compiled and run together by one worker.")
@click.option("--junit", "junit", default=None, metavar="FILE", type=click.Path(dir_okay=False),
              help="Also write a JUnit XML report (one testcase per conversion and dtype) to FILE.")
def verify(src: Optional[str], dst: Optional[str], target: str, arch: Optional[str], strategy: str, swizzle: str,
           smem_budget: int, shape: Optional[str], strides: Optional[str], warps: Optional[int],
           dtypes: tuple[str, ...], corpus: Optional[str], runs: int, seed: int, host: bool, gpus: Optional[str],
           batch: int, junit: Optional[str]) -> None:
    """Compile and run generated harnesses and check them bit for bit: one
    conversion (--src/--dst, one row per --dtype) or every entry of --corpus.
    CUDA runs on the GPU (CuPy), or on the host SIMT runtime with --host; HIP
    runs on the host SIMT runtime (wave64 or wave32).  Rows are planned,
    compiled and run in batches and printed as they finish (a progress line
    on a terminal).  Exit status 1 on any failure."""
    from ll_codegen import jobs as J
    from ll_codegen.run import gpu
    from ll_codegen.run import host as host_runtime
    if strides is not None:
        raise CLIError("--stride: verify runs global tiles at padded strides of its own")
    if host and gpus is not None:
        raise CLIError("--gpus: with --host every row runs on the CPU")
    parse_gpus(gpus)
    if junit is not None:
        check_targets([junit], "--junit")
    if corpus:
        if src or dst:
            raise CLIError("give either --corpus or --src/--dst, not both")
        jobs = J.load_corpus(corpus)
        suite = os.path.splitext(os.path.basename(corpus))[0]
    else:
        need(src, dst)
        get_target(target, arch)                # --target hip --arch sm_90: refused before any file is read
        dts = limits.dtype_list([d.strip() for v in (dtypes or ("f16",)) for d in v.split(",") if d.strip()], "--dtype")
        if not dts:
            raise CLIError("--dtype: no element type given")
        a, b = load_spec(src, shape_override=shape), load_spec(dst, shape_override=shape)
        J.check_work(len(dts) * max(J.row_work(a), J.row_work(b)), None, "--dtype")
        jobs = [J.VerifyJob(pair=f"{os.path.basename(src)} -> {os.path.basename(dst)}", src=src, dst=dst,
                            dtypes=tuple(dts), target=target, arch=arch, strategy=strategy, swizzle=swizzle,
                            smem_budget=smem_budget, shape=shape, name=None)]
        suite = jobs[0].pair
    # the machine, before anything is planned
    devices: list[str] = []
    if J.needs_gpu(jobs, host):
        reason = gpu.available()
        if reason is not None:
            raise CLIError(f"cannot verify: {reason} (--host runs on the CPU)")
        visible = gpu.visible_devices()
        devices = visible[:parse_gpus(gpus, len(visible))]
    if J.needs_host(jobs, host) and host_runtime.compiler() is None:
        raise CLIError("cannot verify: the host SIMT runtime (HIP rows, --host) needs clang++ (apt-get install clang)")
    rows = J.rows_of(jobs)
    run_rows(rows, devices, J.Settings(runs=runs, seed=seed, host=host,
                                       compile_workers=max(1, (os.cpu_count() or 1) // max(1, len(devices)))),
             batch, junit, suite)


def run_rows(rows: Sequence[Row], devices: list[str], settings: Settings, batch: int, junit: Optional[str],
             suite: str, workers: Optional[Sequence[Worker]] = None, err: Optional[TextIO] = None) -> None:
    """Stream ``rows`` through the workers (one per device in ``devices`` when there are several,
    else this process; ``workers`` replaces them), print the table, a progress line on ``err``
    (standard error) when it is a terminal, and the summary; write ``junit``; raise the exit status."""
    from ll_codegen import jobs as J
    from ll_codegen.jobs.stream import close_pools
    table = J.Table(rows)
    progress = J.Progress(sys.stderr if err is None else err, len(rows))
    pools = []
    if workers is None:
        if len(devices) > 1:
            workers, pools = J.device_workers(devices, settings)
        else:
            workers = [J.local_worker(settings, devices[0] if devices else "")]
    start = time.monotonic()
    outcomes = []
    click.echo(table.head())
    progress.show()
    finished = False
    try:
        for o in J.stream_rows(J.batches(rows, batch), workers):
            outcomes.append(o)
            progress.add(o)
            progress.clear()
            click.echo(table.row(rows[o.index], o))
            progress.show()
        finished = True
    finally:
        progress.clear()
        for p in pools:         # after an interrupt, do not wait for the batches in flight
            p.shutdown(wait=finished, cancel_futures=True)
        close_pools()
    seconds = time.monotonic() - start
    click.echo(J.summary(outcomes, seconds, len(devices)))
    if junit is not None:
        J.write_junit(junit, rows, outcomes, suite, seconds)
    refused = [o for o in outcomes if o.status == "error"]
    if refused:
        job = rows[refused[0].index].job
        more = f" ({len(refused)} rows refused)" if len(refused) > 1 else ""
        where = f"{quote_path(job.source)}: entry {job.entry}: " if job.source else ""
        raise CLIError(f"{where}{refused[0].message}{more}")
    if any(o.status == "failed" for o in outcomes):
        raise click.exceptions.Exit(1)
