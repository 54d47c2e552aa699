"""Run-time alignment: one header for any leading dimension.

A global tile's `alignment` is a promise about the tile pointer and the strides; where the layout
allows wider vectors than the promise, the plan carries a path per vector width (``plan.paths``)
and the header's store/load/copy read the actual pointer and strides and take the widest path
they allow.  Checked here: which paths the planner makes; each path through the emulator; every
path's harness variant (strides and a pointer offset of exactly that alignment) bit-exact on the
host SIMT runtime, which reports a misaligned vector access -- so a dispatch that takes a path
too wide fails (a mutation test below); the header compiles for CUDA and HIP.
"""
from __future__ import annotations

import os
import re

import pytest

from ll_codegen import api
from ll_codegen.emit.harness_tiles import global_access, harness_tile, harness_variants
from ll_codegen.operations import check
from ll_codegen.run import host

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ACC = os.path.join(ROOT, "examples", "gemm", "acc.yaml")               # mma.sync f32 accumulator, 128 x 128
BLOCKED = os.path.join(ROOT, "examples", "blocked_64x64.yaml")
WAVE64 = os.path.join(ROOT, "examples", "specs", "blocked_wave64_64x64.yaml")
NVMMA = os.path.join(ROOT, "examples", "nvmma_shared_64x64.yaml")


def glob(shape, alignment: int) -> dict:
    """A row-major global tile spec (a mapping, as a YAML file holds it)."""
    return {"kind": "global", "order": [1, 0], "alignment": alignment, "shape": list(shape)}


def plan(src, dst, dtype, target="cuda", arch=None):
    return api.plan_conversion(src, dst, dtype=dtype, target=target, arch=arch)


def vectors(p) -> list[int]:
    return [global_access(q).vector_bytes for q in (p, *p.paths)]


def test_paths_widest_first_down_to_the_promise():
    assert not plan(ACC, glob((128, 128), 16), "f32", arch="sm_80").paths        # promise 16: as before
    p = plan(ACC, glob((128, 128), 4), "f32", arch="sm_80")
    assert vectors(p) == sorted(set(vectors(p)), reverse=True) and vectors(p)[0] == 8 and vectors(p)[-1] == 4
    assert p.paths[-1].memory.alignment == 4 and p.memory.alignment >= 8
    c = plan(glob((64, 64), 2), NVMMA, "f16", arch="sm_80")                       # a copy: 16, 8, 4, 2 bytes
    assert vectors(c) == [16, 8, 4, 2] and c.paths[-1].load.alignment == 2
    # strides the caller fixes rule alignments out: 999 elements of 4 bytes allow 4 only
    s = api.plan_conversion(ACC, glob((128, 128), 4), dtype="f32", arch="sm_80", strides=(999, 1))
    assert not s.paths and s.memory.vector_bytes == 4


def test_harness_variants_steer_each_path():
    p = plan(ACC, glob((128, 128), 2), "f16", arch="sm_80")
    assert len(p.paths) >= 2
    for q in (p, *p.paths):
        v = q.memory.vector_bytes
        variant = "" if q is p else f"_a{v}"
        assert variant in harness_variants(p) and variant + "_masked" in harness_variants(p)
        strides, offset = harness_tile(p, variant)
        align = offset * p.elem_bytes | strides[0] * p.elem_bytes | 64
        assert align & -align >= v, variant                         # this path's vectors are allowed
        narrower = [w for w in vectors(p) if w > v]
        assert all((align & -align) < w for w in narrower), variant   # and no wider path's


@pytest.mark.compile
@pytest.mark.parametrize("case", ["store_f32", "store_f16", "store_i8", "load_f16", "copy_f16", "hip_store_i8",
                                  "hip_load_f16"])
def test_every_path_emulated_and_host_run(case):
    p = {"store_f32": lambda: plan(ACC, glob((128, 128), 4), "f32", arch="sm_80"),
         "store_f16": lambda: plan(ACC, glob((128, 128), 2), "f16", arch="sm_80"),
         "store_i8": lambda: plan(BLOCKED, glob((64, 64), 1), "i8"),
         "load_f16": lambda: plan(glob((64, 64), 2), BLOCKED, "f16"),
         "copy_f16": lambda: plan(glob((64, 64), 2), NVMMA, "f16", arch="sm_80"),
         "hip_store_i8": lambda: plan(WAVE64, glob((64, 64), 1), "i8", "hip", "gfx942"),
         "hip_load_f16": lambda: plan(glob((64, 64), 2), WAVE64, "f16", "hip", "gfx90a")}[case]()
    assert p.paths, case
    check(p, 0)
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    [r] = host.verify_host([(f"rta_{case}", p)])
    assert r.ok, r.message


@pytest.mark.compile
def test_a_dispatch_too_wide_is_caught(tmp_path):
    """Mutation: the header's dispatch always takes the widest path -- the misaligned harness
    variants then make misaligned vector accesses, which the host runtime reports."""
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    p = plan(ACC, glob((128, 128), 4), "f32", arch="sm_80")
    host.write_sources(str(tmp_path), [("rta_mut", p)])
    path = tmp_path / "rta_mut.cuh"
    text = path.read_text()
    assert re.search(r"if \(align % 8 == 0\) a8::store", text)
    path.write_text(re.sub(r"if \(align % 8 == 0\) (a8::store\w*\([^;]*;)\s*else [^;]*;", r"\1", text))
    [r] = host.verify_host([("rta_mut", p)], sources=str(tmp_path))
    assert not r.ok and "align" in r.message.lower(), r.message


def test_one_signature_whatever_the_paths():
    """store()/store_masked() of a plan with paths read like those of one without."""
    heads = [api.plan_render(plan(ACC, glob((128, 128), a), "f32", arch="sm_80"), "header", "x") for a in (16, 4)]
    for fn in ("store", "store_masked"):
        pat = re.compile(rf"__device__ __forceinline__ void {fn}\(([^)]*)\)", re.S)
        a, b = (re.sub(r"\s+", " ", pat.findall(h)[-1]) for h in heads)
        assert a == b, (a, b)
    assert "constexpr int kSmemBytes = 0;" in heads[0]


#: a driver prelude counting the global accesses a launch issues by width (the instruction
#: wrappers' host branches call llgen_host::st_global / ld_global / cp_async: the macros send
#: them through counters first); each launch's counts go to stderr as
#: ``WIDTHS <run> <kind>:<bytes>:<count> ...``
_COUNTING = """namespace llgen_host {
inline unsigned long long g_widths[3][17];
inline void counted_st_global(char* p, unsigned n, uint32_t* const* w) { ++g_widths[0][n]; st_global(p, n, w); }
inline void counted_ld_global(const char* p, unsigned n, uint32_t* const* w) { ++g_widths[1][n]; ld_global(p, n, w); }
inline void counted_cp_async(unsigned a, const void* s, unsigned n, unsigned sn) { ++g_widths[2][n]; cp_async(a, s, n, sn); }
inline void print_widths(int run) {
    std::fprintf(stderr, "WIDTHS %d", run);
    for (int k = 0; k < 3; ++k)
        for (int n = 0; n < 17; ++n)
            if (g_widths[k][n]) std::fprintf(stderr, " %d:%d:%llu", k, n, g_widths[k][n]);
    std::fprintf(stderr, "\\n");
    std::memset(g_widths, 0, sizeof g_widths);
}
}
#define st_global counted_st_global
#define ld_global counted_ld_global
#define cp_async counted_cp_async
"""
_KINDS = ("st.global", "ld.global", "cp.async")


def issued_widths(cases, directory) -> dict[tuple[str, str], dict[tuple[str, int], int]]:
    """Run every harness variant of each ``(name, plan)`` on the host SIMT runtime (one driver):
    (name, variant) -> {(instruction, bytes): how many} of the global accesses its launch issued;
    an error the runtime reports fails."""
    import numpy as np
    from ll_codegen.operations import harness_of
    host.write_sources(directory, cases)
    launch, errors_loop = "        auto errors = llgen_host::launch(", "        for (auto& e : errors)"
    text = host.driver_source(cases)
    assert text.count(launch) == text.count(errors_loop) == 1
    text = _COUNTING + text.replace(launch, "        llgen_host::print_widths(-1);\n" + launch).replace(
        errors_loop, "        llgen_host::print_widths(i);\n" + errors_loop)
    exe, log = host.build(directory, cases, driver=text, opt="-O0")
    assert exe, log
    rng, runs, inputs = np.random.default_rng(0), [], []
    for name, p in cases:
        op = harness_of(p)
        for v in op.variants(p):
            runs.append((name, v))
            inputs += [np.ascontiguousarray(a).tobytes() for a in op.data(p, rng, v).args]
    code, stderr, errors, _ = host.run_driver(exe, inputs)
    assert code == 0 and not errors, (code, stderr[-500:], errors)
    out = {}
    for line in stderr.splitlines():
        if line.startswith("WIDTHS ") and not line.startswith("WIDTHS -1"):
            run, *counts = line.split()[1:]
            out[runs[int(run)]] = {(_KINDS[int(k)], int(n)): int(c) for k, n, c in (x.split(":") for x in counts)}
    assert len(out) == len(runs), stderr[-500:]
    return out


@pytest.mark.compile
def test_each_variant_takes_its_own_path(tmp_path):
    """The path a harness variant's dispatch takes, observed: the host runtime counts the global
    accesses each launch issues by width.  The aligned variant moves the whole tile in vectors of
    the widest path and each ``_a<v>`` variant (strides and pointer of exactly that alignment) in
    ``v``-byte vectors, the masked forms too (fewer of them) -- a dispatch reading the wrong
    strides, or always the narrowest path, keeps the results right and fails here."""
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    cases = [("rta_store_f32", plan(ACC, glob((128, 128), 4), "f32", arch="sm_80")),        # st.global 8, 4
             ("rta_copy_f16", plan(glob((64, 64), 2), NVMMA, "f16", arch="sm_80"))]         # cp.async 16, 8, 4; 2
    issued = issued_widths(cases, str(tmp_path))
    for name, p in cases:
        tile_bytes = p.elem_bytes
        for n in p.shape:
            tile_bytes *= n
        paths = {"": global_access(p).vector_bytes} | {f"_a{v}": v for v in vectors(p)[1:]}
        assert len(paths) >= 2
        for path, v in paths.items():
            whole = issued[name, path]
            masked = issued[name, path + "_masked"]
            assert {n for _, n in whole} == {n for _, n in masked} == {v}, (name, path, whole, masked)
            assert sum(whole.values()) * v == tile_bytes, (name, path, whole)
            assert 0 < sum(masked.values()) <= sum(whole.values()), (name, path, masked)
