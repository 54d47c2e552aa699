"""``llgen verify``: conversions checked bit for bit, from the command line or a corpus (YAML),
at any scale.

* ``corpus``: what is checked -- ``VerifyJob`` (a conversion), ``Row`` (one element type of
  it), ``load_corpus`` (every entry validated and its layouts loaded, nothing planned), the work
  bound (``check_work``: tile elements over all rows, ``limits.MAX_VERIFY_WORK``), ``plan_row``;
* ``stream``: how rows run -- planned, built (in parallel) and run in batches by one worker per
  GPU (or the host SIMT runtime), outcomes streamed back in row order;
* ``report``: the table, the progress line, the summary and the JUnit XML report.

The command (``cli/verify.py``) reads the corpus, checks for CuPy and a GPU (or clang++), and
only then plans anything, batch by batch.
"""
from ll_codegen.jobs.corpus import (CONVERT_STRATEGIES, CORPUS_FIELDS, Row, VerifyJob, check_work, load_corpus,
                                    needs_gpu, needs_host, plan_jobs, plan_row, row_work, rows_of)
from ll_codegen.jobs.report import Progress, Table, junit_xml, summary, write_junit
from ll_codegen.jobs.stream import Outcome, Settings, batches, device_workers, local_worker, run_batch, stream_rows

__all__ = ["CONVERT_STRATEGIES", "CORPUS_FIELDS", "Row", "VerifyJob", "check_work", "load_corpus", "needs_gpu",
           "needs_host", "plan_jobs", "plan_row", "row_work", "rows_of", "Progress", "Table", "junit_xml", "summary",
           "write_junit", "Outcome", "Settings", "batches", "device_workers", "local_worker", "run_batch", "stream_rows"]
