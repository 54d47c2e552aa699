"""Seeded layout corpora for tests and benches.

``corpus``: the named conversion pairs (with the strategy the planner is expected to choose),
gather, MMA and MFMA cases, and seeded random layouts, memory tiles and pairs.  Nothing in the
library imports this package; the CPU tests, the GPU tests and the benchmarks do.
"""
