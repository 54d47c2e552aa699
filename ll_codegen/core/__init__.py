"""Stage ``core``: the foundations every other stage builds on; imports nothing above core.

* ``f2``: linear algebra over F2 on bit vectors stored as Python ints;
* ``layout``: ``LinearLayout``, a linear map over F2 between named dims (Triton's LinearLayout);
* ``limits``: hard limits on user input, checked before any real work;
* ``files``: writing output files all or none, every target checked first;
* ``target``: the GPU targets (CUDA, HIP) as data;
* ``dtypes``: the element-type table (widths, C and numpy types).
"""
