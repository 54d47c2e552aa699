"""Every rendered line executed on the CPU: generated headers and
harnesses compiled for the host unchanged and run on the host SIMT runtime
(``ll_codegen/simt/simt_host.h``), compared bit for bit with numpy.

* every harness of ``generated/``, as it is on disk (the bench files are only compiled:
  ``test_compile_generated.py``);
* a stratified sample of CUDA (sm_80, sm_90) and HIP (gfx90a, gfx940 wave64; gfx1030
  wave32) plans (``strata.py``): at least ``strata.QUOTA`` plans for every strategy
  and access form -- register permutations of 8/16/32/64-bit elements, shuffles in xor and
  index form with select trees and swap stages, shared-memory accesses of every width,
  ldmatrix/stmatrix and their .trans, several rounds, per-warp scratch, two buffers, stores
  and loads of every memory kind (global tiles with their masked forms), copies, gathers by
  shuffles and by shared memory -- plus the named corpus; the numpy emulator must agree on
  each sampled plan too.

Needs clang++ (it comes with Debian's hipcc); skipped without it unless
``LLGEN_REQUIRE_TOOLCHAINS=1``.
"""
import collections
import os

import pytest

from ll_codegen.run import host
from ll_codegen.api import plan_conversion
from ll_codegen.testing.corpus import NAMED
from ll_codegen.spec import spec_from_dict
from ll_codegen.core.layout import layout_of
from ll_codegen.operations import check
import strata

pytestmark = pytest.mark.compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 20261123
QUOTA = strata.quota_from_env("host", strata.QUOTA)      # LLGEN_HOST_QUOTA

if host.compiler() is None:
    if os.environ.get("LLGEN_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail("LLGEN_REQUIRE_TOOLCHAINS=1 but no clang++ for the host SIMT runtime", pytrace=False)
    pytest.skip("no clang++ for the host SIMT runtime (apt-get install clang)", allow_module_level=True)


def stratified():
    return strata.sample(SEED, quota=QUOTA)


def sample() -> list[tuple[str, object]]:
    items = [(name, plan) for name, plan, _ in stratified()]
    # the named corpus (register, noop, ldmatrix/stmatrix pairs), wave32 ones on RDNA too
    for pair in NAMED:
        src, dst = spec_from_dict(dict(pair.src)).linear, spec_from_dict(dict(pair.dst)).linear
        archs = (("cuda", "sm_80"), ("cuda", "sm_90"), ("hip", "gfx1030")) if pair.target == "cuda" \
            else (("hip", "gfx90a"),)
        for dtype in pair.dtypes:
            for target, arch in archs:
                items.append((f"h{len(items):03d}_{pair.name}_{arch}_{dtype}".replace("-", "_"),
                               plan_conversion(src, dst, dtype, target, arch)))
    return items


@pytest.fixture(scope="module")
def sampled():
    items = sample()
    # -O0 (tests/conftest.py): a quarter of -O1's compile time for the same runs; generated/ (below)
    # builds a harness of every operation and target at -O1 too, so optimised builds of the templates are checked
    return items, host.verify_host(items, seed=SEED)


def test_stratified_minimums():
    """Coverage by construction: every strategy x access form of both targets has at least
    ``strata.QUOTA`` plans in the host-run (and emulator) sample, whatever the sampler draws."""
    items = stratified()
    assert QUOTA >= strata.QUOTA or os.environ.get("LLGEN_HOST_QUOTA"), "the quota may only be lowered on purpose"
    short = strata.shortfall(items, QUOTA)
    assert not short, f"labels below {QUOTA} plans: {short}"
    assert {p.operation for _, p, _ in items} == {"convert", "store", "load", "copy", "gather"}


def test_labels_read_the_plan():
    """A plan's labels are read off the plan itself (a memory tile's kind, which plans do not
    record, aside), so a recipe that stops producing its form cannot count towards it."""
    for _, p, mine in stratified():
        if p.operation not in ("store", "load"):
            assert mine == strata.labels(p)
        if "cuda:smem:stmatrix.trans" in mine:
            assert p.smem.store_instr == "matrix.trans"


def test_sample_covers_targets_and_strategies(sampled):
    items, _ = sampled
    per_target = collections.Counter(p.target for _, p in items)
    assert per_target["cuda"] >= 15 * QUOTA and per_target["hip"] >= 15 * QUOTA, per_target
    kinds = {(p.target, p.strategy, p.elem_bytes) for _, p in items if p.operation == "convert"}
    for target in ("cuda", "hip"):
        for strategy in ("register", "shuffle", "smem"):
            assert any(k[:2] == (target, strategy) for k in kinds), (target, strategy)
        assert {k[2] for k in kinds if k[0] == target} == {1, 2, 4, 8}
    assert {p.warp_size for _, p in items if p.target == "hip"} == {32, 64}
    # lane-dependent shuffle registers in every form: select trees, swap stages, fused (byte permutes)
    forms = {(p.target, "fused" if p.shuffle.send_fused or p.shuffle.recv_fused else
              bool(p.shuffle.send_swaps or p.shuffle.recv_swaps)) for _, p in items
             if getattr(p, "shuffle", None) is not None and p.operation == "convert"
             and (p.shuffle.send_select.size > 1 or p.shuffle.recv_select.size > 1)}
    assert forms == {(t, f) for t in ("cuda", "hip") for f in (False, True, "fused")}, forms


def test_sample_bit_exact_on_host(sampled):
    items, results = sampled
    bad = [r.message for r in results if not r.ok]
    assert not bad, f"{len(bad)} of {len(items)} failed; first: {bad[0]}"


def test_emulator_agrees_with_host(sampled):
    """The plan data (emulator) and the rendered code (host run) both match numpy."""
    items, results = sampled
    for (name, plan), r in zip(items, results):
        assert r.ok
        check(plan, 1)


def test_generated_files_run_unchanged(manifest_build):
    entries = manifest_build[0]
    items = []                    # conversions, gathers, TMA, mma; a chain's steps, each with its harness
    for e in entries:
        if e.command != "chain":
            items.append((e.params["name"], e.conv.plan))
            continue
        for k, plan in enumerate(e.conv.plan.plans):
            harness = [f for f in e.conv.files if f.startswith(f"{e.params['name']}_{k}_") and f.endswith("_harness.cu")]
            assert len(harness) == 1, (e.params["name"], k, sorted(e.conv.files))
            items.append((harness[0].removesuffix("_harness.cu"), plan))
    results = host.verify_host(items, runs=2, seed=7, sources=os.path.join(ROOT, "generated"))
    bad = [r.message for r in results if not r.ok]
    assert not bad, bad
    # optimised builds: the first harness of every (operation, target) again at -O1
    firsts = {}
    for name, plan in items:
        firsts.setdefault((plan.operation, plan.target), (name, plan))
    optimised = host.verify_host(list(firsts.values()), seed=8, sources=os.path.join(ROOT, "generated"), opt="-O1")
    assert all(r.ok for r in optimised) and len(optimised) >= 10, [r.message for r in optimised if not r.ok]
    assert len(results) == len(items) >= max(19, len(entries)) and {p.operation for _, p in items} >= {"gather", "tma", "mma"}


def test_verify_cli_uses_the_host_runtime():
    """``llgen verify`` runs HIP rows (no AMD GPU here) and, with --host, CUDA rows on the host runtime."""
    import subprocess
    import sys
    specs = os.path.join(ROOT, "examples", "specs")
    for extra, want in ((["--src", f"{specs}/mfma_32x32_2x2_64x64.yaml", "--dst", f"{specs}/blocked_wave64_64x64.yaml",
                          "--target", "hip"], "ok (bit-exact, host SIMT wave64)"),
                        (["--src", f"{specs}/blocked_row_64x64.yaml", "--dst", f"{specs}/blocked_col_64x64.yaml",
                          "--host"], "ok (bit-exact, host SIMT wave32)")):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "cli.py"), "verify", "--dtype", "f16,i8", *extra],
                           capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.count(want) == 2, r.stdout


def test_index_helpers_match_the_layouts(tmp_path):
    """src_index/dst_index of generated headers, called in host code, equal the layouts' row-major indices."""
    import subprocess
    from ll_codegen.verify.emulate.reference import row_major_index
    from ll_codegen.emit.render import file_names
    from ll_codegen.operations import render
    # one translation unit: CUDA headers first (a HIP header poisons CUDA-only names such as __syncwarp)
    conversions = [(n, p) for n, p in sample() if p.operation == "convert"]
    items = sorted(conversions[::len(conversions) // 10], key=lambda t: t[1].target == "hip")
    lines = []
    for name, plan in items:
        (tmp_path / file_names(plan.target, name)["header"]).write_text(render(plan, "header", name))
        lines.append(f'#include "{file_names(plan.target, name)["header"]}"')
    lines.append("int main() {")
    for name, plan in items:
        for fn, n in (("src_index", plan.n_src), ("dst_index", plan.n_dst)):
            lines.append(f"  for (int w = 0; w < {plan.num_warps}; ++w) for (int l = 0; l < {plan.warp_size}; ++l) "
                         f"for (int r = 0; r < {n}; ++r) std::printf(\"%d\\n\", {name}::{fn}(r, l, w));")
    lines.append("}")
    (tmp_path / "idx.cpp").write_text("\n".join(lines))
    exe = str(tmp_path / "idx")
    r = subprocess.run([host.compiler(), *host.flags(), *host.runtime_include(host.compiler(), host.flags()),
                        str(tmp_path / "idx.cpp"), "-o", exe], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    got = [int(x) for x in subprocess.run([exe], capture_output=True, text=True).stdout.split()]
    want = []
    for _, plan in items:
        for bases, n in ((plan.src_bases, plan.n_src), (plan.dst_bases, plan.n_dst)):
            # row_major_index lists hardware points register fastest, then lane, then warp
            want += [int(x) for x in row_major_index(layout_of(bases))]
    assert len(items) >= 8 and got == want


@pytest.mark.parametrize("body", ["__shared__ int s[4]; s[0] = 1; o[0] = s[0];",   # static shared: not modelled
                                  'asm volatile("membar.gl;"); o[0] = 0;',          # inline PTX
                                  "o[0] = __ldg(o);"])                                # an unknown intrinsic
def test_runtime_refuses_unmodelled_constructs(tmp_path, body):
    import subprocess
    src = tmp_path / "k.cu"
    src.write_text("#include <cuda_runtime.h>\n__global__ void k(int* o) { " + body + " }\n")
    r = subprocess.run([host.compiler(), *host.flags(), "-I", host.SIMT_DIR, "-include", "simt_host.h", "-c",
                        str(src), "-o", str(tmp_path / "k.o")], capture_output=True, text=True)
    assert r.returncode != 0 and "error" in r.stderr
