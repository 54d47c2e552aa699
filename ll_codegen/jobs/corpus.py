"""What ``llgen verify`` checks: conversions (``VerifyJob``), their rows (one per element type) and
the work they add up to, read from a corpus file or the command line -- everything decided
without planning.

``load_corpus`` reads and validates a corpus (every problem one ``SpecError`` naming the entry
and field): its layouts are loaded and its enumerated fields (target, arch, strategy, swizzle)
checked, but nothing is planned; ``check_work`` bounds the rows by their tile elements
(``limits.MAX_VERIFY_WORK``) while the entries are read, so a hostile corpus is refused before a
GPU is looked for.  ``plan_row`` plans one row when the run reaches it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from math import prod
from typing import Any, Mapping, Sequence

from ll_codegen.api import DEFAULT_SMEM_BUDGET, plan_conversion
from ll_codegen.core import limits
from ll_codegen.core.dtypes import DTYPE_BITS
from ll_codegen.core.target import get_target
from ll_codegen.emit.names import check_name, stem_ident
from ll_codegen.operations import for_endpoints
from ll_codegen.plan.plans import Transfer
from ll_codegen.spec import Spec, SpecError, load_spec, parse_yaml, read_spec_text, spec_from_dict

__all__ = ["VerifyJob", "Row", "CORPUS_FIELDS", "load_corpus", "rows_of", "row_work", "check_work", "plan_row",
           "plan_jobs", "needs_gpu", "needs_host", "CONVERT_STRATEGIES"]

#: the ``strategy`` values a corpus entry may name (its layouts are distributed: a conversion)
CONVERT_STRATEGIES = ("auto",) + tuple(s for op in for_endpoints(("registers", "registers")) for s in op.strategies)
CORPUS_FIELDS = ("src", "dst", "dtypes", "dtype", "target", "arch", "strategy", "swizzle", "smem_budget",
                 "shape", "name")


@dataclass
class VerifyJob:
    """One conversion to verify (``llgen verify``): one row per dtype.  ``entry`` is its
    1-based position in the corpus (0: given on the command line), ``source`` the corpus file."""
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
    entry: int = 0
    source: str | None = None

    @property
    def where(self) -> str:
        """Where the job comes from, as an error line names it (``corpus.yaml: entry 3``)."""
        return f"{self.source}: entry {self.entry}" if self.source else ""


@dataclass(frozen=True)
class Row:
    """One (conversion, dtype) row: ``index`` is its position in the run (0-based, corpus order)."""
    index: int
    job: VerifyJob
    dtype: str

    @property
    def target(self) -> str:
        return self.job.target


def row_work(spec: Spec) -> int:
    """The work of one row on ``spec``'s tile: its elements, at least ``limits.MIN_ROW_WORK``."""
    return max(prod(spec.shape), limits.MIN_ROW_WORK)


def check_work(total: int, source: str | None, where: str) -> None:
    """Refuse a run whose rows add up to more than ``limits.MAX_VERIFY_WORK`` tile elements
    (``total`` so far, ``where``: the entry or option that went over); raises SpecError."""
    if total > limits.MAX_VERIFY_WORK:
        raise SpecError(source or "", where or None,
                        f"the rows add up to over {limits.MAX_VERIFY_WORK} tile elements (at most "
                        f"{limits.MAX_VERIFY_WORK}: rows x elements per tile, a row counting as at least "
                        f"{limits.MIN_ROW_WORK}); split the corpus")


def _check_choices(source: str, where: str, target: str, arch: str | None, strategy: str, swizzle: str) -> None:
    if target not in ("cuda", "hip"):
        raise SpecError(source, f"{where}.target", f"unknown target {limits.short(target)} (known: cuda, hip)")
    try:
        get_target(target, arch)
    except ValueError as err:
        raise SpecError(source, f"{where}.arch", str(err)) from None
    if strategy not in CONVERT_STRATEGIES:
        raise SpecError(source, f"{where}.strategy", f"unknown strategy {limits.short(strategy)} "
                                                      f"(known: {', '.join(CONVERT_STRATEGIES)})")
    if swizzle not in ("optimal", "none"):
        raise SpecError(source, f"{where}.swizzle", f"unknown swizzle {limits.short(swizzle)} (known: optimal, none)")


def load_corpus(path: str | os.PathLike) -> list[VerifyJob]:
    """Read and validate a verify corpus: a YAML list of mappings
    ``{src, dst, dtypes, strategy, swizzle, name, target, arch, shape,
    smem_budget}``; ``src``/``dst`` are spec paths relative to the corpus
    file or inline spec mappings.  Every problem raises SpecError
    ``"<file>: entry <n>[.<field>]: <what>"``; the layouts are loaded and the
    work bound checked here, entry by entry, but nothing is planned."""
    source = os.fspath(path)
    data = parse_yaml(read_spec_text(source, "corpus"), source)
    if isinstance(data, Mapping) and set(data) == {"conversions"}:
        data = data["conversions"]
    if not isinstance(data, list) or not data:
        raise SpecError(source, "top level", "expected a non-empty list of conversions "
                                             "({src: ..., dst: ..., dtypes: [...]} each)")
    base = os.path.dirname(source)
    jobs = []
    work = 0
    seen: set[str] = set()
    # (path, shape) -> spec: entries that name the same file at the same shape share one load (a corpus
    # of a thousand entries over two files reads two); a Spec is immutable
    loaded: dict[tuple[str, str], Spec] = {}
    for i, e in enumerate(data, 1):
        where = f"entry {i}"
        if not isinstance(e, Mapping):
            raise SpecError(source, where, f"expected a mapping with src, dst and dtypes, got {type(e).__name__}")
        unknown = [k for k in e if k not in CORPUS_FIELDS]
        if unknown:
            raise SpecError(source, f"{where}.{limits.field_name(unknown[0])}", f"unknown field; allowed: {', '.join(CORPUS_FIELDS)}")
        if "dtype" in e and "dtypes" in e:
            raise SpecError(source, f"{where}.dtype", "give dtype or dtypes, not both")

        def text_field(k: str, default: Any) -> Any:
            v = e.get(k, default)
            if v is not default and not isinstance(v, str):
                raise SpecError(source, f"{where}.{k}", f"expected a string, got {type(v).__name__}")
            return v
        # the cheap fields first: a long dtype list or a typo is refused before any layout is built
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
            if d not in DTYPE_BITS:
                raise SpecError(source, f"{where}.{field}", f"unknown dtype {limits.short(d)} (known: {', '.join(DTYPE_BITS)})")
        name = text_field("name", None)
        if name is not None:
            try:
                check_name(name)
            except ValueError as err:
                raise SpecError(source, f"{where}.name", str(err).replace("--name ", "")) from None
        budget = e.get("smem_budget", DEFAULT_SMEM_BUDGET)
        if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
            raise SpecError(source, f"{where}.smem_budget", f"expected a positive number of bytes, got {limits.short(budget)}")
        target, arch = text_field("target", "cuda"), text_field("arch", None)
        strategy, swizzle = text_field("strategy", "auto"), text_field("swizzle", "optimal")
        _check_choices(source, where, target, arch, strategy, swizzle)
        specs = []
        for k in ("src", "dst"):
            if k not in e:
                raise SpecError(source, f"{where}.{k}", "missing (a spec path relative to the corpus, or a mapping)")
            v = e[k]
            if isinstance(v, str):
                key = (os.path.join(base, v), repr(e.get("shape")))
                if key not in loaded:
                    loaded[key] = load_spec(key[0], shape_override=e.get("shape"))
                spec = loaded[key]
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
        work += len(dts) * max(row_work(specs[0][0]), row_work(specs[1][0]))
        check_work(work, source, where)
        pair = name or f"{specs[0][1]} -> {specs[1][1]}"
        if pair in seen:
            pair = f"{pair} #{i}"
        seen.add(pair)
        jobs.append(VerifyJob(pair=pair, src=specs[0][0], dst=specs[1][0], dtypes=tuple(dts), target=target,
                              arch=arch, strategy=strategy, swizzle=swizzle, smem_budget=budget, shape=None,
                              name=name, entry=i, source=source))
    return jobs


def rows_of(jobs: Sequence[VerifyJob]) -> list[Row]:
    """Every (job, dtype) row in order, numbered from 0; nothing planned."""
    return [Row(k, job, dt) for k, (job, dt) in enumerate((j, d) for j in jobs for d in j.dtypes)]


def plan_row(row: Row) -> Transfer:
    """The plan of one row; raises ValueError (SpecError) when the planner refuses it."""
    job = row.job
    return plan_conversion(job.src, job.dst, dtype=row.dtype, target=job.target, arch=job.arch,
                           strategy=job.strategy, swizzle=job.swizzle, smem_budget=job.smem_budget,
                           shape=job.shape)


def plan_jobs(jobs: Sequence[VerifyJob]) -> list[tuple[VerifyJob, str, Transfer]]:
    """(job, dtype, plan) for every row, all planned now; raises ValueError for bad inputs."""
    return [(r.job, r.dtype, plan_row(r)) for r in rows_of(jobs)]


def needs_gpu(jobs: Sequence[VerifyJob], host: bool) -> bool:
    """Whether the run needs a CUDA GPU: a CUDA row not sent to the host runtime (known unplanned)."""
    return not host and any(j.target == "cuda" for j in jobs)


def needs_host(jobs: Sequence[VerifyJob], host: bool) -> bool:
    """Whether the run uses the host SIMT runtime (HIP rows; every row with ``host``)."""
    return any(host or j.target != "cuda" for j in jobs)

