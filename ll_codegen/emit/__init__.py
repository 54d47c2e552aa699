"""Stage emit: plans -> CUDA/HIP source text through the Jinja2 templates in ``templates/``.

``render`` is the one entry point (``render``, ``render_files``, ``file_names``):
its ``OPERATIONS`` table, keyed by ``plan.operation``, names each file kind's
template and the function computing its values.  ``cexpr`` (C expressions of
GF(2) maps, packing), ``intrinsics`` (target-instruction wrappers), ``env``
(the template environment) and ``body`` (what every register <-> memory
operation shares) serve the operations: ``convert``, ``memory`` (store, load),
``copy`` and ``gather``.  Import from the defining module, not from here.
"""
