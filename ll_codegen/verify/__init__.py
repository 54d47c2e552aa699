"""Verification stage: plans checked against numpy, on the CPU and by running generated code.

* ``reference``: the numpy references (from the layouts alone);
* ``emulator``: ``check(plan)`` for every operation, dispatched on
  ``plan.operation`` to ``emulate_convert``/``emulate_memory``/``emulate_gather``
  (shared hardware semantics in ``emulate_common``); ``banks``: the brute-force
  bank and sector counters;
* ``harness``: what a harness run is per operation (arguments, reference,
  comparison); ``host`` runs harnesses on the host SIMT runtime (clang++),
  ``gpu`` on a CUDA GPU (NVRTC + CuPy), both through that one table.
"""
