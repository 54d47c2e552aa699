"""The Hopper referee model (ll_codegen.verify.models.ptx_model) against facts stated in the PTX ISA.

Expectations are literal numbers read off the PTX ISA figures/tables (and the CUDA driver
API for tensor maps), not re-derivations of the model's own formulas.
"""
import numpy as np
import pytest

from ll_codegen.verify.models import ptx_model as pm


# ---------------------------------------------------------------- Matrix Descriptor Format
def test_descriptor_field_positions():
    # start 0x400 -> bits 0-13 hold 0x40; LBO 16 -> bit 16; SBO 1024 -> 64 << 32;
    # base offset 5 -> bits 49-51; 128B swizzle = mode 1 -> bit 62.
    d = pm.encode_descriptor(start=0x400, lbo=16, sbo=1024, swizzle_bytes=128, base_offset=5)
    assert d == 0x40 | (1 << 16) | (64 << 32) | (5 << 49) | (1 << 62)
    assert pm.encode_descriptor(0, 0, 0, 64) == 2 << 62
    assert pm.encode_descriptor(0, 0, 0, 32) == 3 << 62
    assert pm.encode_descriptor(0, 0, 0, 0) == 0
    assert pm.SWIZZLE_MODES == {0: 0, 1: 128, 2: 64, 3: 32}


def test_descriptor_round_trip():
    for args in [(0, 16, 1024, 128, 0), (0x3FFF0, 0x3FFF0, 0x3FFF0, 32, 7), (4096, 128, 256, 0, 0),
                 (1024 + 32, 16, 512, 64, 3)]:
        d = pm.decode_descriptor(pm.encode_descriptor(*args))
        assert (d.start, d.lbo, d.sbo, d.swizzle_bytes, d.base_offset) == args
    d = pm.decode_descriptor((0x12 << 0) | (0x34 << 16) | (0x56 << 32) | (2 << 49) | (3 << 62))
    assert d == pm.Descriptor(start=0x120, lbo=0x340, sbo=0x560, base_offset=2, swizzle_bytes=32)


@pytest.mark.parametrize("kwargs", [dict(start=8), dict(lbo=24), dict(sbo=1 << 18), dict(start=-16),
                                    dict(swizzle_bytes=16), dict(base_offset=8)])
def test_descriptor_rejects_unencodable_fields(kwargs):
    args = dict(start=0, lbo=16, sbo=1024, swizzle_bytes=128, base_offset=0) | kwargs
    with pytest.raises(ValueError):
        pm.encode_descriptor(**args)


# ---------------------------------------------------------------- swizzle
def test_swizzle_address_bits():
    # 128B: bits 4-6 ^= bits 7-9. Address 0x3A0 = row 7, chunk 2 -> chunk 2^7 = 5.
    assert pm.swizzle_address(0x3A0, 128) == 0x3D0
    assert pm.swizzle_address(0x3A3, 128) == 0x3D3           # bits 0-3 untouched
    assert pm.swizzle_address(1024 + 0x3A0, 128) == 1024 + 0x3D0   # repeats every 1024 B
    # 64B: bits 4-5 ^= bits 7-8: row 3 chunk 1 (0x190) -> chunk 2 (0x1A0); bit 6 untouched.
    assert pm.swizzle_address(0x190, 64) == 0x1A0
    assert pm.swizzle_address(0x200, 64) == 0x200            # 512-byte repeat
    # 32B: bit 4 ^= bit 7.
    assert pm.swizzle_address(0x80, 32) == 0x90
    assert pm.swizzle_address(0x100, 32) == 0x100            # 256-byte repeat
    assert pm.swizzle_address(0x3A0, 0) == 0x3A0
    a = np.array([0x3A0, 0x80])
    assert list(pm.swizzle_address(a, 128)) == [0x3D0, 0x90]


# ---------------------------------------------------------------- Shared Memory Matrix Layout
def test_k_major_128b_f16_canonical():
    # K-major SW128 atom: 8 rows of 128 B; 16-byte chunk c of row r stored at chunk c ^ (r % 8);
    # the next 8 rows SBO = 1024 bytes further.
    desc = pm.encode_descriptor(start=0, lbo=16, sbo=1024, swizzle_bytes=128)
    addr = pm.wgmma_operand_addresses(desc, rows=64, k=16, elem_bits=16, k_major=True)
    assert addr.shape == (64, 16)
    assert addr[0, 0] == 0 and addr[0, 1] == 2 and addr[0, 8] == 16
    assert addr[1, 0] == 128 + 16 and addr[1, 8] == 128          # chunk 0 -> 1, chunk 1 -> 0
    assert addr[5, 3] == 5 * 128 + (0 ^ 5) * 16 + 6
    assert addr[7, 15] == 7 * 128 + (1 ^ 7) * 16 + 14
    assert addr[8, 0] == 1024 and addr[63, 0] == 7 * 1024 + 7 * 128 + 7 * 16
    # The k-th 32-byte step inside the 128-byte row is taken by advancing the start address
    # (as CUTLASS does); the swizzle is on the address, so chunk (2 + c) ^ r is read.
    desc2 = pm.encode_descriptor(start=32, lbo=16, sbo=1024, swizzle_bytes=128)
    addr2 = pm.wgmma_operand_addresses(desc2, 64, 16, 16, True)
    assert addr2[0, 0] == 32 and addr2[1, 0] == 128 + 3 * 16 and addr2[3, 8] == 3 * 128 + 0


def test_k_major_no_swizzle_core_matrices():
    # No swizzle, K-major: core matrix = 8 rows x 16 B (contiguous 128 B); the second core
    # matrix along K is LBO=128 away, the next 8 rows SBO=256 away.
    desc = pm.encode_descriptor(start=2048, lbo=128, sbo=256, swizzle_bytes=0)
    addr = pm.wgmma_operand_addresses(desc, rows=16, k=16, elem_bits=16, k_major=True) - 2048
    assert addr[0, 0] == 0 and addr[0, 7] == 14 and addr[1, 0] == 16 and addr[7, 7] == 126
    assert addr[0, 8] == 128 and addr[3, 9] == 128 + 48 + 2
    assert addr[8, 0] == 256 and addr[15, 15] == 256 + 128 + 7 * 16 + 14
    # tf32 (K=8): 4 elements per chunk; e4m3 (K=32): 16 per chunk.
    a32 = pm.wgmma_operand_addresses(desc, 8, 8, 32, True) - 2048
    assert a32[0, 3] == 12 and a32[0, 4] == 128 and a32[2, 5] == 128 + 32 + 4
    a8 = pm.wgmma_operand_addresses(desc, 8, 32, 8, True) - 2048
    assert a8[1, 15] == 31 and a8[1, 16] == 128 + 16


def test_k_major_32b_and_64b_swizzle():
    # 32B: rows 32 B apart, chunk bit 0 ^= address bit 7 -> rows 4..7 swap their two chunks.
    desc = pm.encode_descriptor(0, 16, 256, 32)
    addr = pm.wgmma_operand_addresses(desc, 8, 16, 16, True)
    assert addr[0, 0] == 0 and addr[3, 8] == 96 + 16 and addr[4, 0] == 128 + 16 and addr[4, 8] == 128
    # 64B: rows 64 B apart, chunk bits 0-1 ^= address bits 7-8 (row pair index).
    desc = pm.encode_descriptor(0, 16, 512, 64)
    addr = pm.wgmma_operand_addresses(desc, 16, 16, 16, True)
    assert addr[2, 0] == 128 + 16 and addr[6, 8] == 384 + (1 ^ 3) * 16 and addr[8, 0] == 512


def test_mn_major_128b_f16():
    # MN-major SW128 atom: 64 f16 of M contiguous (128 B) x 8 K-rows 128 B apart, chunk c of
    # K-row j at c ^ j; the next 8 K-rows SBO=1024 away; the next 64 of M LBO=2048 away.
    desc = pm.encode_descriptor(start=0, lbo=2048, sbo=1024, swizzle_bytes=128)
    addr = pm.wgmma_operand_addresses(desc, rows=128, k=16, elem_bits=16, k_major=False)
    assert addr[0, 0] == 0 and addr[1, 0] == 2 and addr[7, 0] == 14
    assert addr[8, 0] == 16 and addr[63, 0] == 126
    assert addr[0, 1] == 128 + 16 and addr[8, 1] == 128 and addr[56, 3] == 384 + (7 ^ 3) * 16
    assert addr[0, 8] == 1024 and addr[64, 0] == 2048 and addr[64, 9] == 2048 + 1024 + 128 + 16
    with pytest.raises(ValueError):                      # transpose is f16/bf16 only
        pm.wgmma_operand_addresses(desc, 64, 8, 32, k_major=False)


def test_mn_major_no_swizzle():
    # Interleaved MN-major: core matrix = 8 f16 of M (16 B) x 8 K-rows 16 B apart; the next 8
    # of M SBO away, the next 8 K-rows LBO away.
    desc = pm.encode_descriptor(start=0, lbo=1024, sbo=128, swizzle_bytes=0)
    addr = pm.wgmma_operand_addresses(desc, 64, 16, 16, False)
    assert addr[3, 0] == 6 and addr[0, 1] == 16 and addr[8, 0] == 128 and addr[0, 8] == 1024
    assert addr[17, 10] == 2 + 2 * 128 + 2 * 16 + 1024


def test_base_offset():
    # PTX: base offset = (pattern start addr >> 7) & 7. A 128B-swizzle pattern that starts at
    # 384 (row phase 3): row r of that pattern lies at 384 + 128 r with chunk c at c ^ r.
    desc = pm.encode_descriptor(start=384, lbo=16, sbo=1024, swizzle_bytes=128, base_offset=3)
    addr = pm.wgmma_operand_addresses(desc, 8, 16, 16, True)
    assert addr[0, 0] == 384 and addr[0, 8] == 384 + 16
    assert addr[1, 0] == 512 + 16 and addr[5, 8] == 384 + 640 + (1 ^ 5) * 16
    # With base offset 0 the same start reads the absolute-address pattern (phase 3 for row 0).
    desc0 = pm.encode_descriptor(start=384, lbo=16, sbo=1024, swizzle_bytes=128, base_offset=0)
    assert pm.wgmma_operand_addresses(desc0, 8, 16, 16, True)[0, 0] == 384 + 3 * 16


# ---------------------------------------------------------------- register fragments
def test_wgmma_d_fragment_m64n8():
    f = pm.wgmma_d_fragment(8)
    assert f.shape == (128, 4, 2)
    assert [tuple(x) for x in f[0]] == [(0, 0), (0, 1), (8, 0), (8, 1)]
    assert [tuple(x) for x in f[5]] == [(1, 2), (1, 3), (9, 2), (9, 3)]
    assert [tuple(x) for x in f[31]] == [(7, 6), (7, 7), (15, 6), (15, 7)]
    assert tuple(f[32, 0]) == (16, 0) and tuple(f[127, 3]) == (63, 7)
    # Every (row, col) of the 64 x 8 D exactly once.
    assert len({tuple(x) for x in f.reshape(-1, 2)}) == 64 * 8


def test_wgmma_d_fragment_wider_n():
    f = pm.wgmma_d_fragment(256)
    assert f.shape == (128, 128, 2)
    assert [tuple(x) for x in f[0, 4:8]] == [(0, 8), (0, 9), (8, 8), (8, 9)]
    assert tuple(f[0, 127]) == (8, 249) and tuple(f[66, 6]) == (40, 12)
    assert (pm.wgmma_d_fragment(64, acc_bits=16) == pm.wgmma_d_fragment(64)).all()
    with pytest.raises(ValueError):
        pm.wgmma_d_fragment(12)


def test_wgmma_a_fragment():
    f16 = pm.wgmma_a_fragment(16, 16)
    assert f16.shape == (128, 8, 2)
    assert [tuple(x) for x in f16[0]] == [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]
    assert tuple(f16[33, 0]) == (16, 2) and tuple(f16[127, 7]) == (63, 15)
    tf32 = pm.wgmma_a_fragment(8, 32)
    assert [tuple(x) for x in tf32[1]] == [(0, 1), (8, 1), (0, 5), (8, 5)]
    b8 = pm.wgmma_a_fragment(32, 8)
    assert b8.shape == (128, 16, 2)
    assert [tuple(x) for x in b8[1, :5]] == [(0, 4), (0, 5), (0, 6), (0, 7), (8, 4)]
    assert tuple(b8[1, 8]) == (0, 20) and tuple(b8[1, 15]) == (8, 23)
    for f, k in ((f16, 16), (tf32, 8), (b8, 32)):
        assert len({tuple(x) for x in f.reshape(-1, 2)}) == 64 * k


def test_mma_sync_m16n8k16():
    f = pm.mma_sync_fragments("m16n8k16", "f16")
    assert f["a"].shape == (32, 8, 2) and f["b"].shape == (32, 4, 2) and f["c"].shape == (32, 4, 2)
    assert [tuple(x) for x in f["a"][0]] == [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]
    assert [tuple(x) for x in f["a"][6]] == [(1, 4), (1, 5), (9, 4), (9, 5), (1, 12), (1, 13), (9, 12), (9, 13)]
    assert [tuple(x) for x in f["b"][0]] == [(0, 0), (1, 0), (8, 0), (9, 0)]
    assert [tuple(x) for x in f["b"][7]] == [(6, 1), (7, 1), (14, 1), (15, 1)]
    assert [tuple(x) for x in f["c"][5]] == [(1, 2), (1, 3), (9, 2), (9, 3)]


def test_mma_sync_m16n8k8_and_k32():
    f = pm.mma_sync_fragments("m16n8k8", "tf32")
    assert [tuple(x) for x in f["a"][5]] == [(1, 1), (9, 1), (1, 5), (9, 5)]
    assert [tuple(x) for x in f["b"][5]] == [(1, 1), (5, 1)]
    f = pm.mma_sync_fragments("m16n8k32", "e4m3")
    assert f["a"].shape == (32, 16, 2) and f["b"].shape == (32, 8, 2)
    assert [tuple(x) for x in f["a"][5][[0, 3, 4, 8, 12, 15]]] == [(1, 4), (1, 7), (9, 4), (1, 20), (9, 20), (9, 23)]
    assert [tuple(x) for x in f["b"][5][[0, 3, 4, 7]]] == [(4, 1), (7, 1), (20, 1), (23, 1)]
    with pytest.raises(ValueError):
        pm.mma_sync_fragments("m16n8k16", "tf32")


# ---------------------------------------------------------------- TMA
def test_tma_box_offsets_64x64_f16_128b():
    off = pm.tma_box_smem_offsets((64, 64), 2, 128)
    assert off.shape == (64, 64)
    assert off[0, 0] == 0 and off[0, 8] == 16 and off[1, 0] == 128 + 16 and off[1, 8] == 128
    assert off[7, 63] == 7 * 128 + 0 * 16 + 14 and off[8, 0] == 1024 and off[9, 8] == 1024 + 128
    assert sorted(off.ravel().tolist()) == list(range(0, 8192, 2))
    plain = pm.tma_box_smem_offsets((32, 4, 2), 4, 0)
    assert plain.shape == (2, 4, 32) and plain[1, 2, 3] == (32 * 4 + 2 * 32 + 3) * 4


def test_tma_box_validation():
    with pytest.raises(ValueError, match="swizzle span"):
        pm.tma_box_smem_offsets((128, 8), 2, 128)          # 256-byte rows, 128B swizzle
    with pytest.raises(ValueError, match="multiple of 16"):
        pm.tma_box_smem_offsets((12, 8), 2, 0)             # 24-byte rows
    with pytest.raises(ValueError, match="256"):
        pm.tma_box_smem_offsets((8, 257), 2, 0)
    with pytest.raises(ValueError, match="non-zero"):
        pm.tma_box_smem_offsets((8, 0), 2, 0)
    pm.tma_box_smem_offsets((256, 2), 1, 0)                # limits themselves are fine


def test_tma_load_out_of_bounds_zero_fill():
    t = (np.arange(10 * 20, dtype=np.uint16) + 1).reshape(10, 20)
    out = pm.tma_load_reference(t, box=(16, 4), coords=(8, -2), swizzle_bytes=32)
    assert out.dtype == np.uint8 and out.size == 16 * 4 * 2
    vals = out.view(np.uint16)
    # rows -2, -1 are outside: their 64 bytes are zero (rows 0,1 live at 0..63, unswizzled
    # since address bit 7 is 0 there).
    assert (vals[:32] == 0).all()
    # box row 2 = tensor row 0, columns 8..19 then 4 zeros past the extent; row 2 is bytes 64..95.
    assert list(vals[32:48]) == [t[0, c] if c < 20 else 0 for c in range(8, 24)]
    # box row 3 (bytes 96..127) likewise.
    assert list(vals[48:64]) == [t[1, c] if c < 20 else 0 for c in range(8, 24)]
    assert (pm.tma_load_reference(t, (16, 4), (40, 0), 0) == 0).all()


def test_tma_load_128b_swizzle_places_chunks():
    t = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    out = pm.tma_load_reference(t, (64, 64), (0, 0), 128).view(np.uint16)
    # row 1 chunk 0 (t[1, 0:8]) lands in chunk 1 of the second 128-byte row.
    assert list(out[64 + 8:64 + 16]) == list(t[1, 0:8])
    assert list(out[64:72]) == list(t[1, 8:16])
    assert list(out[7 * 64 + 0:7 * 64 + 8]) == list(t[7, 56:64])


# ---------------------------------------------------------------- wgmma end to end
def _smem(size, *pieces):
    mem = np.zeros(size, np.uint8)
    for at, data in pieces:
        mem[at:at + data.size] = data
    return mem


def test_wgmma_ss_k_major_128b_through_tma():
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (64, 64)).astype(np.float16)      # M x K tile, K contiguous
    b = rng.integers(-4, 5, (32, 64)).astype(np.float16)      # N x K tile
    mem = _smem(16384, (0, pm.tma_load_reference(a, (64, 64), (0, 0), 128)),
                (8192, pm.tma_load_reference(b, (64, 32), (0, 0), 128)))
    d = None
    for kb in range(4):                                       # four K=16 steps of 32 bytes
        da = pm.encode_descriptor(kb * 32, 16, 1024, 128)
        db = pm.encode_descriptor(8192 + kb * 32, 16, 1024, 128)
        d = pm.wgmma_reference(mem, da, None, db, 32, "f16", d, True, True)
    assert d.shape == (64, 32) and d.dtype == np.float64
    np.testing.assert_array_equal(d, a.astype(np.float64) @ b.astype(np.float64).T)


def test_wgmma_mn_major_b_and_register_a():
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, (64, 16)).astype(np.float64)
    bt = rng.integers(-3, 4, (16, 64)).astype(np.float16)     # K x N, N contiguous (N-major B)
    mem = _smem(4096, (1024, pm.tma_load_reference(bt, (64, 16), (0, 0), 128)))
    db = pm.encode_descriptor(1024, 8192, 1024, 128)
    frag = pm.wgmma_a_fragment(16, 16)
    regs = a[frag[..., 0], frag[..., 1]]                      # (128, 8) per-thread values
    d = pm.wgmma_reference(mem, None, regs, db, 64, "f16", None, True, False)
    np.testing.assert_array_equal(d, a @ bt.astype(np.float64))
    acc = np.ones((64, 64))
    d2 = pm.wgmma_reference(mem, None, a, db, 64, "f16", acc, True, False)
    np.testing.assert_array_equal(d2, a @ bt.astype(np.float64) + 1)


def test_wgmma_no_swizzle_core_matrix_layout_s8():
    rng = np.random.default_rng(2)
    a = rng.integers(-128, 128, (64, 32)).astype(np.int8)
    b = rng.integers(-128, 128, (8, 32)).astype(np.int8)

    def core(mat, lbo, sbo):                                  # 8x16B core matrices, by hand
        mem = np.zeros(8192, np.uint8)
        for r in range(mat.shape[0]):
            for c in range(2):
                at = (r // 8) * sbo + c * lbo + (r % 8) * 16
                mem[at:at + 16] = mat[r, 16 * c:16 * c + 16].view(np.uint8)
        return mem

    mem = core(a, 128, 256)
    mem[4096:] = core(b, 1024, 2048)[:4096]
    d = pm.wgmma_reference(mem, pm.encode_descriptor(0, 128, 256, 0), None,
                           pm.encode_descriptor(4096, 1024, 2048, 0), 8, "s8", None, True, True)
    assert d.dtype == np.int64
    np.testing.assert_array_equal(d, a.astype(np.int64) @ b.astype(np.int64).T)


def test_element_decoding():
    one_bits = {"bf16": 0x3F80, "e4m3": 0x38, "e5m2": 0x3C, "tf32": 0x3F800000, "u8": 1}
    nbytes = {"bf16": 2, "e4m3": 1, "e5m2": 1, "tf32": 4, "u8": 1}

    def value(dtype, raw):                                    # A[0, 0] = raw, B[0, 0] = 1.0
        as_bytes = lambda x: np.frombuffer(int(x).to_bytes(nbytes[dtype], "little"), np.uint8)
        mem = _smem(2048, (0, as_bytes(raw)), (1024, as_bytes(one_bits[dtype])))
        return pm.wgmma_reference(mem, pm.encode_descriptor(0, 128, 256, 0), None,
                                  pm.encode_descriptor(1024, 128, 256, 0), 8, dtype, None, True, True)[0, 0]

    assert value("bf16", 0x4049) == 3.140625
    assert value("e4m3", 0x7E) == 448.0                       # e4m3 max normal
    assert value("e4m3", 0x01) == 2.0 ** -9                   # smallest subnormal
    assert np.isnan(value("e4m3", 0x7F))                      # S.1111.111 is NaN
    assert value("e5m2", 0x7B) == 57344.0                     # e5m2 max normal
    assert value("tf32", 0x3FC00FFF) == 1.5                   # low 13 mantissa bits ignored
    assert value("u8", 200) == 200
