"""The names of generated code and files: ``--name`` checks, default names, ``--emit`` kinds.

A generated namespace is a C identifier that is not a C/C++ keyword, not
reserved for the compiler and not a name the generated code or CUDA/HIP
uses unqualified (``check_name``); without ``--name`` each command derives
one from its spec files (``default_name``, ``gather_name``, ``mma_name``).
``output_names`` gives the files a command is sure to write, so that the
CLI can check every target before planning (a folder or FIFO in the way of
a large tile is reported at once, not after seconds of work).
"""
from __future__ import annotations

import os
import re
from typing import Any, Iterable

from ll_codegen.core import limits
from ll_codegen.emit.render import file_names
from ll_codegen.ttgir import split_selector

__all__ = ["C_KEYWORDS", "RESERVED_NAMES", "EMIT_KINDS", "check_name", "stem_ident", "usable_name", "default_name",
           "gather_name", "mma_name", "reduce_name", "parse_emit", "said_all", "output_names"]

EMIT_KINDS = ("header", "harness", "bench")

#: C and C++ keywords (and the alternative operator spellings) a name must not be.
C_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast requires restrict return short signed sizeof static static_assert static_cast struct switch
template this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
wchar_t while xor xor_eq _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn
_Static_assert _Thread_local
""".split())

C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

#: Names a generated namespace must not take: CUDA/HIP built-ins, types and macros the generated code
#: and its harness use unqualified, and the names the generated code declares inside the namespace.
RESERVED_NAMES = frozenset("""
threadIdx blockIdx blockDim gridDim warpSize NULL nullptr_t size_t ptrdiff_t printf memcpy memset malloc free
assert min max abs uint8_t uint16_t uint32_t uint64_t int8_t int16_t int32_t int64_t uintptr_t intptr_t
uint2 uint4 float2 float4 half __half __nv_bfloat16 std cuda hip llgen_host dim3 cudaStream_t hipStream_t
convert convert_words store store_words store_masked load load_words load_masked copy copy_masked commit wait
src_index dst_index tile_index detail kSrcRegs kDstRegs kRegs kSmemBytes kTileBytes kTileAlign kThreads
kWarpSize kElemBytes kRank kShape kOrder kAlignment kSrcWords kDstWords kWords lane warp tid smem tile strides
extent fill
gather index index_bits idx_index kIdxRegs kIndexBytes kAxis kAxisSize kSrcShape kIdxShape V8 V16
make_tensor_map mbar_init mbar_wait mbar_arrive_expect_tx fence_barrier_init fence_proxy_async store_commit
store_wait smem_u32 kBox kBoxDims kSwizzle kDataType kBoxes kBoxBytes kTxBytes CUtensorMap grid_wait
grid_launch_dependents
reduce broadcast exp2_sub ex2_ftz shfl_xor Sum Max Min kOutputs kParts hip_bfloat16 kSmemAlign
mma fence fence_smem commit wait_acc regs_dec regs_inc pack_operand acc_index a_index b_index pack_index p_index
a_tile_index b_tile_index kM kN kK kAccRegs kAccPerReg kAWords kBWords kPackRegs kDescA kDescB kTileBytesA
kTileBytesB kTileAlignA kTileAlignB relayout src dst via then coalesced base_loop a1 a2 a4 a8 a16 a32
src_tile_index dst_tile_index kSrcTileBytes kDstTileBytes kSrcTileAlign kDstTileAlign kDstOffset kTileElems
kScratchBuffers kWarpSliceBytes mbar_arrive desc elem word ld st gld gst warp_sync
upcast move kMidRegs kScaleRegs scale_index
reorder restore reorder_vector restore_vector source_index vectors Extent Raw kOffset kBits kElemBits kVector
kVectorBytes tile_shape
""".split())


def check_name(name: str) -> str:
    """``name`` if it is a usable C/C++ identifier, else ValueError."""
    if not isinstance(name, str) or not C_IDENT.match(name):
        raise ValueError(f"--name {limits.short(name)} is not a C identifier (letters, digits and _, not starting with a digit)")
    if name in C_KEYWORDS:
        raise ValueError(f"--name {limits.short(name)} is a C/C++ keyword")
    if name.startswith("__") or re.match(r"_[A-Z]", name):
        raise ValueError(f"--name {limits.short(name)} is reserved for the compiler (names starting with __ or _ and a capital)")
    if name in RESERVED_NAMES:
        raise ValueError(f"--name {limits.short(name)} is a CUDA/HIP built-in, a standard type or macro, or a name the "
                         f"generated code uses; pick another")
    return name


def stem_ident(path: str) -> str:
    """The file's stem as an identifier; for a TTGIR layout (``k.ttgir#blocked1@128x64``) its alias."""
    selection = split_selector(os.fspath(path))
    if selection is not None and selection[1]:
        return re.sub(r"[^A-Za-z0-9_]", "_", selection[1]) or "layout"
    stem = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    ident = re.sub(r"[^A-Za-z0-9_]", "_", stem) or "layout"
    return ident


def usable_name(name: str, prefix: str) -> str:
    """A derived ``name`` made one ``check_name`` accepts: ``prefix_`` before a name starting with a
    digit or reserved for the compiler (``__``, ``_`` and a capital: ``__init___mma``, ``_Acc_mma``),
    ``_`` after a keyword or a name the generated code declares."""
    if name[0].isdigit() or name.startswith("__") or re.match(r"_[A-Z]", name):
        name = f"{prefix}_{name}"
    return name + "_" if name in C_KEYWORDS or name in RESERVED_NAMES else name


def default_name(src: Any, dst: Any) -> str:
    """``<src stem>_to_<dst stem>`` made a C identifier (``cvt`` without paths)."""
    if isinstance(src, (str, os.PathLike)) and isinstance(dst, (str, os.PathLike)):
        name = f"{stem_ident(src)}_to_{stem_ident(dst)}"
    else:
        name = "cvt"
    return usable_name(name, "cvt")


def parse_emit(values: Iterable[str] | str | None) -> tuple[str, ...]:
    """``--emit`` values (repeatable, comma lists, ``all``) -> kinds in canonical order."""
    if values is None:
        return ("header", "harness")
    if isinstance(values, str):
        values = [values]
    kinds: set[str] = set()
    for v in values:
        for k in (x.strip() for x in str(v).split(",")):
            if not k:
                continue
            if k == "all":
                kinds.update(EMIT_KINDS)
            elif k in EMIT_KINDS:
                kinds.add(k)
            else:
                raise ValueError(f"--emit: unknown kind {limits.short(k)} (known: header, harness, bench, all)")
    if not kinds:
        return ("header", "harness")
    return tuple(k for k in EMIT_KINDS if k in kinds)


def said_all(emit: Iterable[str] | str | None) -> bool:
    """Whether ``--emit`` asked for ``all`` (every kind that applies) rather than naming kinds."""
    return any("all" in str(v).split(",") for v in ([emit] if isinstance(emit, str) else emit or ()))


def gather_name(src: Any, axis: int) -> str:
    """``llgen gather``'s default name: ``<src stem>_gather<axis>``."""
    name = f"{stem_ident(src)}_gather{axis}"
    return usable_name(name, "gather")


def reduce_name(src: Any, dims: Any, combine: str) -> str:
    """``llgen reduce``'s default name: ``<src stem>_<combine><dims>`` (``acc_max1``, ``tile_sum0_1``)."""
    dims = [dims] if isinstance(dims, int) else sorted(dims)
    name = f"{stem_ident(src)}_{combine}{'_'.join(map(str, dims))}"
    return usable_name(name, "reduce")


def mma_name(acc: Any) -> str:
    """``llgen mma``'s default name: ``<acc stem>_mma``."""
    name = f"{stem_ident(acc)}_mma"
    return usable_name(name, "mma")


def output_names(target: str, name: str, emit: Iterable[str] | str | None) -> list[str]:
    """The files a command with ``--emit emit`` writes for certain: every
    kind asked for, except a bench that ``all`` leaves out where it does not
    apply (known only after planning)."""
    names = file_names(target, name)
    return [names[k] for k in parse_emit(emit) if not (k == "bench" and said_all(emit))]
