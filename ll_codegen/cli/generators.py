"""``llgen gather``, ``mma`` and ``reduce``: the commands generating one operation's files from
its own options (``generator_options``: -o, --name, --emit, --plan, --json)."""
from __future__ import annotations

import os
from typing import Optional

import click

from ll_codegen.cli.app import CLIError, main, say
from ll_codegen.cli.options import (ARCHS, BARRIER, BYTE_DTYPES, COMBINES, GATHER_STRATEGIES, INDEX_DTYPES,
                                    MMA_DTYPES, REDUCE_DTYPES, SCALES, TARGETS, generate, generator_options,
                                    given, spec_option)
from ll_codegen.core.files import check_targets, quote_path, write_all
from ll_codegen.emit.names import gather_name, mma_name, reduce_name
from ll_codegen.layouts.show import layout_params
from ll_codegen.core.dtypes import UPCAST_SOURCES
from ll_codegen.plan.mma_model import AB_BYTES
from ll_codegen.spec import flow_yaml, load_spec, spec_from_dict

__all__ = ["gather", "mma", "reduce"]


@main.command()
@click.option("--src", "src", default=None, metavar="SRC.yaml", type=click.Path(dir_okay=False),
              help="Source layout spec (distributed).")
@click.option("--index", "index", default=None, metavar="IDX.yaml", type=click.Path(dir_okay=False),
              help="Index layout spec (distributed; the output has this layout and shape).")
@click.option("--axis", default=None, type=int, metavar="N", help="The gather axis (a tensor dim).")
@click.option("--dtype", default="f16", show_default=True, type=click.Choice(BYTE_DTYPES),
              help="Element type (only its width matters).")
@click.option("--index-dtype", "index_dtype", default="i32", show_default=True, type=click.Choice(tuple(INDEX_DTYPES)),
              help="Index element type.")
@click.option("--target", default="cuda", show_default=True, type=click.Choice(TARGETS), help="Target.")
@click.option("--arch", default=None, type=click.Choice(ARCHS),
              help="Architecture of --target: sm_* for cuda (default sm_90), gfx* for hip (default gfx90a).")
@click.option("--strategy", default="auto", show_default=True, type=click.Choice(GATHER_STRATEGIES),
              help="Force a strategy (shuffle needs a warp-local gather; an illegal one is an error).")
@generator_options("<src stem>_gather<axis>", "header, harness, bench (CUDA) or all", "GatherPlan")
def gather(src: Optional[str], index: Optional[str], axis: Optional[int], dtype: str, index_dtype: str, target: str,
           arch: Optional[str], strategy: str, output: str, name: Optional[str], emit: tuple[str, ...],
           show_plan: bool, as_json: bool) -> None:
    """Generate out = gather(src, index, axis) (Triton's gather, paper
    §5.5): out[i] = src[i with i[axis] replaced by index[i] mod n].  Warp
    shuffles when every needed element is in the thread's own warp and that
    is cheaper, else through shared memory.  Writes a header with the device
    function gather(src, idx, out, smem) and a test harness (prints each
    path), or with --plan prints the plan.  All files are written or none."""
    from ll_codegen.api import gather_files as files_of
    given(("--src", src), ("--index", index), ("--axis", axis))
    generate(lambda: files_of(src, index, axis, dtype, index_dtype, target, arch, strategy, name, emit or None),
              gather_name(src, axis), output, target, name, emit, show_plan, as_json)


@main.command()
@spec_option("--acc", "Accumulator layout spec (nvidia_mma: version [3, 0] wgmma, [2, 0] mma.sync), M x N.",
             required=False)
@spec_option("--a", "Operand A spec, M x K: a shared layout (wgmma) or a dot_operand register layout.",
             required=False)
@spec_option("--b", "Operand B spec, K x N: a shared layout (wgmma) or a dot_operand register layout (mma.sync).",
             required=False)
@click.option("--dtype", default="f16", show_default=True, type=click.Choice(MMA_DTYPES),
              help="Operand type (tf32 is stored as 32-bit floats).")
@click.option("--acc-dtype", "acc_dtype", default="f32", show_default=True, type=click.Choice(("f32", "f16", "i32")),
              help="Accumulator type (f32 for floats, i32 for i8/u8).")
@click.option("--target", default="cuda", show_default=True, type=click.Choice(TARGETS), help="Target.")
@click.option("--arch", default=None, type=click.Choice(ARCHS),
              help="Architecture: sm_90a for wgmma (default sm_90a with a v3 accumulator), sm_80+ for mma.sync.")
@click.option("--a-dtype", "a_dtype", default=None, type=click.Choice(UPCAST_SOURCES + MMA_DTYPES),
              help="Mixed-input MMA: A holds this narrower type (i4, u4, e2m1 packed two a byte; f8e4m3, f8e5m2, "
                   "i8, u8; f16 or bf16 into tf32), upcast exactly into the A fragment; B and the instruction are "
                   "--dtype (f16, bf16, tf32; or i8, u8, f8e4m3, f8e5m2 from the 4-bit types each holds exactly: "
                   "i4/u4 -> i8, u4 -> u8, e2m1 -> f8e4m3/f8e5m2). "
                   "With --dtype of the same 8-bit family (f8e4m3 / f8e5m2, i8 / u8): A's type in an MMA of the two "
                   "types, no upcast.")
@SCALES
@click.option("--write-operand-spec", "operand_spec", default=None, metavar="FILE", type=click.Path(dir_okay=False),
              help="Instead of generating: write the register A operand spec (dot_operand of --acc with the k_width "
                   "of --dtype, M x K with K the rows of --b) to FILE, or print it with -.")
@generator_options("<acc stem>_mma", "header, harness or all", "MmaPlan")
def mma(acc: Optional[str], a: Optional[str], b: Optional[str], dtype: str, acc_dtype: str, target: str,
        arch: Optional[str], a_dtype: Optional[str], scales: Optional[str], operand_spec: Optional[str], output: str,
        name: Optional[str], emit: tuple[str, ...], show_plan: bool, as_json: bool) -> None:
    """Generate acc += A @ B for one CTA tile: mma(acc, a, b) issuing every
    wgmma.mma_async (operands in shared memory through matrix descriptors
    derived from the layouts' offsets, or A in registers) or mma.sync (register
    operands), with fence()/commit()/wait<N>() for wgmma.  Writes a header and
    a test harness (prints each path), or with --plan prints the plan.  With
    --write-operand-spec, writes the register A operand spec the accumulator
    implies (the --a that makes A register-resident) instead.  With --a-dtype,
    A is of that narrower type and the header also upcasts it (with
    --scales) into the A fragment: load_a()/convert_a(), mma(), and
    mma_upcast() doing both."""
    from ll_codegen.api import mma_files
    if operand_spec is not None:
        if (a is not None or a_dtype is not None or show_plan or name is not None or emit or output != "."
                or target != "cuda"):
            raise CLIError("--write-operand-spec writes only the A operand spec: give --acc, --b and --dtype "
                           "(no --a, --plan, --name, --emit, -o; --target cuda)")
        given(("--acc", acc), ("--b", b), tail=" (--write-operand-spec: the accumulator, and B for K)")
        write_operand_spec(acc, b, dtype, operand_spec)
        return
    given(("--acc", acc), ("--a", a), ("--b", b))
    generate(lambda: mma_files(acc, a, b, dtype=dtype, acc_dtype=acc_dtype, target=target, arch=arch, name=name,
                                emit=emit or None, a_dtype=a_dtype, scales=scales), mma_name(acc), output, target,
             name, emit, show_plan, as_json)


def operand_spec_text(acc: str, b: str, dtype: str) -> str:
    """The YAML spec of the register A operand of ``acc += A @ B`` (wgmma with A in registers, or
    mma.sync): Triton's ``dot_operand`` with ``operand_index`` 0, the accumulator's parameters as its
    parent and ``k_width`` = the elements of one 32-bit register (2 for 16-bit types, 4 for 8-bit, 1
    for tf32), over M x K -- M the accumulator's rows, K the rows of B.  Built (and so validated)
    before it is returned."""
    from ll_codegen.api import check_instr_k
    s = load_spec(acc)
    if s.kind != "nvidia_mma":
        raise CLIError(f"--write-operand-spec: the accumulator {quote_path(acc)} is {s.kind}; an nvidia_mma "
                       f"layout (version [3, 0] wgmma, [2, 0] mma.sync) implies a register A")
    check_instr_k(s, dtype)
    bs = load_spec(b)
    if len(s.shape) != 2 or len(bs.shape) != 2:
        raise CLIError("--write-operand-spec: the accumulator and B must be rank 2 (M x N, K x N)")
    spec = {"kind": "dot_operand", "operand_index": 0, "k_width": max(1, 4 // AB_BYTES[dtype]),
            "parent": layout_params(s.layout), "shape": [s.shape[0], bs.shape[0]]}
    spec_from_dict(spec, "--write-operand-spec")           # the layout builds: its k_width and shape fit
    lines = [f"# Register A operand (M x K) of llgen mma with --acc {quote_path(os.path.basename(acc))} and --dtype "
             f"{dtype}: {spec['k_width']} K-consecutive elements per 32-bit register.", "kind: dot_operand",
             "operand_index: 0", f"k_width: {spec['k_width']}", "parent:"]
    lines += [f"  {k}: {flow_yaml(v)}" for k, v in spec["parent"].items()]
    lines.append(f"shape: {flow_yaml(spec['shape'])}")
    return "\n".join(lines) + "\n"


def write_operand_spec(acc: str, b: str, dtype: str, path: str) -> None:
    """``--write-operand-spec``: the spec printed (``-``) or written all-or-none, its path listed."""
    if path != "-":
        check_targets([path], "--write-operand-spec")
    text = operand_spec_text(acc, b, dtype)
    if path == "-":
        click.echo(text, nl=False)
        return
    write_all({path: text}, "--write-operand-spec", announce=say)


@main.command()
@spec_option("--src", "Source layout spec (distributed).", required=False)
@click.option("--dim", "dims", multiple=True, metavar="D", help="A tensor dim to reduce; repeatable or a comma list.")
@click.option("--op", "combine", default="sum", show_default=True, type=click.Choice(COMBINES), help="The combine.")
@click.option("--dtype", default="f32", show_default=True, type=click.Choice(REDUCE_DTYPES), help="Element type.")
@click.option("--target", default="cuda", show_default=True, type=click.Choice(TARGETS), help="Target.")
@click.option("--arch", default=None, type=click.Choice(ARCHS),
              help="Architecture of --target: sm_* for cuda (default sm_90), gfx* for hip (default gfx90a).")
@BARRIER
@generator_options("<src stem>_<op><dims>", "header, harness or all", "ReducePlan")
def reduce(src: Optional[str], dims: tuple[str, ...], combine: str, dtype: str, target: str, arch: Optional[str],
           barrier: str, output: str, name: Optional[str], emit: tuple[str, ...], show_plan: bool,
           as_json: bool) -> None:
    """Generate dst = reduce(src, dims, op) (Triton's tt.reduce) in the slice layout of --dim: reduce() and
    broadcast() in a header, and a test harness (prints each path), or with --plan prints the plan."""
    from ll_codegen.api import parse_dims, reduce_files
    given(("--src", src), ("--dim", dims))
    generate(lambda: reduce_files(src, dims, combine, dtype, target, arch, name, emit or None, barrier=barrier),
              reduce_name(src, parse_dims(dims), combine), output, target, name, emit, show_plan, as_json)
