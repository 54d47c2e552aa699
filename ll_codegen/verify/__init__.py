"""Verification stage: plans checked by code that does not share theirs.

* ``emulate``: each operation's plans run step by step with the hardware's semantics against
  numpy references computed from the layouts alone, one module per operation family; the
  brute-force bank and sector counters (``emulate.banks``);
* ``models``: hardware models written from the vendors' documents alone (wgmma, mma.sync,
  TMA; AMD MFMA);
* ``ptx``: the compilers' output read back -- a PTX interpreter for one CTA and what the plan
  says each thread issues (``ptx.expect``); the AMDGPU LDS sequence reader (``ptx.isa_check``);
* ``harness``: what a harness run is per operation (its arguments, expected outputs and
  comparison), which the drivers of ``ll_codegen/run/`` use.

The registry (``ll_codegen/operations.py``) gives each operation its emulator, harness and PTX
expectations; the drivers that run harnesses (host SIMT runtime, GPU, PTX check) sit above it.
"""
