"""Triton as a test oracle: the bases Triton itself computes for a spec.

``TritonOracle`` runs Triton (Gluon's ``to_linear_layout``, CPU only) in a
worker subprocess: specs go in as JSON lines, bases come back as JSON lines.
Some invalid specs make Triton abort (an LLVM ``report_fatal_error`` or a C++
assert kills the process); the oracle then records the spec as rejected
(``"abort: ..."``) and starts a fresh worker, so one bad spec never ends a
sweep.  Never imported by ``ll_codegen``: Triton is a test-only dependency
(the ``crosscheck`` extra).

Spec dicts are ours (``ll_codegen.spec`` YAML form); ``to_gluon`` maps them to
Gluon's classes.  Two of our forms have no Gluon twin and are converted here:

* the old CTA triple ``ctas_per_cga``/``cta_split_num``/``cta_order`` (gone
  from Gluon): converted to ``cga_layout`` as older Triton's ``makeCgaLayout``
  did -- dims walked in ``cta_order``, each contributing
  ``identity(split[d]) * zeros(ctas[d] / split[d])`` block bases;
* ``amd_wmma`` ``warps_per_cta`` (Gluon now takes ``warp_bases``): the warps
  tile the dims row-major (last dim fastest), which is what
  ``warps_per_cta`` meant in the Triton releases that had it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Iterable

WORKER = r"""
import json, os, sys
# Triton's nanobind leak report and LLVM noise go to stderr; keep stdout clean.
from triton._C.libtriton import ir
from triton._C.libtriton.gluon_ir import GluonOpBuilder
import triton.experimental.gluon.language as ttgl
from triton.experimental.gluon.language import amd as ttgl_amd
sys.path.insert(0, os.environ["LLGEN_ORACLE_DIR"])
from triton_oracle import to_gluon
ctx = ir.context(); ir.load_dialects(ctx)
builder = GluonOpBuilder(ctx)
out = sys.stdout
sys.stdout = sys.stderr
for line in sys.stdin:
    spec = json.loads(line)
    try:
        layout = to_gluon(spec, ttgl, ttgl_amd)
        ll = builder.to_linear_layout(layout._to_ir(builder), list(spec["shape"]))
        if hasattr(ll, "offset_bases"):
            res = {"offset": ll.offset_bases, "block": ll.block_bases}
        else:
            res = {"register": ll.reg_bases, "lane": ll.lane_bases, "warp": ll.warp_bases,
                   "block": ll.block_bases}
        reply = {"ok": {k: [list(map(int, b)) for b in v] for k, v in res.items()}}
    except BaseException as e:  # Gluon's Python-side asserts and MLIR verifier errors
        reply = {"error": (type(e).__name__ + ": " + str(e)).splitlines()[0][:200] if str(e) else type(e).__name__}
    out.write(json.dumps(reply) + "\n")
    out.flush()
"""


def cga_from_triple(rank: int, ctas: list[int] | None, split: list[int] | None,
                    order: list[int] | None) -> list[list[int]]:
    """Old Triton's ``makeCgaLayout``: block bases of the CTA triple."""
    ctas = ctas or [1] * rank
    split = split or [1] * rank
    order = order or list(range(rank - 1, -1, -1))
    bases = []
    for d in order:
        for i in range(split[d].bit_length() - 1):
            b = [0] * rank
            b[d] = 1 << i
            bases.append(b)
        for _ in range((ctas[d] // split[d]).bit_length() - 1):
            bases.append([0] * rank)
    return bases


def _cga(spec: dict, rank: int) -> list[list[int]]:
    if spec.get("cga_layout") is not None:
        return [list(b) for b in spec["cga_layout"]]
    if any(spec.get(k) is not None for k in ("ctas_per_cga", "cta_split_num", "cta_order")):
        return cga_from_triple(rank, spec.get("ctas_per_cga"), spec.get("cta_split_num"), spec.get("cta_order"))
    return []


def rank_of(spec: dict) -> int:
    """The tensor rank a spec dict describes."""
    kind = spec["kind"]
    if kind == "blocked":
        return len(spec["size_per_thread"])
    if kind in ("nvidia_mma", "amd_mfma", "amd_wmma"):
        return len(spec["warps_per_cta"])
    if kind == "slice":
        return rank_of(spec["parent"]) - 1
    if kind == "dot_operand":
        return rank_of(spec["parent"])
    if kind == "swizzled_shared":
        return len(spec["order"])
    if kind == "nvmma_shared":
        return spec.get("rank", 2)
    raise ValueError(kind)


def wmma_warp_bases(warps: list[int]) -> list[list[int]]:
    """Row-major warp tiling (last dim fastest) as Gluon ``warp_bases``."""
    rank = len(warps)
    bases = []
    for d in reversed(range(rank)):
        for i in range(warps[d].bit_length() - 1):
            b = [0] * rank
            b[d] = 1 << i
            bases.append(b)
    return bases


def to_gluon(spec: dict, ttgl: Any, amd: Any) -> Any:
    """Our spec dict -> the Gluon layout object with the same parameters."""
    kind = spec["kind"]
    rank = rank_of(spec)
    if kind == "blocked":
        return ttgl.BlockedLayout(spec["size_per_thread"], spec["threads_per_warp"], spec["warps_per_cta"],
                                  spec["order"], _cga(spec, rank))
    if kind == "slice":
        return ttgl.SliceLayout(spec["dim"], to_gluon(spec["parent"], ttgl, amd))
    if kind == "nvidia_mma":
        return ttgl.NVMMADistributedLayout(spec["version"], spec["warps_per_cta"], spec["instr_shape"],
                                           _cga(spec, rank))
    if kind == "dot_operand":
        return ttgl.DotOperandLayout(spec["operand_index"], to_gluon(spec["parent"], ttgl, amd),
                                     spec.get("k_width", 0))
    if kind == "amd_mfma":
        return amd.AMDMFMALayout(spec["version"], spec["instr_shape"], spec["transposed"], spec["warps_per_cta"],
                                 spec.get("element_bitwidth"), spec.get("tiles_per_warp"), _cga(spec, rank))
    if kind == "amd_wmma":
        return amd.AMDWMMALayout(spec["version"], spec["transposed"], wmma_warp_bases(spec["warps_per_cta"]),
                                 None, spec.get("instr_shape"), _cga(spec, rank), rank)
    if kind == "swizzled_shared":
        return ttgl.SwizzledSharedLayout(spec["vec"], spec["per_phase"], spec["max_phase"], spec["order"],
                                         _cga(spec, rank))
    if kind == "nvmma_shared":
        return ttgl.NVMMASharedLayout(spec["swizzle_byte_width"], spec["element_bitwidth"], rank,
                                      spec.get("transposed", False), spec.get("fp4_padded", False),
                                      _cga(spec, rank))
    raise ValueError(f"no Gluon twin for kind {kind!r}")


def triton_available() -> bool:
    try:
        import triton.experimental.gluon.language  # noqa: F401
        return True
    except Exception:
        return False


def triton_version() -> str:
    import triton
    return triton.__version__


class TritonOracle:
    """Bases from Triton, one worker process, restarted when Triton aborts."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def _start(self) -> None:
        env = dict(os.environ, LLGEN_ORACLE_DIR=os.path.dirname(os.path.abspath(__file__)))
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=env, bufsize=1)

    def bases(self, spec: dict) -> dict:
        """``{"ok": bases}`` or ``{"error": message}`` (``"abort: ..."`` when Triton died)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            self.proc.stdin.write(json.dumps(spec) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            code = self.proc.wait()
            self.proc = None
            return {"error": f"abort: Triton's process died (exit {code})"}
        return json.loads(line)

    def many(self, specs: Iterable[dict]) -> list[dict]:
        return [self.bases(s) for s in specs]

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        self.proc = None
