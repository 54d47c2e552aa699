"""GPU tests: everything here needs a CUDA GPU reachable through CuPy.

Without one (CI, a laptop) every test is skipped with the reason that
``ll_codegen.run.gpu.available()`` gives (``LLGEN_REQUIRE_GPU=1`` makes that an error); the test modules also skip themselves at
import time, before they plan anything.
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

from ll_codegen.run import gpu  # noqa: E402

REASON = gpu.available()


def pytest_collection_modifyitems(config, items):
    if REASON is None:
        return
    if os.environ.get("LLGEN_REQUIRE_GPU") == "1":
        raise pytest.UsageError(f"LLGEN_REQUIRE_GPU=1 but no GPU: {REASON}")
    skip = pytest.mark.skip(reason=f"no GPU: {REASON}")
    for item in items:
        item.add_marker(skip)


def pytest_report_header(config):
    if REASON is not None:
        return f"gpu_tests: skipped, no GPU ({REASON})"
    info = gpu.device_info()
    return (f"gpu_tests: {info['name']} (cc {info['cc']}), driver {info['driver']}, runtime {info['runtime']}, "
            f"CuPy {info['cupy']}, {info['smem_per_block_optin']} B shared memory per block (opt-in)")
