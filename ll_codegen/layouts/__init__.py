"""Stage ``layouts``: Triton-compatible layouts and their ``LinearLayout``; imports only ``core``.

* ``base``: ``LayoutError``, field checks, the shared CTA/CGA conversion steps, the ``Layout`` base class;
* ``distributed``: ``blocked``, ``slice``, ``linear``;
* ``nvidia``: ``nvidia_mma`` (mma.sync, wgmma accumulators);
* ``amd``: ``amd_mfma``, ``amd_wmma``;
* ``dot_operand``: ``dot_operand`` (operands A and B of a dot);
* ``memory``: ``swizzled_shared``, ``nvmma_shared``, ``shared_linear``, ``cute``, ``global``;
* ``kinds``: ``LAYOUT_KINDS`` (YAML kind -> class) and ``from_dict``;
* ``cute``: the CuTe-style descriptor parser;
* ``shape_ops``: transpose, reshape, expand_dims, broadcast, join, split on layouts;
* ``show``: text, JSON and SVG views of a layout.
"""
