"""What a plan says one compiled ``convert()``, ``store()``, ``load()`` or copy contains, checked
against the compiler's output (PTX on CUDA, AMDGPU assembly on HIP), and the archs a plan's
source is compiled for.  Shared by ``tests/test_compile.py`` (the seeded sample) and
``tests/test_compile_generated.py`` (``generated/``)."""
from __future__ import annotations

from ll_codegen.plan.plans import Transfer
from toolchain import expected, isa_counts, ptx_counts, uses_stmatrix, widths

CUDA_ARCHS = ("sm_80", "sm_90")


def compile_archs(plan: Transfer) -> tuple[str, ...]:
    """The archs a conversion's source is compiled for: sm_90a (TMA, wgmma) or a HIP arch alone;
    sm_90 alone when it issues stmatrix; else sm_80 and sm_90."""
    if plan.target == "hip" or plan.arch == "sm_90a":
        return (plan.arch,)
    return ("sm_90",) if uses_stmatrix(plan) else CUDA_ARCHS


def count_check(plan: Transfer, code: str, tool: str) -> tuple[list[str], list[str]]:
    """(hard, soft) differences between the plan and the code of one convert().

    Hard: every difference (CUDA issues inline PTX of exactly the planned
    width; HIP fences each LDS access, so a ds_read2/ds_write2 pair or a fused
    access is a finding) but one documented, benign deviation, which is soft:
    ``lds-promoted`` -- on AMDGPU a conversion without shared memory touches
    LDS (the backend promoted a thread-private array to LDS).  No barriers in
    a one-wave AMDGPU workgroup agree with the plan (there they are no-ops
    and the backend drops them)."""
    if plan.operation == "copy":
        return copy_count_check(plan, code, tool), []
    if plan.operation in ("store", "load"):
        return memory_count_check(plan, code, tool), []
    exp = expected(plan)
    hard, soft = [], []
    if tool == "cuda":
        got = ptx_counts(code)
        names = {"shfl": "shfl.sync", "bar": "bar.sync", "st": "st.shared", "ld": "ld.shared"}
    else:
        got = isa_counts(code)
        names = {"shfl": "ds_bpermute", "bar": "s_barrier", "st": "ds_write", "ld": "ds_read"}
    if got["shfl"] != exp.get("shfl", 0):
        hard.append(f"{names['shfl']}: code has {got['shfl']}, plan says {exp.get('shfl', 0)}")
    one_wave = tool == "hip" and plan.threads <= plan.warp_size
    if got["bar"] != exp.get("bar", 0) and not (one_wave and got["bar"] == 0):
        hard.append(f"{names['bar']}: code has {got['bar']}, plan says {exp.get('bar', 0)}")
    m = plan.smem if plan.operation == "convert" else None
    for kind, instr in (("st", m and m.store_instr), ("ld", m and m.load_instr)):
        g, want = got[kind], exp.get(kind, [])
        if instr and instr.startswith("matrix"):
            if got[kind + "matrix"] != want or g:
                hard.append(f"{kind}matrix: code has {got[kind + 'matrix']} (+ {names[kind]} {g}), plan says {want}")
            continue
        if tool == "cuda" and got[kind + "matrix"]:
            hard.append(f"{kind}matrix: code has {got[kind + 'matrix']}, plan says none")
        if g == want:
            continue
        msg = f"{names[kind]}: code has {widths(g)}, plan says {widths(want)}"
        if not want and m is None and tool == "hip":
            soft.append(f"lds-promoted: {msg}")
        else:
            hard.append(msg)
    if tool == "hip":
        for kind in ("st", "ld"):
            if got[kind + "2"]:
                hard.append(f"{names[kind]}2: the backend paired {got[kind + '2']} planned accesses")
    return hard, soft


def copy_count_check(plan: Transfer, code: str, tool: str) -> list[str]:
    """A copy's harness (it moves the tile itself with plain C++, typed
    .u/.f and not counted): cp.async as planned, or the planned ld.global +
    st.shared widths.  HIP copies are compile-checked only (the harness's
    own accesses are the same instructions there)."""
    if tool == "hip":
        return []
    exp, got = expected(plan), ptx_counts(code)
    bad = []
    for key, what in (("cp_async", "cp.async"), ("gld", "ld.global"), ("st", "st.shared"), ("gst", "st.global"),
                      ("ld", "ld.shared")):
        want = exp.get(key, 0 if key == "cp_async" else [])
        if got[key] != want:
            bad.append(f"{what}: code has {got[key]}, plan says {want}")
    return bad


def memory_count_check(plan: Transfer, code: str, tool: str) -> list[str]:
    """The probe kernel of a memory plan (only its planned accesses): CUDA st/ld.shared (.b-typed, with widths), stmatrix/ldmatrix
    and st/ld.global (.b-typed, with widths) as planned; AMDGPU ds_write /
    ds_read widths as planned (none for a global tile), none paired.  A
    shared load's probe first fills the tile (so the loads read defined
    bytes) with a barrier: for it only the load side is compared on AMDGPU,
    where the fill is the same instructions."""
    exp = expected(plan)
    side = "st" if plan.memory.direction == "store" else "ld"
    if plan.via is not None:                 # the conversion as any conversion, then the global accesses
        bad = count_check(plan.via, code, tool)[0]
        if tool == "cuda":
            got = ptx_counts(code)
            bad += [f"{k}.global: code has {widths(got['g' + k])}, plan says {widths(exp.get('g' + k, []))}"
                    for k in ("st", "ld") if got["g" + k] != exp.get("g" + k, [])]
        return bad
    if tool == "hip":
        got = isa_counts(code)
        bad = [f"ds_{op}2: the backend paired {got[k + '2']} planned accesses"
               for k, op in (("st", "write"), ("ld", "read")) if k == side and got[k + "2"]]
        for k, op in (("st", "write"), ("ld", "read")):
            if k == side and got[k] != exp.get(k, []):
                bad.append(f"ds_{op}: code has {widths(got[k])}, plan says {widths(exp.get(k, []))}")
        if got["shfl"]:
            bad.append(f"ds_bpermute: code has {got['shfl']}, plan says none")
        return bad
    got = ptx_counts(code)
    bad = []
    if got["shfl"]:
        bad.append(f"shfl.sync: code has {got['shfl']}, plan says 0")
    for key, what in (("st", "st.shared"), ("ld", "ld.shared"), ("gst", "st.global"), ("gld", "ld.global")):
        want = exp.get(key, [])
        if plan.memory.instr.startswith("matrix") and key in ("st", "ld"):
            if isinstance(want, int):
                if got[key + "matrix"] != want or got[key]:
                    bad.append(f"{key}matrix: code has {got[key + 'matrix']} (+ {what} {got[key]}), plan says {want}")
                continue
            want = []
        if got[key] != want:
            bad.append(f"{what}: code has {widths(got[key])}, plan says {widths(want)}")
    for key in ("st", "ld"):
        if not (plan.memory.instr.startswith("matrix") and key in exp) and got[key + "matrix"]:
            bad.append(f"{key}matrix: code has {got[key + 'matrix']}, plan says none")
    return bad
