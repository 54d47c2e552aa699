"""The PTX interpreter's integer instructions and typed global accesses (``verify/ptx/sim.py``) against
numpy, on every thread of a block: register and immediate operands (the interpreter's direct forms),
operands it reads through a getter (a special register), signed and unsigned shifts, ``mul.lo`` /
``mul.wide``, vector and sign-extending loads, vector stores.  Expected values are numpy's uint32 /
int32 / int64 arithmetic, written from the PTX ISA's definitions (results modulo 2^32; ``shr.s32``
arithmetic; ``ld.s16`` sign-extends into the register); comparisons, selects, conversions, packing and
the .hi / .wide products likewise, and the instructions written out as Python source against the
functions the others run through."""
import numpy as np

from ll_codegen.verify.ptx.sim import parse, run

THREADS = 64
OUT_WORDS = 14

PTX = """
.visible .entry k(
    .param .u64 k_param_0,
    .param .u64 k_param_1
)
{
    .reg .b32 %r<24>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd2, [k_param_1];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.v2.u32 {%r2, %r3}, [%rd4];
    add.s32 %r4, %r2, %r3;
    sub.s32 %r5, %r2, %r3;
    mul.lo.s32 %r6, %r2, %r3;
    xor.b32 %r7, %r2, -5;
    shl.b32 %r8, %r2, 5;
    shr.u32 %r9, %r3, 3;
    shr.s32 %r10, %r3, 3;
    and.b32 %r11, %r2, %r3;
    or.b32 %r12, %r3, 65280;
    sub.s32 %r13, %tid.x, %r2;
    add.s32 %r14, %r3, -7;
    ld.global.s16 %r15, [%rd4];
    mul.wide.u32 %rd5, %r1, 56;
    add.s64 %rd6, %rd2, %rd5;
    st.global.v4.u32 [%rd6], {%r4, %r5, %r6, %r7};
    st.global.v4.u32 [%rd6+16], {%r8, %r9, %r10, %r11};
    st.global.v2.u32 [%rd6+32], {%r12, %r13};
    st.global.u32 [%rd6+40], %r14;
    st.global.u32 [%rd6+44], %r15;
    mul.wide.s32 %rd7, %r3, -3;
    st.global.u64 [%rd6+48], %rd7;
    ret;
}
"""


def test_integer_instructions_match_numpy():
    rng = np.random.default_rng(7)
    inp = rng.integers(0, 1 << 32, size=(THREADS, 2), dtype=np.uint64).astype(np.uint32)
    inp[0] = (0xFFFFFFFF, 0x80000000)                       # wrap-around and sign bits
    inp[1] = (0x00008001, 0x7FFFFFFF)                       # a negative low half for ld.s16
    out = run(parse(PTX)["k"], [inp, np.zeros((THREADS, OUT_WORDS), np.uint32)], THREADS, 0).args[1]
    a, b = inp[:, 0].astype(np.uint64), inp[:, 1].astype(np.uint64)
    m32 = np.uint64(0xFFFFFFFF)
    tid = np.arange(THREADS, dtype=np.uint64)
    want = np.zeros((THREADS, OUT_WORDS), np.uint64)
    want[:, 0] = (a + b) & m32
    want[:, 1] = (a - b) & m32
    want[:, 2] = (a * b) & m32
    want[:, 3] = a ^ np.uint64(0xFFFFFFFB)
    want[:, 4] = (a << np.uint64(5)) & m32
    want[:, 5] = b >> np.uint64(3)
    want[:, 6] = (inp[:, 1].view(np.int32) >> 3).view(np.uint32)
    want[:, 7] = a & b
    want[:, 8] = b | np.uint64(0xFF00)
    want[:, 9] = (tid - a) & m32
    want[:, 10] = (b - np.uint64(7)) & m32
    want[:, 11] = (inp[:, 0] & 0xFFFF).astype(np.uint16).view(np.int16).astype(np.int32).view(np.uint32)
    wide = (inp[:, 1].view(np.int32).astype(np.int64) * -3).view(np.uint64)
    want[:, 12], want[:, 13] = wide & m32, wide >> np.uint64(32)
    np.testing.assert_array_equal(out, want.astype(np.uint32))


# comparisons, selects, conversions, packing and the .hi / .wide products, all on registers the
# kernel loaded (so the interpreter cannot fold them), against numpy
PTX_MORE = """
.visible .entry k2(
    .param .u64 k2_param_0,
    .param .u64 k2_param_1
)
{
    .reg .pred %p<6>;
    .reg .b16 %rs<4>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [k2_param_0];
    ld.param.u64 %rd2, [k2_param_1];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.v2.u32 {%r2, %r3}, [%rd4];
    setp.lt.s32 %p1, %r2, %r3;
    setp.lt.u32 %p2, %r2, %r3;
    setp.ge.and.s32 %p3, %r2, %r3, %p2;
    setp.ne.or.u32 %p4|%p5, %r2, 7, %p1;
    selp.b32 %r4, %r2, %r3, %p1;
    selp.b32 %r5, 1, 0, %p2;
    selp.b32 %r6, 1, 0, %p3;
    selp.b32 %r7, 1, 0, %p4;
    selp.b32 %r8, 1, 0, %p5;
    cvt.s32.s8 %r9, %r2;
    cvt.u32.u16 %r10, %r3;
    mov.b32 {%rs1, %rs2}, %r2;
    mov.b32 %r11, {%rs2, %rs1};
    mul.hi.s32 %r12, %r2, %r3;
    mul.hi.u32 %r13, %r2, %r3;
    mad.hi.s32 %r14, %r2, %r3, %r1;
    mad.lo.s32 %r15, %r2, %r3, %r1;
    shr.s32 %r16, %r2, %r1;
    mad.wide.s32 %rd5, %r2, %r3, %rd3;
    cvt.s64.s32 %rd6, %r3;
    mul.wide.u32 %rd7, %r1, 64;
    add.s64 %rd8, %rd2, %rd7;
    st.global.v4.u32 [%rd8], {%r4, %r5, %r6, %r7};
    st.global.v4.u32 [%rd8+16], {%r8, %r9, %r10, %r11};
    st.global.v4.u32 [%rd8+32], {%r12, %r13, %r14, %r15};
    st.global.u32 [%rd8+48], %r16;
    st.global.u64 [%rd8+56], %rd5;
    ret;
}
"""


def test_comparisons_selects_conversions_and_products_match_numpy():
    rng = np.random.default_rng(11)
    inp = rng.integers(0, 1 << 32, size=(THREADS, 2), dtype=np.uint64).astype(np.uint32)
    inp[0] = (0xFFFFFFFF, 0x80000000)
    inp[1] = (7, 7)
    inp[2] = (0x80, 0x7FFF8001)
    out = run(parse(PTX_MORE)["k2"], [inp, np.zeros((THREADS, 16), np.uint32)], THREADS, 0).args[1]
    a, b = inp[:, 0].astype(np.int64), inp[:, 1].astype(np.int64)            # unsigned values
    sa, sb = inp[:, 0].view(np.int32).astype(np.int64), inp[:, 1].view(np.int32).astype(np.int64)
    tid = np.arange(THREADS, dtype=np.int64)
    lt_s, lt_u = sa < sb, a < b
    want = np.zeros((THREADS, 16), np.int64)
    want[:, 0] = np.where(lt_s, a, b)
    want[:, 1], want[:, 2] = lt_u, (sa >= sb) & lt_u
    want[:, 3], want[:, 4] = (a != 7) | lt_s, ~((a != 7) | lt_s)
    want[:, 5] = (inp[:, 0] & 0xFF).astype(np.uint8).view(np.int8).astype(np.int64)
    want[:, 6] = b & 0xFFFF
    want[:, 7] = ((a & 0xFFFF) << 16) | (a >> 16)
    want[:, 8] = (sa * sb) >> 32
    want[:, 9] = [(int(x) * int(y)) >> 32 for x, y in zip(a, b)]       # beyond int64
    want[:, 10] = ((sa * sb) >> 32) + tid
    want[:, 11] = [(int(x) * int(y) + int(t)) for x, y, t in zip(sa, sb, tid)]
    want[:, 12] = sa >> np.minimum(tid, 32)
    wide = [int(x) * int(y) + 8 * int(t) for x, y, t in zip(sa, sb, tid)]
    got = out.astype(np.int64)
    np.testing.assert_array_equal(got[:, :13] & 0xFFFFFFFF, want[:, :13] & 0xFFFFFFFF)
    got_wide = [int(lo) | int(hi) << 32 for lo, hi in zip(out[:, 14], out[:, 15])]
    assert got_wide == [w & (2**64 - 1) for w in wide]


def test_written_out_integer_forms_equal_the_instruction_functions():
    """The interpreter writes the commonest integer instructions out as Python source
    (``execute._inline_alu``) and runs the others through their functions (``execute._alu``): both
    give the same results, whatever the operands' signs and widths."""
    import random
    from ll_codegen.verify.ptx.execute import _alu, _inline_alu
    rng = random.Random(5)
    for base in ("add", "sub", "mul", "mad", "and", "or", "xor", "shl", "shr"):
        for t in ("b16", "s16", "u16", "b32", "s32", "u32", "s64", "u64"):
            for mods in ([], ["lo"], ["wide"], ["hi"]):
                if (mods and base not in ("mul", "mad")) or ("wide" in mods and t.endswith("64")):
                    continue
                bits = int(t[1:])
                mask = (1 << (2 * bits if "wide" in mods else bits)) - 1
                n = 3 if base == "mad" else 2
                f, src = _alu(base, mods, t), _inline_alu(base, mods, t, [f"x{i}" for i in range(n)])
                for _ in range(200):
                    xs = [rng.choice([rng.getrandbits(bits), rng.getrandbits(2 * bits), rng.randint(-2**bits, 2**bits),
                                      0, 1, (1 << bits) - 1, 1 << (bits - 1), rng.randint(0, 70)]) for _ in range(n)]
                    got = eval(f"({src}) & {mask}", {f"x{i}": x for i, x in enumerate(xs)})
                    assert got == f(*xs) & mask, (base, t, mods, xs, src)


def test_a_register_read_before_it_is_written_names_the_line():
    """Straight-line runs execute as one block: the report still names the instruction that read."""
    import pytest
    from ll_codegen.verify.ptx.ops import PtxError
    ptx = (".visible .entry k(.param .u64 k_param_0)\n{\n.reg .b32 %r<4>;\n.reg .b64 %rd<3>;\n"
           "ld.param.u64 %rd1, [k_param_0];\nmov.u32 %r1, %tid.x;\nadd.s32 %r2, %r1, 1;\n"
           "add.s32 %r3, %r9, %r2;\nst.global.u32 [%rd1], %r3;\nret;\n}\n")
    with pytest.raises(PtxError, match=r"thread 0: register %r9 read before it is written \(PTX line 6\)"):
        run(parse(ptx)["k"], [np.zeros(4, np.uint32)], 32, 16)
