"""Packed 4-bit elements (i4, u4, e2m1): two per byte, the byte-internal position a layout bit.

1. Planning: a 4-bit transfer whose two layouts pair the same elements is the 8-bit plan of
   the quotient layouts (same strategy, costs and bytes as planning those by hand); layouts
   whose pair vector is a register basis of the other side repack in registers; anything
   else is one clear line naming both pair vectors; ``dtype_bytes`` refuses 4-bit types.
2. Nibble level: random nibble tensors through the byte plan (numpy emulator) reproduce
   numpy's permutation of the nibbles through the 4-bit layouts -- conversions (with source
   and destination repacks), stores and loads of shared and global tiles, copies; the
   faithfulness check fails on a corrupted plan.
3. Host SIMT runtime: the rendered harnesses run bit-exact (repacks included); a wrong
   repack is caught; ``nvcc -arch=sm_90a`` and sm_80 compile the headers.
4. CLI: ``llgen convert/plan --dtype i4``, one-line errors with exit status 2.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from ll_codegen.api import conversion_files, plan_conversion
from ll_codegen.cli import main
from ll_codegen.core.dtypes import DTYPE_BITS, PACKED_BITS, dtype_bits, dtype_bytes
from ll_codegen.core.layout import LinearLayout, layout_of
from ll_codegen.operations import check
from ll_codegen.plan import packed
from ll_codegen.plan.plans import without_via
from ll_codegen.spec import spec_from_dict
from ll_codegen.verify.emulate.convert import emulate
from ll_codegen.verify.emulate.memory import emulate_memory
from ll_codegen.verify.emulate.packed import (check_packing, pack_registers, packed_tensor, random_nibbles,
                                              swapped_registers, unpack_registers, unpacked_tensor)
from ll_codegen.verify.emulate.reference import regs_of

BLOCKED = "examples/blocked_64x64.yaml"          # 1 x 4 per thread along K (dim 1): pairs (0, 1)
MMA = "examples/mma_v2_64x64.yaml"               # register basis 0 is (0, 1)
GLOBAL = "examples/global_64x64.yaml"
SWIZZLED = "examples/swizzled_shared_64x64.yaml"
#: 2 x 4 per thread, K fastest: pairs (0, 1); register basis 2 is (1, 0)
K_MAJOR = {"kind": "blocked", "size_per_thread": [2, 4], "threads_per_warp": [4, 8], "warps_per_cta": [4, 1],
           "order": [1, 0], "shape": [64, 64]}
#: 2 x 4 per thread, M fastest: pairs (1, 0); register basis 1 is (0, 1)
M_MAJOR = {"kind": "blocked", "size_per_thread": [2, 4], "threads_per_warp": [8, 4], "warps_per_cta": [1, 4],
           "order": [0, 1], "shape": [64, 64]}
#: 1 x 8 per thread along M only: pairs (1, 0) and no register basis (0, 1)
M_ONLY = {"kind": "blocked", "size_per_thread": [8, 1], "threads_per_warp": [4, 8], "warps_per_cta": [2, 2],
          "order": [0, 1], "shape": [64, 64]}
#: one register per thread: no byte to pair two elements in
ONE_REG = LinearLayout({"register": [], "lane": [[0, 1], [0, 2], [0, 4], [1, 0], [2, 0]], "warp": [[4, 0], [8, 0]],
                        "block": []}, ["dim0", "dim1"])
#: (source, destination, operation, source swap, destination swap)
PAIRS = [(BLOCKED, MMA, "convert", 0, 0), (MMA, BLOCKED, "convert", 0, 0),
         (K_MAJOR, M_MAJOR, "convert", 2, 0), (M_MAJOR, K_MAJOR, "convert", 1, 0), (BLOCKED, M_MAJOR, "convert", 0, 1),
         (BLOCKED, GLOBAL, "store", 0, 0), (GLOBAL, BLOCKED, "load", 0, 0),
         (MMA, SWIZZLED, "store", 0, 0), (SWIZZLED, MMA, "load", 0, 0),
         (M_MAJOR, GLOBAL, "store", 1, 0), (GLOBAL, M_MAJOR, "load", 0, 1),
         (M_MAJOR, SWIZZLED, "store", 1, 0), (SWIZZLED, M_MAJOR, "load", 0, 1),
         (GLOBAL, SWIZZLED, "copy", 0, 0)]


def _plans(dtype: str = "i4", arch: str | None = None):
    return [plan_conversion(s, d, dtype=dtype, arch=arch) for s, d, *_ in PAIRS]


PLANS = _plans()


# ------------------------------------------------------------------ 1. planning
def test_dtype_table_knows_the_4_bit_types_in_bits_only():
    assert {k: DTYPE_BITS[k] for k in PACKED_BITS} == {"i4": 4, "u4": 4, "e2m1": 4}
    assert dtype_bits("f16") == 16 and dtype_bits("e2m1") == 4
    for t in PACKED_BITS:
        with pytest.raises(ValueError, match="two elements per byte"):
            dtype_bytes(t)


@pytest.mark.parametrize("i", range(len(PAIRS)))
def test_plan_is_the_byte_plan_of_the_quotient(i):
    _, _, op, src_swap, dst_swap = PAIRS[i]
    p = PLANS[i]
    assert p.operation == op and p.dtype == "i4" and p.elem_bytes == 1
    k = p.packing
    assert (k.src_swap, k.dst_swap) == (src_swap, dst_swap)
    # the quotient: the 4-bit layouts' pair basis dropped, bit k of dim d removed; planned as u8 it is the same plan
    four_src, four_dst = layout_of(k.src_bases), layout_of(k.dst_bases)
    assert four_src.total_out_size_log2 == layout_of(p.src_bases).total_out_size_log2 + 1
    assert p.n_src * 2 == (four_src.in_dim_size("register") if "register" in four_src.in_dims else 0)
    assert p.n_dst * 2 == (four_dst.in_dim_size("register") if "register" in four_dst.in_dims else 0)
    by_hand = plan_conversion(layout_of(p.src_bases), layout_of(p.dst_bases), dtype="u8") if op != "copy" else None
    if by_hand is not None and op == "convert":
        assert (by_hand.strategy, by_hand.cost, by_hand.smem_bytes) == (p.strategy, p.cost, p.smem_bytes)
    # nested plans state the 4-bit type too
    assert all(q.dtype == "i4" for q in (getattr(p, "via", None), *getattr(p, "paths", ())) if q is not None)


def test_quotient_drops_the_pair_bit_and_halves_its_dim():
    L = LinearLayout({"register": [[0, 1], [0, 2], [4, 0]], "lane": [[0, 4], [1, 0], [2, 0]], "warp": []},
                     ["dim0", "dim1"])
    q = packed.quotient(L, "registers", 1, 0, "source")
    assert q.bases["register"] == [[0, 1], [4, 0]] and q.bases["lane"] == [[0, 2], [1, 0], [2, 0]]
    assert q.out_dim_sizes == {"dim0": 8, "dim1": 4}
    # a pair bit in the middle of a dim: the bits below it stay, the bits above shift down
    L2 = LinearLayout({"register": [[0, 2], [0, 1], [4, 0]], "lane": [[0, 4], [1, 0], [2, 0]], "warp": []},
                      ["dim0", "dim1"])
    q = packed.quotient(L2, "registers", 1, 1, "source")
    assert q.bases["register"] == [[0, 1], [4, 0]] and q.bases["lane"] == [[0, 2], [1, 0], [2, 0]]
    # another basis moving the pair bit: the nibble would not be that bit alone
    with pytest.raises(ValueError, match="register basis 1 of the source layout .* also moves the pair bit"):
        packed.quotient(L, "registers", 1, 1, "source")


def test_refusals_are_one_line():
    cases = [
        (BLOCKED, M_ONLY, "pair different u4 elements.*\\(0, 1\\).*\\(1, 0\\)"),
        (ONE_REG, ONE_REG, "has 1 register: give it at least 2 registers"),
        (BLOCKED, {"kind": "linear", "shape": [64, 64], "register": [[0, 1], [1, 1], [0, 2], [0, 32], [16, 0],
                                                                     [32, 0]],
                   "lane": [[0, 4], [0, 8], [0, 16], [2, 0], [4, 0]], "warp": [[8, 0], [0, 0]]},
         "also moves the pair bit"),
    ]
    for s, d, msg in cases:
        try:
            plan_conversion(s, d, dtype="u4")
        except ValueError as e:
            assert "\n" not in str(e)
            assert __import__("re").search(msg, str(e)), str(e)
        else:
            raise AssertionError(f"{s} -> {d} planned")


def test_strides_are_elements_of_the_4_bit_tensor():
    p = plan_conversion(BLOCKED, GLOBAL, dtype="i4", strides="128,1")
    assert p.memory.strides == (64, 1)
    for bad, msg in (("127,1", "must be even"), ("128,2", "must be 1")):
        with pytest.raises(ValueError, match=msg):
            plan_conversion(BLOCKED, GLOBAL, dtype="i4", strides=bad)


# ------------------------------------------------------------------ 2. nibble level
def _through_convert(p, t):
    k = p.packing
    src = pack_registers(swapped_registers(regs_of(layout_of(k.src_bases), t), k.src_swap))
    got = unpack_registers(emulate(p, src))
    return swapped_registers(got, k.dst_swap)          # the swap is its own inverse


@pytest.mark.parametrize("i", range(len(PAIRS)))
def test_nibbles_follow_numpys_permutation(i):
    p, rng = PLANS[i], np.random.default_rng(i)
    check(p, rng)                                        # the byte plan and its faithfulness to the 4-bit layouts
    k = p.packing
    t = random_nibbles(k.shape, rng)
    src4, dst4 = layout_of(k.src_bases), layout_of(k.dst_bases)
    if p.operation == "convert":
        assert np.array_equal(_through_convert(p, t), regs_of(dst4, t))
    elif p.operation == "load":                          # the access, then the conversion of a via plan
        regs = emulate_memory(without_via(p), packed_tensor(t, k.dim, k.bit))
        regs = emulate(p.via, regs) if p.via is not None else regs
        assert np.array_equal(swapped_registers(unpack_registers(regs), k.dst_swap), regs_of(dst4, t))
    elif p.operation == "store":                         # registers packed from the 4-bit layout, the tile unpacked
        src = pack_registers(swapped_registers(regs_of(src4, t), k.src_swap))
        regs = emulate(p.via, src) if p.via is not None else src
        step = without_via(p)
        image = emulate_memory(step, packed_tensor(t, k.dim, k.bit))
        assert np.array_equal(regs, regs_of(layout_of(step.src_bases), packed_tensor(t, k.dim, k.bit)))
        assert np.array_equal(unpacked_tensor(image, k.dim, k.bit), t)
    assert src4.out_dim_sizes == dst4.out_dim_sizes


def test_packing_round_trips():
    rng = np.random.default_rng(5)
    t = random_nibbles((8, 16), rng)
    for d, b in ((0, 0), (0, 2), (1, 0), (1, 3)):
        assert np.array_equal(unpacked_tensor(packed_tensor(t, d, b), d, b), t)
    r = rng.integers(0, 16, size=(2, 3, 8), dtype=np.uint8)
    assert np.array_equal(unpack_registers(pack_registers(r)), r)
    assert np.array_equal(swapped_registers(swapped_registers(r, 2), 2), r)
    assert pack_registers(np.array([0x3, 0xC], dtype=np.uint8))[0] == 0xC3       # register 0 in the low nibble


def test_faithfulness_check_fails_on_a_corrupted_plan():
    p = PLANS[0]
    bases = {**p.src_bases["in_dims"]}
    reg = list(bases["register"])
    reg[0], reg[1] = reg[1], reg[0]
    bad = replace(p, src_bases={**p.src_bases, "in_dims": {**bases, "register": reg}})
    with pytest.raises(AssertionError, match="packed source"):
        check_packing(bad, 0)
    k = PLANS[2].packing
    with pytest.raises(AssertionError, match="packed source"):
        check_packing(replace(PLANS[2], packing=replace(k, src_swap=1)), 0)


# ------------------------------------------------------------------ 3. host runtime and nvcc
def _host():
    from ll_codegen.run import host
    if host.compiler() is None:
        pytest.skip("the host SIMT runtime needs clang++")
    return host


@pytest.mark.compile
def test_harnesses_run_bit_exact_on_the_host():
    host = _host()
    items = [(f"sb{i:02d}", p) for i, p in enumerate(PLANS)]
    items += [(f"sbu{i:02d}", p) for i, p in enumerate(_plans("e2m1", "sm_80")[:5])]
    results = host.verify_host(items, runs=2, seed=11, jobs=1)
    bad = [r.message for r in results if not r.ok]
    assert not bad, bad[0]


@pytest.mark.compile
def test_a_wrong_repack_is_caught_on_the_host(monkeypatch):
    host = _host()
    from ll_codegen.emit import packed as emit_packed
    right = emit_packed.repack_lines

    def wrong(n, j):                     # the low nibble of byte b moved where its high nibble belongs
        return [line.replace(">> 4", "& 0x0Fu") for line in right(n, j)]
    monkeypatch.setattr(emit_packed, "repack_lines", wrong)
    results = host.verify_host([("sbw", PLANS[2]), ("sbw2", PLANS[4])], runs=1, seed=2, jobs=1)
    for r in results:
        assert not r.ok and "compile failed" not in r.message, r.message


@pytest.mark.compile
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_nvcc_compiles_the_headers(arch, tmp_path):
    from toolchain import arch_flags, compile_together, need
    nvcc = need("nvcc")
    units = []
    for i in (0, 2, 4, 9, 10, 13):
        s, d = PAIRS[i][:2]
        if not isinstance(s, str) or not isinstance(d, str):
            continue
        conv = conversion_files(s, d, dtype="i4", arch=arch if arch == "sm_80" else "sm_90", name=f"sb{i}",
                                emit=("header", "harness"))
        for fname, text in conv.files.items():
            (tmp_path / fname).write_text(text)
            if fname.endswith("_harness.cu"):
                units.append(fname)
    for p_i in (2, 4, 9, 10):          # the repacking plans come from spec mappings: rendered through the plan
        p = PLANS[p_i]
        for kind, suffix in (("header", ".cuh"), ("harness", "_harness.cu")):
            (tmp_path / f"sbr{p_i}{suffix}").write_text(p.render(kind, name=f"sbr{p_i}"))
        units.append(f"sbr{p_i}_harness.cu")
    bad = compile_together(nvcc, units, arch_flags(arch), str(tmp_path))
    assert not bad, bad[0][-2000:]


@pytest.mark.compile
def test_ptx_of_the_harnesses_does_what_the_plan_says(tmp_path):
    """The device branch read back: nvcc's PTX of each harness run by the PTX interpreter, its
    outputs against numpy and every thread's accesses against the byte plan (repacks included)."""
    from toolchain import ptx_problems
    cases = [(f"sbp{i}", PLANS[i]) for i in (0, 2, 4, 7, 9, 10, 13)]
    for n, p in cases:
        for kind, suffix in (("header", ".cuh"), ("harness", "_harness.cu")):
            (tmp_path / f"{n}{suffix}").write_text(p.render(kind, name=n))
    problems = ptx_problems(cases, str(tmp_path), "sm_90")
    for n, _ in cases:
        assert problems[n] == [], PAIRS[int(n[3:])][2]


# ------------------------------------------------------------------ 4. CLI
def test_cli_convert_and_plan(tmp_path):
    r = CliRunner().invoke(main, ["plan", "--src", BLOCKED, "--dst", MMA, "--dtype", "i4"])
    assert r.exit_code == 0 and "packed: i4 two per byte" in r.output and "1 B = 2 elems packed" in r.output
    r = CliRunner().invoke(main, ["convert", "--src", BLOCKED, "--dst", GLOBAL, "--dtype", "e2m1", "-o",
                                  str(tmp_path), "--name", "st4"])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "st4.cuh").read_text()
    assert "Packed e2m1 (4-bit elements, two per byte)" in text
    assert "bytes (two e2m1 elements each) per thread store() moves" in text
    assert "--dtype e2m1" in text


def test_cli_errors_are_one_line_exit_2(tmp_path):
    spec = tmp_path / "m_only.yaml"
    spec.write_text("\n".join(f"{k}: {v}" for k, v in M_ONLY.items()))
    r = CliRunner().invoke(main, ["convert", "--src", BLOCKED, "--dst", str(spec), "--dtype", "i4", "-o",
                                  str(tmp_path / "out")])
    assert r.exit_code == 2
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "pair different i4 elements" in lines[0] and "Traceback" not in r.output
    assert not (tmp_path / "out").exists()
    r = CliRunner().invoke(main, ["gather", "--src", BLOCKED, "--index", BLOCKED, "--axis", "0", "--dtype", "i4"])
    assert r.exit_code == 2


def test_spec_shapes_are_elements():
    s = spec_from_dict(dict(K_MAJOR), "<k>")
    p = plan_conversion(s, MMA, dtype="u4")
    assert p.packing.shape == (64, 64) and p.shape == (64, 32)
