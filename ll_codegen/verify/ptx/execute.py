"""The instruction semantics of ``sim``: each PTX instruction compiled into a ``blocks.Snippet``,
Python source that runs it on one thread -- arithmetic, moves, conversions, predicates, shared and
the harness's global loads and stores, branches written out; the rest (other loads and stores,
barriers, traps) and ``warp``'s warp collectives and asynchronous copies as closures the snippet
calls.

Registers hold Python ints; every operation masks its inputs to its type's width and
sign-extends ``.s`` inputs where the PTX ISA widens (``mul.wide``, ``cvt``, ``shr.s``, ``setp``
orderings, ``min``/``max``); floating-point arithmetic and conversions are ``floats``' (exact
values rounded once).  An opcode not modelled raises ``PtxError`` naming it.
"""
from __future__ import annotations

import re
import struct
from dataclasses import replace
from typing import Callable

from ll_codegen.verify.ptx import floats
from ll_codegen.verify.ptx.blocks import Snippet
from ll_codegen.verify.ptx.ops import (GLOBAL_BASE, LOCAL_GENERIC, SHARED_GENERIC, SMEM_WINDOW, Compiler, Event,
                                       PtxError, bits_of, record_event, signed, split_op)
from ll_codegen.verify.ptx.warp import cp_async_instr, matrix_instr, recorded_instr, shfl_instr, wgmma_instr


# ------------------------------------------------------------------ arithmetic
def _alu(base: str, mods: list[str], t: str) -> Callable[..., int] | None:
    """The function of an arithmetic / logic instruction on masked inputs, or None."""
    bits = bits_of(t)
    mask = (1 << bits) - 1
    sgn = t.startswith("s")

    def s(v: int) -> int:
        return signed(v, bits) if sgn else v & mask
    if t in floats.FORMATS and base in ("add", "sub", "mul", "mad", "fma", "min", "max", "neg", "abs"):
        return floats.arith(base, mods, t)
    if t in floats.PACKED and base in ("add", "sub", "mul", "fma"):
        return floats.packed_arith(base, mods, t)
    if base == "lop3" and not mods:
        def lop3(a, b, c, lut):         # PTX ISA "lop3": bit i of d is bit (a_i b_i c_i) of the table
            a, b, c = a & mask, b & mask, c & mask
            d = 0
            for i in range(8):
                if lut >> i & 1:
                    d |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
            return d & mask
        return lop3
    if base in ("add", "sub", "mul", "mad"):
        if t.startswith("f"):
            return None
        wide, hi = "wide" in mods, "hi" in mods
        out = (1 << (2 * bits)) - 1 if wide else mask
        if not (wide or hi):            # modulo 2^bits the sign does not matter: the hot, simple cases
            return {"add": lambda a, b: (a + b) & mask, "sub": lambda a, b: (a - b) & mask,
                    "mul": lambda a, b: (a * b) & mask, "mad": lambda a, b, c: (a * b + c) & mask}[base]

        def arith(a, b, c=0):
            a, b = s(a), s(b)
            if base == "add":
                return (a + b) & out
            if base == "sub":
                return (a - b) & out
            p = a * b
            if hi:
                p = p >> bits
            if base == "mad":
                p = p + (s(c) if not wide else (signed(c, 2 * bits) if sgn else c))
            return p & out
        return arith
    simple = {"and": lambda a, b: a & b & mask, "or": lambda a, b: (a | b) & mask,
              "xor": lambda a, b: (a ^ b) & mask, "not": lambda a: ~a & mask,
              "neg": lambda a: -s(a) & mask, "abs": lambda a: abs(s(a)) & mask,
              "min": lambda a, b: min(s(a), s(b)) & mask, "max": lambda a, b: max(s(a), s(b)) & mask,
              "popc": lambda a: bin(a & mask).count("1"),
              "clz": lambda a: bits - (a & mask).bit_length(),
              "brev": lambda a: int(format(a & mask, f"0{bits}b")[::-1], 2),
              "cnot": lambda a: int((a & mask) == 0)}
    if base in simple:
        if t == "pred":
            return {"and": lambda a, b: a and b, "or": lambda a, b: a or b, "xor": lambda a, b: a != b,
                    "not": lambda a: not a}.get(base)
        return simple[base]
    if base == "shl":
        return lambda a, b: (a << min(b & 0xffffffff, bits)) & mask
    if base == "shr":
        return lambda a, b: (s(a) >> min(b & 0xffffffff, bits)) & mask
    if base in ("div", "rem"):
        def divrem(a, b):
            a, b = s(a), s(b)
            if b == 0:
                raise PtxError(f"{base} by zero")
            q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
            return (q if base == "div" else a - q * b) & mask
        return divrem
    if base == "bfe":
        def bfe(a, pos, ln):
            pos, ln = pos & 0xff, ln & 0xff
            v = ((a & mask) >> pos) & ((1 << ln) - 1) if pos < bits else 0
            if sgn and ln and (v >> (ln - 1) & 1 if pos + ln <= bits else a >> (bits - 1) & 1):
                v |= mask & ~((1 << ln) - 1)
            return v & mask
        return bfe
    if base == "bfi":
        def bfi(a, b, pos, ln):
            pos, ln = pos & 0xff, ln & 0xff
            f = (((1 << ln) - 1) << pos) & mask
            return ((b & ~f) | ((a << pos) & f)) & mask
        return bfi
    if base == "prmt":
        if mods:
            raise PtxError(f"prmt mode .{'.'.join(mods)} is not modelled")

        def prmt(a, b, c):
            x = (a & 0xffffffff) | (b & 0xffffffff) << 32
            out = 0
            for i in range(4):
                sel = (c >> (4 * i)) & 0xf
                byte = (x >> (8 * (sel & 7))) & 0xff
                if sel & 8:
                    byte = 0xff if byte & 0x80 else 0
                out |= byte << (8 * i)
            return out
        return prmt
    return None


#: setp's comparisons (PTX ISA "setp"): lo/ls/hi/hs are the unsigned orderings of the masked inputs
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "lo": "<", "ls": "<=", "hi": ">",
        "hs": ">="}


# ------------------------------------------------------------------ compile one instruction
def compile_instr(m, ins, c: Compiler) -> Snippet:
    """``ins`` (guard included) as a ``blocks.Snippet``; ``c`` the machine's ``Compiler``.  An
    instruction that only runs and moves on is a closure called from the snippet (it advances the
    pc too, which the block overwrites)."""
    body = _body(m, ins, c)
    if not isinstance(body, Snippet):
        body = Snippet(f"{c.bind(body)}(th)")
    if ins.pred is None:
        return body
    return replace(body, guard=("not " if ins.neg else "") + c.expr(ins.pred))


def _call(c: Compiler, f: Callable) -> Snippet:
    """A closure that may leave the straight line (sets or keeps the pc and the state itself)."""
    return Snippet(f"{c.bind(f)}(th)", ends=True)


def _body(m, ins, c: Compiler) -> Snippet | Callable:
    op, a = ins.op, ins.args
    base, mods, types = split_op(op)
    t = types[-1] if types else "b32"
    bits = bits_of(t)
    if op in ("ret", "exit"):
        return Snippet('th.state = "done"', ends=True)
    if base == "bra":
        return Snippet(f"th.pc = {m.kernel.labels[a[0]]}", ends=True)
    if base == "trap":
        def trap(th):
            raise PtxError(f"thread {th.tid}: trap (line {ins.line})")
        return _call(c, trap)
    if base in ("ld", "st"):
        return _ldst(m, c, ins, base, mods, t)
    if base == "mov":
        return _mov(c, a, t)
    if base == "cvt":
        if len(types) == 2 and types[0] in floats.PACKED:
            f = floats.convert_packed(types[0], types[1], mods)
            return Snippet(c.assign(a[0], 32, f"{c.bind(f)}({', '.join(c.expr(x) for x in a[1:])})"))
        if len(types) == 2 and any(x in floats.FORMATS for x in types):
            f = floats.convert(types[0], types[1], mods)
            return Snippet(c.assign(a[0], bits_of(types[0]), f"{c.bind(f)}({c.expr(a[1])})"))
        if len(types) != 2 or any(x.startswith("f") or x.startswith("bf") for x in types):
            raise PtxError(f"{op}: only integer and float conversions are modelled")
        sb, x = bits_of(types[1]), c.expr(a[1])
        value = _value(x, sb, types[1].startswith("s"))
        return Snippet(c.assign(a[0], bits_of(types[0]), value))
    if base == "cvta":
        space = [x for x in mods if x != "to"][0]
        off = {"global": 0, "shared": SHARED_GENERIC, "local": LOCAL_GENERIC}.get(space)
        if off is None:
            raise PtxError(f"{op} is not modelled")
        return Snippet(c.assign(a[0], 64, f"{c.expr(a[1])} {'-' if 'to' in mods else '+'} {off}"))
    if base == "setp":
        return _setp(c, a, mods, t)
    if base == "selp":
        return Snippet(c.assign(a[0], bits, f"{c.expr(a[1])} if {c.expr(a[3])} else {c.expr(a[2])}"))
    if base == "shfl":
        return _call(c, shfl_instr(c, ins, mods))
    if op.startswith(("bar.sync", "barrier.sync")) or op in ("bar.sync", "barrier.sync.aligned"):
        ident = c.get(a[0]) if a else (lambda th: 0)

        def block_bar(th):
            record_event(th, ins, extra=(ident(th),) + tuple(c.get(x)(th) for x in a[1:]))
            th.state = "bar"
        return _call(c, block_bar)
    if op == "bar.warp.sync":
        mask = c.get(a[0])

        def warp_bar(th):
            record_event(th, ins, extra=(mask(th) & 0xffffffff,))
            th.state, th.waiting = "warp", ("warpsync",)
        return _call(c, warp_bar)
    if base in ("ldmatrix", "stmatrix"):
        return _call(c, matrix_instr(c, ins, base, mods))
    if op.startswith("cp.async") and not op.startswith("cp.async.bulk"):
        return cp_async_instr(m, c, ins, mods)
    if op.startswith("wgmma."):
        return wgmma_instr(m, c, ins)
    if op.startswith(("mbarrier.", "fence.", "membar", "cp.async.bulk", "mma.sync")):
        return recorded_instr(m, c, ins)
    f = _alu(base, mods, t)
    if f is None:
        raise PtxError(f"PTX instruction {op!r} (line {ins.line}) is not modelled")
    srcs = [c.expr(x) for x in a[1:]]
    if t == "pred":
        return Snippet(c.assign(a[0], 1, f"{c.bind(f)}({', '.join(srcs)})"))
    value = _inline_alu(base, mods, t, srcs) or f"{c.bind(f)}({', '.join(srcs)})"
    mask = (1 << (2 * bits if "wide" in mods else bits)) - 1
    return Snippet(f"r[{a[0].strip()!r}] = ({value}) & {mask}")


_INT_TYPE = re.compile(r"[bsu]\d+")
_INT_LITERAL = re.compile(r"\(?-?\d+\)?")          # an immediate operand's source (``Compiler.expr``)
_VECTOR = re.compile(r"v\d")

#: integer instructions whose result modulo 2^bits does not depend on the operands' signedness
_INLINE_OPS = {"add": "+", "sub": "-", "mul": "*", "and": "&", "or": "|", "xor": "^"}


def _inline_alu(base: str, mods: list[str], t: str, srcs: list[str]) -> str | None:
    """The commonest integer instructions written out (the result is masked to the type, or twice its
    width for .wide, after): the same values as ``_alu``'s functions (add / sub / mul / mad modulo
    2^bits, mul / mad .wide / .hi of the sign-extended or masked operands, bitwise ops, shl, shr)
    without a call.  None for every other form."""
    if not _INT_TYPE.fullmatch(t) or base == "lop3":
        return None
    bits = bits_of(t)
    sgn = t.startswith("s")
    if {"wide", "hi"} & set(mods):      # the product of the operands' values (sign-extended for .s)
        if base not in ("mul", "mad"):
            return None
        p = f"{_value(srcs[0], bits, sgn)} * {_value(srcs[1], bits, sgn)}"
        if "hi" in mods:
            p = f"(({p}) >> {bits})"
        if base == "mul":
            return p
        if "wide" not in mods:
            return f"{p} + {_value(srcs[2], bits, sgn)}"
        return f"{p} + {_value(srcs[2], 2 * bits, True) if sgn else srcs[2]}"      # a 2 x bits addend
    if base in _INLINE_OPS and len(srcs) == 2:
        return f"{srcs[0]} {_INLINE_OPS[base]} {srcs[1]}"
    if base == "mad" and len(srcs) == 3:
        return f"{srcs[0]} * {srcs[1]} + {srcs[2]}"
    if base in ("shl", "shr") and len(srcs) == 2:
        b = srcs[1]
        shift = str(min(int(b.strip("()")) & 0xffffffff, bits)) if _INT_LITERAL.fullmatch(b) \
            else f"min({b} & 0xffffffff, {bits})"
        if base == "shl":
            return f"{srcs[0]} << {shift}"
        return f"{_value(srcs[0], bits, t.startswith('s'))} >> {shift}"
    return None


def _value(x: str, bits: int, sgn: bool) -> str:
    """The source of operand ``x`` as a ``bits``-bit value: sign-extended (``ops.signed``) or masked."""
    m = (1 << bits) - 1
    return f"((({x} & {m}) ^ {1 << (bits - 1)}) - {1 << (bits - 1)})" if sgn else f"({x} & {m})"


def _mov(c: Compiler, a, t: str) -> Snippet:
    bits = bits_of(t)
    if a[1].strip().startswith("{"):                              # pack parts, lowest first
        parts = [c.expr(x) for x in a[1].strip()[1:-1].split(",")]
        w = bits // len(parts)
        return Snippet(c.assign(a[0], bits, " | ".join(f"(({x} & {(1 << w) - 1}) << {w * i})"
                                                       for i, x in enumerate(parts))))
    if a[0].strip().startswith("{"):                              # unpack
        dsts = a[0].strip()[1:-1].split(",")
        w = bits // len(dsts)
        return Snippet("\n".join([f"v = {c.expr(a[1])}"] + [c.assign(d, w, f"v >> {w * i}")
                                                            for i, d in enumerate(dsts)]))
    if bits == 1:
        return Snippet(c.assign(a[0], 1, c.expr(a[1])))
    return Snippet(f"r[{a[0].strip()!r}] = {c.expr(a[1])} & {(1 << bits) - 1}")


def _setp(c: Compiler, a, mods, t: str) -> Snippet:
    bits, sgn = bits_of(t), t.startswith("s")
    if t.startswith("f"):
        raise PtxError("floating-point setp is not modelled")
    x, y = (_value(c.expr(v), bits, sgn) for v in a[1:3])
    code = [f"v = {x} {_CMP[mods[0]]} {y}"]
    if len(mods) > 1:                   # setp.CmpOp.BoolOp: combined with a predicate, read either way
        neg = a[3].strip().startswith("!")
        other = f"bool({c.expr(a[3].strip().lstrip('!'))}) != {neg}"
        code.append({"and": f"v = {other} and v", "or": f"v = {other} or v", "xor": f"v = v != ({other})"}[mods[1]])
    names = a[0].split("|")
    code.append(c.assign(names[0], 1, "v"))
    if len(names) > 1:
        code.append(c.assign(names[1], 1, "not v"))
    return Snippet("\n".join(code))


def _ldst(m, c: Compiler, ins, base: str, mods: list[str], t: str) -> Snippet | Callable:
    space = next((x for x in mods if x in ("global", "shared", "local", "param", "const")), "")
    space = space if space else ("shared" if any(x.startswith("shared::") for x in mods) else "")
    vec = next((int(x[1:]) for x in mods if _VECTOR.fullmatch(x)), 1)
    bits = bits_of(t)
    n = bits // 8
    sgn = t.startswith("s")
    a = ins.args
    if base == "ld" and space == "param":
        name = re.match(r"^\[\s*([\w$]+)\s*\]$", a[1].strip())
        if not name or name.group(1) not in m.params or vec != 1:
            raise PtxError(f"{ins.op} {a[1]}: only 64-bit pointer parameters are modelled")
        return Snippet(c.assign(a[0], 64, str(m.params[name.group(1)])))
    if space == "const":
        raise PtxError(f"{ins.op}: the constant space is not modelled")
    addr = c.addr(a[1] if base == "ld" else a[0])
    # the harness's own global traffic is never compared: only our wrappers' (inline asm) is recorded
    record = space != "local" and (space == "shared" or ins.asm or space == "")

    # little-endian words of the access (signed ones sign-extended); a generic address is sorted
    # into its window at run time, a space the opcode names is the space
    word = {1: "b", 2: "h", 4: "i", 8: "q"}.get(n)
    fmt = struct.Struct(f"<{vec}{word if sgn else word.upper()}") if word else None
    explicit = space not in ("", "generic")
    vmask = (1 << bits) - 1

    def where(th) -> tuple[str, int]:
        return (space, addr(th)) if explicit else m.resolve(space, addr(th), th)

    regs = a[0 if base == "ld" else 1].strip()
    regs = regs[1:-1].split(",") if regs.startswith("{") else [regs]
    if fmt is not None and (space == "shared" or (space == "global" and not ins.asm)) \
            and (base == "ld" or len(regs) == vec):
        return _inline_access(m, c, ins, base, space, fmt, regs, 64 if sgn else max(bits, 32), vmask)

    if base == "ld":
        sets = c.setv(a[0], 64 if sgn else max(bits, 32))

        def load(th):
            sp, ad = where(th)
            raw = m.read(sp, ad, n * vec, th)
            if fmt is not None and len(raw) == fmt.size:
                vals = fmt.unpack(raw)
                if sgn:
                    vals = [v & 0xffffffffffffffff for v in vals]
            else:
                vals = [int.from_bytes(raw[i * n:(i + 1) * n], "little") for i in range(vec)]
                if sgn:
                    vals = [signed(v, bits) & 0xffffffffffffffff for v in vals]
            for s, v in zip(sets, vals):
                s(th, v)
            if record and (sp == "shared" or ins.asm):
                record_event(th, ins, sp, ad, [v & vmask for v in vals])
            th.pc += 1
        return load
    gets = c.getv(a[1])
    # stored words as unsigned values of the access width
    ufmt = struct.Struct(f"<{vec}{word.upper()}") if word and len(gets) == vec else None

    def store(th):
        sp, ad = where(th)
        vals = [g(th) & vmask for g in gets]
        m.write(sp, ad, ufmt.pack(*vals) if ufmt is not None else b"".join(v.to_bytes(n, "little") for v in vals), th)
        if record and (sp == "shared" or ins.asm):
            record_event(th, ins, sp, ad, vals)
        th.pc += 1
    return store


def _inline_access(m, c: Compiler, ins, base: str, space: str, fmt: struct.Struct, regs: list[str], reg_bits: int,
                   vmask: int) -> Snippet:
    """An ld / st of the shared window (recorded), or one of the harness's own global accesses (never
    recorded: straight from or into the argument's buffer), written out.  The bytes move straight
    between the buffer and the registers when the access is in bounds and no cp.async is in flight;
    otherwise through ``m.global_at`` / ``m.read`` / ``m.write``, which check and report.  Loads give
    the words of ``fmt`` (signed ones sign-extended) to registers of ``reg_bits``; stores take the
    registers' words masked to the access width.  ``load`` / ``store`` above are the same for the
    other spaces."""
    mem = ins.args[1 if base == "ld" else 0]
    size, words = fmt.size, range(len(fmt.unpack(bytes(fmt.size))))
    code = [f"a = {c.addr_expr(mem)}"]
    if base == "st":
        code.append(f"v = ({''.join(f'{c.expr(x)} & {vmask}, ' for x in regs)})")
    pack = (f"{c.bind(fmt.pack_into)}(buf, o, *v)" if base == "st" else f"v = {c.bind(fmt.unpack_from)}(buf, o)")
    if space == "global":
        buffers = c.bind({k + 1: b for k, b in enumerate(m.buffers)}, "buffers")
        code += [f"buf = {buffers}.get(a >> {GLOBAL_BASE.bit_length() - 1})", f"o = a & {GLOBAL_BASE - 1}",
                 f"if buf is None or o + {size} > len(buf):",
                 f"    buf, o = {c.bind(m.global_at, 'global_at')}(a, {size}, th)", pack]
    else:
        checked = (f"{c.bind(m.write, 'write')}('shared', a, {c.bind(fmt.pack)}(*v), th)" if base == "st" else
                   f"v = {c.bind(fmt.unpack)}({c.bind(m.read, 'read')}('shared', a, {size}, th))")
        code += [f"o = a - {SMEM_WINDOW}",
                 f"if o < 0 or o + {size} > {m.smem_bytes} or {c.bind(m.inflight, 'inflight')}:",
                 f"    {checked}", "else:", f"    buf = {c.bind(m.smem, 'smem')}", f"    {pack}"]
    if base == "ld":
        code += [c.assign(d, reg_bits, f"v[{i}] & 0xffffffffffffffff") for i, d in zip(words, regs)]
    if space == "shared":
        data = "v" if base == "st" else f"({''.join(f'v[{i}] & {vmask}, ' for i in words)})"
        code.append(f"th.events.append({c.bind(Event, 'Event')}({ins.op!r}, {ins.asm}, 'shared', a, {data}, (), "
                    f"{ins.line}))")
    return Snippet("\n".join(code))
