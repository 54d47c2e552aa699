"""Compile harnesses in one process and launch them in another.

Nsight Compute and compute-sanitizer wrap a whole process; ``prepare`` compiles
(NVRTC, outside the tool) and pickles (name, plan, cubin) for every case, and
``drive`` -- the process the tool runs -- loads the cubins with CuPy and
launches each harness once on fresh random data, checking it bit for bit.  The
driver launches nothing but the harness kernels (CuPy's host<->device copies
are not kernels), so every profiled or sanitized kernel is a harness, named
``<name>_harness``.
"""
from __future__ import annotations

import os
import pickle
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

from ll_codegen.run import gpu  # noqa: E402
from ll_codegen.verify.harness import RunResult  # noqa: E402


def prepare(items, directory: str) -> tuple[str, dict[str, str]]:
    """Compile (name, plan) items into ``directory``; returns (manifest path, compile errors)."""
    os.makedirs(directory, exist_ok=True)
    b = gpu.Batch(items, directory)
    opts = b.options + (f"--gpu-architecture={gpu.arch()}",) + tuple(f"-I{d}" for d in gpu.cuda_include_dirs())
    chunks = [b.items[i:i + 16] for i in range(0, len(b.items), 16)]
    jobs = [(directory, c, opts, f"drv{k}", True) for k, c in enumerate(chunks)]
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing as mp
    with ProcessPoolExecutor(min(len(jobs), os.cpu_count() or 1), mp_context=mp.get_context("spawn")) as ex:
        results = list(ex.map(gpu.build_modules, *zip(*jobs)))
    entries, errors = [], {}
    plans = dict(items)
    for modules, errs in results:
        errors.update(errs)
        for path, names in modules:
            entries += [(n, plans[n], path) for n in names]
    order = {n: i for i, (n, _) in enumerate(items)}
    entries.sort(key=lambda e: order[e[0]])
    manifest = os.path.join(directory, "manifest.pkl")
    with open(manifest, "wb") as f:
        pickle.dump(entries, f)
    return manifest, errors


def drive(manifest: str) -> int:
    """Launch every harness once; prints one line per harness and a total; exit status 1 on any failure."""
    import cupy
    with open(manifest, "rb") as f:
        entries = pickle.load(f)
    mods: dict[str, object] = {}
    bad = 0
    t0 = time.time()
    for name, plan, path in entries:
        if path not in mods:
            mods[path] = cupy.RawModule(path=path)
        k = gpu.Kernel(plan, name, mods[path])
        try:
            r = k.run()
        except Exception as e:       # noqa: BLE001 - report and go on (a sticky error fails the rest too)
            r = RunResult(False, f"{type(e).__name__}: {e}")
        bad += not r.ok
        print(f"DRIVE {name} {'ok' if r.ok else 'FAIL ' + r.message}", flush=True)
    print(f"DRIVE total {len(entries)} launched, {len(entries) - bad} bit-exact, {bad} failed, "
          f"{time.time() - t0:.1f} s", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(drive(sys.argv[1]))
