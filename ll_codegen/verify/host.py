"""Run generated harnesses on the CPU through the host SIMT runtime (issue 11).

The header and harness that ``llgen convert`` writes are compiled for the host
*unchanged* -- ``clang++ -std=c++17 -x c++ -I ll_codegen/simt -include
simt_host.h`` -- together with a small driver, and every harness runs one block
of fibers (``simt/simt_host.h``): shuffles with NVIDIA or AMD semantics,
barriers, shared memory through the headers' named target-instruction
wrappers, with race, uninitialised-read and bounds checks.  The check is the
one ``gpu.py`` makes on a GPU: fresh random bits in, complement-poisoned
outputs, the output tensor and every thread's destination registers compared
with the numpy reference bit for bit.

Many harnesses share one driver (one compile); batches compile in parallel.
Needs clang++ (HIP headers use clang's vector extensions); ``compiler()`` says
which one is used.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from ll_codegen.verify.gpu import RAW, RunResult, compare, random_data
from ll_codegen.plan.model import ConversionPlan, harness_variants
from ll_codegen.emit.render import RAW_TYPES, file_names, render

SIMT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "simt")
FLAGS = ("-std=c++17", "-x", "c++", "-O1", "-w")


def compiler() -> str | None:
    """A clang++ on this machine (``LLGEN_HOST_CXX`` overrides), or None."""
    env = os.environ.get("LLGEN_HOST_CXX")
    if env:
        return env
    for c in ("clang++", "clang++-15", "clang++-16", "clang++-14", "/usr/lib/llvm-15/bin/clang++"):
        path = shutil.which(c)
        if path:
            return path
    return None


def driver_source(cases: Sequence[tuple[str, ConversionPlan]]) -> str:
    """C++ driver: includes each ``<name>_harness`` and runs them in order.

    ``driver IN OUT``: IN holds, per case, the input tensor, then the poisoned
    output tensor and destination registers; OUT gets, per case, the output
    tensor and registers after the run.  Errors the runtime reports are
    printed as ``ERR <case> <message>`` lines."""
    lines = []
    for name, plan in cases:
        lines.append(f'#include "{file_names(plan.target, name)["harness"]}"')
    smem = max([p.smem_bytes for _, p in cases] + [16])
    lines += [f"__attribute__((aligned(16))) unsigned char smem[{smem}];", "",
              "struct Case { int threads, warp, smem; size_t in_bytes, regs_bytes, scratch_bytes; "
              "void (*run)(const void*, void*, void*, void*); };", ""]
    runs = []
    for name, plan in cases:
        raw = RAW_TYPES[plan.elem_bytes]
        for v in harness_variants(plan):
            k = len(runs)
            lines.append(f"static void run_{k}(const void* a, void* b, void* c, void* d) {{ {name}_harness{v}("
                         f"static_cast<const {raw}*>(a), static_cast<{raw}*>(b), static_cast<{raw}*>(c), "
                         f"static_cast<{raw}*>(d)); }}")
            n = int(np.prod(plan.shape))
            runs.append(f"    {{{plan.threads}, {plan.warp_size}, {plan.smem_bytes}, {n * plan.elem_bytes}, "
                        f"{plan.threads * plan.n_dst * plan.elem_bytes}, {max(16, plan.scratch_bytes)}, run_{k}}},")
    lines.append("static const Case kCases[] = {")
    lines += runs
    lines += ["};", "", """int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* in = std::fopen(argv[1], "rb");
    FILE* out = std::fopen(argv[2], "wb");
    if (!in || !out) return 2;
    int i = 0;
    for (const Case& c : kCases) {
        std::vector<unsigned char> a(c.in_bytes), b(c.in_bytes), r(c.regs_bytes);
        std::vector<unsigned char> scratch(c.scratch_bytes + 16);  // a global tile, 16-byte aligned
        unsigned char* sc = scratch.data() + (16 - reinterpret_cast<uintptr_t>(scratch.data()) % 16) % 16;
        if (std::fread(a.data(), 1, a.size(), in) != a.size() || std::fread(b.data(), 1, b.size(), in) != b.size() ||
            std::fread(r.data(), 1, r.size(), in) != r.size()) return 3;
        for (size_t k = 0; k < sizeof smem; ++k) smem[k] = static_cast<unsigned char>(0xa5 ^ k);
        auto errors = llgen_host::launch(c.threads, c.warp, smem, size_t(c.smem),
                                         [&] { c.run(a.data(), b.data(), r.data(), sc); });
        for (auto& e : errors) std::printf("ERR %d %s\\n", i, e.c_str());
        std::fwrite(b.data(), 1, b.size(), out);
        std::fwrite(r.data(), 1, r.size(), out);
        ++i;
    }
    std::fclose(out);
    return 0;
}
"""]
    return "\n".join(lines)


def write_sources(directory: str, cases: Sequence[tuple[str, ConversionPlan]]) -> None:
    """Render each case's header and harness into ``directory``."""
    for name, plan in cases:
        names = file_names(plan.target, name)
        for kind in ("header", "harness"):
            with open(os.path.join(directory, names[kind]), "w", encoding="utf-8") as fh:
                fh.write(render(plan, kind, name))


def build(directory: str, cases: Sequence[tuple[str, ConversionPlan]], exe: str = "driver",
          sources: str | None = None, driver: str | None = None,
          defines: Sequence[str] = ()) -> tuple[str | None, str]:
    """Compile the driver of ``cases`` (``driver``: its source text, default
    ``driver_source(cases)``) into ``directory``; the harnesses and headers are
    in ``sources`` (default: ``directory``); ``defines``: extra macros.
    (path or None, log)."""
    cxx = compiler()
    if cxx is None:
        return None, "no clang++ found (install clang, or Debian's hipcc which brings it)"
    src = os.path.join(directory, exe + ".cpp")
    with open(src, "w", encoding="utf-8") as fh:
        fh.write(driver if driver is not None else driver_source(cases))
    path = os.path.join(directory, exe)
    proc = subprocess.run([cxx, *FLAGS, *[f"-D{d}" for d in defines], "-I", SIMT_DIR, "-I", sources or directory,
                           "-include", "simt_host.h", src, "-o", path],
                          capture_output=True, text=True, cwd=directory)
    if proc.returncode:
        return None, (proc.stdout + proc.stderr)[-3000:]
    return path, ""


def run_driver(path: str, inputs: Sequence[bytes]) -> tuple[int, str, dict[int, list[str]], bytes]:
    """Run a built driver ``path IN OUT`` on the concatenated ``inputs``:
    (exit status, stderr, the runtime's ``ERR <case> <message>`` lines per case,
    the bytes it wrote to OUT)."""
    fin, fout = path + ".in", path + ".out"
    with open(fin, "wb") as fh:
        fh.write(b"".join(inputs))
    proc = subprocess.run([path, fin, fout], capture_output=True, text=True, timeout=600)
    errors: dict[int, list[str]] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("ERR "):
            _, i, msg = line.split(" ", 2)
            errors.setdefault(int(i), []).append(msg)
    data = b""
    if proc.returncode == 0:
        with open(fout, "rb") as fh:
            data = fh.read()
    return proc.returncode, proc.stderr, errors, data


def run_cases(directory: str, exe: str, cases: Sequence[tuple[str, ConversionPlan]],
              rng: np.random.Generator) -> list[RunResult]:
    """Run a built driver once on fresh random bits; one result per case."""
    inputs, wants = [], []
    for name, p in cases:
        for v in harness_variants(p):
            flat, out_want, want = random_data(p, rng, v)
            inputs += [flat.tobytes(), (~out_want).tobytes(), np.ascontiguousarray(~want).tobytes()]  # poisoned outputs
            wants.append((name + v, p, out_want, want))
    code, stderr, errors, data = run_driver(os.path.join(directory, exe), inputs)
    if code:
        return [RunResult(False, f"{name}: host driver exited with {code}: {stderr[-500:]}") for name, _ in cases]
    per_run, pos = [], 0
    for i, (name, p, flat, want) in enumerate(wants):
        raw = RAW[p.elem_bytes]
        nout, nregs = flat.nbytes, want.nbytes
        out = np.frombuffer(data[pos:pos + nout], dtype=raw)
        regs = np.frombuffer(data[pos + nout:pos + nout + nregs], dtype=raw).reshape(want.shape)
        pos += nout + nregs
        if i in errors:
            per_run.append(RunResult(False, f"{name}: host SIMT runtime: " + "; ".join(errors[i][:3])))
        else:
            per_run.append(compare(name, p, flat, want, out, regs, f"bit-exact, host SIMT wave{p.warp_size}"))
    # one result per case: its first failing variant, else its last
    results, k = [], 0
    for _, p in cases:
        n = len(harness_variants(p))
        mine = per_run[k:k + n]
        k += n
        results.append(next((r for r in mine if not r.ok), mine[-1]))
    return results


def verify_host(items: Sequence[tuple[str, ConversionPlan]], runs: int = 1, seed: int = 0,
                batch_size: int = 40, jobs: int = 2, keep: str | None = None,
                sources: str | None = None) -> list[RunResult]:
    """Compile and run ``(name, plan)`` harnesses on the host, ``runs`` times
    each on fresh random bits; one result per item (the first failure).  The
    sources are rendered from the plans, or taken as they are from the folder
    ``sources`` (e.g. ``generated/``)."""
    directory = keep or tempfile.mkdtemp(prefix="llgen_host_")
    try:
        if sources is None:
            write_sources(directory, items)
        batches = [list(items[i:i + batch_size]) for i in range(0, len(items), batch_size)]

        def go(k: int) -> list[RunResult]:
            exe, log = build(directory, batches[k], f"driver{k}", sources)
            if exe is None:
                return [RunResult(False, f"{name}: host compile failed: {log}") for name, _ in batches[k]]
            rng = np.random.default_rng([seed, k])
            res = run_cases(directory, f"driver{k}", batches[k], rng)
            for _ in range(runs - 1):
                res = [a if not a.ok else b for a, b in zip(res, run_cases(directory, f"driver{k}", batches[k], rng))]
            return res

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return [r for rs in pool.map(go, range(len(batches))) for r in rs]
    finally:
        if keep is None:
            shutil.rmtree(directory, ignore_errors=True)


# ------------------------------------------------------------------ gather harnesses
def gather_driver_source(cases: Sequence[tuple[str, object]]) -> str:
    """C++ driver for gather harnesses (``gather_render``): ``driver IN OUT``;
    IN holds per case the source tensor, the index tensor, the poisoned output
    tensor and registers; OUT gets the output tensor and registers."""
    from ll_codegen.emit.gather import INDEX_C_TYPES
    lines = [f'#include "{file_names(p.target, name)["harness"]}"' for name, p in cases]
    smem = max([p.smem_bytes for _, p in cases] + [16])
    lines += [f"__attribute__((aligned(16))) unsigned char smem[{smem}];", "",
              "struct Case { int threads, warp, smem; size_t src_bytes, idx_bytes, out_bytes, regs_bytes; "
              "void (*run)(const void*, const void*, void*, void*); };", ""]
    runs = []
    for k, (name, p) in enumerate(cases):
        raw, it = RAW_TYPES[p.elem_bytes], INDEX_C_TYPES[p.index_dtype]
        lines.append(f"static void run_{k}(const void* a, const void* b, void* c, void* d) {{ {name}_harness("
                     f"static_cast<const {raw}*>(a), static_cast<const {it}*>(b), static_cast<{raw}*>(c), "
                     f"static_cast<{raw}*>(d)); }}")
        ns, ni = int(np.prod(p.src_shape)), int(np.prod(p.idx_shape))
        runs.append(f"    {{{p.threads}, {p.warp_size}, {p.smem_bytes}, {ns * p.elem_bytes}, {ni * p.index_bytes}, "
                    f"{ni * p.elem_bytes}, {p.threads * p.n_idx * p.elem_bytes}, run_{k}}},")
    lines += ["static const Case kCases[] = {"] + runs + ["};", "", """int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* in = std::fopen(argv[1], "rb");
    FILE* out = std::fopen(argv[2], "wb");
    if (!in || !out) return 2;
    int i = 0;
    for (const Case& c : kCases) {
        std::vector<unsigned char> a(c.src_bytes), x(c.idx_bytes), b(c.out_bytes), r(c.regs_bytes);
        if (std::fread(a.data(), 1, a.size(), in) != a.size() || std::fread(x.data(), 1, x.size(), in) != x.size() ||
            std::fread(b.data(), 1, b.size(), in) != b.size() || std::fread(r.data(), 1, r.size(), in) != r.size())
            return 3;
        for (size_t k = 0; k < sizeof smem; ++k) smem[k] = static_cast<unsigned char>(0xa5 ^ k);
        auto errors = llgen_host::launch(c.threads, c.warp, smem, size_t(c.smem),
                                         [&] { c.run(a.data(), x.data(), b.data(), r.data()); });
        for (auto& e : errors) std::printf("ERR %d %s\\n", i, e.c_str());
        std::fwrite(b.data(), 1, b.size(), out);
        std::fwrite(r.data(), 1, r.size(), out);
        ++i;
    }
    std::fclose(out);
    return 0;
}
"""]
    return "\n".join(lines)


INDEX_NP = {"i32": np.int32, "u32": np.uint32, "i16": np.int16, "u16": np.uint16, "i8": np.int8, "u8": np.uint8}


def gather_expected(plan, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(source tensor, index tensor, output tensor, output registers per thread) for one
    random run (``emulator.gather_tensors``), all row-major and raw, the references by numpy."""
    from ll_codegen.verify.emulator import gather_reference, gather_tensors
    from ll_codegen.verify.gpu import layout_of
    src_t, idx_t = gather_tensors(plan, rng)
    want_t = np.take_along_axis(src_t, np.mod(idx_t, plan.axis_size), axis=plan.axis)
    regs = gather_reference(layout_of(plan.src_bases), layout_of(plan.idx_bases), plan.axis, src_t, idx_t)
    return src_t, idx_t.astype(INDEX_NP[plan.index_dtype]), want_t, regs.reshape(plan.threads, plan.n_idx)


def verify_gather_host(items: Sequence[tuple[str, object]], seed: int = 0, runs: int = 1,
                       keep: str | None = None, defines: Sequence[str] = (),
                       sources: str | None = None) -> list[RunResult]:
    """Render, compile and run gather harnesses on the host SIMT runtime,
    ``runs`` times each on fresh random data; one result per item.
    ``defines``: extra macros (``LLGEN_GATHER_CHECK``); ``sources``: a folder
    with the harnesses as they are (e.g. ``generated/``) instead of rendering."""
    from ll_codegen.emit.gather import gather_files
    directory = keep or tempfile.mkdtemp(prefix="llgen_gather_")
    try:
        for name, p in items if sources is None else ():
            for fname, text in gather_files(p, name).items():
                with open(os.path.join(directory, fname), "w", encoding="utf-8") as fh:
                    fh.write(text)
        exe, log = build(directory, [], "gdriver", sources, driver=gather_driver_source(items), defines=defines)
        if exe is None:
            return [RunResult(False, f"{name}: host compile failed: {log}") for name, _ in items]
        rng = np.random.default_rng(seed)
        results: list[RunResult] = [RunResult(True, f"{name}: ok (bit-exact, host SIMT)") for name, _ in items]
        for _ in range(runs):
            data, wants = [], []
            for name, p in items:
                src_t, idx_t, want_t, regs = gather_expected(p, rng)
                data += [src_t.tobytes(), idx_t.tobytes(), (~want_t).tobytes(), (~regs).tobytes()]
                wants.append((want_t, regs))
            code, stderr, errors, blob = run_driver(exe, data)
            if code:
                return [RunResult(False, f"{name}: host driver exited with {code}: {stderr[-300:]}")
                        for name, _ in items]
            pos = 0
            for i, ((name, p), (want_t, regs)) in enumerate(zip(items, wants)):
                raw = RAW[p.elem_bytes]
                out = np.frombuffer(blob[pos:pos + want_t.nbytes], dtype=raw).reshape(want_t.shape)
                pos += want_t.nbytes
                got = np.frombuffer(blob[pos:pos + regs.nbytes], dtype=raw).reshape(regs.shape)
                pos += regs.nbytes
                if not results[i].ok:
                    continue
                if i in errors:
                    results[i] = RunResult(False, f"{name}: host SIMT runtime: " + "; ".join(errors[i][:3]))
                elif not (out == want_t).all():
                    results[i] = RunResult(False, f"{name}: output tensor differs at {int((out != want_t).sum())} "
                                                  f"element(s), first {np.argwhere(out != want_t)[0].tolist()}")
                elif not (got == regs).all():
                    t, r = np.argwhere(got != regs)[0]
                    results[i] = RunResult(False, f"{name}: thread {t} register {r}: got {got[t, r]:#x}, "
                                                  f"want {regs[t, r]:#x}")
        return results
    finally:
        if keep is None:
            shutil.rmtree(directory, ignore_errors=True)
