"""Every target instruction a generated CUDA file issues, one record each: the one home of inline asm.

As CuTe's ``arch/`` does, each instruction is one wrapper, ``detail::<name>(...)``, and one
``Instruction`` here holds all of it:

* the device branch: the inline asm (no other module or template of the package writes ``asm``);
* the host branch (``LLGEN_HOST_SIMT``): the host SIMT runtime's model of the same instruction
  (``ll_codegen/simt/``), so every generated file also runs on the CPU;
* the arch guard: the oldest arch whose PTX has the instruction (``arch``), or the
  architecture-specific feature it needs (``feature``: ``sm_90a``, seen by the preprocessor as
  ``__CUDA_ARCH_FEAT_SM90_ALL``, as CUTLASS tests it).  A device pass without it compiles the
  wrapper to ``__trap()``.  ``nvcc -arch=sm_90a`` runs two device passes: compute_90a (the sm_90a
  code an H100 or H200 runs, with ``__CUDA_ARCH_FEAT_SM90_ALL``) and compute_90 (PTX kept for later GPUs to
  compile, without it), and ptxas rejects wgmma and setmaxnreg in the second; the guard lets both
  passes compile.  Instructions every CUDA arch the package targets has (``BASE_ARCH``) need no guard.

``templates/instructions.j2``'s macro ``define`` renders any list of records, each the same way.
The functions below build the records the emitters use.
"""
from __future__ import annotations

from dataclasses import dataclass

from ll_codegen.core.target import CUDA_ARCHS

#: the oldest CUDA arch the package targets (``core/target.CUDA_ARCHS``): an instruction it has needs no guard
BASE_ARCH = min(int(a[3:5]) for a in CUDA_ARCHS)

#: the preprocessor macro of each architecture-specific feature
FEATURE_MACROS = {"sm_90a": "__CUDA_ARCH_FEAT_SM90_ALL"}

PTX_SHARED_TYPES = {1: ".b8", 2: ".b16", 4: ".b32", 8: ".v2.b32", 16: ".v4.b32"}


@dataclass(frozen=True)
class Instruction:
    """One target instruction behind one inline wrapper:
    ``[template]  __device__ __forceinline__ <result> <name>(<params>)``."""
    name: str
    params: str
    device: tuple[str, ...]          # the device branch: the asm statement(s)
    host: tuple[str, ...]            # the LLGEN_HOST_SIMT branch: the host SIMT runtime's model
    ptx: str                         # the instruction, as the PTX ISA names it
    arch: int = BASE_ARCH            # the oldest sm_XY whose PTX has it
    feature: str = ""                # the architecture-specific feature it needs ("sm_90a")
    template: str = ""               # "template <int kImm>", ...
    result: str = "void"
    doc: tuple[str, ...] = ()        # comment lines above the wrapper

    @property
    def guard(self) -> str:
        """The preprocessor condition of the device branch ("" when every target arch has it)."""
        if self.feature:
            return f"defined({FEATURE_MACROS[self.feature]})"
        return f"__CUDA_ARCH__ >= {self.arch * 10}" if self.arch > BASE_ARCH else ""

    @property
    def missing(self) -> str:
        """What the ``__trap()`` of a device pass without the guard says."""
        if self.feature:
            return (f"{self.ptx} is {self.feature} only: code built without {FEATURE_MACROS[self.feature]} traps "
                    f"(-arch={self.feature}'s compute_{self.arch} PTX, say)")
        return f"{self.ptx} needs sm_{self.arch} or newer"


# ---------------------------------------------------------------- shared / global memory, cp.async
def memory(op: str, nbytes: int = 0, x: int = 0, trans: bool = False) -> Instruction:
    """One ld/st.shared, ld/st.global, ldmatrix, stmatrix or cp.async: ``detail::<name><kImm>(addr, words...)``.

    ``addr`` is a 32-bit shared-window address (a generic pointer for global accesses), ``kImm`` a
    byte offset the PTX keeps as an immediate, ``words`` 32-bit registers (sub-word stores take the
    low bits).

    ``op``: ``st_shared``/``ld_shared``/``st_global``/``ld_global`` (``nbytes`` 1, 2, 4, 8, 16),
    ``stmatrix``/``ldmatrix`` (m8n8 b16, ``x`` 1, 2, 4 matrices, ``trans``) or
    ``cp_async``/``cp_async_zfill`` (``nbytes`` 4, 8, 16: global -> shared, the zfill form reading
    ``src_bytes`` and zeroing the rest)."""
    glob = op.endswith("global")
    arch = BASE_ARCH
    if op in ("st_shared", "ld_shared", "st_global", "ld_global"):
        t = PTX_SHARED_TYPES[nbytes]
        words = max(1, nbytes // 4)
        name = f"{op}{t.replace('.', '_')}"
        ptx = f"{op.replace('_', '.')}{t}"
    elif op in ("stmatrix", "ldmatrix"):
        words, nbytes = x, 0
        name = f"{op}_x{x}{'_trans' if trans else ''}"
        ptx = f"{op}.sync.aligned.m8n8.x{x}{'.trans' if trans else ''}.shared.b16"
        arch = 90 if op == "stmatrix" else 75
    elif op in ("cp_async", "cp_async_zfill"):
        zfill = op.endswith("zfill")
        cache = "cg" if nbytes == 16 else "ca"          # .cg (L2 only) takes 16-byte copies alone
        src_size = ", %2" if zfill else ""
        imm = 3 if zfill else 2
        ops = '"r"(addr), "l"(src)' + (', "r"(src_bytes)' if zfill else "") + ', "n"(kImm)'
        return Instruction(
            f"{op}_{nbytes}", "unsigned addr, const void* src" + (", unsigned src_bytes" if zfill else ""),
            (f'asm volatile("cp.async.{cache}.shared.global [%0+%{imm}], [%1], {nbytes}{src_size};" '
             f':: {ops} : "memory");',),
            (f"llgen_host::cp_async(addr + kImm, src, {nbytes}, {'src_bytes' if zfill else nbytes});",),
            f"cp.async.{cache}.shared.global", template="template <int kImm>")
    else:
        raise ValueError(f"unknown target instruction {op!r}")
    store = op.startswith("st")
    regs = [f"%{j + (1 if store else 0)}" for j in range(words)]
    regs_text = regs[0] if words == 1 and not op.endswith("matrix") else "{" + ", ".join(regs) + "}"
    addr_op, imm_op = (0, words + 1) if store else (words, words + 1)
    operand = f"[%{addr_op}+%{imm_op}]"
    asm = f"{ptx} {operand}, {regs_text};" if store else f"{ptx} {regs_text}, {operand};"
    rs = [f"r{j}" for j in range(words)]
    a = '"l"(addr)' if glob else '"r"(addr)'
    if store:
        constraints = ":: " + ", ".join([a] + [f'"r"({r})' for r in rs] + ['"n"(kImm)'])
    else:
        constraints = ": " + ", ".join(f'"=r"({r})' for r in rs) + f' : {a}, "n"(kImm)'
    if op.endswith("matrix"):
        model = f"{op}(addr + kImm, {x}, {'true' if trans else 'false'}, regs)"
    elif glob:
        model = f"{op}(static_cast<{'' if store else 'const '}char*>(addr) + kImm, {nbytes}, regs)"
    else:
        model = f"{op}(addr + kImm, {nbytes}, regs)"
    addr_t = ("void* addr" if store else "const void* addr") if glob else "unsigned addr"
    return Instruction(name, ", ".join([addr_t] + [f"uint32_t{'' if store else '&'} {r}" for r in rs]),
                       (f'asm volatile("{asm}" {constraints} : "memory");',),
                       (f"uint32_t* regs[] = {{{', '.join(f'&{r}' for r in rs)}}};", f"llgen_host::{model};"),
                       ptx, arch=arch, template="template <int kImm>")


#: cp.async groups: commit_group closes the group of cp.async issued since the last one; wait_group<N>
#: returns once at most N are in flight (the host SIMT runtime lands each cp.async at the wait that covers it)
CP_ASYNC_GROUPS = (
    Instruction("cp_async_commit_group", "", ('asm volatile("cp.async.commit_group;" ::: "memory");',),
                ("llgen_host::cp_async_commit();",), "cp.async.commit_group"),
    Instruction("cp_async_wait_group", "", ('asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");',),
                ("llgen_host::cp_async_wait(N);",), "cp.async.wait_group", template="template <int N>"))


# ---------------------------------------------------------------- named barriers
#: bar.sync id, threads (PTX ISA "bar.sync / barrier.sync"): waits until ``threads`` threads -- whole
#: warps -- arrived at barrier ``id`` (1..15; 0 is __syncthreads()'s), ordering their shared-memory
#: accesses; the block's other warps are not involved.  The host runtime models the count, the
#: arrivals and the ordering (simt_host.h, named barriers).
BAR_SYNC = Instruction(
    "bar_sync", "unsigned id, unsigned threads",
    ('asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");',),
    ("llgen_host::named_barrier(id, threads);",), "bar.sync",
    doc=("// bar.sync id, threads: a named barrier over `threads` threads (whole warps) only.",))


# ---------------------------------------------------------------- mma.sync, wgmma
def mma(name: str, instr: str, nd: int, acc_c: str, constraint: str, a_words: int, b_words: int, tail: str,
        host_call: str, wgmma: bool) -> Instruction:
    """One mma.sync or wgmma form: ``name(d0.., [a0..], [b0..], [desc_a], desc_b[, accumulate])``.

    ``instr`` the full PTX instruction; ``nd`` accumulator words of C type ``acc_c`` (asm constraint
    ``constraint``); ``a_words``/``b_words`` operand registers (0: the operand through a descriptor);
    ``tail`` the immediates after wgmma's scale-d predicate; ``host_call`` the host SIMT runtime's call
    (``w`` the word array -- wgmma: ``d`` the accumulator registers' addresses --, ``a``/``b`` the
    operand arrays); ``wgmma``: ``accumulate`` sets the scale-d predicate (0: D = A * B)."""
    d = "{" + ", ".join(f"%{i}" for i in range(nd)) + "}"
    k = nd
    if a_words:
        a = "{" + ", ".join(f"%{k + i}" for i in range(a_words)) + "}"
        k += a_words
    else:
        a, k = f"%{k}", k + 1
    if b_words:
        b = "{" + ", ".join(f"%{k + i}" for i in range(b_words)) + "}"
        k += b_words
    else:
        b, k = f"%{k}", k + 1
    operands = f"{d}, {a}, {b}, p{tail}" if wgmma else f"{d}, {a}, {b}, {d}"
    outputs = [f'"+{constraint}"(d{i})' for i in range(nd)]
    out_lines = [", ".join(outputs[i:i + 8]) + ("," if i + 8 < len(outputs) else "") for i in range(0, nd, 8)]
    inputs = ([f'"r"(a{i})' for i in range(a_words)] or ['"l"(desc_a)']) + \
             ([f'"r"(b{i})' for i in range(b_words)] or ['"l"(desc_b)']) + (['"r"(accumulate)'] if wgmma else [])
    pad = " " * 13                                               # under `asm volatile(`
    if wgmma:
        device = [f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{k}, 0;\\n"',
                  f'{pad}"{instr} {operands};\\n}}\\n"']
    else:
        device = [f'asm volatile("{instr} {operands};\\n"']
    device += [f"{pad}{': ' if j == 0 else '  '}{line}" for j, line in enumerate(out_lines)]
    device += [f"{pad}: {', '.join(inputs)}", pad + (': "memory");' if wgmma else ");")]
    # wgmma is asynchronous: the host runtime keeps the accumulator registers' addresses (``d``) and
    # writes them at the wgmma.wait_group that covers the instruction; mma.sync computes in ``w`` during the call
    regs = f"{{{', '.join(f'&d{i}' for i in range(nd))}}}"
    host = [f"void* const d[{nd}] = {regs};"] if wgmma else \
        [f"{acc_c}* const d[{nd}] = {regs};", f"uint32_t w[{nd}];",
         f"for (int i = 0; i < {nd}; ++i) memcpy(&w[i], d[i], 4);"]
    if a_words:
        host.append(f"const uint32_t a[{a_words}] = {{{', '.join(f'a{i}' for i in range(a_words))}}};")
    if b_words:
        host.append(f"const uint32_t b[{b_words}] = {{{', '.join(f'b{i}' for i in range(b_words))}}};")
    host += [f"{host_call};"] + ([] if wgmma else [f"for (int i = 0; i < {nd}; ++i) memcpy(d[i], &w[i], 4);"])
    params = ([f"{acc_c}& d{i}" for i in range(nd)]
              + ([f"uint32_t a{i}" for i in range(a_words)] or ["uint64_t desc_a"])
              + ([f"uint32_t b{i}" for i in range(b_words)] or ["uint64_t desc_b"])
              + (["int accumulate"] if wgmma else []))
    doc = (f"// {instr}: {nd} accumulator word(s)"
           f"{', A by descriptor' if not a_words else f', A in {a_words} registers'}"
           f"{', B by descriptor' if not b_words else f', B in {b_words} registers'}.")
    fp8 = ".e4m3" in instr or ".e5m2" in instr                  # mma.sync on 8-bit floats: sm_89
    return Instruction(name, ", ".join(params), tuple(device), tuple(host),
                       "wgmma.mma_async" if wgmma else "mma.sync", arch=90 if wgmma else (89 if fp8 else BASE_ARCH),
                       feature="sm_90a" if wgmma else "", doc=(doc,))


#: wgmma's fence / commit / wait (every warp of the warp group), sm_90a; on the host a wgmma lands at
#: the wait covering its group (``simt/wgmma.h``)
WGMMA_FENCE = Instruction("wgmma_fence", "", ('asm volatile("wgmma.fence.sync.aligned;" ::: "memory");',),
                          ("llgen_host::wgmma_fence();",), "wgmma.fence", arch=90, feature="sm_90a")
WGMMA_COMMIT_GROUP = Instruction(
    "wgmma_commit_group", "", ('asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");',),
    ("llgen_host::wgmma_commit_group();",), "wgmma.commit_group", arch=90, feature="sm_90a")
WGMMA_WAIT_GROUP = Instruction(
    "wgmma_wait_group", "", ('asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");',),
    ("llgen_host::wgmma_wait_group(N);",), "wgmma.wait_group", arch=90, feature="sm_90a", template="template <int N>")


def setmaxnreg(inc: bool) -> Instruction:
    """``setmaxnreg.inc`` / ``.dec`` to ``R`` registers per thread (every warp of the warp group), sm_90a;
    on the host the CTA's register pool (``simt/hopper.h``): an ``.inc`` the pool cannot cover waits."""
    action = "inc" if inc else "dec"
    return Instruction(f"setmaxnreg_{action}", "",
                       (f'asm volatile("setmaxnreg.{action}.sync.aligned.u32 %0;" :: "n"(R));',),
                       (f"llgen_host::setmaxnreg(R, {'true' if inc else 'false'});",), f"setmaxnreg.{action}", arch=90,
                       feature="sm_90a", template="template <int R>")


def register_pin(c_type: str, constraint: str) -> Instruction:
    """An empty asm that reads and writes ``x``: the compiler keeps ``x`` in place across it (no PTX).
    On the host a read of ``x``: an error while a wgmma in flight writes it (``simt/wgmma.h``)."""
    return Instruction(f"pin_{constraint}", f"{c_type}& x", (f'asm volatile("" : "+{constraint}"(x) :: "memory");',),
                       ("llgen_host::register_read(&x);",), "(none: a compiler barrier on one register)")


# ---------------------------------------------------------------- mbarrier, TMA, the async proxy
#: fence.proxy.async: this thread's shared-memory writes visible to the async proxy (TMA, wgmma)
FENCE_PROXY_ASYNC = Instruction("fence_proxy_async_shared", "",
                                ('asm volatile("fence.proxy.async.shared::cta;" ::: "memory");',),
                                ("llgen_host::fence_proxy_async();",), "fence.proxy.async", arch=90)

MBARRIER = (
    Instruction("mbarrier_init", "unsigned bar, unsigned count",
                ('asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");',),
                ("llgen_host::mbarrier_init(bar, count);",), "mbarrier.init"),
    Instruction("fence_mbarrier_init", "", ('asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");',),
                ("// the host SIMT runtime's barriers are visible to its TMA at once",), "fence.mbarrier_init",
                arch=90),
    Instruction("mbarrier_arrive_expect_tx", "unsigned bar, unsigned bytes",
                ('asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes)',
                 '             : "memory");'),
                ("llgen_host::mbarrier_arrive_expect_tx(bar, bytes);",), "mbarrier.arrive.expect_tx", arch=90),
    Instruction("mbarrier_arrive", "unsigned bar",
                ('asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");',),
                ("llgen_host::mbarrier_arrive(bar);",), "mbarrier.arrive"),
    Instruction("mbarrier_try_wait_parity", "unsigned bar, unsigned parity",
                ("unsigned done;",
                 'asm volatile("{\\n\\t.reg .pred p;\\n\\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\n\\t"',
                 '             "selp.u32 %0, 1, 0, p;\\n\\t}" : "=r"(done) : "r"(bar), "r"(parity) : "memory");',
                 "return done != 0;"),
                ("return llgen_host::mbarrier_try_wait_parity(bar, parity);",), "mbarrier.try_wait.parity", arch=90,
                result="bool"))

#: programmatic dependent launch: a grid launched with cudaLaunchAttributeProgrammaticStreamSerialization may
#: start while the grid before it in the stream still runs; griddepcontrol.wait returns once that grid has
#: completed and its memory is visible, launch_dependents lets the next grid start before this one ends.  The
#: host SIMT runtime runs one grid after another, so both are no-ops there.
GRID_DEPENDENCY = (
    Instruction("griddepcontrol_wait", "", ('asm volatile("griddepcontrol.wait;" ::: "memory");',),
                ("// the host SIMT runtime runs one grid after another: the grid before has completed",),
                "griddepcontrol.wait", arch=90),
    Instruction("griddepcontrol_launch_dependents", "",
                ('asm volatile("griddepcontrol.launch_dependents;" ::: "memory");',),
                ("// the host SIMT runtime runs one grid after another: no grid to start early",),
                "griddepcontrol.launch_dependents", arch=90))

#: cp.async.bulk groups of TMA stores: commit_group closes one, wait_group.read<N> returns once at most N
#: still read shared memory
BULK_GROUPS = (
    Instruction("bulk_commit_group", "", ('asm volatile("cp.async.bulk.commit_group;" ::: "memory");',),
                ("llgen_host::bulk_commit_group();",), "cp.async.bulk.commit_group", arch=90),
    Instruction("bulk_wait_group_read", "",
                ('asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");',),
                ("llgen_host::bulk_wait_group_read(N);",), "cp.async.bulk.wait_group.read", arch=90,
                template="template <int N>"))


def _coords(rank: int) -> tuple[str, str, str]:
    """(parameters ``int c0, ..``, asm inputs ``"r"(c0), ..``, the host array's initialiser ``c0, ..``)."""
    cs = [f"c{i}" for i in range(rank)]
    return ", ".join(f"int {c}" for c in cs), ", ".join(f'"r"({c})' for c in cs), ", ".join(cs)


def tma_load(rank: int) -> Instruction:
    """``cp.async.bulk.tensor.<rank>d`` global -> shared: the box at map coordinates ``c0..`` (innermost
    first) of the tensor map ``map`` to the shared address ``dst``, completing ``bar``'s transaction bytes."""
    params, inputs, init = _coords(rank)
    ops = "{" + ", ".join(f"%{2 + i}" for i in range(rank)) + "}"
    asm = (f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes "
           f"[%0], [%1, {ops}], [%{2 + rank}];")
    return Instruction(f"tma_load_{rank}d", f"unsigned dst, const void* map, {params}, unsigned bar",
                       (f'asm volatile("{asm}"',
                        f'             :: "r"(dst), "l"(map), {inputs}, "r"(bar) : "memory");'),
                       (f"const int c[{rank}] = {{{init}}};", "llgen_host::tma_load(map, dst, bar, c);"),
                       "cp.async.bulk.tensor", arch=90)


def tma_store(rank: int) -> Instruction:
    """``cp.async.bulk.tensor.<rank>d`` shared -> global: the shared box at ``src`` to map coordinates
    ``c0..`` (innermost first) of the tensor map ``map``, in the thread's current bulk group."""
    params, inputs, init = _coords(rank)
    ops = "{" + ", ".join(f"%{2 + i}" for i in range(rank)) + "}"
    asm = f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [%0, {ops}], [%1];"
    return Instruction(f"tma_store_{rank}d", f"const void* map, unsigned src, {params}",
                       (f'asm volatile("{asm}"', f'             :: "l"(map), "r"(src), {inputs} : "memory");'),
                       (f"const int c[{rank}] = {{{init}}};", "llgen_host::tma_store(map, src, c);"),
                       "cp.async.bulk.tensor", arch=90)


# ---------------------------------------------------------------- f32 -> packed 16- and 8-bit floats
#: the packed conversion of each element type: (PTX instruction, result type, asm constraint, oldest arch,
#: the host stand-in's call on (lo, hi))
_CVT_PACK = {
    "f16": ("cvt.rn.f16x2.f32", "uint32_t", "r", 80,
            "const __half2 h = __floats2half2_rn(lo, hi);"),
    "bf16": ("cvt.rn.bf16x2.f32", "uint32_t", "r", 80,
             "const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);"),
    "f8e4m3": ("cvt.rn.satfinite.e4m3x2.f32", "uint16_t", "h", 89,
               "const __nv_fp8x2_storage_t h = __nv_cvt_float2_to_fp8x2(float2{lo, hi}, __NV_SATFINITE, __NV_E4M3);"),
    "f8e5m2": ("cvt.rn.satfinite.e5m2x2.f32", "uint16_t", "h", 89,
               "const __nv_fp8x2_storage_t h = __nv_cvt_float2_to_fp8x2(float2{lo, hi}, __NV_SATFINITE, __NV_E5M2);"),
}

#: the element types ``cvt_pack`` converts f32 pairs to
CVT_PACK_TYPES = tuple(_CVT_PACK)


def cvt_pack(dtype: str) -> Instruction:
    """``cvt_pack_<dtype>(hi, lo)``: two f32 rounded to nearest even into one packed pair, ``lo`` in the
    low half (bits 0-15 of the .b32 for f16/bf16, bits 0-7 of the .b16 for fp8), ``hi`` in the high half.

    PTX ISA "cvt": ``cvt.rn.f16x2.f32 d, a, b`` (likewise bf16x2, and e4m3x2/e5m2x2 with the mandatory
    ``.satfinite``) stores the value converted from ``a`` in the upper half of ``d`` and from ``b`` in the
    lower half, so the wrapper passes (hi, lo) in that order.  ``.satfinite``: a finite value beyond the
    format's largest and +-infinity become +-MAXNORM (448 e4m3, 57344 e5m2), a NaN the NaN 0x7f.  The host
    branch is the stand-ins' conversion (``simt/cuda_fp16.h``, ``cuda_bf16.h``, ``cuda_fp8.h``)."""
    ptx, result, constraint, arch, host = _CVT_PACK[dtype]
    return Instruction(
        f"cvt_pack_{dtype}", "float hi, float lo",
        (f"{result} d;", f'asm("{ptx} %0, %1, %2;" : "={constraint}"(d) : "f"(hi), "f"(lo));', "return d;"),
        (host, f"{result} d;", "memcpy(&d, &h, sizeof d);", "return d;"),
        ptx, arch=arch, result=result,
        doc=(f"// {ptx}: hi -> the upper {'8' if result == 'uint16_t' else '16'} bits, lo -> the lower.",))


# ---------------------------------------------------------------- bench loops
#: lop3.b32 d = LUT(a, kB, c) with kB an immediate (LUT bit (a << 2 | b << 1 | c) of kLut); the host
#: evaluates the truth table bit by bit
LOP3 = Instruction(
    "lop3_b32", "uint32_t a, uint32_t c",
    ("uint32_t d;", 'asm("lop3.b32 %0, %1, %2, %3, %4;" : "=r"(d) : "r"(a), "n"(kB), "r"(c), "n"(kLut));', "return d;"),
    ("uint32_t d = 0;",
     "for (int i = 0; i < 8; ++i)",
     "    if (kLut >> i & 1) d |= (i & 4 ? a : ~a) & (i & 2 ? kB : ~kB) & (i & 1 ? c : ~c);",
     "return d;"),
    "lop3.b32", template="template <uint32_t kB, int kLut>", result="uint32_t")


# ---------------------------------------------------------------- upcasts (plan/upcast.py)
#: prmt.b32 d = prmt(a, b, kSel) (PTX ISA "prmt", default mode): byte i of d is byte (kSel >> 4i) & 7 of
#: the 8 bytes {b, a} (a bytes 0-3), or that byte's sign replicated when (kSel >> 4i) & 8
PRMT = Instruction(
    "prmt_b32", "uint32_t a, uint32_t b",
    ("uint32_t d;", 'asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "n"(kSel));', "return d;"),
    ("const uint64_t x = a | static_cast<uint64_t>(b) << 32;",
     "uint32_t d = 0;",
     "for (int i = 0; i < 4; ++i) {",
     "    const uint32_t s = kSel >> (4 * i) & 0xfu;",
     "    uint32_t byte = static_cast<uint32_t>(x >> (8 * (s & 7u))) & 0xffu;",
     "    if (s & 8u) byte = (byte & 0x80u) ? 0xffu : 0u;",
     "    d |= byte << (8 * i);",
     "}",
     "return d;"),
    "prmt.b32", template="template <uint32_t kSel>", result="uint32_t")

#: the half type of each packed fma: (C stand-in type, bits -> type, type -> float, float -> type, oldest arch)
_HALF2 = {"f16x2": ("__half", "__ushort_as_half", "__half2float", "__float2half_rn", "__half_as_ushort", 80),
          "bf16x2": ("__nv_bfloat16", "__ushort_as_bfloat16", "__bfloat162float", "__float2bfloat16_rn",
                     "__bfloat16_as_ushort", 80)}


#: the half types' (stored mantissa bits, smallest normal exponent, exponent of 2 at which it overflows)
_HALF_FORMAT = {"f16x2": (10, -14, 16), "bf16x2": (7, -126, 128)}


def fma_x2(t: str) -> Instruction:
    """``fma_rn_<t>(a, b, c)``: fma.rn.f16x2 / fma.rn.bf16x2 (PTX ISA "fma" half precision): each 16-bit half
    of d is that half's a * b + c rounded once to nearest even (subnormals kept, overflow to infinity; a
    NaN result is the canonical NaN).  The host model: a * b is exact in double; TwoSum gives the
    rounded sum s and its exact error e; s rounded to nearest even at the half type's quantum, a tie
    of s broken by the sign of e -- one rounding of the exact a * b + c."""
    typ, from_bits, to_float, from_float, to_bits, arch = _HALF2[t]
    mant, emin, emax = _HALF_FORMAT[t]
    return Instruction(
        f"fma_rn_{t.replace('x2', '')}x2", "uint32_t a, uint32_t b, uint32_t c",
        ("uint32_t d;", f'asm("fma.rn.{t} %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));', "return d;"),
        ("uint32_t d = 0;",
         "for (int i = 0; i < 2; ++i) {",
         f"    const auto h = [&](uint32_t w) {{ return static_cast<double>({to_float}("
         f"{from_bits}(static_cast<uint16_t>(w >> (16 * i))))); }};",
         "    const double p = h(a) * h(b), c2 = h(c), s = p + c2, bp = s - c2;",
         "    const double e = (p - bp) + (c2 - (s - bp));          // s + e == p + c exactly",
         "    double v = s;",
         "    if (s != 0 && std::isfinite(s)) {",
         "        int ex;",
         "        std::frexp(s, &ex);",
         f"        const double q = std::ldexp(1.0, std::max(ex - 1, {emin}) - {mant});  // the quantum at s",
         "        const double n = s / q, fl = std::floor(n);",
         "        double r = std::nearbyint(n);                        // to nearest even",
         "        if (n - fl == 0.5 && e != 0) r = e > 0 ? fl + 1 : fl;  // a tie of s: the exact sum decides",
         "        v = r * q;",
         f"        if (std::fabs(v) >= std::ldexp(1.0, {emax})) v = std::copysign(INFINITY, v);",
         "    }",
         f"    const {typ} r = {from_float}(static_cast<float>(v));",
         f"    d |= static_cast<uint32_t>({to_bits}(r)) << (16 * i);",
         "}",
         "return d;"),
        f"fma.rn.{t}", arch=arch, result="uint32_t")


def cvt_fp8x2(src: str) -> Instruction:
    """``cvt_f16x2_<src>x2(a)``: cvt.rn.f16x2.e4m3x2 / .e5m2x2 (PTX ISA "cvt", sm_89): the two 8-bit floats
    of the .b16 ``a`` widened exactly to f16, the upper byte's into the upper half of d; a NaN becomes
    a NaN (the host stand-in's canonical 0x7fff, ``simt/cuda_fp8.h``)."""
    fmt = {"f8e4m3": ("e4m3x2", "__NV_E4M3"), "f8e5m2": ("e5m2x2", "__NV_E5M2")}[src]
    return Instruction(
        f"cvt_f16x2_{fmt[0]}", "uint16_t a",
        ("uint32_t d;", f'asm("cvt.rn.f16x2.{fmt[0]} %0, %1;" : "=r"(d) : "h"(a));', "return d;"),
        (f"const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(a, {fmt[1]});",
         "return static_cast<uint32_t>(h.x) | static_cast<uint32_t>(h.y) << 16;"),
        f"cvt.rn.f16x2.{fmt[0]}", arch=89, result="uint32_t")


#: ex2.approx.ftz.f32 (PTX ISA "ex2"): 2^a in one MUFU.EX2, subnormal inputs and results flushed to zero
#: (maximum relative error 2^-22 over the normal range).  The non-ftz ``exp2f`` costs three more
#: instructions a call (a compare and two predicated multiplies that rescale subnormals); a softmax's
#: terms below 2^-126 vanish beside its largest, 1.  The host model: exp2 in float, flushed the same way.
EX2_FTZ = Instruction(
    "ex2_ftz", "float a",
    ("float d;", 'asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(d) : "f"(a));', "return d;"),
    ("if (std::fpclassify(a) == FP_SUBNORMAL) a = 0.0f;",
     "const float d = std::exp2(a);",
     "return std::fpclassify(d) == FP_SUBNORMAL ? 0.0f : d;"),
    "ex2.approx.ftz.f32", result="float")

#: cvt.f32.f16 (PTX ISA "cvt"): the f16 in the low half of ``a`` widened exactly to f32
CVT_F32_F16 = Instruction(
    "cvt_f32_f16", "uint16_t a",
    ("float d;", 'asm("cvt.f32.f16 %0, %1;" : "=f"(d) : "h"(a));', "return d;"),
    ("return __half2float(__ushort_as_half(a));",),
    "cvt.f32.f16", result="float")

#: mul.rn.f32 (PTX ISA "mul"): a * b rounded once to nearest even, subnormals kept -- as literal PTX, so
#: that a build with ``-ftz=true`` or ``--use_fast_math`` (which flushes the compiler's own f32 multiplies)
#: cannot flush an e8m0-scaled tf32 value below 2^-126.  The host model: the IEEE float product.
MUL_RN_F32 = Instruction(
    "mul_rn_f32", "float a, float b",
    ("float d;", 'asm("mul.rn.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));', "return d;"),
    ("return a * b;",),
    "mul.rn.f32", result="float")
