"""Option helpers shared by ``llgen``'s commands: the enumerated choices (``click.Choice``s,
so shell completion offers their values), ``CommaChoice``, the option groups of the
conversion and generator commands, and the checks every command runs before planning
(missing options, output targets)."""
from __future__ import annotations

import functools
import os
from typing import Any, Callable, Optional

import click

from ll_codegen.cli.app import CLIError, say
from ll_codegen.core import limits
from ll_codegen.core.dtypes import DTYPE_BITS, DTYPE_BYTES, INDEX_DTYPES, UPCAST_TARGETS
from ll_codegen.core.files import check_output_dir, check_targets
from ll_codegen.core.target import CUDA_ARCHS, HIP_WAVE32, HIP_WAVE64
from ll_codegen.emit.names import check_name, output_names
from ll_codegen.plan.mma import AB_TYPES
from ll_codegen.plan.reduce import COMBINES, REDUCE_DTYPES

__all__ = ["DTYPES", "BYTE_DTYPES", "MMA_DTYPES", "INDEX_DTYPES", "COMBINES", "REDUCE_DTYPES", "TARGETS", "ARCHS",
           "STRATEGY_CHOICES", "SWIZZLES", "EMIT_CHOICES", "GATHER_STRATEGIES", "CommaChoice", "spec_option",
           "options", "conversion_options", "generator_options", "check_outputs", "given", "generate", "need",
           "DTYPE_HELP", "SCRATCH_BUFFERS", "SCRATCH_PER_WARP", "BARRIER", "DST_DTYPE", "SCALES"]

DTYPES = tuple(DTYPE_BITS)          # conversions, stores, loads, copies: the 4-bit types packed two per byte
BYTE_DTYPES = tuple(DTYPE_BYTES)     # gathers and the GPU bench: whole-byte elements
MMA_DTYPES = tuple(AB_TYPES)
TARGETS = ("cuda", "hip")
ARCHS = CUDA_ARCHS + HIP_WAVE64 + HIP_WAVE32
STRATEGY_CHOICES = ("auto", "noop", "register", "shuffle", "smem", "shuffle+smem", "store", "load", "copy", "tma", "butterfly")
SWIZZLES = ("optimal", "none")
EMIT_CHOICES = ("header", "harness", "bench", "all")


class CommaChoice(click.ParamType):
    """A comma list of choices (``--dtype f16,f32``, ``--emit header,bench``):
    each item is checked, and shell completion offers the choices after the
    last comma.  The value stays the string given."""

    name = "choice-list"

    def __init__(self, choices: tuple[str, ...]):
        self.choices = tuple(choices)

    def get_metavar(self, param: click.Parameter, *args: Any, **kwargs: Any) -> str:
        # click >= 8.2 also passes ctx (by keyword); older versions only param
        return "[" + "|".join(self.choices) + "][,...]"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> Any:
        for item in (x.strip() for x in str(value).split(",")):
            if item and item not in self.choices:
                self.fail(f"{limits.short(item)} is not one of {', '.join(map(repr, self.choices))}", param, ctx)
        return value

    def shell_complete(self, ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        from click.shell_completion import CompletionItem
        head, _, last = incomplete.rpartition(",")
        prefix = head + "," if head else ""
        return [CompletionItem(prefix + c) for c in self.choices if c.startswith(last)]


def spec_option(flag: str, help: str, required: bool = True) -> Callable[..., Any]:
    """A spec-file option whose metavar names its own role (``--acc ACC.yaml``, ``--src SRC.yaml``)."""
    return click.option(flag, flag.lstrip("-"), required=required, metavar=f"{flag.lstrip('-').upper()}.yaml",
                        type=click.Path(dir_okay=False), help=help)

# ------------------------------------------------- plan / convert / verify
def options(*opts: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """One decorator applying the click options ``opts`` (in ``--help`` order)."""
    return lambda f: functools.reduce(lambda g, o: o(g), reversed(opts), f)


def conversion_options(required: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Options shared by ``plan``, ``convert`` and ``verify`` (the enumerated
    ones are ``click.Choice``s: checked by click and offered by shell
    completion; the rest validated by the planner -- a bad value is one
    ``llgen: error:`` line, exit 2).  ``verify`` takes --corpus instead of
    --src/--dst, so there they are not required."""
    return options(
            spec_option("--src", "Source layout spec (distributed; or a shared/global memory layout: a load).",
                         required),
            spec_option("--dst", "Destination layout spec (distributed; or a shared/global memory layout: a store).",
                         required),
            click.option("--target", default="cuda", show_default=True, type=click.Choice(TARGETS), help="Target."),
            click.option("--arch", default=None, type=click.Choice(ARCHS),
                         help="Architecture of --target: sm_* for cuda (default sm_90), gfx* for hip (default "
                              "gfx90a; gfx1030/gfx1100 are wave32)."),
            click.option("--strategy", default="auto", show_default=True, type=click.Choice(STRATEGY_CHOICES),
                         help="Force a strategy (an illegal one is an error)."),
            click.option("--swizzle", default="optimal", show_default=True, type=click.Choice(SWIZZLES),
                         help="Shared-memory swizzle."),
            click.option("--smem-budget", "smem_budget", default=48 * 1024, show_default=True, type=int,
                         metavar="BYTES", help="Most shared memory per conversion (more rounds if needed)."),
            click.option("--shape", default=None, metavar="N,N", help="Tensor shape (overrides both specs' 'shape')."),
            click.option("--stride", "strides", default=None, metavar="N,N",
                         help="Global tile strides in elements, one per dim, for the predicted sectors "
                              "(default: the dense tile)."),
            click.option("--warps", "warps", default=None, type=int, metavar="N",
                         help="Warps of a copy (global -> shared tile; default 4)."))


def check_outputs(output: str, target: str, name: str, emit: tuple[str, ...], given: Optional[str]) -> None:
    """Every file a command will write, checked before any planning: a folder,
    FIFO or device in the way is reported at once, not after the work of a
    large tile (``write_all`` checks them again before writing)."""
    check_output_dir(output, "-o")
    if given is not None:
        check_name(given)               # a bad --name is reported as such, not as a bad file name
    check_targets([os.path.join(output, f) for f in output_names(target, name, emit or None)], "-o", make_dirs=True)


def generator_options(default: str, emit: str, plan_type: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """-o, --name, --emit, --plan and --json of the commands generating one operation's files (gather, mma, reduce)."""
    return options(
        click.option("-o", "--output", "output", default=".", show_default=True, metavar="DIR",
                     type=click.Path(file_okay=False), help="Folder to write into (created if missing)."),
        click.option("--name", default=None, metavar="NAME",
                     help=f"C identifier for the namespace and file names (default: {default})."),
        click.option("--emit", "emit", multiple=True, type=CommaChoice(EMIT_CHOICES),
                     help=f"{emit}; repeatable or a comma list (default header,harness)."),
        click.option("--plan", "show_plan", is_flag=True, help="Print the plan instead of writing files."),
        click.option("--json", "as_json", is_flag=True, help=f"With --plan: the plan as JSON ({plan_type}.to_json())."))


def given(*opts: tuple[str, Any], tail: str = "") -> None:
    """An empty spec path, or a missing option, is one error line."""
    for o in [o for o, v in opts if v == ""][:1]:
        raise CLIError(f"{o} '': an empty path (a spec file)")
    missing = [o for o, v in opts if v is None or v == ()]
    if missing:
        raise CLIError(f"missing option {' and '.join(missing)}{tail}")


def generate(files_of: Callable[[], Any], default: str, output: str, target: str, name: Optional[str],
              emit: tuple[str, ...], show_plan: bool, as_json: bool) -> None:
    """Outputs checked before planning (``default``: the name without --name), then the plan printed or the files."""
    from ll_codegen.api import write_rendered
    if as_json and not show_plan:
        raise CLIError("--json needs --plan (the files are the output otherwise)")
    if not show_plan:
        check_outputs(output, target, name if name is not None else default, emit, name)
    g = files_of()
    if show_plan:
        text = g.plan.to_json() if as_json else g.plan.summary()
        click.echo(text, nl=not text.endswith("\n"))
        return
    write_rendered(g.files, output, "-o", announce=say)


def need(src: Optional[str], dst: Optional[str]) -> None:
    given(("--src", src), ("--dst", dst), tail=" (a spec file each)")


DTYPE_HELP = ("Element type (only its width matters; i4, u4 and e2m1 are packed two per byte, the byte-internal "
              "position register basis 0 / offset basis 0 of each layout).")
SCRATCH_BUFFERS = click.option(
    "--scratch-buffers", "scratch_buffers", default="1", show_default=True, type=click.Choice(["1", "2"]),
    callback=lambda ctx, param, v: int(v),
    help="2: no barrier before a shared-memory conversion's stores; the caller alternates two scratch "
         "buffers of kSmemBytes between consecutive conversions (see the header's Barriers line).")
SCRATCH_PER_WARP = click.option(
    "--scratch-per-warp", "scratch_per_warp", is_flag=True,
    help="A warp-local shared-memory conversion keeps each warp in its own kSmemBytes/kWarps slice and "
         "issues only warp barriers; the caller guarantees no other warp used that slice since the last "
         "__syncthreads() (see the header's Barriers line).")

DST_DTYPE = click.option(
    "--dst-dtype", "dst_dtype", default=None, type=click.Choice(UPCAST_TARGETS), metavar="f16|bf16",
    help="Upcast: the destination registers hold this wider type (f16, bf16) of the --dtype elements (i4, u4, "
         "e2m1, f8e4m3, f8e5m2, i8, u8), exactly, in the layout --dst (register layouts; CUDA).")

SCALES = click.option(
    "--scales", "scales", default=None, metavar="G[,dim=D][,e8m0|f16|bf16][,zero]",
    help="With --dst-dtype (llgen convert) or --a-dtype (llgen mma): per-group scales applied during the upcast -- "
         "groups of G elements along dim D (default the last: K of an MMA's A), scales of the destination type "
         "(or e8m0 exponents for bf16), optional zero points: dst = RNE(u * s - RNE(z * s)); the header takes "
         "them in the layout the destination implies.")

GATHER_STRATEGIES = ("auto", "shuffle", "smem")
BARRIER = click.option(
    "--barrier", "barrier", default="block", show_default=True, metavar="block|ID",
    help="The block barrier of a plan that synchronises (through shared memory): block is __syncthreads(); "
         "ID (1..15) a named barrier, bar.sync ID, kThreads, over the warps that make the call only -- for "
         "warp-specialised kernels whose other warps (a producer) do not call. CUDA only.")
