"""The PTX interpreter's integer instructions and typed global accesses (``verify/ptx/sim.py``) against
numpy, on every thread of a block: register and immediate operands (the interpreter's direct forms),
operands it reads through a getter (a special register), signed and unsigned shifts, ``mul.lo`` /
``mul.wide``, vector and sign-extending loads, vector stores.  Expected values are numpy's uint32 /
int32 / int64 arithmetic, written from the PTX ISA's definitions (results modulo 2^32; ``shr.s32``
arithmetic; ``ld.s16`` sign-extends into the register)."""
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
