"""``llgen verify``: a corpus of conversions (YAML), planned and run bit for bit.

``load_corpus`` reads and validates the corpus (every problem one line naming the
entry and field), ``plan_jobs`` plans every (conversion, dtype) row, and
``run_jobs`` runs each row's generated harness -- on the GPU through CuPy, or on
the host SIMT runtime -- and prints a table as rows finish.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ll_codegen.api import DEFAULT_SMEM_BUDGET, plan_conversion
from ll_codegen.core import limits
from ll_codegen.core.dtypes import DTYPE_BYTES
from ll_codegen.emit.names import check_name, stem_ident
from ll_codegen.plan.plans import Transfer
from ll_codegen.spec import SpecError, load_spec, parse_yaml, read_spec_text, spec_from_dict
from ll_codegen.run import gpu
from ll_codegen.run import host as host_runtime


@dataclass
class VerifyJob:
    """One conversion to verify (``llgen verify``): one row per dtype."""
    pair: str
    src: Any                   # spec path (relative to the cwd) or a loaded Spec
    dst: Any
    dtypes: tuple[str, ...]
    target: str = "cuda"
    arch: str | None = None
    strategy: str = "auto"
    swizzle: str = "optimal"
    smem_budget: int = DEFAULT_SMEM_BUDGET
    shape: Any = None
    name: str | None = None


_CORPUS_FIELDS = ("src", "dst", "dtypes", "dtype", "target", "arch", "strategy", "swizzle", "smem_budget",
                  "shape", "name")


def load_corpus(path: str | os.PathLike) -> list[VerifyJob]:
    """Read and validate a verify corpus: a YAML list of mappings
    ``{src, dst, dtypes, strategy, swizzle, name, target, arch, shape,
    smem_budget}``; ``src``/``dst`` are spec paths relative to the corpus
    file or inline spec mappings.  Every problem raises SpecError
    ``"<file>: entry <n>[.<field>]: <what>"``; the layouts are loaded here."""
    source = os.fspath(path)
    data = parse_yaml(read_spec_text(source, "corpus"), source)
    if isinstance(data, Mapping) and set(data) == {"conversions"}:
        data = data["conversions"]
    if not isinstance(data, list) or not data:
        raise SpecError(source, "top level", "expected a non-empty list of conversions "
                                             "({src: ..., dst: ..., dtypes: [...]} each)")
    if len(data) > limits.MAX_VERIFY_ROWS:      # before loading a spec: every entry is planned below
        raise SpecError(source, "top level", f"{len(data)} entries; at most {limits.MAX_VERIFY_ROWS} rows")
    base = os.path.dirname(source)
    jobs = []
    rows = 0
    seen: set[str] = set()
    for i, e in enumerate(data, 1):
        where = f"entry {i}"
        if not isinstance(e, Mapping):
            raise SpecError(source, where, f"expected a mapping with src, dst and dtypes, got {type(e).__name__}")
        unknown = [k for k in e if k not in _CORPUS_FIELDS]
        if unknown:
            raise SpecError(source, f"{where}.{limits.field_name(unknown[0])}", f"unknown field; allowed: {', '.join(_CORPUS_FIELDS)}")
        if "dtype" in e and "dtypes" in e:
            raise SpecError(source, f"{where}.dtype", "give dtype or dtypes, not both")

        def text_field(k: str, default: Any) -> Any:
            v = e.get(k, default)
            if v is not default and not isinstance(v, str):
                raise SpecError(source, f"{where}.{k}", f"expected a string, got {type(v).__name__}")
            return v
        specs = []
        for k in ("src", "dst"):
            if k not in e:
                raise SpecError(source, f"{where}.{k}", "missing (a spec path relative to the corpus, or a mapping)")
            v = e[k]
            if isinstance(v, str):
                spec = load_spec(os.path.join(base, v), shape_override=e.get("shape"))
                label = stem_ident(v)
            elif isinstance(v, Mapping):
                spec = spec_from_dict(dict(v), f"{source}: {where}.{k}", shape_override=e.get("shape"))
                label = f"{v.get('kind', 'inline')}"
            else:
                raise SpecError(source, f"{where}.{k}", f"expected a spec path or mapping, got {type(v).__name__}")
            if spec.is_memory:
                raise SpecError(source, f"{where}.{k}", f"{spec.kind} is a memory layout; "
                                                         f"conversions need distributed layouts")
            specs.append((spec, label))
        dts = e.get("dtypes", e.get("dtype", ["f16"]))
        if isinstance(dts, str):
            dts = [d.strip() for d in dts.split(",")]
        field = "dtypes" if "dtypes" in e else "dtype"
        if not isinstance(dts, list) or not dts or not all(isinstance(d, str) and d for d in dts):
            raise SpecError(source, f"{where}.{field}", "expected a non-empty list of element types such as [f16, f32]")
        try:
            dts = limits.dtype_list(dts, f"{where}.{field}")
        except ValueError as err:
            raise SpecError(source, None, str(err)) from None
        for d in dts:
            if d not in DTYPE_BYTES:
                raise SpecError(source, f"{where}.{field}", f"unknown dtype {limits.short(d)} (known: {', '.join(DTYPE_BYTES)})")
        rows += len(dts)
        if rows > limits.MAX_VERIFY_ROWS:
            raise SpecError(source, f"{where}.{field}", f"the corpus has over {limits.MAX_VERIFY_ROWS} rows "
                                                        f"(conversions x element types); at most {limits.MAX_VERIFY_ROWS}")
        name = text_field("name", None)
        if name is not None:
            try:
                check_name(name)
            except ValueError as err:
                raise SpecError(source, f"{where}.name", str(err).replace("--name ", "")) from None
        budget = e.get("smem_budget", DEFAULT_SMEM_BUDGET)
        if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
            raise SpecError(source, f"{where}.smem_budget", f"expected a positive number of bytes, got {limits.short(budget)}")
        pair = name or f"{specs[0][1]} -> {specs[1][1]}"
        if pair in seen:
            pair = f"{pair} #{i}"
        seen.add(pair)
        jobs.append(VerifyJob(pair=pair, src=specs[0][0], dst=specs[1][0], dtypes=tuple(dts),
                              target=text_field("target", "cuda"), arch=text_field("arch", None),
                              strategy=text_field("strategy", "auto"), swizzle=text_field("swizzle", "optimal"),
                              smem_budget=budget, shape=None, name=name))
    # plan every entry now, so that a bad option is reported against its entry
    for i, job in enumerate(jobs, 1):
        try:
            plan_jobs([job])
        except ValueError as err:
            raise SpecError(source, f"entry {i}", str(err)) from None
    return jobs


def plan_jobs(jobs: Sequence[VerifyJob]) -> list[tuple[VerifyJob, str, Transfer]]:
    """(job, dtype, plan) for every row; raises ValueError for bad inputs."""
    out = []
    for job in jobs:
        for dt in job.dtypes:
            p = plan_conversion(job.src, job.dst, dtype=dt, target=job.target, arch=job.arch,
                                strategy=job.strategy, swizzle=job.swizzle, smem_budget=job.smem_budget,
                                shape=job.shape)
            out.append((job, dt, p))
    return out


def needs_gpu(planned: Sequence[tuple[VerifyJob, str, Transfer]], host: bool) -> bool:
    """Whether ``run_jobs`` needs a CUDA GPU (CUDA rows not sent to the host runtime)."""
    return not host and any(p.target == "cuda" for _, _, p in planned)


def needs_host(planned: Sequence[tuple[VerifyJob, str, Transfer]], host: bool) -> bool:
    """Whether ``run_jobs`` runs rows on the host SIMT runtime (HIP rows, every row with ``host``)."""
    return any(host or p.target != "cuda" for _, _, p in planned)


def run_jobs(planned: Sequence[tuple[VerifyJob, str, Transfer]], runs: int = 2, seed: int = 0,
             echo=print, host: bool = False) -> tuple[list[tuple[str, str, str, str]], int]:
    """Verify every planned row and print a table through ``echo`` as rows
    finish; returns (rows, number of failures).  CUDA rows run on the GPU
    (CuPy) unless ``host``; HIP rows (no AMD GPU is driven here) and, with
    ``host``, CUDA rows run on the host SIMT runtime (``run/host.py``)."""
    heads = ("pair", "dtype", "strategy", "result")
    w = [max([len(heads[0])] + [len(j.pair) for j, _, _ in planned]),
         max([len(heads[1])] + [len(d) for _, d, _ in planned]),
         max([len(heads[2])] + [len(f"{p.strategy} ({p.target} {p.arch})") for _, _, p in planned])]
    line = lambda a, b, c, d: f"{a:<{w[0]}}  {b:<{w[1]}}  {c:<{w[2]}}  {d}".rstrip()  # noqa: E731
    echo(line(*heads))
    rows, failed = [], 0
    for k, (job, dt, p) in enumerate(planned):
        strat = f"{p.strategy} ({p.target} {p.arch})"
        on_host = host or p.target != "cuda"
        if on_host and host_runtime.compiler() is None:
            result = "FAIL: the host SIMT runtime needs clang++ (apt-get install clang)"
        else:
            try:
                if on_host:
                    r = host_runtime.verify_host([(job.name or "cvt", p)], runs=runs, seed=seed + k)[0]
                else:
                    r = gpu.verify_plan(p, name=job.name or "cvt", runs=runs, seed=seed + k)
                result = f"ok ({r.message})" if r.ok else f"FAIL: {r.message}"
            except Exception as e:  # noqa: BLE001 - a compile or launch error is a failed row
                first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
                result = f"FAIL: {type(e).__name__}: {first}"
        failed += result.startswith("FAIL")
        rows.append((job.pair, dt, strat, result))
        echo(line(job.pair, dt, strat, result))
    echo(f"{len(rows)} row(s): {len(rows) - failed} passed, {failed} failed")
    return rows, failed
