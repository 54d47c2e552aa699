"""The instruction semantics of ``sim``: each PTX instruction compiled into a closure over one
thread (arithmetic, moves, conversions, predicates, loads and stores, branches); warp
collectives and asynchronous copies are ``warp``'s.

Registers hold Python ints; every operation masks its inputs to its type's width and
sign-extends ``.s`` inputs where the PTX ISA widens (``mul.wide``, ``cvt``, ``shr.s``, ``setp``
orderings, ``min``/``max``); floating-point arithmetic and conversions are ``floats``' (exact
values rounded once).  An opcode not modelled raises ``PtxError`` naming it.
"""
from __future__ import annotations

import functools
import operator
import re
import struct
from typing import Callable

from ll_codegen.verify.ptx import floats
from ll_codegen.verify.ptx.ops import (LOCAL_GENERIC, SHARED_GENERIC, Compiler, PtxError, advancing, bits_of,
                                       record_event, signed, split_op)
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


_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
        "lo": lambda a, b: a < b, "ls": lambda a, b: a <= b, "hi": lambda a, b: a > b, "hs": lambda a, b: a >= b}


# ------------------------------------------------------------------ compile one instruction
def compile_instr(m, ins, c: Compiler) -> Callable:
    """A closure ``f(thread)`` executing ``ins`` (guard included) and advancing the thread's pc;
    ``c`` the machine's ``Compiler``."""
    body = _body(m, ins, c)
    if ins.pred is None:
        return body
    g = c.get(ins.pred)
    neg = ins.neg

    def guarded(th):
        if bool(g(th)) != neg:
            body(th)
        else:
            th.pc += 1
    return guarded


def _body(m, ins, c: Compiler) -> Callable:
    op, a = ins.op, ins.args
    base, mods, types = split_op(op)
    t = types[-1] if types else "b32"
    bits = bits_of(t)
    if op in ("ret", "exit"):
        def done(th):
            th.state = "done"
        return done
    if base == "bra":
        target = m.kernel.labels[a[0]]

        def jump(th):
            th.pc = target
        return jump
    if base == "trap":
        def trap(th):
            raise PtxError(f"thread {th.tid}: trap (line {ins.line})")
        return trap
    if base in ("ld", "st"):
        return _ldst(m, c, ins, base, mods, t)
    if base == "mov":
        return _mov(c, a, t)
    if base == "cvt":
        if len(types) == 2 and types[0] in floats.PACKED:
            f = floats.convert_packed(types[0], types[1], mods)
            srcs, dst = [c.get(x) for x in a[1:]], c.setter(a[0], 32)
            return advancing(lambda th: dst(th, f(*[g(th) for g in srcs])))
        if len(types) == 2 and any(x in floats.FORMATS for x in types):
            f, src, dst = floats.convert(types[0], types[1], mods), c.get(a[1]), c.setter(a[0], bits_of(types[0]))
            return advancing(lambda th: dst(th, f(src(th))))
        if len(types) != 2 or any(x.startswith("f") or x.startswith("bf") for x in types):
            raise PtxError(f"{op}: only integer and float conversions are modelled")
        st, src, dst = types[1], c.get(a[1]), c.setter(a[0], bits_of(types[0]))
        sb, ss = bits_of(st), st.startswith("s")
        return advancing(lambda th: dst(th, signed(src(th), sb) if ss else src(th) & ((1 << sb) - 1)))
    if base == "cvta":
        src, dst = c.get(a[1]), c.setter(a[0], 64)
        space = [x for x in mods if x != "to"][0]
        off = {"global": 0, "shared": SHARED_GENERIC, "local": LOCAL_GENERIC}.get(space)
        if off is None:
            raise PtxError(f"{op} is not modelled")
        return advancing((lambda th: dst(th, src(th) - off)) if "to" in mods else (lambda th: dst(th, src(th) + off)))
    if base == "setp":
        return _setp(c, a, mods, t)
    if base == "selp":
        x, y, p, dst = c.get(a[1]), c.get(a[2]), c.get(a[3]), c.setter(a[0], bits)
        return advancing(lambda th: dst(th, x(th) if p(th) else y(th)))
    if base == "shfl":
        return shfl_instr(c, ins, mods)
    if op.startswith(("bar.sync", "barrier.sync")) or op in ("bar.sync", "barrier.sync.aligned"):
        ident = c.get(a[0]) if a else (lambda th: 0)

        def block_bar(th):
            record_event(th, ins, extra=(ident(th),) + tuple(c.get(x)(th) for x in a[1:]))
            th.state = "bar"
        return block_bar
    if op == "bar.warp.sync":
        mask = c.get(a[0])

        def warp_bar(th):
            record_event(th, ins, extra=(mask(th) & 0xffffffff,))
            th.state, th.waiting = "warp", ("warpsync",)
        return warp_bar
    if base in ("ldmatrix", "stmatrix"):
        return matrix_instr(c, ins, base, mods)
    if op.startswith("cp.async") and not op.startswith("cp.async.bulk"):
        return cp_async_instr(m, c, ins, mods)
    if op.startswith("wgmma."):
        return wgmma_instr(m, c, ins)
    if op.startswith(("mbarrier.", "fence.", "membar", "cp.async.bulk", "mma.sync")):
        return recorded_instr(m, c, ins)
    f = _alu(base, mods, t)
    if f is None:
        raise PtxError(f"PTX instruction {op!r} (line {ins.line}) is not modelled")
    ins_ = [c.get(x) for x in a[1:]]
    name, mask = a[0].strip(), (1 << (2 * bits if "wide" in mods else bits)) - 1
    if t == "pred":
        dst = c.setter(a[0], 1)
        return advancing(lambda th: dst(th, f(*[g(th) for g in ins_])))
    # the hot path (most instructions): the result written and the pc advanced in one closure
    if len(ins_) == 1:
        g0 = ins_[0]

        def alu1(th):
            th.r[name] = f(g0(th)) & mask
            th.pc += 1
        return alu1
    if len(ins_) == 2:
        g0, g1 = ins_
        x, y = (register_name(v) for v in a[1:3])
        k = c.get(a[2])(None) if y is None and imm_operand(a[2]) else None
        fast = _fast_alu2(base, mods, t, name, x, y, k) if x is not None and (y is not None or k is not None) else None
        if fast is not None:
            return fast
        if x is not None and y is not None:          # register, register: no getter calls

            def alu2rr(th):
                r = th.r
                r[name] = f(r[x], r[y]) & mask
                th.pc += 1
            return alu2rr
        if x is not None and k is not None:          # register, immediate

            def alu2ri(th):
                r = th.r
                r[name] = f(r[x], k) & mask
                th.pc += 1
            return alu2ri

        def alu2(th):
            th.r[name] = f(g0(th), g1(th)) & mask
            th.pc += 1
        return alu2

    def alun(th):
        th.r[name] = f(*[g(th) for g in ins_]) & mask
        th.pc += 1
    return alun


def _fast_alu2(base: str, mods: list[str], t: str, name: str, x: str, y: str | None, k: int | None) -> Callable | None:
    """The commonest integer instructions on a register and a register (``y``) or an immediate
    (``k``), the result written straight into the register file: the same values as ``_alu``
    (modulo 2^bits add / sub / mul.lo and bitwise ops, whatever the signedness; shl; shr of an
    unsigned or bit type) without a call per operation.  None for every other form."""
    if t.startswith(("f", "bf")) or t == "pred" or not (mods == [] or (base == "mul" and mods == ["lo"])):
        return None
    bits = bits_of(t)
    mask = (1 << bits) - 1
    if y is None and base in ("shl", "shr") and not (base == "shr" and t.startswith("s")):
        sh = min(k & 0xffffffff, bits)
        if base == "shl":
            def shl_ri(th):
                r = th.r
                r[name] = (r[x] << sh) & mask
                th.pc += 1
            return shl_ri

        def shr_ri(th):
            r = th.r
            r[name] = (r[x] & mask) >> sh
            th.pc += 1
        return shr_ri
    op = _FAST_OPS.get(base)
    if op is None:
        return None
    if y is not None:
        def alu_rr(th):
            r = th.r
            r[name] = op(r[x], r[y]) & mask
            th.pc += 1
        return alu_rr

    def alu_ri(th):
        r = th.r
        r[name] = op(r[x], k) & mask
        th.pc += 1
    return alu_ri


#: two-operand instructions whose result modulo 2^bits does not depend on the operands' signedness
_FAST_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "and": operator.and_,
             "or": operator.or_, "xor": operator.xor}


@functools.lru_cache(maxsize=None)
def register_name(tok: str) -> str | None:
    """The operand's register name when it is a plain register (read straight from the dict)."""
    tok = tok.strip()
    return tok if re.fullmatch(r"%[A-Za-z]+\d*", tok) else None


@functools.lru_cache(maxsize=None)
def imm_operand(tok: str) -> bool:
    return re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|\d+)[uU]?", tok.strip()) is not None


def _mov(c: Compiler, a, t: str) -> Callable:
    bits = bits_of(t)
    if a[1].strip().startswith("{"):                              # pack parts, lowest first
        gs = c.getv(a[1])
        w = bits // len(gs)
        dst = c.setter(a[0], bits)
        return advancing(lambda th: dst(th, sum((g(th) & ((1 << w) - 1)) << (w * i) for i, g in enumerate(gs))))
    if a[0].strip().startswith("{"):                              # unpack
        ss = c.setv(a[0], bits // len(c.getv(a[0])))
        w, src = bits // len(ss), c.get(a[1])
        return advancing(lambda th: [s(th, src(th) >> (w * i)) for i, s in enumerate(ss)])
    src, name, mask = c.get(a[1]), a[0].strip(), (1 << bits) - 1
    if bits == 1:
        dst = c.setter(a[0], 1)
        return advancing(lambda th: dst(th, src(th)))

    def mov(th):
        th.r[name] = src(th) & mask
        th.pc += 1
    return mov


def _setp(c: Compiler, a, mods, t: str) -> Callable:
    cmp = _CMP[mods[0]]
    bits, sgn = bits_of(t), t.startswith("s")
    if t.startswith("f"):
        raise PtxError("floating-point setp is not modelled")
    x, y = c.get(a[1]), c.get(a[2])
    names = a[0].split("|")
    p, q = c.setter(names[0], 1), (c.setter(names[1], 1) if len(names) > 1 else None)
    combine = None
    if len(mods) > 1:
        neg = a[3].strip().startswith("!")
        g = c.get(a[3].strip().lstrip("!"))
        bop = {"and": lambda u, v: u and v, "or": lambda u, v: u or v, "xor": lambda u, v: u != v}[mods[1]]
        combine = (lambda th, r: bop(r, bool(g(th)) != neg))

    def setp(th):
        u, v = x(th), y(th)
        u, v = (signed(u, bits), signed(v, bits)) if sgn else (u & ((1 << bits) - 1), v & ((1 << bits) - 1))
        r = cmp(u, v)
        if combine is not None:
            r = combine(th, r)
        p(th, r)
        if q is not None:
            q(th, not r)
    return advancing(setp)


def _ldst(m, c: Compiler, ins, base: str, mods: list[str], t: str) -> Callable:
    space = next((x for x in mods if x in ("global", "shared", "local", "param", "const")), "")
    space = space if space else ("shared" if any(x.startswith("shared::") for x in mods) else "")
    vec = next((int(x[1:]) for x in mods if re.fullmatch(r"v\d", x)), 1)
    bits = bits_of(t)
    n = bits // 8
    sgn = t.startswith("s")
    a = ins.args
    if base == "ld" and space == "param":
        name = re.match(r"^\[\s*([\w$]+)\s*\]$", a[1].strip())
        if not name or name.group(1) not in m.params or vec != 1:
            raise PtxError(f"{ins.op} {a[1]}: only 64-bit pointer parameters are modelled")
        dst, v = c.setter(a[0], 64), m.params[name.group(1)]
        return advancing(lambda th: dst(th, v))
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

    if base == "ld":
        sets = c.setv(a[0], 64 if sgn else max(bits, 32))
        if space == "global" and not ins.asm and fmt is not None:
            # the harness's own global loads (never recorded): straight from the argument's buffer
            def load_global(th):
                buf, off = m.global_at(addr(th), fmt.size, th)
                for s, v in zip(sets, fmt.unpack_from(buf, off)):
                    s(th, v & 0xffffffffffffffff)
                th.pc += 1
            return load_global

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
    if space == "global" and not ins.asm and ufmt is not None:
        def store_global(th):                    # the harness's own global stores (never recorded)
            buf, off = m.global_at(addr(th), ufmt.size, th)
            ufmt.pack_into(buf, off, *[g(th) & vmask for g in gets])
            th.pc += 1
        return store_global

    def store(th):
        sp, ad = where(th)
        vals = [g(th) & vmask for g in gets]
        m.write(sp, ad, ufmt.pack(*vals) if ufmt is not None else b"".join(v.to_bytes(n, "little") for v in vals), th)
        if record and (sp == "shared" or ins.asm):
            record_event(th, ins, sp, ad, vals)
        th.pc += 1
    return store
