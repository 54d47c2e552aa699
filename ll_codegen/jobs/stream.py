"""Running ``llgen verify``'s rows: planned, built and run in batches, sharded over GPUs.

* ``batches(rows, size)`` cuts the rows into consecutive batches, lazily.
* ``run_batch(rows, settings)`` does one batch in one worker: every row is planned (a row the
  planner refuses is an ``error`` outcome, the others go on), the CUDA rows' harnesses are
  compiled as NVRTC modules in parallel processes (``gpu.Batch``) and run on the worker's GPU,
  the host rows (HIP, or every row with ``--host``) are compiled by clang++ in parallel threads
  and run on the host SIMT runtime (``host.verify_host``).
* ``stream_rows(batches, workers)`` hands each batch to the next free worker -- one per device -- and
  yields the outcomes in row order, each as soon as every row before it is done: the first
  results arrive after one batch, whatever the corpus's size, and a batch is cut only when a
  worker is free to take it.
* ``device_workers(devices, settings)``: one worker process per GPU, pinned to its device with
  ``CUDA_VISIBLE_DEVICES`` before CuPy is imported there; ``local_worker(settings)`` runs the
  batches in this process (one GPU, or the host runtime).

A row's random data comes from its own seed (``[seed, row index]`` on a GPU; the batch's first
row on the host), so a row checks the same bits whichever device runs it.
"""
from __future__ import annotations

import math
import os
import tempfile
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from ll_codegen.jobs.corpus import Row, plan_row
from ll_codegen.run import gpu
from ll_codegen.run import host as host_runtime

__all__ = ["Outcome", "Settings", "batches", "run_batch", "stream_rows", "local_worker", "device_workers",
           "strategy_text", "Worker", "close_pools", "compile_pool", "pin_device"]

#: a worker: one batch of rows in, their outcomes (in the batch's order) out
Worker = Callable[[Sequence[Row]], list["Outcome"]]


@dataclass(frozen=True)
class Outcome:
    """What one row came to.  ``status``: ``passed``, ``failed`` (wrong bits, a compile or launch
    error) or ``error`` (the planner refused the row's inputs); ``strategy``: the plan's strategy,
    target and arch (empty when refused); ``seconds``: the row's planning time plus its share of
    its batch's build and run time; ``device``: the worker that ran it."""
    index: int
    status: str
    strategy: str
    message: str
    seconds: float = 0.0
    device: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class Settings:
    """How rows run: ``runs`` random tensors each, ``seed``, CUDA rows on the host runtime
    (``host``), ``compile_workers`` processes (NVRTC) or threads (clang++) building a batch."""
    runs: int = 2
    seed: int = 0
    host: bool = False
    compile_workers: int = 1


def strategy_text(plan) -> str:
    """A plan's strategy column: ``smem (cuda sm_90)``."""
    return f"{plan.strategy} ({plan.target} {plan.arch})"


def batches(rows: Sequence[Row], size: int) -> Iterator[list[Row]]:
    """Consecutive batches of at most ``size`` rows, cut when asked for."""
    for k in range(0, len(rows), size):
        yield list(rows[k:k + size])


def _first_line(e: BaseException) -> str:
    return next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)


_POOL: list[Executor] = []       # this process's NVRTC compile pool, kept across batches


def compile_pool(workers: int) -> Executor | None:
    """This process's pool of ``workers`` NVRTC compile processes, started once and kept across
    batches (None for one worker, or with ``LLGEN_GPU_COMPILE`` other than ``processes``).  It is
    shut down before this process's exit joins its children: in a device worker process that join
    comes before the interpreter's own shutdown of executors, and would wait on the idle pool forever."""
    if workers <= 1 or os.environ.get("LLGEN_GPU_COMPILE", "processes") != "processes":
        return None
    if not _POOL:
        import multiprocessing as mp
        from multiprocessing.util import Finalize
        _POOL.append(ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")))
        Finalize(None, close_pools, exitpriority=100)          # runs before the children are joined
    return _POOL[0]


def _run_on_gpu(items: list[tuple[Row, object]], settings: Settings) -> dict[int, tuple[bool, str]]:
    """Compile the rows' harnesses as NVRTC modules (in parallel) and run each on this process's GPU."""
    names = {r.index: f"{r.job.name or 'cvt'}_r{r.index}" for r, _ in items}
    workers = max(1, min(settings.compile_workers, len(items)))
    with tempfile.TemporaryDirectory(prefix="llgen_verify_") as d:
        try:
            b = gpu.Batch([(names[r.index], p) for r, p in items], directory=d)
            b.compile(batch_size=max(1, math.ceil(len(items) / workers)), workers=workers,
                      pool=compile_pool(workers))
        except Exception as e:  # noqa: BLE001 - NVRTC or module loading failed for the whole batch
            return {r.index: (False, f"{type(e).__name__}: {_first_line(e)}") for r, _ in items}
        out = {}
        for r, _ in items:
            res = b.run(names[r.index], runs=settings.runs, rng=np.random.default_rng([settings.seed, r.index]))
            out[r.index] = (res.ok, res.message)
        return out


def _run_on_host(items: list[tuple[Row, object]], settings: Settings) -> dict[int, tuple[bool, str]]:
    """Compile the rows' harnesses for the host SIMT runtime (clang++ in parallel threads) and run them."""
    if host_runtime.compiler() is None:
        return {r.index: (False, "the host SIMT runtime needs clang++ (apt-get install clang)") for r, _ in items}
    workers = max(1, min(settings.compile_workers, len(items)))
    try:
        res = host_runtime.verify_host([(f"{r.job.name or 'cvt'}_r{r.index}", p) for r, p in items],
                                       runs=settings.runs, seed=settings.seed + items[0][0].index,
                                       batch_size=max(1, math.ceil(len(items) / workers)), jobs=workers)
    except Exception as e:  # noqa: BLE001 - a failed build or driver is a failed row, not a crash
        return {r.index: (False, f"{type(e).__name__}: {_first_line(e)}") for r, _ in items}
    return {r.index: (x.ok, x.message) for (r, _), x in zip(items, res)}


def run_batch(rows: Sequence[Row], settings: Settings, device: str = "") -> list[Outcome]:
    """Plan, build and run one batch of rows (see the module's docstring); one outcome per row,
    in order.  A row's time is its planning time plus an equal share of the batch's build and run."""
    planned, refused, plan_s = [], {}, {}
    for r in rows:
        t = time.perf_counter()
        try:
            planned.append((r, plan_row(r)))
        except ValueError as e:               # SpecError, LayoutError: the row's inputs, not the tool
            refused[r.index] = _first_line(e)
        plan_s[r.index] = time.perf_counter() - t
    t = time.perf_counter()
    on_host = [(r, p) for r, p in planned if settings.host or p.target != "cuda"]
    on_gpu = [(r, p) for r, p in planned if not (settings.host or p.target != "cuda")]
    results = {}
    if on_gpu:
        results.update(_run_on_gpu(on_gpu, settings))
    if on_host:
        results.update(_run_on_host(on_host, settings))
    share = (time.perf_counter() - t) / max(1, len(planned))
    plans = {r.index: p for r, p in planned}
    out = []
    for r in rows:
        if r.index in refused:
            out.append(Outcome(r.index, "error", "", refused[r.index], plan_s[r.index], device))
        else:
            ok, msg = results[r.index]
            out.append(Outcome(r.index, "passed" if ok else "failed", strategy_text(plans[r.index]), msg,
                               plan_s[r.index] + share, device))
    return out


def stream_rows(parts: Iterable[Sequence[Row]], workers: Sequence[Worker]) -> Iterator[Outcome]:
    """Run every batch of ``parts`` on the first free worker (one thread here per worker) and
    yield the outcomes in row order, each batch's as soon as every earlier batch is done.  A
    batch is taken from ``parts`` only when a worker is free for it.  A worker's exception is
    raised here; closing the generator stops handing out batches."""
    if not workers:
        raise ValueError("no worker to run the rows on")
    it = iter(parts)
    cond = threading.Condition()
    done: dict[int, list[Outcome]] = {}
    state = {"taken": 0, "finished": 0, "error": None, "stop": False}

    def take() -> tuple[int, Sequence[Row]] | None:
        with cond:
            if state["stop"]:
                return None
            part = next(it, None)
            if part is None:
                return None
            state["taken"] += 1
            return state["taken"] - 1, part

    def loop(work: Worker) -> None:
        try:
            while (job := take()) is not None:
                k, part = job
                out = work(part)
                if len(out) != len(part):
                    raise RuntimeError(f"a worker returned {len(out)} outcomes for {len(part)} rows")
                with cond:
                    done[k] = out
                    cond.notify_all()
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            with cond:
                state["error"] = state["error"] or e
                state["stop"] = True
                cond.notify_all()
        finally:
            with cond:
                state["finished"] += 1
                cond.notify_all()

    threads = [threading.Thread(target=loop, args=(w,), daemon=True, name=f"llgen-verify-{k}")
               for k, w in enumerate(workers)]
    for t in threads:
        t.start()
    k = 0
    try:
        while True:
            with cond:
                while k not in done and state["error"] is None and state["finished"] < len(workers):
                    cond.wait()
                if state["error"] is not None:
                    raise state["error"]
                if k not in done:                 # every worker is finished: no batch is left
                    return
                out = done.pop(k)
            yield from out
            k += 1
    finally:
        with cond:
            state["stop"] = True
            cond.notify_all()


def local_worker(settings: Settings, device: str = "") -> Worker:
    """Batches run in this process (one GPU: CuPy's current device; the host runtime)."""
    return lambda part: run_batch(part, settings, device)


def pin_device(device: str) -> None:
    """A worker process's initializer: see only ``device`` (before CuPy is imported here)."""
    os.environ["CUDA_VISIBLE_DEVICES"] = device


def device_workers(devices: Sequence[str], settings: Settings,
                   run: Callable[[list[Row], Settings, str], list[Outcome]] = run_batch
                   ) -> tuple[list[Worker], list[Executor]]:
    """One worker per device: a process started with ``spawn`` (a CUDA context does not survive a
    fork), pinned to its device, calling ``run(rows, settings, device)`` (a module-level function)
    for each batch; (workers, the executors to shut down)."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    pools = [ProcessPoolExecutor(1, mp_context=ctx, initializer=pin_device, initargs=(d,)) for d in devices]

    def worker(pool: Executor, device: str) -> Worker:
        return lambda part: pool.submit(run, list(part), settings, device).result()
    return [worker(p, d) for p, d in zip(pools, devices)], pools


def close_pools() -> None:
    """Shut this process's compile pool down (``llgen verify`` at its end)."""
    while _POOL:
        _POOL.pop().shutdown(wait=True, cancel_futures=True)
