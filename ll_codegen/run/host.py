"""Run generated harnesses on the CPU through the host SIMT runtime.

The header and harness that ``llgen convert`` writes are compiled for the host
*unchanged* -- ``clang++ -std=c++17 -x c++ -I ll_codegen/simt -include
simt_host.h`` -- together with a small driver, and every harness runs one block
of fibers (``simt/simt_host.h``): shuffles with NVIDIA or AMD semantics,
barriers, shared memory through the headers' named target-instruction
wrappers, with race, uninitialised-read and bounds checks.  The check is the
one ``gpu.py`` makes on a GPU: fresh random bits in, complement-poisoned
outputs, the output tensor and every thread's destination registers compared
with the numpy reference bit for bit.

Every operation runs through the same driver: its record in the registry
(``operations.harness_of(plan)``) gives each harness's C parameter types, its random
arguments with poisoned outputs, the numpy reference and the comparison.
Many harnesses share one driver (one compile); batches compile in parallel.
Needs clang++ (HIP headers use clang's vector extensions); ``compiler()`` says
which one is used.

The runtime's header is precompiled once per process and set of flags, or once
for every process that names one folder in ``$LLGEN_HOST_PCH_DIR``
(``precompiled_header``) with clang's ``-fpch-instantiate-templates``: the
standard containers the runtime instantiates -- about 1.2 s of every build,
whatever the harnesses -- are then instantiated once, not in every driver.  At
-O0 the runtime's code itself is compiled once too (``-fpch-codegen``).
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from ll_codegen.core.files import made_once
from ll_codegen.emit.render import file_names
from ll_codegen.operations import harness_of, write_files
from ll_codegen.verify.harness import RunResult

SIMT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "simt")
FLAGS = ("-std=c++17", "-x", "c++", "-O1", "-w")
#: optimisation levels ``build`` accepts in place of FLAGS' -O1: -O0 compiles a batch of harnesses
#: about 4x faster and, the runtime's fiber switches dominating, runs it as fast
OPT_LEVELS = ("-O0", "-O1", "-O2")
#: the environment variable that sets the level ``build`` uses when not told (default -O1); the CPU
#: tests set -O0 (``tests/conftest.py``) and build the generated files at -O1 explicitly
OPT_ENV = "LLGEN_HOST_OPT"


def default_opt() -> str:
    """``$LLGEN_HOST_OPT`` when it is one of ``OPT_LEVELS``, else -O1."""
    opt = os.environ.get(OPT_ENV, "").strip()
    return opt if opt in OPT_LEVELS else "-O1"


def flags(opt: str | None = None) -> list[str]:
    """The compiler flags of a host build: ``FLAGS`` at ``opt`` (``default_opt()`` when None)."""
    opt = opt or default_opt()
    if opt not in OPT_LEVELS:
        raise ValueError(f"opt: one of {', '.join(OPT_LEVELS)}, got {opt!r}")
    return [opt if f == "-O1" else f for f in FLAGS]


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


_PCH_LOCK = threading.Lock()
_PCH: dict[tuple, tuple[str, str | None] | None] = {}
_PCH_DIR: list[str] = []
#: a folder where the precompiled headers are made once for every process that names it (the test
#: suite's workers and the ``llgen`` processes they start), not once per process; unset: per process
PCH_DIR_ENV = "LLGEN_HOST_PCH_DIR"


def _runtime_digest() -> str:
    """A digest of every runtime header: a precompiled header is used only for the text it was made of."""
    h = hashlib.sha256()
    for root, _, files in sorted(os.walk(SIMT_DIR)):
        for f in sorted(files):
            with open(os.path.join(root, f), "rb") as fh:
                h.update(f.encode() + b"\0" + fh.read())
    return h.hexdigest()


def _runtime_macros() -> set[str]:
    """The ``LLGEN_*`` macros the runtime's headers name."""
    names: set[str] = set()
    for root, _, files in os.walk(SIMT_DIR):
        for f in files:
            with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                names.update(re.findall(r"\bLLGEN_\w+", fh.read()))
    return names


def pch_defines(defines: Sequence[str]) -> list[str]:
    """The ``defines`` that can change what the runtime's header compiles to: all but the ``LLGEN_*``
    macros it does not name (a kernel's knobs), so that builds that differ only in those share one
    precompiled header (clang takes a macro on the command line that the PCH lacks)."""
    ours = _runtime_macros()
    return [d for d in defines if not d.startswith("LLGEN_") or d.split("=", 1)[0] in ours]


def precompiled_header(cxx: str, compile_flags: Sequence[str],
                       defines: Sequence[str] = ()) -> tuple[str, str | None] | None:
    """``simt_host.h`` precompiled with ``compile_flags`` and those of ``defines`` that can change it
    (``pch_defines``): (the path for ``-include-pch``,
    the object holding the runtime's code or None), made once per process in a private folder
    removed at exit -- or once for every process in ``$LLGEN_HOST_PCH_DIR`` where that is set; None
    where clang cannot make it (a build then includes the header as text).
    ``-fpch-instantiate-templates`` does the runtime's template instantiations in the PCH, which is
    where a driver's build spends most of its time at -O0 (clang only reuses what the PCH holds: the
    driver compiles as with ``-include``).  At -O0 the PCH also carries the runtime's code
    (``-fpch-codegen``), compiled once into an object every build links, so a driver compiles only
    its own code (about half of its build); an optimised build compiles the runtime's code itself,
    where it can inline it."""
    defines = pch_defines(defines)
    key = (cxx, tuple(compile_flags), tuple(defines), _runtime_digest())
    with _PCH_LOCK:
        if key in _PCH:
            return _PCH[key]
        shared = os.environ.get(PCH_DIR_ENV)
        if shared:
            # named by the key (the runtime's digest in it: never a stale header); the first process to
            # ask makes it holding the lock, the others wait and read what it recorded
            os.makedirs(shared, exist_ok=True)
            stem = os.path.join(shared, "simt_host_" + hashlib.sha256(repr(key).encode()).hexdigest()[:24])
            got = json.loads(made_once(stem + ".json", lambda: json.dumps(
                _make_pch(cxx, compile_flags, defines, stem + ".pch")).encode()))
            made = tuple(got) if got else None
        else:
            if not _PCH_DIR:
                _PCH_DIR.append(tempfile.mkdtemp(prefix="llgen_host_pch_"))
                atexit.register(shutil.rmtree, _PCH_DIR[0], True)
            made = _make_pch(cxx, compile_flags, defines, os.path.join(_PCH_DIR[0], f"simt_host_{len(_PCH)}.pch"))
        _PCH[key] = made
        return made


def _make_pch(cxx: str, compile_flags: Sequence[str], defines: Sequence[str],
              path: str) -> tuple[str, str | None] | None:
    """``precompiled_header``'s build at ``path``: (the PCH, the object of its code or None), or None."""
    header_flags = ["c++-header" if f == "c++" else f for f in compile_flags]     # -x c++ -> -x c++-header
    for codegen in ((True, False) if "-O0" in compile_flags else (False,)):
        proc = subprocess.run([cxx, *header_flags, *[f"-D{d}" for d in defines], "-fpch-instantiate-templates",
                               *(["-fpch-codegen"] if codegen else []), "-I", SIMT_DIR,
                               os.path.join(SIMT_DIR, "simt_host.h"), "-o", path], capture_output=True, text=True)
        if proc.returncode:
            continue
        if not codegen:
            return path, None
        obj = path[:-len(".pch")] + ".o"
        lang = [i for i, f in enumerate(compile_flags) if f == "-x"]       # the PCH is the input, not C++
        flags = [f for i, f in enumerate(compile_flags) if i not in lang and i - 1 not in lang]
        if subprocess.run([cxx, *flags, "-c", path, "-o", obj], capture_output=True, text=True).returncode == 0:
            return path, obj
    return None


def runtime_include(cxx: str, compile_flags: Sequence[str], defines: Sequence[str] = ()) -> list[str]:
    """The flags that put the runtime before a source: its precompiled header where clang made one
    (``precompiled_header``), else ``-include simt_host.h`` (``-I SIMT_DIR`` either way); the object
    with the runtime's code, where the PCH has one, as a linker input (``-Wl,``: whatever the
    language flags around it; a compile-only ``-c`` does not use it)."""
    made = precompiled_header(cxx, compile_flags, defines)
    if made is None:
        return ["-I", SIMT_DIR, "-include", "simt_host.h"]
    pch, obj = made
    return ["-I", SIMT_DIR, "-include-pch", pch] + ([f"-Wl,{obj}"] if obj else [])


def driver_source(cases: Sequence[tuple[str, object]]) -> str:
    """C++ driver: includes each ``<name>_harness`` and runs every variant in order.

    ``driver IN OUT``: IN holds, per run, every harness argument in call
    order (outputs poisoned); OUT gets, per run, the output arguments after
    it (the non-const ones but the last of a conversion, its scratch tile).
    Every buffer is 64-byte aligned (a CUtensorMap's alignment), the shared
    buffer 1024-byte aligned.  A harness with a tensor-map argument
    (``HarnessOp.tensor_map``) gets it from its header's ``make_tensor_map()``
    before each launch.  Errors the runtime reports are printed as
    ``ERR <run> <message>`` lines."""
    lines = [f'#include "{file_names(p.target, name)["harness"]}"' for name, p in cases]
    smem = max([p.smem_bytes for _, p in cases] + [16])
    lines += [f"__attribute__((aligned(1024))) unsigned char smem[{smem}];", "",
              "struct Case { int threads, warp, smem, nargs; size_t bytes[4]; unsigned outs; "
              "void (*run)(unsigned char* const*); int (*setup)(unsigned char* const*); };", ""]
    runs = []
    for name, plan in cases:
        op = harness_of(plan)
        types = op.c_types(plan)
        run = op.data(plan, np.random.default_rng(0), "")
        sizes = [a.nbytes for a in run.args]
        outs = sum(1 << k for k in run.wants)
        setup = "nullptr"
        tm = op.tensor_map(plan) if op.tensor_map is not None else None
        if tm is not None:          # the header's own make_tensor_map() encodes the map (simt/cuda.h)
            setup = f"setup_{len(runs)}"
            lines.append(f"static int {setup}(unsigned char* const* p) {{ "
                         f"const unsigned long long dims[] = {{{', '.join(map(str, tm.dims))}}}, "
                         f"strides[] = {{{', '.join(map(str, tm.strides))}}}; "
                         f"return int({name}::make_tensor_map(reinterpret_cast<CUtensorMap*>(p[{tm.map_arg}]), "
                         f"p[{tm.base_arg}], dims, strides)); }}")
        for v in op.variants(plan):
            k = len(runs)
            args = ", ".join(f"reinterpret_cast<{t}>(p[{i}])" for i, t in enumerate(types))
            lines.append(f"static void run_{k}(unsigned char* const* p) {{ {name}_harness{v}({args}); }}")
            runs.append(f"    {{{plan.threads}, {plan.warp_size}, {plan.smem_bytes}, {len(types)}, "
                        f"{{{', '.join(str(s) for s in sizes)}}}, {outs:#x}, run_{k}, {setup}}},")
    lines += ["static const Case kCases[] = {"] + runs + ["};", "", """int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* in = std::fopen(argv[1], "rb");
    FILE* out = std::fopen(argv[2], "wb");
    if (!in || !out) return 2;
    int i = 0;
    for (const Case& c : kCases) {
        std::vector<unsigned char> store[4];
        unsigned char* p[4] = {};
        for (int k = 0; k < c.nargs; ++k) {
            store[k].assign(c.bytes[k] + 64, 0);
            p[k] = store[k].data() + (64 - reinterpret_cast<uintptr_t>(store[k].data()) % 64) % 64;
            if (std::fread(p[k], 1, c.bytes[k], in) != c.bytes[k]) return 3;
        }
        for (size_t k = 0; k < sizeof smem; ++k) smem[k] = static_cast<unsigned char>(0xa5 ^ k);
        if (c.setup) {
            const int r = c.setup(p);
            if (r) std::printf("ERR %d make_tensor_map returned CUresult %d\\n", i, r);
        }
        auto errors = llgen_host::launch(c.threads, c.warp, smem, size_t(c.smem), [&] { c.run(p); });
        for (auto& e : errors) std::printf("ERR %d %s\\n", i, e.c_str());
        for (int k = 0; k < c.nargs; ++k)
            if (c.outs >> k & 1) std::fwrite(p[k], 1, c.bytes[k], out);
        ++i;
    }
    std::fclose(out);
    return 0;
}
"""]
    return "\n".join(lines)


def write_sources(directory: str, cases: Sequence[tuple[str, object]]) -> None:
    """Render each case's header and harness into ``directory``."""
    for name, plan in cases:
        write_files(plan, directory, name, emit=("header", "harness"))


def build(directory: str, cases: Sequence[tuple[str, object]], exe: str = "driver",
          sources: str | None = None, driver: str | None = None,
          defines: Sequence[str] = (), opt: str | None = None) -> tuple[str | None, str]:
    """Compile the driver of ``cases`` (``driver``: its source text, default
    ``driver_source(cases)``) into ``directory``; the harnesses and headers are
    in ``sources`` (default: ``directory``); ``defines``: extra macros; ``opt``:
    the optimisation level (one of ``OPT_LEVELS``; ``default_opt()`` when None).  (path or None, log)."""
    compile_flags = flags(opt)
    cxx = compiler()
    if cxx is None:
        return None, "no clang++ found (install clang, or Debian's hipcc which brings it)"
    src = os.path.join(directory, exe + ".cpp")
    with open(src, "w", encoding="utf-8") as fh:
        fh.write(driver if driver is not None else driver_source(cases))
    path = os.path.join(directory, exe)
    proc = subprocess.run([cxx, *compile_flags, *[f"-D{d}" for d in defines],
                           *runtime_include(cxx, compile_flags, defines), "-I", sources or directory, src, "-o", path],
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


def run_cases(directory: str, exe: str, cases: Sequence[tuple[str, object]],
              rng: np.random.Generator) -> list[RunResult]:
    """Run a built driver once on fresh random bits; one result per case
    (its first failing variant, else its last)."""
    inputs, runs = [], []
    for name, p in cases:
        op = harness_of(p)
        for v in op.variants(p):
            run = op.data(p, rng, v)
            inputs += [np.ascontiguousarray(a).tobytes() for a in run.args]
            runs.append((name + v, p, op, run))
    code, stderr, errors, data = run_driver(os.path.join(directory, exe), inputs)
    if code:
        return [RunResult(False, f"{name}: host driver exited with {code}: {stderr[-500:]}") for name, _ in cases]
    per_run, pos = [], 0
    for i, (name, p, op, run) in enumerate(runs):
        got: dict[int, np.ndarray] = {}
        for k in sorted(run.wants):
            want = run.wants[k]
            got[k] = np.frombuffer(data[pos:pos + want.nbytes], dtype=want.dtype).reshape(want.shape)
            pos += want.nbytes
        if i in errors:
            per_run.append(RunResult(False, f"{name}: host SIMT runtime: " + "; ".join(errors[i][:3])))
        else:
            per_run.append(op.compare(name, p, run, got, f"bit-exact, host SIMT wave{p.warp_size}", None))
    results, k = [], 0
    for _, p in cases:
        n = len(harness_of(p).variants(p))
        mine = per_run[k:k + n]
        k += n
        results.append(next((r for r in mine if not r.ok), mine[-1]))
    return results


def verify_host(items: Sequence[tuple[str, object]], runs: int = 1, seed: int = 0,
                batch_size: int = 40, jobs: int = 2, keep: str | None = None,
                sources: str | None = None, defines: Sequence[str] = (), opt: str | None = None) -> list[RunResult]:
    """Compile and run ``(name, plan)`` harnesses of any operation on the host,
    ``runs`` times each on fresh random bits; one result per item (the first
    failure).  The sources are rendered from the plans, or taken as they are
    from the folder ``sources`` (e.g. ``generated/``); ``defines``: extra
    macros (``LLGEN_GATHER_CHECK``); ``opt``: the compiler's optimisation level (``build``)."""
    directory = keep or tempfile.mkdtemp(prefix="llgen_host_")
    try:
        if sources is None:
            write_sources(directory, items)
        # one target per driver: a HIP harness's <hip/hip_runtime.h> takes CUDA's warp intrinsics away
        # (simt/hip/hip_runtime.h) from every header included after it
        order = sorted(range(len(items)), key=lambda i: items[i][1].target)
        batches, cur = [], []
        for i in order:
            if cur and (len(cur) == batch_size or items[cur[-1]][1].target != items[i][1].target):
                batches.append(cur)
                cur = []
            cur.append(i)
        if cur:
            batches.append(cur)
        index = [i for b in batches for i in b]
        batches = [[items[i] for i in b] for b in batches]

        def go(k: int) -> list[RunResult]:
            exe, log = build(directory, batches[k], f"driver{k}", sources, defines=defines, opt=opt)
            if exe is None:
                return [RunResult(False, f"{name}: host compile failed: {log}") for name, _ in batches[k]]
            rng = np.random.default_rng([seed, k])
            res = run_cases(directory, f"driver{k}", batches[k], rng)
            for _ in range(runs - 1):
                res = [a if not a.ok else b for a, b in zip(res, run_cases(directory, f"driver{k}", batches[k], rng))]
            return res

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            flat = [r for rs in pool.map(go, range(len(batches))) for r in rs]
        results: list[RunResult] = [None] * len(items)         # back in the order of ``items``
        for i, r in zip(index, flat):
            results[i] = r
        return results
    finally:
        if keep is None:
            shutil.rmtree(directory, ignore_errors=True)
