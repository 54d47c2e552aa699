"""``gpu_tests/sanitize.py`` fails when a harness does not compile: such a harness was
never launched, so never sanitized, and a run that skips it must not read as clean."""
from __future__ import annotations

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sanitize():
    spec = importlib.util.spec_from_file_location("sanitize", os.path.join(ROOT, "gpu_tests", "sanitize.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CLEAN = [{"tool": t, "clean": True} for t in ("memcheck", "racecheck", "synccheck", "initcheck")]


def test_clean_only_when_every_harness_compiled():
    s = sanitize()
    assert s.exit_status(CLEAN, {}, 40)[0] == 0
    status, line = s.exit_status(CLEAN, {"blocked_to_mma_f16": "error: identifier \"x\" is undefined"}, 40)
    assert status == 1 and "1 did NOT compile (blocked_to_mma_f16)" in line


def test_a_dirty_tool_or_no_tool_fails():
    s = sanitize()
    assert s.exit_status(CLEAN[:1] + [{"tool": "racecheck", "clean": False}], {}, 40)[0] == 1
    assert s.exit_status([], {}, 40)[0] == 1
