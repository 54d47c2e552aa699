"""TMA copies (``plan/tma.py``, ``emit/tma.py``, ``verify/emulate/tma.py``; ``--arch sm_90a``).

* ``tma_box`` over ``nvmma_shared`` (swizzle 128/64/32/none, transposed or not, 8/16/32-bit,
  tiles narrower and wider than the swizzle span -> several boxes) and the same bases given as
  ``swizzled_shared``, CuTe and ``shared_linear`` tiles; the refusals, one line each;
* every box placement against the layout's own offsets: the emulator, and the independent PTX
  model (``verify/models/ptx_model.py``) for every swizzle x element width x tile size;
* ``tile_alignment`` and the headers' ``kTileAlign``; ``auto`` picks TMA on sm_90a only;
* the CLI (header written, ``plan --json``, errors: one line, exit 2, nothing written);
* the header and harness compile with ``nvcc -arch=sm_90a`` (one cp.async.bulk.tensor per box);
* the harness runs bit-exact on the host SIMT runtime (once ``simt/hopper.h`` exists).
"""
from __future__ import annotations

import os
import re
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from ll_codegen.api import plan_conversion
from ll_codegen.cli import main
from ll_codegen.core.layout import LinearLayout
from ll_codegen.layouts.memory import CuteLayout, GlobalLayout, NVMMASharedLayout, SharedLinearLayout, SwizzledSharedLayout
from ll_codegen.plan.tma import plan_tma, swizzle, tile_alignment, tma_box
from ll_codegen.run import host
from ll_codegen.operations import check
from toolchain import need

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIMT = os.path.join(ROOT, "ll_codegen", "simt")
GLOBAL = "examples/global_64x64.yaml"
NVMMA = "examples/nvmma_shared_64x64.yaml"
DTYPE = {8: "i8", 16: "f16", 32: "f32"}
SHAPES = ([64, 64], [128, 256], [16, 128], [256, 32], [8, 64], [32, 512])


def nvmma_cases():
    """(swizzle, bits, transposed, shape, layout) for every nvmma_shared the shapes allow."""
    out = []
    for sw in (128, 64, 32, 0):
        for bits in (8, 16, 32):
            for tr in (False, True):
                for shape in SHAPES:
                    try:
                        L = NVMMASharedLayout(sw, bits, transposed=tr).to_linear(shape)
                    except Exception:          # smaller than one core matrix
                        continue
                    if not sw and shape[0 if tr else 1] * bits // 8 < 16:
                        continue                   # rows under 16 bytes: no TMA box (test_refusals_are_one_line)
                    out.append((sw, bits, tr, tuple(shape), L))
    return out


CASES = nvmma_cases()


def global_tile(shape, order) -> LinearLayout:
    return GlobalLayout(order=list(order)).to_linear(list(shape))


def offsets_of(L: LinearLayout) -> dict[tuple[int, ...], int]:
    """Tensor coordinates -> element offset of a bijective shared tile."""
    n = 1 << L.in_dim_size_log2("offset")
    return {tuple(int(v) for v in c): o for o, c in enumerate(L.apply_all()[:n])}


def placement(box, elem_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """(byte offset, box coordinates innermost first) of every box element, as the planner's
    ``swizzle`` places them (row-major box, then the hardware swizzle)."""
    p = np.arange(int(np.prod(box.box)))
    coords = np.array([p // int(np.prod(box.box[:i])) % b for i, b in enumerate(box.box)])
    return np.array([swizzle(int(q) * elem_bytes, box.swizzle_bytes) for q in p]), coords


# ------------------------------------------------------------------ the swizzle and the box
def test_swizzle_bits():
    assert swizzle(0x80, 128) == 0x90 and swizzle(0x380, 128) == 0x3F0 and swizzle(0x400, 128) == 0x400
    assert swizzle(0x180, 64) == 0x1B0 and swizzle(0x200, 64) == 0x200
    assert swizzle(0x80, 32) == 0x90 and swizzle(0x100, 32) == 0x100
    assert all(swizzle(a, 0) == a for a in range(0, 2048, 16))
    for span in (128, 64, 32):                           # an involution, linear over F2
        assert all(swizzle(swizzle(a, span), span) == a for a in range(4096))
        assert all(swizzle(a ^ b, span) == swizzle(a, span) ^ swizzle(b, span) for a in (16, 144, 896) for b in (128, 512))


@pytest.mark.parametrize("sw,bits,tr,shape,L", CASES, ids=[f"sw{c[0]}_b{c[1]}_{'T' if c[2] else 'N'}_{c[3][0]}x{c[3][1]}"
                                                          for c in CASES])
def test_nvmma_box(sw, bits, tr, shape, L):
    w = bits // 8
    box = tma_box(L, w)
    assert box.swizzle_bytes == sw
    assert box.dims[0] == (0 if tr else 1)               # rows along the contiguous dim
    if sw:
        assert box.box[0] * w == sw
    assert all(b <= 256 for b in box.box)
    assert box.bytes * len(box.boxes) == w * int(np.prod(shape))
    if len(box.boxes) > 1:
        assert box.bytes % max(8 * sw, 128) == 0
    # every element where the layout puts it
    offs = offsets_of(L)
    byte, coords = placement(box, w)
    for off, c in box.boxes:
        for k in range(coords.shape[1]):
            t = [0] * len(shape)
            for i, d in enumerate(box.dims):
                t[d] = c[d] + int(coords[i, k])
            assert offs[tuple(t)] * w == off + int(byte[k])
    assert tile_alignment(L, w) == (8 * sw if sw else 16)


def test_several_boxes_cover_wide_tiles():
    L = NVMMASharedLayout(128, 16).to_linear([64, 256])
    box = tma_box(L, 2)
    assert box.box == (64, 64) and [c for _, c in box.boxes] == [(0, 0), (0, 64), (0, 128), (0, 192)]
    assert [off for off, _ in box.boxes] == [0, 8192, 16384, 24576]


def test_equivalent_kinds_give_the_same_box():
    ref = tma_box(NVMMASharedLayout(128, 16).to_linear([64, 64]), 2)
    swz = SwizzledSharedLayout(8, 1, 8, [1, 0]).to_linear([64, 64])             # 16-byte chunks ^ row % 8
    cute = CuteLayout("<(64,64),(64,1),swizzle<3,4,3>,elem=f16>").to_linear([64, 64])
    nv = NVMMASharedLayout(128, 16).to_linear([64, 64])
    lin = SharedLinearLayout(offset=nv.bases["offset"]).to_linear([64, 64])
    for L in (swz, cute, lin):
        assert tma_box(L, 2) == ref
    # 64-byte swizzle of f32 as CuTe Swizzle<2,4,3>; 32-byte of i8 as Swizzle<1,4,3>
    assert tma_box(CuteLayout("<(32,16),(16,1),swizzle<2,4,3>,elem=f32>").to_linear([32, 16]), 4).swizzle_bytes == 64
    assert tma_box(CuteLayout("<(16,32),(32,1),swizzle<1,4,3>,elem=u8>").to_linear([16, 32]), 1).swizzle_bytes == 32
    # a plain row-major tile: no swizzle
    assert tma_box(SharedLinearLayout(offset=[[0, 1 << i] for i in range(6)] + [[1 << i, 0] for i in range(4)])
                   .to_linear([16, 64]), 2).swizzle_bytes == 0


@pytest.mark.parametrize("layout,w,why", [
    (SwizzledSharedLayout(4, 1, 8, [1, 0]).to_linear([64, 64]), 2, "no swizzle mode makes it a dense box"),
    (CuteLayout("<(64,64),(64,1),swizzle<3,3,3>,elem=f16>").to_linear([64, 64]), 2, "no swizzle mode"),
    (SharedLinearLayout(offset=[[0, 1], [0, 2], [1, 0], [0, 4]]).to_linear([2, 8]), 2, "not a multiple of 16"),
    (NVMMASharedLayout(128, 16).to_linear([64, 64]), 4, "offset 64 is at"),         # an f16 tile read as f32
    (NVMMASharedLayout(0, 8, transposed=True).to_linear([8, 64]), 1, "8 bytes, not a multiple of 16"),
])
def test_refusals_are_one_line(layout, w, why):
    with pytest.raises(ValueError, match=why) as e:
        tma_box(layout, w)
    assert "\n" not in str(e.value) and str(e.value).startswith("TMA cannot produce")


def test_plan_refusals():
    nv = NVMMASharedLayout(128, 16, transposed=True).to_linear([64, 64])       # rows along dim 0
    with pytest.raises(ValueError, match="contiguous dim 1; the shared layout's rows run along dim 0"):
        plan_tma(global_tile([64, 64], [1, 0]), nv, "f16", "cuda", "sm_90a")
    plain = NVMMASharedLayout(128, 16).to_linear([64, 64])
    with pytest.raises(ValueError, match=r"^TMA needs --arch sm_90a"):
        plan_tma(global_tile([64, 64], [1, 0]), plain, "f16", "cuda", "sm_90")
    with pytest.raises(ValueError, match="16-byte aligned"):
        plan_tma(global_tile([64, 64], [1, 0]), plain, "f16", "cuda", "sm_90a", alignment=8)
    # the transposed tile matches a column-major global tensor
    p = plan_tma(global_tile([64, 64], [0, 1]), nv, "f16", "cuda", "sm_90a")
    assert p.tma.dims == (0, 1) and p.operation == "tma"


def test_tile_alignment():
    assert tile_alignment(NVMMASharedLayout(128, 16).to_linear([64, 64]), 2) == 1024
    assert tile_alignment(NVMMASharedLayout(64, 16).to_linear([64, 64]), 2) == 512
    assert tile_alignment(NVMMASharedLayout(32, 16).to_linear([64, 64]), 2) == 256
    assert tile_alignment(NVMMASharedLayout(0, 16).to_linear([64, 64]), 2) == 16
    assert tile_alignment(SwizzledSharedLayout(4, 1, 8, [1, 0]).to_linear([64, 64]), 2) == 16


def test_a_dense_box_takes_no_swizzle():
    """A tile whose every swizzle span is the identity on it (one 128-byte row; rows of 32 bytes under the
    32-byte span's 256-byte pattern) is taken unswizzled, 128-byte aligned -- not at a pattern's repeat."""
    for shape, w in (([64], 2), ([2, 64], 2), ([4, 16], 2), ([16, 128], 1)):
        tile = SwizzledSharedLayout(1, 1, 1, list(range(len(shape)))[::-1]).to_linear(shape)
        box = tma_box(tile, w)
        assert box.swizzle_bytes == 0 and box.alignment == 128, (shape, box)
        assert tile_alignment(tile, w) == 16
    # a layout only a swizzle makes dense keeps it
    assert tma_box(NVMMASharedLayout(128, 16).to_linear([64, 64]), 2).swizzle_bytes == 128


# ------------------------------------------------------------------ planning through the API
def test_auto_picks_tma_on_sm90a_only():
    p = plan_conversion(GLOBAL, NVMMA, arch="sm_90a")
    assert p.operation == "tma" and p.strategy == "tma" and p.smem_bytes == 8192 + 8
    d = p.to_dict()["tma"]
    assert list(d["box"]) == [64, 64] and d["swizzle_bytes"] == 128 and d["tx_bytes"] == 8192
    assert d["boxes"] == [{"smem_offset": 0, "coords": [0, 0]}]
    q = plan_conversion(GLOBAL, NVMMA, arch="sm_90")
    assert q.operation == "copy" and q.store.alignment == 1024
    # not a box: cp.async on sm_90a too; forced: the reason
    swz = {"kind": "swizzled_shared", "vec": 4, "per_phase": 1, "max_phase": 8, "order": [1, 0], "shape": [64, 64]}
    assert plan_conversion(GLOBAL, swz, arch="sm_90a").operation == "copy"
    with pytest.raises(ValueError, match="TMA cannot produce"):
        plan_conversion(GLOBAL, swz, arch="sm_90a", strategy="tma")
    with pytest.raises(ValueError, match="TMA needs --arch sm_90a"):
        plan_conversion(GLOBAL, NVMMA, arch="sm_90", strategy="tma")


@pytest.mark.parametrize("sw,bits,tr,shape,L", CASES[::3], ids=[f"sw{c[0]}_b{c[1]}_{'T' if c[2] else 'N'}_{c[3][0]}x{c[3][1]}"
                                                               for c in CASES[::3]])
def test_emulator(sw, bits, tr, shape, L):
    p = plan_tma(global_tile(shape, [0, 1] if tr else [1, 0]), L, DTYPE[bits], "cuda", "sm_90a")
    check(p, 1)


def test_emulator_catches_a_wrong_plan():
    from dataclasses import replace
    p = plan_conversion(GLOBAL, NVMMA, arch="sm_90a", shape=[64, 256])
    t = p.tma
    swapped = tuple((off, c) for (off, _), (_, c) in zip(t.boxes, t.boxes[1:] + t.boxes[:1]))
    for bad in (replace(t, boxes=swapped), replace(t, swizzle_bytes=64), replace(t, dims=t.dims[::-1])):
        with pytest.raises(AssertionError):
            check(replace(p, tma=bad), 0)


def test_kTileAlign_of_every_shared_header():
    copy = plan_conversion(GLOBAL, NVMMA, arch="sm_80").render("header", "c")
    assert re.search(r"kTileAlign = 1024; +// the 128-byte swizzle acts on address bits 4-9: the tile must start "
                     r"on a 1024-byte boundary", copy)
    store = plan_conversion("examples/blocked_64x64.yaml", NVMMA, arch="sm_90").render("header", "s")
    assert "kTileAlign = 1024;" in store
    plain = plan_conversion("examples/blocked_64x64.yaml", "examples/swizzled_shared_64x64.yaml").render("header", "p")
    assert "kTileAlign = 1024;" in plain                  # vec 8 x 8 phases of 128-byte rows: the 128-byte swizzle
    tma = plan_conversion(GLOBAL, NVMMA, arch="sm_90a").render("header", "t")
    assert "kTileAlign = 1024;" in tma and "kTxBytes   = 8192;" in tma and "kSwizzle   = 3;" in tma


# ------------------------------------------------------------------ CLI
def test_cli(tmp_path):
    r = CliRunner().invoke(main, ["convert", "--src", GLOBAL, "--dst", NVMMA, "--arch", "sm_90a", "-o", str(tmp_path),
                                  "--name", "tcp"])
    assert r.exit_code == 0, r.output
    assert sorted(os.listdir(tmp_path)) == ["tcp.cuh", "tcp_harness.cu"]
    text = (tmp_path / "tcp.cuh").read_text()
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in text
    assert "make_tensor_map" in text and "kDataType  = 6;" in text
    r = CliRunner().invoke(main, ["plan", "--src", GLOBAL, "--dst", NVMMA, "--arch", "sm_90a", "--json"])
    assert r.exit_code == 0 and '"tma": {' in r.output and '"tx_bytes": 8192' in r.output
    for args, why in ((["--arch", "sm_90", "--strategy", "tma"], "TMA needs --arch sm_90a"),
                      (["--arch", "sm_90a", "--strategy", "tma", "--dst", "examples/swizzled_shared_64x64.yaml",
                        "--dtype", "i8"], "TMA cannot produce")):
        out = tmp_path / "err"
        dst = [] if "--dst" in args else ["--dst", NVMMA]
        r = CliRunner().invoke(main, ["convert", "--src", GLOBAL, *dst, *args, "-o", str(out)])
        assert r.exit_code == 2, r.output
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and why in lines[0] and lines[0].startswith("llgen: error:")
        assert not out.exists()


# ------------------------------------------------------------------ compiled
def tma_items():
    """A few TMA plans to compile and run: every swizzle, 8/16/32-bit, transposed, several boxes."""
    items = []
    for sw, bits, tr, shape, L in CASES:
        if (sw, bits, tr) in {(128, 16, False), (128, 8, True), (64, 32, False), (32, 16, True), (0, 16, False),
                              (128, 32, True)} and shape in {(64, 64), (16, 128), (256, 32), (128, 256)}:
            p = plan_tma(global_tile(shape, [0, 1] if tr else [1, 0]), L, DTYPE[bits], "cuda", "sm_90a", num_warps=2)
            items.append((f"tma_sw{sw}_b{bits}_{'t' if tr else 'n'}_{shape[0]}x{shape[1]}", p))
    return items


@pytest.mark.compile
def test_header_compiles_for_sm90a(tmp_path):
    nvcc = need("nvcc")
    items = tma_items()
    assert len(items) >= 8 and len({len(p.tma.boxes) for _, p in items}) > 2
    for name, p in items:
        p.write(str(tmp_path), name)
    tu = tmp_path / "all.cu"
    tu.write_text("".join(f'#include "{n}_harness.cu"\n' for n, _ in items))
    r = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90a", "-ptx", str(tu), "-o", str(tmp_path / "all.ptx")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "warning" not in r.stderr.lower(), r.stderr[-3000:]
    ptx = (tmp_path / "all.ptx").read_text()
    for name, p in items:
        for v, instr in (("", "shared::cluster.global"), ("_store", "global.shared::cta")):
            m = re.search(rf"\.entry {name}_harness{v}\(.*?\n}}\n", ptx, re.S)
            assert m, name + v
            assert len(re.findall(rf"cp\.async\.bulk\.tensor\.2d\.{instr}", m.group(0))) == len(p.tma.boxes), name + v
    # and the header alone, host side included (make_tensor_map against the real <cuda.h>)
    obj = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90a", "-c", str(tmp_path / f"{items[0][0]}_harness.cu"),
                          "-o", str(tmp_path / "h.o")], capture_output=True, text=True)
    assert obj.returncode == 0, obj.stderr[-2000:]


HOPPER = os.path.exists(os.path.join(SIMT, "hopper.h")) and os.path.exists(os.path.join(SIMT, "cuda.h"))


@pytest.mark.compile
@pytest.mark.skipif(host.compiler() is None, reason="no clang++ for the host SIMT runtime")
@pytest.mark.skipif(not HOPPER, reason="ll_codegen/simt/hopper.h (mbarrier, TMA on the host) is not there yet")
def test_host_simt_bit_exact():
    items = tma_items()
    results = host.verify_host(items, runs=2, seed=3)
    bad = [r.message for r in results if not r.ok]
    assert not bad, bad[:5]


# ------------------------------------------------------------------ the PTX model as referee
def _ptx_model():
    try:
        from ll_codegen.verify.models import ptx_model
    except ImportError:
        return None
    return ptx_model if hasattr(ptx_model, "tma_box_smem_offsets") else None


@pytest.mark.skipif(_ptx_model() is None, reason="ll_codegen/verify/models/ptx_model.py has no tma_box_smem_offsets yet")
@pytest.mark.parametrize("sw", (128, 64, 32, 0))
@pytest.mark.parametrize("bits", (8, 16, 32))
def test_box_placement_matches_the_ptx_model(sw, bits):
    """For every swizzle x element width x tile size: each box element, placed where the PTX
    model says TMA puts it (plus the box's shared offset), is where the layout's offsets say."""
    ptx_model = _ptx_model()
    w = bits // 8
    seen = 0
    for s, b, tr, shape, L in CASES:
        if (s, b) != (sw, bits):
            continue
        box = tma_box(L, w)
        offs = offsets_of(L)
        model = ptx_model.tma_box_smem_offsets(box.box, w, box.swizzle_bytes)       # shaped reversed(box)
        idx = np.indices(tuple(reversed(box.box))).reshape(len(box.box), -1)[::-1]  # innermost first
        for off, c in box.boxes:
            for k in range(idx.shape[1]):
                t = [0] * len(shape)
                for i, d in enumerate(box.dims):
                    t[d] = c[d] + int(idx[i, k])
                assert offs[tuple(t)] * w == off + int(model.reshape(-1)[k]), (shape, tr, off, t)
        seen += 1
    assert seen
