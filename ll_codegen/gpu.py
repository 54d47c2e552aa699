"""Run generated harnesses on a GPU with CuPy and check them bit for bit.

Every run draws fresh random raw bits (NaN payloads and negative zeros are just
bit patterns here), poisons the outputs, launches one CTA of the harness, and
compares the output tensor and every thread's destination registers with the
numpy reference.  CuPy is optional (``pip install .[gpu]``); ``available()``
says whether a GPU can be used.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

import numpy as np

from .layout import LinearLayout
from .plan import ConversionPlan

RAW = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


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


def layout_of(bases: dict) -> LinearLayout:
    """Rebuild a layout from a plan's ``src_bases``/``dst_bases``."""
    return LinearLayout(bases["in_dims"], bases["out_dims"], require_surjective=False)


def row_major_index(layout: LinearLayout) -> np.ndarray:
    """Row-major element index of every hardware point (register fastest,
    then lane, warp): the inverse view of how the harness addresses ``in``."""
    coords = layout.apply_all()
    sizes = list(layout.out_dim_sizes.values())
    idx = np.zeros(len(coords), dtype=np.int64)
    for k, s in enumerate(sizes):
        idx = idx * s + coords[:, k]
    return idx


def reference_registers(layout: LinearLayout, flat: np.ndarray, threads: int) -> np.ndarray:
    """(threads, registers) array of what each thread must hold."""
    return flat[row_major_index(layout)].reshape(threads, -1)


def plan_step(plan: ConversionPlan, lane: int, reg: int) -> str:
    """Which step of the plan writes destination register ``reg`` of ``lane``."""
    for d, f in plan.dst_copies:
        if d == reg:
            return f"copy of dst[{f}] (broadcast register)"
    if plan.register is not None:
        return f"register move dst[{reg}] = src[{plan.register.dst_from_src[reg]}]"
    if plan.shuffle is not None:
        s = plan.shuffle
        for i, rnd in enumerate(s.rounds):
            if reg in rnd.recv[s.recv_select(lane)]:
                return f"shuffle round {i}"
    if plan.smem is not None:
        for i, rnd in enumerate(plan.smem.rounds):
            for j, acc in enumerate(rnd.loads):
                if reg in acc.regs:
                    return f"smem round {i}, load {j} (offset {acc.offset})"
    return "no step writes it"


@dataclass
class RunResult:
    ok: bool
    message: str


class Harness:
    """A compiled harness (header + harness source in ``directory``)."""

    def __init__(self, plan: ConversionPlan, directory: str, name: str):
        import cupy
        self.plan, self.name = plan, name
        with open(os.path.join(directory, f"{name}_harness.cu")) as f:
            code = f.read()
        self.module = cupy.RawModule(code=code, options=("-std=c++17", f"-I{directory}"))
        self.kernel = self.module.get_function(f"{name}_harness")
        if plan.smem_bytes > 48 * 1024:
            self.kernel.max_dynamic_shared_size_bytes = plan.smem_bytes

    def run(self, rng: np.random.Generator) -> RunResult:
        import cupy
        p = self.plan
        raw = RAW[p.elem_bytes]
        n = int(np.prod(p.shape))
        flat = rng.integers(0, np.iinfo(raw).max, size=n, dtype=raw, endpoint=True)
        d_in = cupy.asarray(flat)
        d_out = cupy.full(n, np.iinfo(raw).max // 3, dtype=raw)          # poison
        d_regs = cupy.full(p.threads * p.n_dst, np.iinfo(raw).max // 5, dtype=raw)
        self.kernel((1,), (p.threads,), (d_in, d_out, d_regs), shared_mem=p.smem_bytes)
        cupy.cuda.runtime.deviceSynchronize()
        out, regs = d_out.get(), d_regs.get().reshape(p.threads, p.n_dst)
        want = reference_registers(layout_of(p.dst_bases), flat, p.threads)
        bad = np.argwhere(regs != want)
        if len(bad):
            t, r = (int(x) for x in bad[0])
            return RunResult(False, f"thread {t} (warp {t // p.warp_size}, lane {t % p.warp_size}) dst[{r}]: "
                                    f"expected {int(want[t, r]):#x}, got {int(regs[t, r]):#x} "
                                    f"({len(bad)} registers differ; written by {plan_step(p, t % p.warp_size, r)})")
        if not np.array_equal(out, flat):
            i = int(np.argmax(out != flat))
            return RunResult(False, f"output tensor element {i}: expected {int(flat[i]):#x}, got {int(out[i]):#x}")
        return RunResult(True, "bit-exact")


def verify_plan(plan: ConversionPlan, name: str = "cvt", runs: int = 2, seed: int | None = None,
                directory: str | None = None) -> RunResult:
    """Render, compile and run ``plan``'s harness ``runs`` times on fresh data."""
    from .render import write_files
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        d = directory or tmp
        write_files(plan, d, name, emit=("header", "harness"))
        h = Harness(plan, d, name)
        for _ in range(runs):
            res = h.run(rng)
            if not res.ok:
                return res
        return res
