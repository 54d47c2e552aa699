"""The target instructions a CUDA header issues, as plain data for ``templates/intrinsics.j2``.

Each ld/st.shared, ld/st.global, ldmatrix, stmatrix and cp.async goes through
one named inline wrapper, ``detail::<name><kImm>(addr, words...)``, so the
generated code issues exactly the planned instruction (the PTX keeps ``kImm``
as an immediate) and the host SIMT runtime can model the same instruction
under ``LLGEN_HOST_SIMT``.  ``intrinsic_spec`` gives the wrapper's name,
parameters, inline asm and host body.
"""
from __future__ import annotations

PTX_SHARED_TYPES = {1: ".b8", 2: ".b16", 4: ".b32", 8: ".v2.b32", 16: ".v4.b32"}


def intrinsic_spec(op: str, nbytes: int = 0, x: int = 0, trans: bool = False) -> dict:
    """One target instruction behind a named inline function (``templates/intrinsics.j2``).

    Every ld/st.shared, ld/st.global, ldmatrix and stmatrix a CUDA header
    issues goes through ``detail::<name><kImm>(addr, words...)``: ``addr`` is
    a 32-bit shared-window address (a generic pointer for global accesses),
    ``kImm`` a byte offset the PTX keeps as an immediate, ``words`` 32-bit
    registers (sub-word stores take the low bits).  On the device the body is
    the one PTX instruction; compiled for the host (``LLGEN_HOST_SIMT``,
    ``ll_codegen/simt/simt_host.h``) it calls the host SIMT runtime's model of
    the same instruction.

    ``op``: ``st_shared``/``ld_shared``/``st_global``/``ld_global`` (``nbytes``
    1, 2, 4, 8, 16), ``stmatrix``/``ldmatrix`` (m8n8 b16, ``x`` 1, 2, 4
    matrices, ``trans``) or ``cp_async``/``cp_async_zfill`` (``nbytes`` 4, 8,
    16: global -> shared, the zfill form reading ``src_bytes`` and zeroing
    the rest)."""
    glob = op.endswith("global")
    if op in ("st_shared", "ld_shared", "st_global", "ld_global"):
        t = PTX_SHARED_TYPES[nbytes]
        words = max(1, nbytes // 4)
        name = f"{op}{t.replace('.', '_')}"
        ptx = f"{op.replace('_', '.')}{t}"
    elif op in ("stmatrix", "ldmatrix"):
        words, nbytes = x, 0
        name = f"{op}_x{x}{'_trans' if trans else ''}"
        ptx = f"{op}.sync.aligned.m8n8.x{x}{'.trans' if trans else ''}.shared.b16"
    elif op in ("cp_async", "cp_async_zfill"):
        zfill = op.endswith("zfill")
        cache = "cg" if nbytes == 16 else "ca"          # .cg (L2 only) takes 16-byte copies alone
        src_size = ", %2" if zfill else ""
        imm = 3 if zfill else 2
        ops = '"r"(addr), "l"(src)' + (', "r"(src_bytes)' if zfill else "") + ', "n"(kImm)'
        return {"name": f"{op}_{nbytes}",
                "params": "unsigned addr, const void* src" + (", unsigned src_bytes" if zfill else ""),
                "host": [f"llgen_host::cp_async(addr + kImm, src, {nbytes}, {'src_bytes' if zfill else nbytes});"],
                "asm": f'asm volatile("cp.async.{cache}.shared.global [%0+%{imm}], [%1], {nbytes}{src_size};" '
                       f':: {ops} : "memory");'}
    else:
        raise ValueError(f"unknown target instruction {op!r}")
    store = op.startswith("st")
    regs = [f"%{j + (1 if store else 0)}" for j in range(words)]
    regs_text = regs[0] if words == 1 and not op.endswith("matrix") else "{" + ", ".join(regs) + "}"
    addr_op, imm_op = (0, words + 1) if store else (words, words + 1)
    operand = f"[%{addr_op}+%{imm_op}]"
    asm = f"{ptx} {operand}, {regs_text};" if store else f"{ptx} {regs_text}, {operand};"
    rs = [f"r{j}" for j in range(words)]
    a = '"l"(addr)' if glob else '"r"(addr)'
    if store:
        constraints = ":: " + ", ".join([a] + [f'"r"({r})' for r in rs] + ['"n"(kImm)'])
    else:
        constraints = ": " + ", ".join(f'"=r"({r})' for r in rs) + f' : {a}, "n"(kImm)'
    if op.endswith("matrix"):
        model = f"{op}(addr + kImm, {x}, {'true' if trans else 'false'}, regs)"
    elif glob:
        model = f"{op}(static_cast<{'' if store else 'const '}char*>(addr) + kImm, {nbytes}, regs)"
    else:
        model = f"{op}(addr + kImm, {nbytes}, regs)"
    addr_t = ("void* addr" if store else "const void* addr") if glob else "unsigned addr"
    return {"name": name,
            "params": ", ".join([addr_t] + [f"uint32_t{'' if store else '&'} {r}" for r in rs]),
            "host": [f"uint32_t* regs[] = {{{', '.join(f'&{r}' for r in rs)}}};", f"llgen_host::{model};"],
            "asm": f'asm volatile("{asm}" {constraints} : "memory");'}
