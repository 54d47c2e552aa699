"""Running generated harnesses.

``harness``: per operation, a harness's inputs, expected outputs and comparison; ``host``: the
driver of the host SIMT runtime (``ll_codegen/simt/``, built with clang++); ``gpu``: the CUDA
driver (NVRTC + CuPy), with ``tensor_map`` encoding a TMA harness's ``CUtensorMap`` through
the CUDA driver.
"""
