"""Named barriers on the GPU: a generated conversion (the f16 transpose through shared memory, its
stores and loads with ldmatrix/stmatrix) and a reduction across warps (the column sum of a 64 x 64
f32 tile), both planned with ``--barrier 2``, run in a warp-specialised block: a producer warp
group of 4 warps that never calls the headers, then the 4 consumer warps that do
(``tests/data/warp_specialised_kernel.cuh``, the kernel the host SIMT runtime runs in
``tests/test_named_barriers.py``).  Every consumer thread's result must be bit-exact.

Two producer modes:

* ``exit``: the producers return at once.  (On an H200 a ``__syncthreads()`` header also finishes
  here: the hardware counts exited warps as arrived at barrier 0.  This mode checks the named
  barrier's own counting of the consumers.)
* ``busy``: the producers stay resident, spinning on a flag the consumers set after the call --
  as a TMA producer waits on its mbarriers.  A header that regressed to ``__syncthreads()`` waits
  for them at barrier 0 while they wait for it: the spin gives up after ~2^31 cycles (about a
  second), reports ``timed_out`` and exits, barrier 0 then completes, and the test fails instead of
  hanging.  Seen on an H200: the named-barrier headers pass both modes; the same kernel with the
  block-wide transpose header passes ``exit`` and reports ``timed_out`` in ``busy``.

Risk (a CuPy launch cannot be killed): on hardware that did not count exited warps at barrier 0, a
regression would hang the ``busy`` kernel after the producers time out.  The header text is checked
for ``__syncthreads`` before any launch, which catches that regression first; run the file under
an outer ``timeout`` all the same.
"""
import os
import tempfile

import numpy as np
import pytest

from ll_codegen.run import gpu

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SPECS = os.path.join(ROOT, "examples", "specs")
PRODUCERS = 128


def plans():
    from ll_codegen.api import plan_conversion, plan_reduce
    cvt = plan_conversion(os.path.join(SPECS, "blocked_row_64x64.yaml"), os.path.join(SPECS, "blocked_col_64x64.yaml"),
                          "f16", barrier=2)
    red = plan_reduce(os.path.join(SPECS, "blocked_row_64x64.yaml"), 0, barrier=2)
    return cvt, red


@pytest.fixture(scope="module", params=[0, 1], ids=["exit", "busy"])
def module(request):
    import cupy
    from ll_codegen.operations import write_files
    cvt, red = plans()
    d = tempfile.mkdtemp(prefix="llgen_named_")
    write_files(cvt, d, "CVT", emit=("header",))
    write_files(red, d, "RED", emit=("header",))
    for name in ("CVT.cuh", "RED.cuh"):
        text = open(os.path.join(d, name)).read()
        assert "__syncthreads();" not in text and "detail::bar_sync(2, 128);" in text, name
    source = (f"#define LLGEN_PRODUCER_THREADS {PRODUCERS}\n#define LLGEN_PRODUCER_MODE {request.param}\n"
              '#include "CVT.cuh"\n#include "RED.cuh"\n#include "warp_specialised_kernel.cuh"\n')
    opts = (list(gpu.DEFAULT_OPTIONS) + [f"--gpu-architecture={gpu.arch()}", f"-I{d}",
                                          f"-I{os.path.join(ROOT, 'tests', 'data')}"]
            + [f"-I{x}" for x in gpu.cuda_include_dirs()])
    cubin, log = gpu.nvrtc_compile(source, opts)
    assert cubin is not None, log
    path = os.path.join(d, "ws.cubin")
    with open(path, "wb") as f:
        f.write(cubin)
    return cupy.RawModule(path=path), cvt, red


def launch(mod, kernel: str, threads: int, smem: int, *extra):
    import cupy
    wrong = cupy.full(threads, 7, dtype=cupy.uint32)
    flags = cupy.zeros(2, dtype=cupy.uint32)
    k = mod.get_function(kernel)
    if smem > 48 * 1024:
        k.max_dynamic_shared_size_bytes = smem
    k((1,), (PRODUCERS + threads,), (wrong, flags, flags[1:], *extra), shared_mem=smem)
    cupy.cuda.Device().synchronize()
    return cupy.asnumpy(wrong), int(flags[1].get())


def test_conversion_in_a_warp_specialised_block(module):
    mod, cvt, _ = module
    for _ in range(3):
        wrong, timed_out = launch(mod, "ws_convert", cvt.threads, cvt.smem_bytes)
        assert timed_out == 0, "the producers timed out: the consumers waited for them"
        assert not wrong.any(), f"{int(wrong.sum())} wrong elements, first thread {int(np.nonzero(wrong)[0][0])}"


def test_reduction_in_a_warp_specialised_block(module):
    mod, _, red = module
    for _ in range(3):
        wrong, timed_out = launch(mod, "ws_reduce", red.threads, red.smem_bytes, np.int32(64), np.int32(64))
        assert timed_out == 0, "the producers timed out: the consumers waited for them"
        assert not wrong.any(), f"{int(wrong.sum())} wrong results"
