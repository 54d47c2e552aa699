"""Pre-shuffled global layouts (``free: global``, ``chain/preshuffle.py``): a weight tensor the
caller reorders once, offline, chosen so that its load into an MMA operand fragment is 16-byte
vectors of exactly the fragment's elements with no register shuffling.  Checked apart from the
planner: the loads' sectors re-counted from the executed addresses, the registers the chosen load
leaves (emulator, on the tensor the generated numpy reorder packed) against the reference
layout's load of the unshuffled tensor and against numpy's fragment, the generated CUDA reorder
and its inverse run on the host SIMT runtime bit for bit, the load step's harness on the host,
and one-line errors."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from ll_codegen.chain import preshuffle
from ll_codegen.chain.check import check_chain, load_registers
from ll_codegen.chain.description import ChainError, chain_from_dict, load_chain
from ll_codegen.chain.files import chain_file_names, chain_files
from ll_codegen.chain.search import plan_chain
from ll_codegen.core import f2
from ll_codegen.operations import check
from ll_codegen.run import host
from ll_codegen.spec import spec_from_dict
from ll_codegen.verify.emulate.banks import measure_memory
from ll_codegen.verify.emulate.reference import regs_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples", "chains")
SIMT = os.path.join(ROOT, "ll_codegen", "simt")
CASES = {"mma_sync_b": "preshuffled_mma_b_e4m3.yaml", "wgmma_a": "preshuffled_wgmma_a_e4m3.yaml",
         "e2m1_mma_sync_b": "preshuffled_mma_b_e2m1.yaml"}
EIGHT_BIT = ["mma_sync_b", "wgmma_a"]


@pytest.fixture(scope="module", params=EIGHT_BIT)
def planned(request):
    return request.param, plan_chain(load_chain(os.path.join(EXAMPLES, CASES[request.param])))


def exec_module(text: str) -> dict:
    scope: dict = {}
    exec(compile(text, "<reorder>", "exec"), scope)
    return scope


def test_loads_are_whole_16_byte_vectors_with_no_conversion(planned):
    """The chosen load: 16-byte vectors straight into the fragment's registers (no conversion after
    it), every instruction's 32 lanes on 16 whole sectors and 4 instructions a warp (64 bytes a
    thread), counted from the executed addresses; the reference (the tensor as written) needs a
    conversion after its loads and costs more."""
    _, cp = planned
    (load,), (ref,) = cp.plans, cp.identity_plans
    assert load.operation == "load" and load.via is None and load.memory.vector_bytes == 16
    got = measure_memory(load)
    assert (got.sectors, got.min_sectors, got.instructions) == (16, 16, 4)
    assert ref.via is not None and cp.cost < cp.identity_cost
    check(load)


def test_reorder_then_load_gives_the_reference_registers(planned):
    """Emulator: the generated numpy reorder applied to random bits, then the chosen load, leaves in
    every thread's registers what the reference layout's load of the unshuffled tensor leaves, and
    both are numpy's fragment of the tensor (``regs_of`` the fixed register layout)."""
    _, cp = planned
    files = chain_files(cp, "ps", "chain.yaml")
    module = exec_module(files["ps_W_reorder.py"])
    fragment = cp.chain.tensor(cp.chain.steps[0].dst).spec.linear
    w = np.random.default_rng(3).integers(0, 256, size=cp.chain.tensor("W").spec.shape, dtype=np.uint8)
    packed = module["reorder"](w)
    assert packed.shape == (1, 1, w.size) and np.array_equal(module["restore"](packed), w)
    got = load_registers(cp.plans[0], packed.reshape(-1))
    want = load_registers(cp.identity_plans[0], w)
    assert np.array_equal(got, want) and np.array_equal(got, regs_of(fragment, w))
    check_chain(cp, rng=5)


def test_offset_bits_follow_the_fragment(planned):
    """The math of the family: ``G``'s columns are the fragment's images in the order 16 bytes of
    registers, lanes, the other registers, warps -- so ``G^-1 o R`` is the identity on them."""
    _, cp = planned
    R = cp.chain.tensor(cp.chain.steps[0].dst).spec.linear
    (_, p), = cp.layouts
    solver = f2.Solver(list(p.offsets))
    reg, lane, warp = (R.flat_bases(d) for d in ("register", "lane", "warp"))
    packed = [solver.solve(v) for v in reg[:4] + lane + reg[4:] + warp]
    assert packed == [1 << i for i in range(len(packed))] == [1 << i for i in range(len(p.offsets))]


def test_e2m1_weights_load_32_elements_a_vector_into_the_fragment():
    """4-bit weights (e2m1, two a byte) for the mma.sync B fragment (k_width 8): the chosen load is
    16-byte vectors of 32 elements with no conversion (sectors re-counted: 16 whole an instruction),
    ``G``'s first column is the fragment's pair (register basis 0), and the generated numpy reorder
    (codes in, bytes out) then the chosen byte load (emulator) gives the bytes the reference's
    load of the K-major packed tensor gives, which are numpy's fragment packed two a register byte;
    the chained emulation unpacks them to the fragment's 4-bit registers."""
    from ll_codegen.verify.emulate.packed import pack_registers, packed_tensor
    cp = plan_chain(load_chain(os.path.join(EXAMPLES, CASES["e2m1_mma_sync_b"])))
    (load,), (ref,) = cp.plans, cp.identity_plans
    assert load.packing is not None and load.via is None and load.memory.vector_bytes == 16
    got = measure_memory(load)
    assert (got.sectors, got.min_sectors, got.instructions) == (16, 16, 4) and ref.via is not None
    R = cp.chain.tensor("B").spec.linear
    (_, p), = cp.layouts
    assert p.offsets[0] == R.flat_bases("register")[0] == 1
    module = exec_module(chain_files(cp, "ps", "chain.yaml")["ps_W_reorder.py"])
    w = np.random.default_rng(4).integers(0, 16, size=(128, 128), dtype=np.uint8)
    packed = module["reorder"](w).reshape(-1)
    assert packed.size == w.size // 2 and np.array_equal(module["restore"](packed), w)
    mine = load_registers(load, packed)
    theirs = load_registers(ref, packed_tensor(w, 0, 0))
    assert np.array_equal(mine, theirs) and np.array_equal(mine, pack_registers(regs_of(R, w)))
    check_chain(cp, rng=6)


def test_numpy_reorder_of_whole_tiles_and_its_inverse():
    """The generated numpy module on a tensor of 2 x 3 tiles with a row stride of its own: tile
    (i, j) is the single-tile reorder of that tile (``preshuffle.reorder``, written apart), restore
    inverts it, and a tensor not made of whole tiles is one clear error."""
    cp = plan_chain(load_chain(os.path.join(EXAMPLES, CASES["mma_sync_b"])))
    module = exec_module(chain_files(cp, "ps", "chain.yaml")["ps_W_reorder.py"])
    (_, p), = cp.layouts
    big = np.random.default_rng(1).integers(0, 256, size=(128, 384), dtype=np.uint8)
    packed = module["reorder"](big)
    assert packed.shape == (2, 3, 8192)
    for i in range(2):
        for j in range(3):
            tile = big[64 * i:64 * (i + 1), 128 * j:128 * (j + 1)]
            assert np.array_equal(packed[i, j], preshuffle.reorder(tile, p.offsets))
    assert np.array_equal(module["restore"](packed, big.shape), big)
    with pytest.raises(ValueError, match="not made of whole"):
        module["reorder"](big[:100])


DRIVER = r"""
#include <cstdio>
#include <vector>
#include "ps_W_reorder.cuh"
namespace R = ps_W_reorder;
int main(int argc, char** argv) {
    const long long bytes = BYTES, packed_bytes = PACKED;      // the strided source, the packed buffer
    std::vector<unsigned char> host(bytes);
    FILE* f = std::fopen(argv[1], "rb");
    if (std::fread(host.data(), 1, host.size(), f) != host.size()) return 4;
    std::fclose(f);
    auto* w = static_cast<R::Raw*>(llgen_host::device_malloc(bytes));
    auto* packed = static_cast<R::Raw*>(llgen_host::device_malloc(packed_bytes));
    auto* back = static_cast<R::Raw*>(llgen_host::device_malloc(bytes));
    std::memcpy(w, host.data(), bytes);
    std::memset(back, 0xA5, bytes);
    R::Extent e{{T0, T1}, {S0, S1}};
    const int threads = 128;
    llgen_host::Dim3 grid;
    grid.x = (R::vectors(e) + threads - 1) / threads, grid.y = 1, grid.z = 1;
    auto errs = llgen_host::launch_grid(grid, threads, nullptr, 0, [&] { R::reorder(w, packed, e); });
    auto errs2 = llgen_host::launch_grid(grid, threads, nullptr, 0, [&] { R::restore(packed, back, e); });
    for (auto& s : errs) std::printf("ERR %s\n", s.c_str());
    for (auto& s : errs2) std::printf("ERR %s\n", s.c_str());
    f = std::fopen(argv[2], "wb");
    std::fwrite(packed, 1, packed_bytes, f);
    std::fwrite(back, 1, bytes, f);
    std::fclose(f);
    return errs.empty() && errs2.empty() ? 0 : 1;
}
"""


def nibble_rows(codes: np.ndarray) -> np.ndarray:
    """Rows of 4-bit codes as bytes, two a byte along the row (element 2i in the low nibble)."""
    return ((codes[:, 0::2] & 0xF) | ((codes[:, 1::2] & 0xF) << 4)).astype(np.uint8)


@pytest.mark.compile
@pytest.mark.parametrize("case", ["mma_sync_b", "wgmma_a", "e2m1_mma_sync_b"])
def test_cuda_reorder_runs_bit_exact_on_the_host(tmp_path, case):
    """The generated CUDA reorder and restore kernels (one thread per 16-byte vector) on the host
    SIMT runtime, over 2 x 3 tiles of a source with padded rows (stored as the reference says: K-major
    for the mma.sync B cases, row-major for the wgmma A case; 4-bit codes two a byte along the
    rows): the packed buffer is the generated numpy reorder's, restore writes back exactly the
    source (the padding untouched)."""
    cxx = host.compiler()
    if cxx is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    cp = plan_chain(load_chain(os.path.join(EXAMPLES, CASES[case])))
    files = chain_files(cp, "ps", "chain.yaml")
    for k, v in files.items():
        (tmp_path / k).write_text(v)
    module = exec_module(files["ps_W_reorder.py"])
    bits = module["ELEM_BITS"]
    shape = cp.chain.tensor("W").spec.shape
    row_major = list(cp.identity_plans[0].memory.layout["order"])[0] == 1
    rng = np.random.default_rng(9)
    logical = rng.integers(0, 16 if bits == 4 else 256, size=(2 * shape[0], 3 * shape[1]), dtype=np.uint8)
    stored = logical if row_major else logical.T
    row = nibble_rows(stored) if bits == 4 else stored
    ld = row.shape[1] + 16                                     # bytes a source row, padded
    buf = np.full((row.shape[0], ld), 0x5A, dtype=np.uint8)
    buf[:, :row.shape[1]] = row
    ld_elems = ld * 8 // bits
    strides = (ld_elems, 1) if row_major else (1, ld_elems)
    packed_bytes = logical.size * bits // 8
    src = tmp_path / "main.cpp"
    src.write_text(DRIVER.replace("BYTES", str(buf.size)).replace("PACKED", str(packed_bytes))
                   .replace("T0", "2").replace("T1", "3").replace("S0", str(strides[0]))
                   .replace("S1", str(strides[1])))
    exe = str(tmp_path / "reorder")
    r = subprocess.run([cxx, "-std=c++17", "-x", "c++", host.default_opt(), "-I", SIMT, "-I", str(tmp_path), "-include",
                        "llgen_host.h", str(src), "-o", exe], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    buf.tofile(tmp_path / "in.bin")
    r = subprocess.run([exe, str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = np.fromfile(tmp_path / "out.bin", dtype=np.uint8)
    assert np.array_equal(out[:packed_bytes], module["reorder"](logical).reshape(-1))
    back = out[packed_bytes:].reshape(buf.shape)
    assert np.array_equal(back[:, :row.shape[1]], row) and (back[:, row.shape[1]:] == 0xA5).all()


@pytest.mark.compile
@pytest.mark.parametrize("case", ["wgmma_a", "e2m1_mma_sync_b"])
def test_cuda_reorder_compiles_with_nvcc(tmp_path, case):
    """The reorder header as the kernel author includes it, compiled by nvcc for sm_90a and sm_80."""
    from toolchain import need
    nvcc = need("nvcc")
    cp = plan_chain(load_chain(os.path.join(EXAMPLES, CASES[case])))
    for k, v in chain_files(cp, "ps", "chain.yaml").items():
        (tmp_path / k).write_text(v)
    (tmp_path / "use.cu").write_text('#include "ps_W_reorder.cuh"\n')
    # NVRTC (CuPy) has no host headers: with __CUDACC_RTC__ defined the header includes only cuda_runtime.h
    rtc = re.sub(r"#if defined\(__CUDACC_RTC__\)(.*?)#else.*?#endif", r"\1", (tmp_path / "ps_W_reorder.cuh").read_text(),
                 flags=re.S)
    assert re.findall(r"#include\s*<([^>]+)>", rtc) == ["cuda_runtime.h"]
    for arch in ("sm_90a", "sm_80"):
        r = subprocess.run([nvcc, "-std=c++17", f"-arch={arch}", "-c", str(tmp_path / "use.cu"), "-o",
                            str(tmp_path / f"use_{arch}.o")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.compile
def test_load_step_harness_runs_bit_exact_on_the_host():
    """The chosen load step's generated harness (the packed buffer into the fragment's registers)
    runs unchanged on the host SIMT runtime, bit for bit, for both cases."""
    items = []
    for case, f in sorted(CASES.items()):
        cp = plan_chain(load_chain(os.path.join(EXAMPLES, f)))
        items.append((f"ps_{case}", cp.plans[0]))
    results = host.verify_host(items, seed=11, jobs=1)
    assert all(results), [r.message for r in results if not r]


def test_files_are_named_before_planning(tmp_path):
    """``llgen chain -o`` writes the step's header and harness, the packed buffer's spec (loadable:
    the dense 1-D tile the header reads) and the reorder module and header, names known up front."""
    c = load_chain(os.path.join(EXAMPLES, CASES["wgmma_a"]))
    files = chain_files(plan_chain(c), "ps", "chain.yaml")
    assert sorted(files) == sorted(chain_file_names(c, "ps"))
    assert {"ps_W_reorder.py", "ps_W_reorder.cuh", "ps_W.yaml"} <= set(files)
    import yaml
    spec = spec_from_dict(yaml.safe_load(files["ps_W.yaml"]))
    assert spec.layout.space == "global" and spec.shape == (64 * 128,)
    assert "# found as for A: 16-byte vectors" in files["ps_W.yaml"]


def test_reference_stays_when_it_is_already_whole_vectors():
    """A register layout the row-major tensor already loads in whole 16-byte vectors with no
    conversion (16 consecutive bytes a thread, lanes then warps along the rows): no pre-shuffle is
    cheaper, the reference stays, and the reorder written is the dense row-major packing."""
    blocked = {"kind": "blocked", "size_per_thread": [1, 16], "threads_per_warp": [4, 8], "warps_per_cta": [4, 1],
               "order": [1, 0], "shape": [64, 128]}
    cp = plan_chain(chain_from_dict({"tensors": {"W": {"free": "global", "shape": [64, 128]}, "R": {"spec": blocked}},
                                     "steps": [{"src": "W", "dst": "R", "dtype": "i8"}]}))
    (_, p), = cp.layouts
    assert not p.offsets and cp.cost == cp.identity_cost
    module = exec_module(chain_files(cp, "ps", "chain.yaml")["ps_W_reorder.py"])
    w = np.arange(64 * 128, dtype=np.int64).reshape(64, 128)
    assert np.array_equal(module["reorder"](w).reshape(-1), w.reshape(-1))


def test_a_store_into_a_preshuffled_tensor_reads_back_through_restore():
    """A pre-shuffled tensor written by a step (registers -> free global): the chained emulation
    stores into the packed buffer and restores it; the view equals the registers' tensor."""
    frag = {"kind": "dot_operand", "operand_index": 0, "k_width": 4, "shape": [64, 128],
            "parent": {"kind": "nvidia_mma", "version": [3, 0], "warps_per_cta": [4, 1], "instr_shape": [16, 64, 32]}}
    cp = plan_chain(chain_from_dict({"tensors": {"A": {"spec": frag}, "W": {"free": "global", "shape": [64, 128]}},
                                     "steps": [{"src": "A", "dst": "W", "dtype": "i8"}]}))
    (_, p), = cp.layouts
    assert p.offsets and cp.plans[0].memory.vector_bytes == 16 and cp.cost < cp.identity_cost
    check_chain(cp, rng=2)


FRAG = {"kind": "dot_operand", "operand_index": 1, "k_width": 4, "shape": [64, 128],
        "parent": {"kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": [1, 4], "instr_shape": [16, 8]}}


@pytest.mark.parametrize("tensors, steps, message", [
    ({"W": {"free": "global", "shape": [64, 128], "warps": 4}, "B": {"spec": FRAG}}, [("W", "B")],
     "tensors.W.warps: belongs to free: registers (a global tile has no threads)"),
    ({"W": {"free": "global", "spec": {"kind": "swizzled_shared", "vec": 1, "per_phase": 1, "max_phase": 1,
                                       "order": [1, 0], "shape": [64, 128]}}, "B": {"spec": FRAG}}, [("W", "B")],
     "the reference is a shared layout but the tensor is free: global"),
    ({"W": {"free": "global", "shape": [64, 128]}, "S": {"free": "shared", "shape": [64, 128]}}, [("W", "S")],
     "steps[0]: W is free: global (pre-shuffled offline), so its steps load it into or store it from a fixed "
     "register layout; this one moves it to S, a free layout"),
    ({"W": {"free": "global", "shape": [64, 128]},
      "S": {"spec": {"kind": "nvmma_shared", "swizzle_byte_width": 128, "element_bitwidth": 8,
                     "shape": [64, 128]}}}, [("W", "S")], "this one moves it to S, a shared layout"),
    ({"W": {"free": "global", "shape": [64, 128]}, "B": {"spec": FRAG}}, [("W", "B", "i8"), ("W", "B", "f16")],
     "a tensor holds one element width"),
    ({"V": {"spec": {"kind": "global", "order": [1, 0], "shape": [64, 128]}}, "B": {"spec": FRAG}},
     [("V", "B", "e2m1")], "steps[0].dtype: e2m1 (4-bit) steps are planned in a chain only to load or store a "
                           "free: global (pre-shuffled) tensor"),
])
def test_bad_preshuffled_tensors_are_one_line(tensors, steps, message):
    data = {"tensors": tensors, "steps": [{"src": s[0], "dst": s[1], "dtype": s[2] if len(s) > 2 else "i8"}
                                          for s in steps]}
    with pytest.raises(ChainError) as e:
        chain_from_dict(data, "c.yaml")
    assert message in str(e.value) and "\n" not in str(e.value) and str(e.value).startswith("c.yaml: ")


def test_cli_prints_the_vectors_and_writes_the_reorder(tmp_path):
    """``llgen chain -o``: the summary states the chosen layout's offsets and both loads' vector
    widths and sectors; a bad chain is one line, exit status 2, before any file is written."""
    run = [sys.executable, "-m", "ll_codegen", "chain", os.path.join(EXAMPLES, CASES["mma_sync_b"]), "-o",
           str(tmp_path), "--name", "ps"]
    out = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert "W (free global: pre-shuffled offline): found as for B: 16-byte vectors" in out
    assert "load of 16-byte vectors (4 a warp, 16 sectors each, 16 at best), cost 97.00" in out
    assert "total cost 97.00 (reference 133.00)" in out
    import json
    js = json.loads(subprocess.run(run[:5] + ["--plan", "--json"], capture_output=True, text=True, check=True).stdout)
    assert (js["steps"][0]["vector_bytes"], js["layouts"]["W"]["space"]) == (16, "global")
    assert {"ps_W_reorder.py", "ps_W_reorder.cuh", "ps_0_W_to_B.cuh"} <= set(os.listdir(tmp_path))
    bad = tmp_path / "bad.yaml"
    bad.write_text("tensors:\n  W: {free: global, shape: [64, 128], per_thread: 4}\n  B: {spec: {kind: blocked, "
                   "size_per_thread: [1, 1], threads_per_warp: [1, 32], warps_per_cta: [1, 4], order: [1, 0], "
                   "shape: [64, 128]}}\nsteps:\n  - {src: W, dst: B, dtype: i8}\n")
    r = subprocess.run([sys.executable, "-m", "ll_codegen", "chain", str(bad), "-o", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "belongs to free: registers" in r.stderr
    assert not (tmp_path / "o").exists()
