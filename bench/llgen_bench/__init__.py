"""llgen's GPU benchmarks (their layouts come from ``ll_codegen.testing.corpus``).

Not part of the ``ll_codegen`` library: the timing code (CUDA events, Gluon
kernels, SASS counts) lives here, installed as the top-level package
``llgen_bench`` (``pyproject.toml`` maps it from ``bench/llgen_bench``).
``llgen bench`` imports ``llgen_bench.convert`` lazily.

Modules: ``jobs`` (plan variants, bench sources, nvcc), ``timing`` (CUDA-event
timer, bench-kernel data, our kernels), ``gluon`` (Triton's kernels, also
compiled without a GPU), ``words`` (packed words as a Gluon layout), ``sass``
(opcode counts, loops, STL/LDL), ``integrity`` (registers, spills, local
memory, equal base work), ``headline`` (the flag rule and the headline of a
results file), ``convert`` (one pair end to end, tables), ``gather`` (gather
benches).
"""
