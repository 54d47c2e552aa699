"""CPU emulator of plans -- the independent checker of the planner
(DESIGN.md, "Verification chain", step 3): one ``check(plan)`` for every
operation, dispatched on ``plan.operation`` through ``CHECKS``.

Nothing in the emulators imports the planner or reuses its formulas: they
read only the plan data and execute it thread by thread (vectorised over all
warps and lanes with numpy), then compare every register and tensor element
with the numpy reference (``reference.py``), which knows only the layouts.
The bank and sector counters (``banks.py``) look only at the actual byte
addresses of each warp-wide instruction.

========== ==================================== =====================================
operation  executed by                          compared with
========== ==================================== =====================================
convert    ``emulate_convert.emulate``          ``reference.reference``
store/load ``emulate_memory.emulate_memory``    ``reference.memory_reference``
copy       both halves (``copy_halves``)        ``reference.memory_reference``
gather     ``emulate_gather.emulate_gather``    ``reference.gather_reference``
tma        ``emulate_tma`` (box by box)         ``emulate_tma.tile_reference`` (the layout's offsets)
mma        ``emulate_mma.emulate`` (PTX model;  ``reference.mma_tensors``
           MFMA: ``mfma_model``)
========== ==================================== =====================================

Every check draws random raw bits (full range: NaN payloads, signed zeros
occur naturally) and raises AssertionError (``SmemError`` for an access the
hardware would not perform as planned) on any difference.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ll_codegen.core.layout import layout_of
from ll_codegen.verify.emulate_convert import check_plan
from ll_codegen.verify.emulate_gather import check_gather
from ll_codegen.verify.emulate_memory import check_copy_plan, check_memory_plan
from ll_codegen.verify.emulate_tma import check_tma
from ll_codegen.verify.emulate_mma import check_mma


def _check_conversion(plan, rng, **kw) -> None:
    check_plan(plan, layout_of(plan.src_bases), layout_of(plan.dst_bases), rng)


#: plan.operation -> check(plan, rng, **options); options: ``extent``/``strides``
#: (store, load, copy), ``runs`` (gather)
CHECKS: dict[str, Callable[..., None]] = {
    "convert": _check_conversion,
    "store": check_memory_plan,
    "load": check_memory_plan,
    "copy": check_copy_plan,
    "gather": check_gather,
    "mma": check_mma,
    "tma": check_tma,
}


def check(plan, rng: np.random.Generator | int | None = 0, **options) -> None:
    """Emulate ``plan`` on random data and compare with numpy; AssertionError on any difference."""
    try:
        fn = CHECKS[plan.operation]
    except KeyError:
        raise ValueError(f"no emulator for operation {plan.operation!r} (known: {', '.join(CHECKS)})") from None
    fn(plan, rng, **options)
