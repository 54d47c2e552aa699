"""``llgen plan``, ``convert`` and ``bench``: one tensor moved between two layouts (a conversion,
or a store/load/copy/TMA when a layout is in memory); ``verify`` is in ``cli/verify.py``."""
from __future__ import annotations

import os
from typing import Optional

import click

from ll_codegen.cli.app import CLIError, main, say
from ll_codegen.cli.options import (BARRIER, BYTE_DTYPES, DST_DTYPE, DTYPE_HELP, DTYPES, EMIT_CHOICES, SCALES,
                                    SCRATCH_BUFFERS,
                                    SCRATCH_PER_WARP,
                                    CommaChoice, check_outputs, conversion_options, need, spec_option)
from ll_codegen.core import limits
from ll_codegen.emit.names import default_name
from ll_codegen.spec import load_spec

__all__ = ["plan", "convert", "bench"]


@main.command()
@conversion_options()
@click.option("--dtype", default="f16", show_default=True, type=click.Choice(DTYPES), help=DTYPE_HELP)
@click.option("--json", "as_json", is_flag=True,
              help="Print the plan as JSON (the text the plan's to_json() returns).")
@SCRATCH_BUFFERS
@SCRATCH_PER_WARP
@BARRIER
@DST_DTYPE
@SCALES
def plan(src: str, dst: str, target: str, arch: Optional[str], strategy: str, swizzle: str,
         smem_budget: int, shape: Optional[str], strides: Optional[str], warps: Optional[int], dtype: str,
         as_json: bool, scratch_buffers: int, scratch_per_warp: bool, barrier: str,
         dst_dtype: Optional[str], scales: Optional[str]) -> None:
    """Plan the conversion from --src to --dst and print it: strategy,
    register permutation, shuffle rounds, shared memory and swizzle, predicted
    wavefronts and bank conflicts, and every candidate with its score,
    cheapest first."""
    from ll_codegen.api import plan_conversion
    need(src, dst)
    p = plan_conversion(src, dst, dtype=dtype, target=target, arch=arch, strategy=strategy, swizzle=swizzle,
                        smem_budget=smem_budget, shape=shape, strides=strides, warps=warps,
                        scratch_buffers=scratch_buffers, scratch_per_warp=scratch_per_warp, barrier=barrier,
                        dst_dtype=dst_dtype, scales=scales)
    text = p.to_json() if as_json else p.summary()
    click.echo(text, nl=not text.endswith("\n"))


@main.command()
@conversion_options()
@click.option("--dtype", default="f16", show_default=True, type=click.Choice(DTYPES), help=DTYPE_HELP)
@click.option("-o", "--output", "output", default=".", show_default=True, metavar="DIR",
              type=click.Path(file_okay=False), help="Folder to write into (created if missing).")
@click.option("--name", default=None, metavar="NAME",
              help="C identifier for the namespace and file names (default: <src stem>_to_<dst stem>).")
@click.option("--emit", "emit", multiple=True, type=CommaChoice(EMIT_CHOICES),
              help="header, harness, bench or all; repeatable or a comma list (default header,harness).")
@SCRATCH_BUFFERS
@SCRATCH_PER_WARP
@BARRIER
@DST_DTYPE
@SCALES
def convert(src: str, dst: str, target: str, arch: Optional[str], strategy: str, swizzle: str,
            smem_budget: int, shape: Optional[str], strides: Optional[str], warps: Optional[int], dtype: str,
            output: str, name: Optional[str], emit: tuple[str, ...], scratch_buffers: int,
            scratch_per_warp: bool, barrier: str, dst_dtype: Optional[str], scales: Optional[str]) -> None:
    """Generate the conversion from --src to --dst: a header with the
    device function (and a test harness, a round-trip bench); prints each
    written path.  Same inputs give byte-identical files.  Every target is
    checked before anything is written, and all files are written or none."""
    from ll_codegen.api import conversion_files, write_rendered
    need(src, dst)
    check_outputs(output, target, name if name is not None else default_name(src, dst), emit, name)
    conv = conversion_files(src, dst, dtype=dtype, target=target, arch=arch, strategy=strategy, swizzle=swizzle,
                            smem_budget=smem_budget, shape=shape, name=name, emit=emit or None, strides=strides,
                            warps=warps, scratch_buffers=scratch_buffers, scratch_per_warp=scratch_per_warp,
                            barrier=barrier, dst_dtype=dst_dtype, scales=scales)
    write_rendered(conv.files, output, "-o", announce=say)


@main.command()
@spec_option("--src", "Source layout spec (a distributed layout).")
@spec_option("--dst", "Destination layout spec (a distributed layout).")
@click.option("--dtype", default="f16", show_default=True, type=click.Choice(BYTE_DTYPES),
              help="Element type (only its width matters).")
@click.option("--shape", default=None, metavar="N,N", help="Tensor shape (overrides both specs' 'shape').")
@click.option("--iters", default=64, show_default=True, type=click.IntRange(1, limits.MAX_ITERS),
              help="Round trips src->dst->src per CTA.")
@click.option("--ctas", default=0, type=click.IntRange(0, limits.MAX_CTAS), help="CTAs per launch (default 48 per SM).")
@click.option("--triton/--no-triton", default=True, show_default=True,
              help="Also time Triton's convert_layout (Gluon) with the same layouts.")
def bench(src: str, dst: str, dtype: str, shape: Optional[str], iters: int, ctas: int,
          triton: bool) -> None:
    """Time the CUDA conversion --src -> --dst on the GPU (round-trip bench
    kernel, CUDA events, median of repeats) against llgen's naive shared-memory
    plan, Triton's convert_layout and the hardware bound; prints a table."""
    from ll_codegen.run import gpu
    from ll_codegen.api import plan_conversion
    need(src, dst)
    if iters < 1:
        raise CLIError(f"--iters must be at least 1, got {iters}")
    a, b = load_spec(src, shape_override=shape), load_spec(dst, shape_override=shape)
    plan_conversion(a, b, dtype=dtype, target="cuda")      # every input checked before looking for a GPU
    reason = gpu.available()
    if reason is not None:
        raise CLIError(f"cannot bench: {reason}")
    try:   # the benchmarks are not library code: bench/llgen_bench, installed as llgen_bench
        from llgen_bench.convert import bench_pair, format_table
    except ImportError as e:
        raise CLIError(f"cannot bench: the llgen_bench package is not importable ({type(e).__name__}: {e})")
    row = bench_pair(a, b, dtype, iters=iters, ctas=ctas or None, triton=triton,
                     name=f"{os.path.splitext(os.path.basename(src))[0]}_to_{os.path.splitext(os.path.basename(dst))[0]}")
    click.echo(format_table([row]))

