"""The compilers' output read back.

``sim`` (with ``ops``, ``execute``, ``warp``, ``blocks``): a PTX interpreter for one CTA;
``check`` (with ``expect``, ``expect_async``): each thread's instruction trace compared with what
the plan says it issues; ``isa_check``: the LDS instruction sequence of AMDGPU assembly.
"""
