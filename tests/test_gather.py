"""``llgen gather`` (the linear-layouts paper, §5.5): planner, emulator, rendered code, CLI.

* the numpy emulator runs every plan (warp 32 and 64, shuffle and smem) on
  random indices -- repeated values, 0, n - 1 and out-of-range ones (negative,
  n, the index type's extremes) -- and must equal ``np.take_along_axis`` with
  the index taken mod n, for every thread and register;
* the planner's predictions (warp-locality, candidates, store wavefronts)
  are checked against brute force;
* rendered harnesses run on the host SIMT runtime (CUDA and HIP wave64/32),
  and compile with nvcc / hipcc (``compile`` marker);
* CLI error rules: one ``llgen: error:`` line, exit 2, nothing written.
"""
import collections
import json
import random

import numpy as np
import pytest

from ll_codegen.core import f2
from ll_codegen.testing.corpus import GATHER_NAMED, random_gather_pair
from ll_codegen.verify.emulate.banks import count_wavefronts
from ll_codegen.verify.emulate.common import SmemError
from ll_codegen.verify.emulate.gather import check_gather, emulate_gather
from ll_codegen.verify.emulate.reference import gather_reference, gather_tensors, regs_of
from ll_codegen.plan.gather import plan_gather
from ll_codegen.spec import spec_from_dict
from ll_codegen.core.target import get_target

SEED = 20261125
CONFIGS = (("cuda", "sm_90", 32), ("hip", "gfx90a", 64), ("hip", "gfx1030", 32))
DTYPES = ("i8", "f16", "f32", "f64")
INDEX_DTYPES = ("i32", "u32", "i16", "u16", "i8", "u8")


def named_plans(strategies=("auto",)):
    out = []
    for c in GATHER_NAMED:
        src, idx = spec_from_dict(c.src).linear, spec_from_dict(c.idx).linear
        for dt in c.dtypes:
            for st in strategies:
                try:
                    p = plan_gather(src, idx, c.axis, dt, c.index_dtype, c.target, strategy=st)
                except ValueError:
                    continue
                out.append((f"{c.name}_{dt}_{st}", p))
    return out


def random_plans(n_per_config: int = 40, seed: int = SEED):
    rng = random.Random(seed)
    out = []
    for target, arch, lanes in CONFIGS:
        for i in range(n_per_config):
            src, idx, axis = random_gather_pair(rng, lanes, local=i % 2 == 0)
            dt, it = DTYPES[i % 4], INDEX_DTYPES[i % 6]
            for st in ("shuffle", "smem"):
                try:
                    out.append((f"r{len(out):03d}_{arch}_{st}_{dt}",
                                plan_gather(src, idx, axis, dt, it, target, arch, strategy=st)))
                except ValueError as e:
                    assert st == "shuffle" and "not warp-local" in str(e)
    return out


# ------------------------------------------------------------------ emulator
def test_emulator_matches_numpy_on_named_cases():
    plans = named_plans(("auto", "shuffle", "smem"))
    for name, p in plans:
        check_gather(p, rng=hash(name) % 1000, runs=2)
    strategies = collections.Counter((p.target, p.warp_size, p.strategy) for _, p in plans)
    for key in (("cuda", 32, "shuffle"), ("cuda", 32, "smem"), ("hip", 64, "shuffle"), ("hip", 64, "smem")):
        assert strategies[key] >= 2, strategies


def test_emulator_matches_numpy_on_random_pairs():
    plans = random_plans()
    for k, (name, p) in enumerate(plans):
        check_gather(p, rng=k, runs=1)
    kinds = collections.Counter((p.warp_size, p.strategy, p.elem_bytes) for _, p in plans)
    assert {w for w, _, _ in kinds} == {32, 64}
    assert sum(v for (w, s, _), v in kinds.items() if s == "shuffle") >= 40, kinds
    assert {len(p.src_shape) for _, p in plans} == {1, 2}


def test_indices_wrap_modulo_the_axis():
    """Out-of-range indices take index mod n: -1 -> n - 1, n -> 0, 2n + 1 -> 1 (also for narrow types)."""
    c = GATHER_NAMED[2]                                   # lanes_4x32_axis1: n = 32
    L = spec_from_dict(c.src).linear
    for it, vals in (("i32", [-1, 32, 65, -33, 2**31 - 1]), ("i8", [-1, -128, 127, 32]), ("u8", [255, 32, 200])):
        for st in ("shuffle", "smem"):
            p = plan_gather(L, L, 1, "f32", it, strategy=st)
            src = np.arange(4 * 32, dtype=np.uint32).reshape(4, 32)
            idx = np.resize(np.array(vals), (4, 32))
            got = emulate_gather(p, regs_of(L, src), regs_of(L, idx.astype(np.int64)))
            want = regs_of(L, np.take_along_axis(src, np.mod(idx, 32), axis=1))
            assert (got == want).all(), (it, st)
            assert (np.mod(idx, 32) == [[v % 32 for v in row] for row in idx]).all()


def test_emulator_catches_a_wrong_plan():
    """The check can fail: a plan with a wrong lane term or a dropped store is caught."""
    from dataclasses import replace
    c = GATHER_NAMED[0]
    L = spec_from_dict(c.src).linear
    p = plan_gather(L, L, 1, "f32", strategy="shuffle")
    s = p.shuffle
    bad = replace(p, shuffle=replace(s, v_lane=tuple(x ^ 1 for x in s.v_lane)))
    with pytest.raises(AssertionError):
        check_gather(bad)
    bad = replace(p, shuffle=replace(s, select_bits=tuple(reversed(s.select_bits))))
    with pytest.raises(AssertionError):
        check_gather(bad)
    q = plan_gather(L, L, 1, "f32", strategy="smem")
    with pytest.raises(SmemError):
        check_gather(replace(q, smem=replace(q.smem, stores=q.smem.stores[1:])))
    with pytest.raises(AssertionError):
        check_gather(replace(q, smem=replace(q.smem, v_offset=tuple(reversed(q.smem.v_offset)))))


# ------------------------------------------------------------------ planner facts
def _brute_warp_local(p) -> bool:
    """Every needed source element of every thread is held in its own warp (any value of the index):
    enumerate the elements, no linear algebra."""
    from ll_codegen.core.layout import layout_of
    src, idx = layout_of(p.src_bases), layout_of(p.idx_bases)
    held = src.apply_flat().reshape(p.num_warps, -1)               # elements of each warp (flat bit vectors)
    need = idx.apply_flat().reshape(p.num_warps, -1)               # index elements of each warp's threads
    i_bits = [n.bit_length() - 1 for n in p.idx_shape]
    s_bits = [n.bit_length() - 1 for n in p.src_shape]
    for w in range(p.num_warps):
        coords, shift = [], 0
        for b in i_bits:
            coords.append((need[w] >> shift) & ((1 << b) - 1))
            shift += b
        for v in range(p.axis_size):
            t, shift = np.zeros_like(need[w]), 0
            for d, b in enumerate(s_bits):
                t |= (v if d == p.axis else coords[d]) << shift
                shift += b
            if not np.isin(t, held[w]).all():
                return False
    return True


def test_shuffle_legal_exactly_when_warp_local():
    rng = random.Random(SEED + 1)
    seen = collections.Counter()
    for i in range(60):
        src, idx, axis = random_gather_pair(rng, 32, local=None, max_bits=2)
        try:
            p = plan_gather(src, idx, axis, "f32", strategy="shuffle")
            legal = True
        except ValueError:
            p, legal = plan_gather(src, idx, axis, "f32", strategy="smem"), False
        assert legal == _brute_warp_local(p), (i, legal)
        seen[legal] += 1
    assert seen[True] >= 10 and seen[False] >= 10, seen


def test_candidate_count_and_strategy_choice():
    """64x64 i32 blocked 1x4/8x4/4x1: along axis 1 there are 16 candidates per element (Triton's count);
    auto takes smem there, and shuffle when the axis lives in lanes (one candidate)."""
    c = GATHER_NAMED[0]
    L = spec_from_dict(c.src).linear
    p = plan_gather(L, L, 1, "i32", strategy="shuffle")
    assert {len(o.cands) for o in p.shuffle.outs} == {16} and p.shuffle.shuffles == 32 * 16
    assert plan_gather(L, L, 1, "i32").strategy == "smem"
    with pytest.raises(ValueError, match="not warp-local"):
        plan_gather(L, L, 0, "i32", strategy="shuffle")
    lanes = spec_from_dict(GATHER_NAMED[2].src).linear
    q = plan_gather(lanes, lanes, 1, "f32")
    assert q.strategy == "shuffle" and q.shuffle.shuffles == 1
    f16 = plan_gather(L, L, 1, "f16", strategy="shuffle")            # two candidates per 32-bit word
    assert f16.shuffle.shuffles == 32 * 8


def test_candidates_are_exactly_the_registers_needed():
    """The candidates of each output register are the source registers some lane needs for some index."""
    for name, p in named_plans(("shuffle",)) + random_plans(6, SEED + 2)[:12]:
        if p.shuffle is None:
            continue
        s = p.shuffle
        lanes, warps = np.arange(p.warp_size)[None, :], np.arange(p.num_warps)[:, None]
        from ll_codegen.verify.emulate.common import xor_form
        thread = xor_form(s.reg, lanes, warps)
        for o in s.outs:
            need = set()
            for v in range(p.axis_size):
                need |= set((o.reg ^ thread ^ f2.apply(s.v_reg, v)).ravel().tolist())
            assert need == set(o.cands), name


def test_store_wavefronts_match_the_bank_counter():
    for name, p in named_plans(("smem",)) + [x for x in random_plans(6, SEED + 3) if x[1].smem]:
        m = p.smem
        t = get_target(p.target, p.arch)
        lanes = np.arange(p.warp_size)
        for w in range(p.num_warps):
            if w & m.warp_skip:
                continue
            for acc in m.stores:
                a = np.array([m.store_base(int(l), w) ^ acc.offset if not l & m.lane_skip else -1 for l in lanes])
                assert count_wavefronts(a, m.vector_bytes, t) == m.store.wavefronts, name
        assert m.store.bank_conflicts == 0, name


def test_reference_is_take_along_axis():
    """gather_reference is numpy's gather (no layout magic): a 1-D identity layout reads back the tensor."""
    from ll_codegen.core.layout import LinearLayout
    L = LinearLayout.from_flat({"register": [], "lane": [1, 2, 4, 8, 16], "warp": [], "block": []}, {"dim0": 32})
    src = np.arange(100, 132, dtype=np.uint32)
    idx = np.array([(5 * i) % 37 - 3 for i in range(32)])
    got = gather_reference(L, L, 0, src, idx)
    assert got[0, :, 0].tolist() == [100 + (x % 32) for x in idx]


def test_layouts_must_cover_their_tensors():
    from ll_codegen.core.layout import LinearLayout
    full = LinearLayout.from_flat({"register": [], "lane": [1, 2, 4, 8, 16], "warp": [], "block": []}, {"dim0": 32})
    holey = LinearLayout.from_flat({"register": [], "lane": [1, 2, 4, 8, 0], "warp": [], "block": []}, {"dim0": 32},
                                   require_surjective=False)
    with pytest.raises(ValueError, match="the index layout does not cover"):
        plan_gather(full, holey, 0, "f32")
    with pytest.raises(ValueError, match="the source layout does not cover"):
        plan_gather(holey, full, 0, "f32")


def test_plan_json_has_the_contract_keys():
    p = named_plans()[0][1]
    d = json.loads(p.to_json())
    assert {"strategy", "shuffle", "smem", "candidates", "axis", "axis_size"} <= set(d)
    assert (d["shuffle"] is None) != (d["smem"] is None)


def test_tensors_include_extreme_and_repeated_indices():
    p = plan_gather(spec_from_dict(GATHER_NAMED[0].src).linear, spec_from_dict(GATHER_NAMED[0].src).linear, 1,
                    "f32", "i8")
    _, idx = gather_tensors(p, np.random.default_rng(0))
    assert idx.min() == -128 and idx.max() == 127 and (idx >= 64).any() and (idx < 0).any()
    assert np.bincount(idx.ravel() + 128).max() > 100


# ------------------------------------------------------------------ rendered code
def _host_items():
    """Named cases (both strategies where legal) and a seeded random sample, all targets."""
    items = [x for x in named_plans(("shuffle", "smem")) if x[0].split("_")[-2] in ("f32", "f16", "f64")][::2]
    items += random_plans()[::14]
    return items


@pytest.mark.compile
def test_rendered_harnesses_bit_exact_on_host():
    from ll_codegen.run import host
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    items = _host_items()
    results = host.verify_host(items, seed=SEED, runs=2)
    bad = [r.message for r in results if not r.ok]
    assert not bad, f"{len(bad)} of {len(items)} failed; first: {bad[0]}"
    kinds = collections.Counter((p.target, p.warp_size, p.strategy) for _, p in items)
    assert all(kinds[(t, w, s)] for t, w in (("cuda", 32), ("hip", 64), ("hip", 32)) for s in ("shuffle", "smem")), kinds


@pytest.mark.compile
def test_host_run_catches_wrong_code_and_traps_under_check():
    """A corrupted plan renders code the host run rejects; LLGEN_GATHER_CHECK traps on out-of-range indices."""
    from dataclasses import replace
    from ll_codegen.run import host
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    L = spec_from_dict(GATHER_NAMED[0].src).linear
    good = plan_gather(L, L, 1, "f32", strategy="shuffle")
    bad = replace(good, shuffle=replace(good.shuffle, v_lane=tuple(x ^ 1 for x in good.shuffle.v_lane)))
    smem = plan_gather(L, L, 1, "f32", strategy="smem")
    bad_smem = replace(smem, smem=replace(smem.smem, load_offsets=smem.smem.load_offsets[::-1]))
    res = host.verify_host([("good", good), ("bad", bad), ("bad_smem", bad_smem)], seed=3)
    assert [r.ok for r in res] == [True, False, False], [r.message[:200] for r in res]
    trapped = host.verify_host([("chk", smem)], seed=3, defines=["LLGEN_GATHER_CHECK"])
    assert not trapped[0].ok and "exited" in trapped[0].message


def _compile_items():
    return [x for x in named_plans(("shuffle", "smem"))][::4] + random_plans()[1::24]


@pytest.mark.compile
@pytest.mark.parametrize("tool", ["cuda", "hip"])
def test_headers_compile(tmp_path, tool):
    """Every header + harness compiles without warnings: nvcc sm_90, and sm_80 with
    LLGEN_GATHER_CHECK; hipcc gfx90a (wave64) and gfx1030 (wave32)."""
    from toolchain import HIP_ENV, failures, need, run_all
    from ll_codegen.operations import render_files
    exe = need("nvcc" if tool == "cuda" else "hipcc")
    items = [(n, p) for n, p in _compile_items() if p.target == tool]
    assert len(items) >= 5
    tus = collections.defaultdict(list)
    for name, p in items:
        for fname, text in render_files(p, name).items():
            (tmp_path / fname).write_text(text)
        tus[p.arch if tool == "hip" else "all"].append(fname)
    jobs = []
    for key, files in tus.items():
        tu = tmp_path / f"tu_{key}.{'cu' if tool == 'cuda' else 'hip'}"
        tu.write_text("".join(f'#include "{f}"\n' for f in files))
        if tool == "cuda":
            jobs.append(("sm_90", [exe, "-std=c++17", "-arch=sm_90", "-cubin", str(tu), "-o", str(tu) + ".cubin"]))
            jobs.append(("sm_80 check", [exe, "-std=c++17", "-arch=sm_80", "-DLLGEN_GATHER_CHECK", "-cubin", str(tu),
                                         "-o", str(tu) + ".chk.cubin"]))
        else:
            arch = {"gfx1030": "gfx1030"}.get(key, "gfx90a")
            jobs.append((key, [exe, f"--offload-arch={arch}", "--genco", str(tu), "-o", str(tu) + ".co"]))
    bad = failures(run_all(jobs, str(tmp_path), HIP_ENV if tool == "hip" else None))
    assert not bad, bad[0][:3000]


@pytest.mark.compile
def test_ptx_shuffle_count_matches_the_plan(tmp_path):
    """The PTX of a shuffle gather has exactly the planned shfl.sync count; an smem gather none."""
    from toolchain import need, run
    from ll_codegen.operations import render_files
    nvcc = need("nvcc")
    L = spec_from_dict(GATHER_NAMED[0].src).linear
    lanes = spec_from_dict(GATHER_NAMED[3].src).linear
    for name, p in (("a", plan_gather(L, L, 1, "f32", strategy="shuffle")),
                    ("b", plan_gather(L, L, 1, "f16", strategy="shuffle")),
                    ("c", plan_gather(lanes, lanes, 1, "f64", strategy="shuffle")),
                    ("d", plan_gather(L, L, 1, "f32", strategy="smem"))):
        for fname, text in render_files(p, name).items():
            (tmp_path / fname).write_text(text)
        rc, out = run([nvcc, "-std=c++17", "-arch=sm_90", "-ptx", f"{name}_harness.cu", "-o", f"{name}.ptx"],
                      str(tmp_path))
        assert rc == 0, out
        ptx = (tmp_path / f"{name}.ptx").read_text()
        want = p.shuffle.shuffles if p.shuffle else 0
        assert ptx.count("shfl.sync.idx") == want, (name, ptx.count("shfl.sync.idx"), want)


# ------------------------------------------------------------------ CLI
def _cli(*args, cwd=None):
    import subprocess
    import sys
    import os
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.run([sys.executable, os.path.join(root, "cli.py"), "gather", *args], capture_output=True,
                          text=True, cwd=cwd, env=dict(os.environ, PYTHONPATH=root))


def _spec(path, d):
    import yaml
    path.write_text(yaml.safe_dump(d))
    return str(path)


def test_cli_writes_files_and_prints_plans(tmp_path):
    c = GATHER_NAMED[0]
    src = _spec(tmp_path / "src.yaml", c.src)
    r = _cli("--src", src, "--index", src, "--axis", "1", "--dtype", "i32", "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    paths = r.stdout.split()
    assert [p.rsplit("/", 1)[1] for p in paths] == ["src_gather1.cuh", "src_gather1_harness.cu"]
    text = (tmp_path / "out" / "src_gather1.cuh").read_text()
    assert "gather(const T (&src)[kSrcRegs], const I (&idx)[kIdxRegs], T (&out)[kIdxRegs]" in text
    assert "llgen gather --src" in text and "LLGEN_GATHER_CHECK" in text
    _cli("--src", src, "--index", src, "--axis", "1", "--dtype", "i32", "-o", str(tmp_path / "out2"))
    assert (tmp_path / "out2" / "src_gather1.cuh").read_text() == text            # byte-identical
    j = json.loads(_cli("--src", src, "--index", src, "--axis", "1", "--dtype", "i32", "--plan", "--json").stdout)
    assert j["strategy"] == "smem" and j["shuffle"] is None and j["smem"]["bytes"] == 64 * 64 * 4
    j = json.loads(_cli("--src", src, "--index", src, "--axis", "1", "--strategy", "shuffle", "--plan",
                        "--json").stdout)
    assert j["strategy"] == "shuffle" and j["smem"] is None and len(j["shuffle"]["outs"]) == 32
    t = _cli("--src", src, "--index", src, "--axis", "1", "--plan").stdout
    assert t.startswith("gather along axis 1: smem") and "shuffle" in t
    h = _cli("--src", _spec(tmp_path / "w64.yaml", GATHER_NAMED[-2].src), "--index", str(tmp_path / "w64.yaml"),
             "--axis", "1", "--target", "hip", "--name", "g64", "-o", str(tmp_path / "hip"))
    assert h.returncode == 0 and h.stdout.split()[0].endswith("g64.h"), h.stderr


@pytest.mark.parametrize("args, message", [
    (["--axis", "2"], "axis 2 is out of range for rank 2"),
    (["--axis", "-1"], "axis -1 is out of range"),
    (["--axis", "0", "--strategy", "shuffle"], "not warp-local"),
    ([], "missing option --axis"),
    (["--axis", "0", "--json"], "--json needs --plan"),
    (["--axis", "0", "--name", "gather"], "--name 'gather'"),
    (["--axis", "0", "--name", "index"], "--name 'index'"),
    (["--axis", "0", "--target", "hip"], "has warp size 64"),
    (["--axis", "0", "--index-dtype", "i64"], "'i64' is not one of"),
    (["--axis", "0", "--index", "other.yaml"], "shapes differ off the axis"),
    (["--axis", "1", "--index", "warps.yaml"], "warp counts differ"),
    (["--axis", "0", "--index", "missing.yaml"], "missing.yaml"),
    (["--axis", "0", "--emit", "bench", "--target", "hip", "--arch", "gfx1030"], "CUDA only"),
])
def test_cli_errors_are_one_line_and_write_nothing(tmp_path, args, message):
    from ll_codegen.testing.corpus import blocked
    src = _spec(tmp_path / "src.yaml", GATHER_NAMED[0].src)
    _spec(tmp_path / "other.yaml", blocked([1, 4], [8, 4], [4, 1], [1, 0], [64, 32]))
    _spec(tmp_path / "warps.yaml", blocked([1, 4], [8, 4], [2, 1], [1, 0], [64, 64]))
    if "--index" not in args:
        args = ["--index", src] + args
    r = _cli("--src", src, *args, "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("llgen: error:") and message in r.stderr, r.stderr
    assert not (tmp_path / "out").exists() and r.stdout == ""


@pytest.mark.compile
def test_bench_kernel_writes_the_expected_output(tmp_path):
    """The bench kernel (one CTA here) writes llgen_bench.gather.bench_expected after 1 and 4 iterations, for a
    shuffle and an smem plan; so the GPU bench's output check checks the right thing."""
    import subprocess
    from ll_codegen.run import host
    from llgen_bench.gather import bench_expected, bench_inputs
    from ll_codegen.core.dtypes import C_RAW
    from ll_codegen.operations import render_files
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    L = spec_from_dict(GATHER_NAMED[0].src).linear
    lanes = spec_from_dict(GATHER_NAMED[3].src).linear
    for name, p in (("bs", plan_gather(L, L, 1, "f16", strategy="smem")),
                    ("bh", plan_gather(lanes, lanes, 1, "f32", strategy="shuffle"))):
        for f, t in render_files(p, name, ("header", "bench")).items():
            (tmp_path / f).write_text(t)
        src, idx = bench_inputs(p, 1, seed=3)
        raw, ns, ni = C_RAW[p.elem_bytes], src.size, idx.size
        drv = tmp_path / f"{name}.cpp"
        drv.write_text(f'''#include "{name}_bench.cu"
#include <cstdio>
#include <vector>
__attribute__((aligned(16))) unsigned char smem[{max(16, p.smem_bytes)}];
int main(int argc, char** argv) {{
    std::vector<{raw}> in({ns}), out({ni});
    std::vector<int32_t> index({ni});
    FILE* f = std::fopen(argv[1], "rb");
    if (!f || std::fread(in.data(), sizeof({raw}), {ns}, f) != {ns} || std::fread(index.data(), 4, {ni}, f) != {ni})
        return 3;
    FILE* o = std::fopen(argv[2], "wb");
    for (int iters : {{1, 4}}) {{
        auto errors = llgen_host::launch({p.threads}, {p.warp_size}, smem, {p.smem_bytes},
                                         [&] {{ {name}_bench(in.data(), index.data(), out.data(), iters); }});
        for (auto& e : errors) std::printf("ERR %s\\n", e.c_str());
        std::fwrite(out.data(), sizeof({raw}), {ni}, o);
    }}
    std::fclose(o);
    return 0;
}}
''')
        exe = tmp_path / name
        r = subprocess.run([host.compiler(), *host.flags(), *host.runtime_include(host.compiler(), host.flags()),
                            "-I", str(tmp_path), str(drv), "-o", str(exe)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
        (tmp_path / "in.bin").write_bytes(src.tobytes() + idx.astype(np.int32).tobytes())
        r = subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0 and "ERR" not in r.stdout, r.stdout[-2000:]
        outs = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=src.dtype).reshape(2, *p.idx_shape)
        for got, iters in zip(outs, (1, 4)):
            want = bench_expected(p, src, idx, iters)[0]
            assert np.array_equal(got, want), (name, iters, int((got != want).sum()))
        assert not np.array_equal(bench_expected(p, src, idx, 1), bench_expected(p, src, idx, 4))
