"""Independent hardware models, written from the vendors' documents and not from the planners.

``ptx_model``: wgmma, mma.sync and TMA from the PTX ISA; ``mfma_model``: AMD MFMA from AMD's ISA.
"""
