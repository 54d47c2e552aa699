"""Stage emit: plans -> CUDA/HIP source text through the Jinja2 templates in ``templates/``.

One module per operation computes the values of its files (``convert``, ``memory`` (store,
load), ``copy``, ``tma``, ``gather``, ``mma`` with ``mfma``, ``reduce``), each exposing its file table that
the registry (``ll_codegen/operations.py``) records; ``render.render_template`` renders one
file from such a table.  ``cexpr`` (C expressions of GF(2) maps, packing), ``instructions``
(the instruction home: every target instruction's wrapper, the only inline asm), ``env`` (the template environment), ``body`` (what every
register <-> memory operation shares) and ``harness_tiles`` (what a memory harness runs on)
serve them.  Import from the defining module, not from here.
"""
