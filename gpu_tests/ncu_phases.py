"""Which lanes share a shared-memory wavefront: one-instruction probes under Nsight Compute.

    python gpu_tests/ncu_phases.py --out DIR

Each probe kernel is one warp issuing ONE ``ld.shared``/``st.shared`` of 4, 8 or 16 bytes at a byte
offset read per lane from a table: contiguous, with one or two lane bits broadcast (lanes l and
l ^ 2^b read the same address), spread to a 2-granule stride, or with the remaining bits reversed.
ncu counts the instruction's wavefronts and bank conflicts; the bank model (``Target``,
``emulator.count_wavefronts`` on the addresses, ``swizzle.predict_wavefronts`` on the lane bases)
must give the same numbers for every probe.  This is where ``Target.load_quad_merge`` comes from;
the measurements are kept in ``tests/data/h100_shared_phases.json`` for the CPU tests.

``cp.async`` probes (op ``cp``: every lane copies its own 4/8/16 bytes from a contiguous global
source; a copy never writes one shared address twice): at 4 and 8 bytes the LDGSTS counters equal
``st.shared``'s, and are checked so.  At 16 bytes ncu reports no bank conflicts for LDGSTS at all and
wavefronts that follow neither model (a 2-way conflicting stride: 32 wavefronts where ``st.shared``
takes 8); those probes are recorded, not checked -- the planner's 16-byte copies are conflict-free,
where both agree (4 wavefronts per instruction).

Writes DIR/phases.json (that file's format) and prints the mismatches; exit 1 when there are any.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]

from ncu_bank_conflicts import ncu_bin, parse_raw_csv  # noqa: E402

METRICS = {op: (f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum",
                 f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum") for op in ("ld", "st")}
METRICS["cp"] = ("sm__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum",
                 "sm__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum")
ASM = {("ld", 4): '"ld.shared.u32 %0, [%1];" : "=r"(a) : "r"(addr)',
       ("ld", 8): '"ld.shared.v2.u32 {%0,%1}, [%2];" : "=r"(a), "=r"(b) : "r"(addr)',
       ("ld", 16): '"ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(addr)',
       ("st", 4): '"st.shared.u32 [%0], %1;" :: "r"(addr), "r"(a)',
       ("st", 8): '"st.shared.v2.u32 [%0], {%1,%2};" :: "r"(addr), "r"(a), "r"(b)',
       ("st", 16): '"st.shared.v4.u32 [%0], {%1,%2,%3,%4};" :: "r"(addr), "r"(a), "r"(b), "r"(c), "r"(d)'}
ASM.update({("cp", w): f'"cp.async.{"cg" if w == 16 else "ca"}.shared.global [%0], [%1], {w}; cp.async.wait_all;" '
                       f':: "r"(addr), "l"(out + threadIdx.x * {w // 4}) : "memory"' for w in (4, 8, 16)})


def probes() -> list[dict]:
    """(bytes, op, case, offsets) of every probe."""
    lanes = np.arange(32)

    def without(bits):                    # lane index with the broadcast bits dropped
        out, k = np.zeros(32, dtype=np.int64), 0
        for b in range(5):
            if b not in bits:
                out |= ((lanes >> b) & 1) << k
                k += 1
        return out

    def reverse4(c):
        return sum(((c >> k) & 1) << (3 - k) for k in range(4))

    out = []
    for w in (4, 8, 16):
        maps = [("contig", lanes * w)]
        maps += [(f"bc{b}", without({b}) * w) for b in range(5)]
        maps += [("bc" + "".join(map(str, bs)), without(set(bs)) * w)
                 for bs in ((0, 1), (1, 2), (2, 3), (3, 4), (0, 2), (1, 3), (0, 4), (2, 4))]
        maps += [(f"bc{b}_stride2", without({b}) * 2 * w) for b in (0, 1, 2)]
        maps += [(f"bc{b}_rev", reverse4(without({b})) * w) for b in (1, 2)]
        out += [{"bytes": w, "op": op, "case": name, "offsets": [int(x) for x in offs]}
                for name, offs in maps for op in ("ld", "st")]
        # cp.async: every lane writes its own bytes (copy plans never write one address twice)
        linear = [("contig", [w << k for k in range(5)]), ("u8_copy", [16, 32, 72, 144, 288])]
        linear += [(f"bit{b}_far", [w << k if k != b else 1024 for k in range(5)]) for b in range(5)]
        linear += [(f"bit{b}_row", [w << k if k != b else 128 for k in range(5)]) for b in range(5)]
        linear += [(f"stride{m}", [m * w << k for k in range(5)]) for m in (2, 4, 8)]
        for name, lane in linear:
            offs = [int(np.bitwise_xor.reduce([lane[k] for k in range(5) if l >> k & 1] or [0])) for l in range(32)]
            if len(set(offs)) == 32 and max(offs) + w <= 4096 and all(o % w == 0 for o in offs):
                out += [{"bytes": w, "op": op, "case": name, "offsets": offs} for op in ("st", "cp")]
    return out


def source(ps: list[dict]) -> str:
    return "".join(f'''extern "C" __global__ void phase_{i}(const int* offs, unsigned* out) {{
    __shared__ __align__(128) unsigned char s[4096];
    unsigned addr = (unsigned)__cvta_generic_to_shared(s) + offs[threadIdx.x];
    unsigned a = threadIdx.x, b = 1, c = 2, d = 3;
    asm volatile({ASM[p["op"], p["bytes"]]});
    out[threadIdx.x] = a + b + c + d;
}}
''' for i, p in enumerate(ps))


def model(p: dict) -> tuple[int, int, int, int]:
    """(brute-force wavefronts, conflicts, predicted wavefronts, conflicts) of one probe on sm_90."""
    from ll_codegen.verify.emulate.banks import count_wavefronts, min_wavefronts
    from ll_codegen.plan.swizzle import predict_wavefronts
    from ll_codegen.core.target import get_target
    t = get_target("cuda", "sm_90")
    a, load = np.array(p["offsets"]), p["op"] == "ld"
    w = count_wavefronts(a, p["bytes"], t, load)
    pw, pc = predict_wavefronts([int(a[1 << k] ^ a[0]) for k in range(5)], p["bytes"], t, load=load)
    return w, w - min_wavefronts(a, p["bytes"], t, load), pw, pc


def drive(work: str) -> None:
    import cupy
    ps = json.load(open(os.path.join(work, "probes.json")))
    mod = cupy.RawModule(path=os.path.join(work, "phases.cubin"))
    out = cupy.zeros(32 * 4, dtype=cupy.uint32)
    for i, p in enumerate(ps):
        mod.get_function(f"phase_{i}")((1,), (32,), (cupy.asarray(np.array(p["offsets"], dtype=np.int32)), out))
    cupy.cuda.runtime.deviceSynchronize()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu_tests/out"))
    ap.add_argument("--drive", metavar="WORK", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.drive:
        drive(a.drive)
        return 0
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="llgen_phases_")
    ps = probes()
    json.dump(ps, open(os.path.join(work, "probes.json"), "w"))
    with open(os.path.join(work, "phases.cu"), "w") as f:
        f.write(source(ps))
    subprocess.run(["nvcc", "-arch=sm_90", "-O3", "-cubin", "-o", os.path.join(work, "phases.cubin"),
                    os.path.join(work, "phases.cu")], check=True)
    metrics = [k for pair in METRICS.values() for k in pair]
    log = os.path.join(work, "ncu.csv")
    subprocess.run([ncu_bin(), "--metrics", ",".join(metrics), "--csv", "--page", "raw", "--log-file", log,
                    "--kernel-name", "regex:^phase_", sys.executable, os.path.abspath(__file__), "--drive", work],
                   check=True, capture_output=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE])))
    meas = parse_raw_csv(open(log).read())
    bad = []
    for i, p in enumerate(ps):
        m = meas.get(f"phase_{i}", {})
        p["wavefronts"], p["bank_conflicts"] = (int(m.get(k, -1)) for k in METRICS[p["op"]])
        w, c, pw, pc = model(p)
        if p["op"] == "cp" and p["bytes"] == 16:
            continue                      # recorded, not modelled (module docstring)
        if not (w, c) == (pw, pc) == (p["wavefronts"], p["bank_conflicts"]):
            bad.append(f"{p['bytes']:2d} B {p['op']} {p['case']}: measured {p['wavefronts']}/{p['bank_conflicts']}, "
                       f"brute force {w}/{c}, predicted {pw}/{pc}")
    with open(os.path.join(a.out, "phases.json"), "w") as f:
        json.dump({"command": "python gpu_tests/ncu_phases.py --out DIR", "probes": ps}, f, indent=1)
    for b in bad:
        print("MISMATCH", b)
    n = sum(not (p["op"] == "cp" and p["bytes"] == 16) for p in ps)
    print(f"ncu phases: {n - len(bad)} of {n} modelled probes match the bank model (wavefronts and conflicts); "
          f"{len(ps) - n} 16-byte cp.async probes recorded")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
