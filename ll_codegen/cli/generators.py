"""``llgen gather``, ``mma`` and ``reduce``: the commands generating one operation's files from
its own options (``generator_options``: -o, --name, --emit, --plan, --json)."""
from __future__ import annotations

from typing import Optional

import click

from ll_codegen.cli.app import main
from ll_codegen.cli.options import (ARCHS, BARRIER, COMBINES, DTYPE_HELP, DTYPES, GATHER_STRATEGIES, INDEX_DTYPES,
                                    MMA_DTYPES, REDUCE_DTYPES, TARGETS, generate, generator_options, given,
                                    spec_option)
from ll_codegen.emit.names import gather_name, mma_name, reduce_name

__all__ = ["gather", "mma", "reduce"]


@main.command()
@click.option("--src", "src", default=None, metavar="SRC.yaml", type=click.Path(dir_okay=False),
              help="Source layout spec (distributed).")
@click.option("--index", "index", default=None, metavar="IDX.yaml", type=click.Path(dir_okay=False),
              help="Index layout spec (distributed; the output has this layout and shape).")
@click.option("--axis", default=None, type=int, metavar="N", help="The gather axis (a tensor dim).")
@click.option("--dtype", default="f16", show_default=True, type=click.Choice(DTYPES), help=DTYPE_HELP)
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
@spec_option("--acc", "Accumulator layout spec (nvidia_mma: version [3, 0] wgmma, [2, 0] mma.sync), M x N.")
@spec_option("--a", "Operand A spec, M x K: a shared layout (wgmma) or a dot_operand register layout.")
@spec_option("--b", "Operand B spec, K x N: a shared layout (wgmma) or a dot_operand register layout (mma.sync).")
@click.option("--dtype", default="f16", show_default=True, type=click.Choice(MMA_DTYPES),
              help="Operand type (tf32 is stored as 32-bit floats).")
@click.option("--acc-dtype", "acc_dtype", default="f32", show_default=True, type=click.Choice(("f32", "f16", "i32")),
              help="Accumulator type (f32 for floats, i32 for i8/u8).")
@click.option("--target", default="cuda", show_default=True, type=click.Choice(TARGETS), help="Target.")
@click.option("--arch", default=None, type=click.Choice(ARCHS),
              help="Architecture: sm_90a for wgmma (default sm_90a with a v3 accumulator), sm_80+ for mma.sync.")
@generator_options("<acc stem>_mma", "header, harness or all", "MmaPlan")
def mma(acc: str, a: str, b: str, dtype: str, acc_dtype: str, target: str, arch: Optional[str], output: str,
        name: Optional[str], emit: tuple[str, ...], show_plan: bool, as_json: bool) -> None:
    """Generate acc += A @ B for one CTA tile: mma(acc, a, b) issuing every
    wgmma.mma_async (operands in shared memory through matrix descriptors
    derived from the layouts' offsets, or A in registers) or mma.sync (register
    operands), with fence()/commit()/wait<N>() for wgmma.  Writes a header and
    a test harness (prints each path), or with --plan prints the plan."""
    from ll_codegen.api import mma_files
    given(("--acc", acc), ("--a", a), ("--b", b))
    generate(lambda: mma_files(acc, a, b, dtype=dtype, acc_dtype=acc_dtype, target=target, arch=arch, name=name,
                                emit=emit or None), mma_name(acc), output, target, name, emit, show_plan, as_json)


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
