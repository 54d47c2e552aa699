"""SASS of a cubin (``cuobjdump -sass``) and its opcode counts.

``sass_counts`` counts opcodes for the whole kernel and for its main loop
(the largest backward branch), grouped into shared-memory loads/stores,
ldmatrix/stmatrix, shuffles, barriers and ALU instructions.
"""
from __future__ import annotations

import re
import subprocess

# ------------------------------------------------------------------ SASS
_OP = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
_LABEL = re.compile(r"^\s*\.(L_x_\d+):")
_BRA = re.compile(r"BRA\s+(?:`\()?\.?(L_x_\d+|0x[0-9a-f]+)")
ALU_OPS = ("IMAD", "IADD3", "LOP3", "SHF", "LEA", "MOV", "PRMT", "SEL", "ISETP", "IABS", "BFE", "BFI", "SGXT",
           "POPC", "FLO", "S2R", "IMNMX", "VIADD", "UIADD3", "ULOP3", "USHF", "UMOV", "ULEA", "UIMAD", "CS2R")


def sass_text(cubin: str) -> str:
    r = subprocess.run(["cuobjdump", "-sass", cubin], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else ""


def sass_counts(text: str) -> dict:
    """Opcode counts for the whole kernel and for its main (largest backward-branch) loop."""
    instrs: list[tuple[int, str, str]] = []
    labels: dict[str, int] = {}
    pending: list[str] = []
    for line in text.splitlines():
        m = _LABEL.match(line)
        if m:
            pending.append(m.group(1))
            continue
        m = _OP.match(line)
        if m:
            addr = int(m.group(1), 16)
            for lb in pending:
                labels[lb] = addr
            pending = []
            instrs.append((addr, m.group(3), line))
    loop = (0, -1)
    for addr, op, line in instrs:
        if op.startswith("BRA"):
            b = _BRA.search(line)
            if b:
                t = b.group(1)
                tgt = int(t, 16) if t.startswith("0x") else labels.get(t, addr)
                if tgt < addr and addr - tgt > loop[1] - loop[0]:
                    loop = (tgt, addr)

    def count(sel) -> dict:
        c: dict[str, int] = {}
        for addr, op, _ in sel:
            c[op] = c.get(op, 0) + 1
        return c
    body = [t for t in instrs if loop[0] <= t[0] <= loop[1]]
    whole, inner = count(instrs), count(body)

    def fam(c: dict) -> dict:
        f = {"total": sum(c.values()), "LDS": 0, "STS": 0, "LDSM": 0, "STSM": 0, "SHFL": 0, "BAR": 0, "ALU": 0,
             "NOP": 0, "SEL": 0, "PRMT": 0}
        for op, n in c.items():
            head = op.split(".")[0]
            if head in ("SEL", "PRMT"):         # selects and byte permutes of shuffle plans, also in ALU
                f[head] += n
            if head in ("LDS", "STS", "LDSM", "STSM", "SHFL", "BAR", "NOP"):
                f[head] += n
            elif head in ALU_OPS:
                f["ALU"] += n
        f["detail"] = {op: n for op, n in sorted(c.items()) if op.split(".")[0] in
                       ("LDS", "STS", "LDSM", "STSM", "SHFL", "BAR")}
        return f
    return {"kernel": fam(whole), "loop": fam(inner), "loop_instrs": len(body)}

