"""The numpy emulator: plans executed step by step with the hardware's semantics -- the
independent checker of the planner.  Each operation's check is a field of its record in the
registry (``ll_codegen/operations.py``, ``check(plan)``); ``common`` holds the shared hardware
semantics (shared memory, shuffles, byte packing), ``reference`` the numpy references computed
from the layouts alone, and ``banks`` the brute-force wavefront, bank-conflict and sector counters.

Nothing in the emulators imports the planner or reuses its formulas: they
read only the plan data and execute it thread by thread (vectorised over all
warps and lanes with numpy), then compare every register and tensor element
with the numpy reference (``reference.py``), which knows only the layouts.
The bank and sector counters (``banks.py``) look only at the actual byte
addresses of each warp-wide instruction.

========== ==================================== =====================================
operation  executed by                          compared with
========== ==================================== =====================================
convert    ``convert.check_convert``            ``reference.reference``
store/load ``memory.emulate_memory``            ``reference.memory_reference``
copy       both halves (``copy_halves``)        ``reference.memory_reference``
gather     ``gather.emulate_gather``            ``reference.gather_reference``
tma        ``tma`` (box by box)                 ``tma.tile_reference`` (the layout's offsets)
mma        ``mma.emulate`` (PTX model;          ``reference.mma_tensors``
           MFMA: ``mfma_model``)
reduce     ``reduce.emulate_reduce`` (groups,   ``reference.reduce_reference`` (the
           xor rounds, a modelled scratch)      plan's order, the type's rounding)
========== ==================================== =====================================

Every check draws random raw bits (full range: NaN payloads, signed zeros
occur naturally; reductions, which compute, draw finite values: random normal floats,
small and full-range integers) and raises AssertionError (``SmemError`` for an access the
hardware would not perform as planned) on any difference.
"""
