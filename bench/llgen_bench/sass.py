"""SASS of a cubin (``cuobjdump -sass``): per-function opcode counts, the main loop, local memory.

``sass_text`` disassembles a cubin (every function), ``functions`` splits that text per
kernel, ``sass_counts`` counts one kernel's opcodes for the whole kernel and for its main loop
(the largest backward branch) in families: shared-memory loads/stores, ldmatrix/stmatrix,
shuffles, barriers, local-memory stores/loads (``STL``/``LDL``: spills or local arrays) and ALU
instructions.  ptxas unrolls loops whose trip count it does not know (by 2 or 4, with a
remainder loop), so ``loop_step`` reads how many iterations one pass of the loop body does
(the step of the counter the loop-closing compare tests) and ``alu_per_iter`` is the loop's ALU
count over that step: what two base loops are compared by.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess

# ------------------------------------------------------------------ SASS
_OP = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*)")
_LABEL = re.compile(r"^\s*\.(L_x_\d+):")
_BRA = re.compile(r"BRA\s+(?:`\()?\.?(L_x_\d+|0x[0-9a-f]+)")
_FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)")
#: integer/logic/move instructions, vector and uniform datapath (what a data change and a loop's
#: bookkeeping compile to; F2FP/HADD2 never appear: every bench moves raw integers)
ALU_OPS = ("IMAD", "IADD3", "IADD", "LOP3", "SHF", "LEA", "MOV", "PRMT", "SEL", "ISETP", "IABS", "BFE", "BFI",
           "SGXT", "BMSK", "POPC", "FLO", "S2R", "IMNMX", "VIADD", "VIMNMX", "CS2R", "PLOP3",
           "UIADD3", "ULOP3", "USHF", "UMOV", "ULEA", "UIMAD", "UISETP", "USEL", "UPRMT", "USGXT", "UBMSK",
           "UFLO", "UPOPC", "UIMNMX")
FAMILIES = ("LDS", "STS", "LDSM", "STSM", "SHFL", "BAR", "NOP", "STL", "LDL")


def cuobjdump() -> str:
    """The cuobjdump to run: on PATH (the CUDA toolkit), else the one Triton ships."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import triton
        path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
        if os.path.exists(path):
            return path
    except Exception:  # noqa: BLE001
        pass
    return "cuobjdump"


def sass_text(cubin: str) -> str:
    """``cuobjdump -sass`` of every function of ``cubin`` ('' when it fails)."""
    try:
        r = subprocess.run([cuobjdump(), "-sass", cubin], capture_output=True, text=True)
    except OSError:
        return ""
    return r.stdout if r.returncode == 0 else ""


def functions(text: str) -> dict[str, str]:
    """``cuobjdump -sass`` text split per kernel: name -> its lines (one unnamed entry '' if none)."""
    out: dict[str, list[str]] = {}
    name = ""
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            name = m.group(1)
            out[name] = []
            continue
        out.setdefault(name, []).append(line)
    if any(out) and "" in out:
        del out[""]                         # the header before the first function
    return {k: "\n".join(v) for k, v in out.items()}


def _parse(text: str) -> list[tuple[int, str, str, str]]:
    """(address, opcode, predicate, line) of every instruction, labels resolved into ``_BRA`` targets."""
    instrs = []
    for line in text.splitlines():
        m = _OP.match(line)
        if m:
            instrs.append((int(m.group(1), 16), m.group(3), (m.group(2) or "").strip(), line))
    return instrs


def _main_loop(text: str, instrs) -> tuple[int, int]:
    """(first, last) address of the largest backward branch's body; (0, -1) if none."""
    labels: dict[str, int] = {}
    pending: list[str] = []
    for line in text.splitlines():
        m = _LABEL.match(line)
        if m:
            pending.append(m.group(1))
            continue
        m = _OP.match(line)
        if m:
            for lb in pending:
                labels[lb] = int(m.group(1), 16)
            pending = []
    loop = (0, -1)
    for addr, op, _, line in instrs:
        if op.startswith("BRA"):
            b = _BRA.search(line)
            if b:
                t = b.group(1)
                tgt = int(t, 16) if t.startswith("0x") else labels.get(t, addr)
                if tgt < addr and addr - tgt > loop[1] - loop[0]:
                    loop = (tgt, addr)
    return loop


def _operands(line: str) -> list[str]:
    body = _OP.match(line).group(4).split(";")[0]
    return [x.strip() for x in body.split(",") if x.strip()]


def _imm(x: str) -> int | None:
    """A SASS immediate as a signed 32-bit int (None if ``x`` is not one)."""
    m = re.fullmatch(r"(-?)0x([0-9a-f]+)", x)
    if not m:
        return None
    v = int(m.group(2), 16)
    v = v - (1 << 32) if v >= 1 << 31 else v
    return -v if m.group(1) else v


#: LOP3 truth tables that xor their inputs (a ^ b ^ c, a ^ b, a ^ c, b ^ c) -- and a ^ (b | c),
#: b ^ (a | c), c ^ (a | b), which ptxas writes for an xor of two values it knows share no bit
XOR_LUTS = {0x96, 0x3C, 0x5A, 0x66, 0x1E, 0x36, 0x56}


def _feeds_an_address(body: list, k: int, reg: str) -> bool:
    """Whether the next instruction of ``body`` after index ``k`` that reads ``reg`` reads it inside a
    memory operand's brackets (``STS.128 [R77+UR5+0x900], R32``: an address, not data)."""
    word = re.compile(rf"\b{re.escape(reg)}\b")
    for _, _, _, line in body[k + 1:]:
        ops = _operands(line)
        reads = [o for j, o in enumerate(ops) if j or o.startswith("[")]   # a store's first operand is read
        if any(word.search(o) for o in reads):
            return any(word.search(o) for o in reads if o.startswith("["))
        if ops and ops[0] == reg:
            return False                                      # overwritten before any read
    return False


def loop_xor_immediates(text: str) -> list[int]:
    """The immediates (unsigned 32-bit, sorted) of the xor ``LOP3``s in one kernel's main loop: in a
    round trip, the per-register keys (``templates/bench.cu.j2``, ``gluon.gluon_kernels``).  An xor
    whose result is next read as an address (a shared-memory address ptxas recomputes in the loop
    rather than keep live: ``LOP3.LUT R77, R76, 0x10, RZ, 0x3c`` for ``STS.128 [R77+UR5+0x900]``)
    is not a key and is left out."""
    instrs = _parse(text)
    lo, hi = _main_loop(text, instrs)
    body = [i for i in instrs if lo <= i[0] <= hi]
    out = []
    for k, (_, op, _, line) in enumerate(body):
        if op.startswith("LOP3"):
            ops = _operands(line)
            lut = _imm(ops[-2]) if len(ops) >= 6 else None
            if lut is not None and lut & 0xFF in XOR_LUTS and not _feeds_an_address(body, k, ops[0]):
                out += [v & 0xFFFFFFFF for v in map(_imm, ops[1:4]) if v is not None]
    return sorted(out)


def loop_step(body) -> int | None:
    """Iterations one pass of a loop body does: the step of the register that the compare feeding the
    loop-closing branch tests (``UIADD3 UR5, UR5, -0x4`` + ``ISETP.NE P0, PT, RZ, UR5``: 4; a
    predicate copied by ``PLOP3.LUT P1, PT, PT, PT, UP0, ...`` from a ``UISETP`` is followed, as
    Triton's loops have it); None if no such add is found (then the loop is taken as not unrolled)."""
    if not body or not body[-1][1].startswith("BRA"):
        return None
    pred = body[-1][2].lstrip("@!")
    regs: list[str] = []
    for _, op, _, line in reversed(body[:-1]):
        ops = _operands(line)
        if not ops or ops[0] != pred:
            continue
        head = op.split(".")[0]
        if head == "PLOP3":                     # P1 = UP0 (a lut over predicates): follow the one it reads
            src = [o.lstrip("!") for o in ops[2:] if re.fullmatch(r"!?U?P\d+", o)]
            if len(src) != 1:
                break
            pred = src[0]
        elif head in ("ISETP", "UISETP"):
            regs = [o for o in ops[2:] if re.fullmatch(r"U?R\d+", o)]
            break
    for _, op, _, line in body:
        if op.split(".")[0] not in ("IADD3", "UIADD3", "VIADD", "IADD"):
            continue
        ops = _operands(line)
        if not ops or ops[0] not in regs:
            continue
        steps = [v for v in map(_imm, ops[1:]) if v is not None]
        if len(steps) == 1 and 0 < abs(steps[0]) <= 64:
            return abs(steps[0])
    return None


def sass_counts(text: str) -> dict:
    """Opcode counts of one kernel (``functions(...)[name]``; a whole cubin's text sums its kernels)
    for the kernel and for its main loop; ``loop_step``/``alu_per_iter`` as in the module docstring."""
    instrs = _parse(text)
    loop = _main_loop(text, instrs)

    def count(sel) -> dict:
        c: dict[str, int] = {}
        for _, op, _, _ in sel:
            c[op] = c.get(op, 0) + 1
        return c
    body = [t for t in instrs if loop[0] <= t[0] <= loop[1]]
    whole, inner = count(instrs), count(body)

    def fam(c: dict) -> dict:
        f = {"total": sum(c.values()), "ALU": 0, "SEL": 0, "PRMT": 0, **dict.fromkeys(FAMILIES, 0)}
        for op, n in c.items():
            head = op.split(".")[0]
            if head in ("SEL", "PRMT"):         # selects and byte permutes of shuffle plans, also in ALU
                f[head] += n
            if head in FAMILIES:
                f[head] += n
            elif head in ALU_OPS:
                f["ALU"] += n
        f["detail"] = {op: n for op, n in sorted(c.items()) if op.split(".")[0] in
                       ("LDS", "STS", "LDSM", "STSM", "SHFL", "BAR", "STL", "LDL")}
        return f
    step = loop_step(body)
    out = {"kernel": fam(whole), "loop": fam(inner), "loop_instrs": len(body), "loop_step": step}
    out["alu_per_iter"] = out["loop"]["ALU"] / (step or 1) if body else None
    return out
