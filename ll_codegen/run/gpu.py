"""Run generated harnesses on a GPU with CuPy and check them bit for bit.

Every run draws fresh random raw bits (NaN payloads and negative zeros are just
bit patterns here), poisons the outputs with the bitwise complement of what
must arrive (so every element or register left unwritten differs), launches
one CTA of the harness, and compares the output tensor and every thread's
destination registers with the numpy reference.  A failure names the first
differing thread and register, the expected and actual bits, and the plan step
that writes that register (``plan_step``).

Many harnesses compile as ONE NVRTC module (``Batch``: a generated ``.cu`` that
``#include``s each ``<name>_harness.cu`` from a temporary folder; every
conversion has its own namespace and kernel name), several modules compile at
once in worker processes (NVRTC needs no GPU), and CuPy loads the cubins
(``cupy.RawModule(path=...)``): a suite of a thousand conversions takes a
couple of minutes.  Harnesses that need more than 48 KiB of
shared memory raise the kernel's dynamic limit (up to the device's opt-in
maximum; beyond it the run fails with a clear message).

Every operation (conversions, stores, loads, copies, gathers) runs through
the same ``Batch``/``Kernel``: its record in the registry
(``operations.harness_of(plan)``) gives each harness's arguments, the numpy reference and
the comparison, exactly as on the host (``host.py``).

CuPy is optional (``pip install .[gpu]``); ``available()`` says whether a GPU
can be used.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any, Sequence

import numpy as np

from ll_codegen.operations import harness_of, write_files
from ll_codegen.verify.harness import RunResult
from ll_codegen.run.tensor_map import encode_tiled

DEFAULT_OPTIONS = ("-std=c++17", "-lineinfo")


def available() -> str | None:
    """None if a CUDA GPU is usable through CuPy, else the reason it is not."""
    try:
        import cupy
    except Exception as e:  # ImportError or a broken CUDA install
        return f"CuPy is not importable ({type(e).__name__}: {e})"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device"
    except Exception as e:
        return f"no usable CUDA device ({e})"
    return None


def visible_devices() -> list[str]:
    """The CUDA devices this process sees, as ``CUDA_VISIBLE_DEVICES`` entries that name them to a
    child process (``["0", "1"]``, or the parent's own entries, e.g. ``["2", "3"]`` or UUIDs, when it
    has that variable); empty when none is usable.  Needs CuPy."""
    import cupy
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return []
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        names = [t.strip() for t in given.split(",") if t.strip()]
        if len(names) >= n:
            return names[:n]
    return [str(k) for k in range(n)]


def device_info() -> dict:
    """Name, compute capability, driver/runtime versions and shared-memory limits of device 0."""
    import cupy
    rt = cupy.cuda.runtime
    p = rt.getDeviceProperties(0)
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    return {"name": name, "cc": f"{p['major']}.{p['minor']}",
            "driver": rt.driverGetVersion(), "runtime": rt.runtimeGetVersion(),
            "smem_per_block": int(p["sharedMemPerBlock"]),
            "smem_per_block_optin": int(p.get("sharedMemPerBlockOptin", p["sharedMemPerBlock"])),
            "cupy": cupy.__version__}


def _max_smem() -> int:
    import cupy
    p = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
    return int(p.get("sharedMemPerBlockOptin", p["sharedMemPerBlock"]))


class Kernel:
    """One harness kernel (every variant) of a compiled module and its plan."""

    def __init__(self, plan, name: str, module):
        self.plan, self.name = plan, name
        self.op = harness_of(plan)
        self.kernels = {v: module.get_function(f"{name}_harness{v}") for v in self.op.variants(plan)}
        self.kernel = self.kernels[""]
        self.smem_error = None
        if plan.smem_bytes > 48 * 1024:
            limit = _max_smem()
            if plan.smem_bytes > limit:
                self.smem_error = (f"needs {plan.smem_bytes} bytes of shared memory; "
                                   f"the device allows {limit} per block")
            else:
                for f in self.kernels.values():
                    f.max_dynamic_shared_size_bytes = plan.smem_bytes

    def launch(self, args, variant: str = "") -> None:
        """One CTA of the harness ``variant`` on device arrays ``args`` (call order)."""
        p = self.plan
        self.kernels[variant]((1,), (p.threads,), tuple(args), shared_mem=p.smem_bytes)

    def run(self, rng: np.random.Generator | None = None, entropy: int | None = None) -> RunResult:
        """One launch of each variant on fresh random raw bits; compares every output."""
        import cupy
        p = self.plan
        if self.smem_error:
            return RunResult(False, self.smem_error)
        if rng is None:
            entropy = np.random.SeedSequence().entropy if entropy is None else entropy
            rng = np.random.default_rng(entropy)
        res = RunResult(False, "not run")
        for variant in self.kernels:
            run = self.op.data(p, rng, variant)
            d_args = [cupy.asarray(np.ascontiguousarray(a).ravel()) for a in run.args]   # outputs poisoned
            tm = self.op.tensor_map(p) if self.op.tensor_map is not None else None
            if tm is not None:      # the CUtensorMap of the tensor argument, encoded by the driver
                raw = encode_tiled(p, d_args[tm.base_arg].data.ptr, tm.dims, tm.strides)
                d_args[tm.map_arg] = cupy.asarray(np.frombuffer(raw, dtype=run.args[tm.map_arg].dtype))
            self.launch(d_args, variant)
            cupy.cuda.runtime.deviceSynchronize()
            got = {k: d_args[k].get().reshape(w.shape) for k, w in run.wants.items()}
            res = self.op.compare(self.name + variant, p, run, got,
                                  "bit-exact" + (" (masked too)" if len(self.kernels) > 1 else ""), entropy)
            if not res.ok:
                return res
        return res


def arch() -> str:
    """The NVRTC architecture of the current device (``sm_XY``)."""
    import cupy
    return "sm_" + cupy.cuda.Device().compute_capability


def compile_arch(plans: Sequence[Any]) -> str:
    """The device's architecture, ``sm_90a`` on an sm_90 device when a plan is for sm_90a
    (TMA, wgmma: code that runs only there)."""
    a = arch()
    return a + "a" if a == "sm_90" and any(getattr(p, "arch", "") == "sm_90a" for p in plans) else a


def cuda_include_dirs() -> list[str]:
    """Folders holding ``cuda_runtime.h`` for NVRTC (it has no default include
    path; CuPy's own RawModule adds the CUDA toolkit's): CuPy's CUDA path,
    ``CUDA_PATH``/``CUDA_HOME``, ``/usr/local/cuda`` and the NVIDIA wheels."""
    cands = []
    try:
        import cupy
        cp = cupy.cuda.get_cuda_path()
        if cp:
            cands.append(os.path.join(cp, "include"))
    except Exception:
        pass
    for var in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(var):
            cands.append(os.path.join(os.environ[var], "include"))
    cands.append("/usr/local/cuda/include")
    for mod in ("nvidia.cuda_runtime", "nvidia.cu13", "nvidia.cuda_nvrtc"):
        try:
            m = __import__(mod, fromlist=["_"])
            for p in getattr(m, "__path__", []):
                cands.append(os.path.join(p, "include"))
        except Exception:
            pass
    out = []
    for c in cands:
        if os.path.exists(os.path.join(c, "cuda_runtime.h")) and c not in out:
            out.append(c)
    return out[:1]


def _digest(directory: str, names: Sequence[str]) -> str:
    h = hashlib.sha256()
    for n in names:
        for f in (f"{n}.cuh", f"{n}_harness.cu"):
            with open(os.path.join(directory, f), "rb") as fh:
                h.update(f.encode() + b"\0" + fh.read())
    return h.hexdigest()


def batch_source(directory: str, names: Sequence[str]) -> str:
    """The batch translation unit: one ``#include`` per harness.  A digest of
    every included file is in its first line, so a cache keyed by the source
    text never serves a module built from older files of the same names."""
    lines = [f"// llgen batch of {len(names)} harnesses, content sha256 {_digest(directory, names)}"]
    lines += [f'#include "{n}_harness.cu"' for n in names]
    return "\n".join(lines) + "\n"


def nvrtc_compile(source: str, options: Sequence[str]) -> tuple[bytes | None, str]:
    """(cubin or None, log) of one NVRTC compilation (needs no GPU context)."""
    from cupy_backends.cuda.libs import nvrtc
    prog = nvrtc.createProgram(source, "batch.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(prog, list(options))
        except nvrtc.NVRTCError:
            return None, nvrtc.getProgramLog(prog)
        return nvrtc.getCUBIN(prog), nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)


def build_modules(directory: str, items: Sequence[tuple[str, Any]], options: Sequence[str],
                  tag: str, render: bool = True) -> tuple[list[tuple[str, list[str]]], dict[str, str]]:
    """Render ``items`` into ``directory`` (unless ``render`` is False) and
    compile them as one NVRTC module ``<tag>.cubin``; if that fails, halves
    until every failing conversion is alone.  Returns ([(cubin path, names)],
    {name: compiler log}).  Runs in worker processes (no CUDA context)."""
    if render:
        for name, plan in items:
            write_files(plan, directory, name, emit=("header", "harness"))
    names = [n for n, _ in items]
    opts = list(options) + [f"-I{directory}"]
    modules: list[tuple[str, list[str]]] = []
    errors: dict[str, str] = {}

    def go(ns: list[str], t: str) -> None:
        if not ns:
            return
        src = batch_source(directory, ns)
        with open(os.path.join(directory, f"{t}.cu"), "w") as f:
            f.write(src)
        cubin, log = nvrtc_compile(src, opts)
        if cubin is not None:
            path = os.path.join(directory, f"{t}.cubin")
            with open(path, "wb") as f:
                f.write(cubin)
            modules.append((path, ns))
        elif len(ns) == 1:
            errors[ns[0]] = short_log(log)
        else:
            h = len(ns) // 2
            go(ns[:h], t + "a")
            go(ns[h:], t + "b")
    go(names, tag)
    return modules, errors


def short_log(text: str, limit: int = 2000) -> str:
    """The error lines of a compiler log (all lines if none), at most ``limit`` characters."""
    lines = [ln for ln in str(text).splitlines() if "error" in ln.lower()] or str(text).splitlines()
    out = "\n".join(lines)
    return out[:limit] + ("..." if len(out) > limit else "")


class Batch:
    """Many conversions compiled as NVRTC modules and loaded with CuPy.

    ``items``: (name, plan) with distinct C-identifier names.  Each plan's
    header and harness are rendered into ``directory`` (a temporary folder by
    default) and ``<tag>.cu`` includes every harness (``batch_source``): one
    module per ``batch_size`` conversions, compiled in ``workers`` processes
    (NVRTC needs no GPU; the modules then load as ``cupy.RawModule``).  A module
    that fails to compile is split in halves until every failing conversion is
    isolated; ``errors`` maps each to its compiler log.
    """

    def __init__(self, items: Sequence[tuple[str, Any]], directory: str | None = None,
                 options: Sequence[str] = (), render: bool = True):
        names = [n for n, _ in items]
        if len(set(names)) != len(names):
            raise ValueError("batch names must be distinct")
        for n in names:
            if not n.isidentifier():
                raise ValueError(f"name {n!r} is not a C identifier")
        self.items = list(items)
        self.plans = dict(items)
        self.directory = directory or tempfile.mkdtemp(prefix="llgen_batch_")
        self.options = tuple(DEFAULT_OPTIONS) + tuple(options)
        self.render = render
        self.kernels: dict[str, Kernel] = {}
        self.errors: dict[str, str] = {}
        self.modules: list = []

    def compile(self, batch_size: int = 32, workers: int | None = None, pool: Executor | None = None) -> "Batch":
        """Compile every item, ``batch_size`` harnesses per NVRTC module, in ``workers`` spawned
        processes -- or in ``pool``, an executor the caller keeps across batches (no start-up per call)."""
        opts = (self.options + (f"--gpu-architecture={compile_arch(list(self.plans.values()))}",)
                + tuple(f"-I{d}" for d in cuda_include_dirs()))
        chunks = [self.items[i:i + batch_size] for i in range(0, len(self.items), batch_size)]
        jobs = [(self.directory, c, opts, f"batch{k}", self.render) for k, c in enumerate(chunks)]
        workers = min(len(jobs), workers or os.cpu_count() or 1)
        if pool is not None and jobs:
            results = list(pool.map(build_modules, *zip(*jobs)))
        elif workers > 1 and os.environ.get("LLGEN_GPU_COMPILE", "processes") == "processes":
            import multiprocessing as mp
            with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as ex:
                results = list(ex.map(build_modules, *zip(*jobs)))
        else:
            results = [build_modules(*j) for j in jobs]
        self._load(results)
        return self

    def _load(self, results) -> None:
        import cupy
        for modules, errors in results:
            self.errors.update(errors)
            for path, names in modules:
                mod = cupy.RawModule(path=path)
                self.modules.append(mod)
                for n in names:
                    self.kernels[n] = Kernel(self.plans[n], n, mod)

    def kernel(self, name: str) -> "Kernel":
        if name in self.errors:
            raise RuntimeError(f"{name}: compile error: {self.errors[name]}")
        return self.kernels[name]

    def run(self, name: str, runs: int = 2, rng: np.random.Generator | None = None) -> RunResult:
        if name in self.errors:
            return RunResult(False, f"{name}: compile error: {self.errors[name]}")
        res = RunResult(False, "not run")
        try:
            for _ in range(runs):
                res = self.kernels[name].run(rng)
                if not res.ok:
                    return res
        except Exception as e:   # a launch error (illegal address, ...) is sticky: later runs fail too
            return RunResult(False, f"{name}: {type(e).__name__}: {e}")
        return res


class Harness:
    """A compiled harness (header + harness source in ``directory``)."""

    def __init__(self, plan, directory: str, name: str):
        b = Batch([(name, plan)], directory, render=False).compile(workers=1)
        if name in b.errors:
            raise RuntimeError(f"{name}: compile error: {b.errors[name]}")
        self.plan, self.name = plan, name
        self._k = b.kernels[name]
        self.kernel = self._k.kernel

    def run(self, rng: np.random.Generator | None = None) -> RunResult:
        return self._k.run(rng)


def verify_plan(plan, name: str = "cvt", runs: int = 2, seed: int | None = None,
                directory: str | None = None) -> RunResult:
    """Render, compile and run ``plan``'s harness ``runs`` times on fresh data."""
    rng = None if seed is None else np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        d = directory or tmp
        write_files(plan, d, name, emit=("header", "harness"))
        h = Harness(plan, d, name)
        res = RunResult(False, "not run")
        for _ in range(runs):
            res = h.run(rng)
            if not res.ok:
                return res
        return res
