"""``llgen``: the command-line entry point (click).

Commands are added to the ``main`` group with ``@main.command()``.  The group
class, ``LLGenGroup``, runs every command under ``handle_errors``: a user
error (``USER_ERRORS``: SpecError, LayoutError and any other ValueError,
OSError, YAML and Jinja2 errors, ``CLIError``) becomes ONE line on stderr,
``llgen: error: <message>``, and exit status 2 -- never a traceback.  Any
other exception is a bug: one line ``llgen: internal error: ...`` and exit
status 1 (set ``LLGEN_DEBUG=1`` to get the traceback instead).  Files are
written with ``files.write_all`` after everything they depend on has been
computed: every target is checked first (``files.check_targets``), then all
files are written or none, so a failing command leaves no output at all.
Paths in messages are the user's, quoted when they hold control characters.
Enumerated options are ``click.Choice``s, so shell completion
(``_LLGEN_COMPLETE=bash_source llgen``) offers their values.
"""
from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable, Optional, Sequence

import click
import yaml

from ll_codegen import __version__
from ll_codegen.core import limits
from ll_codegen.core.files import check_output_dir, check_targets, quote_path, write_all, write_atomic
from ll_codegen.emit.names import check_name, default_name, gather_name, mma_name, output_names, reduce_name
from ll_codegen.layouts.base import LayoutError
from ll_codegen.layouts.show import element_bits_of, json_text, layout_json, layout_params, render_svg, render_text
from ll_codegen.spec import SpecError, load_spec
from ll_codegen import regenerate as R

try:  # jinja2 is a dependency, but the CLI must not need it to report errors
    from jinja2 import TemplateError as _TemplateError
except ImportError:  # pragma: no cover
    _TemplateError = ValueError  # type: ignore[misc,assignment]

__all__ = ["main", "LLGenGroup", "CLIError", "USER_ERRORS", "handle_errors", "command_with_errors",
           "write_atomic", "error_line", "CommaChoice"]

PROG = "llgen"


class CLIError(Exception):
    """Raise from a command for a user error with a ready-made message."""


#: Exceptions reported as one ``llgen: error:`` line and exit status 2.
USER_ERRORS: tuple[type[BaseException], ...] = (
    CLIError, SpecError, LayoutError, ValueError, OSError, yaml.YAMLError, _TemplateError, UnicodeError)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def error_line(e: BaseException) -> str:
    """The one-line message for an exception (without the ``llgen: error:``)."""
    if isinstance(e, OSError) and e.strerror:
        where = quote_path(e.filename) if e.filename is not None else ""
        return f"{where}: {e.strerror}" if where else e.strerror
    if isinstance(e, SpecError) and e.source:
        return ": ".join([quote_path(e.source)] + ([e.field] if e.field else []) + [e.message])
    if isinstance(e, yaml.MarkedYAMLError) and e.problem_mark is not None:
        m = e.problem_mark
        return f"{quote_path(m.name)}: line {m.line + 1}, column {m.column + 1}: {e.problem or e.context or 'malformed YAML'}"
    msg = _first_line(str(e))
    if isinstance(e, KeyError) and msg.startswith(("'", '"')):
        msg = msg[1:-1] if len(msg) > 1 and msg[-1] == msg[0] else msg
    return msg or type(e).__name__


def _fail(e: BaseException, internal: bool = False) -> "None":
    # limits.printable: the last guard of "one line" (a hostile name the message quotes raw)
    if internal:
        if os.environ.get("LLGEN_DEBUG"):
            raise e
        click.echo(f"{PROG}: internal error: {type(e).__name__}: {limits.printable(limits.cut(error_line(e)))} "
                   f"(set LLGEN_DEBUG=1 for the traceback)", err=True)
        raise click.exceptions.Exit(1)
    click.echo(f"{PROG}: error: {limits.printable(limits.cut(error_line(e)))}", err=True)
    raise click.exceptions.Exit(2)


#: Exit status after SIGINT (128 + 2, as a shell reports it); SIGTERM ends the process with 143 itself.
ABORTED = 130


def say(lines: Sequence[str], wrote: bool = True) -> None:
    """Print a command's listing (the paths it writes) in one write: called
    by ``write_all`` *before* its commit, so a listing that cannot be printed
    (stdout on a full disk, a closed pipe) leaves nothing written and is one
    error line (exit 2), never "files written, then an error".  A path with
    a newline is quoted as in error lines: one path per line, always."""
    try:
        click.echo("".join(f"{quote_path(line)}\n" for line in lines), nl=False)
    except OSError as e:
        _drop_stdout()
        raise CLIError(f"cannot write to standard output: {e.strerror or type(e).__name__}"
                       + ("; nothing was written" if wrote else "")) from None


def _drop_stdout() -> None:
    """Point file descriptor 1 at /dev/null: the interpreter flushes stdout's
    buffer again at exit, and that second failure would print a second line."""
    try:
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (OSError, ValueError, AttributeError):   # not a real file (CliRunner): nothing to flush later
        pass


def handle_errors(fn: Callable[..., Any]) -> Callable[[], Any]:
    """Run ``fn()``; user errors become one stderr line and exit 2."""
    try:
        return fn()
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except KeyboardInterrupt:
        # SIGINT: one line (click would print a blank line first) and the conventional status
        click.echo(f"{PROG}: aborted", err=True)
        raise click.exceptions.Exit(ABORTED)
    except BrokenPipeError:
        # stdout closed early (``llgen show ... | head``): not an error of ours
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep interpreter exit quiet
        except OSError:
            pass
        raise click.exceptions.Exit(0)
    except USER_ERRORS as e:
        _fail(e)
    except Exception as e:  # noqa: BLE001
        _fail(e, internal=True)


def command_with_errors(f: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for a command callback outside ``LLGenGroup`` (inside it,
    errors are handled already; applying it twice is harmless)."""
    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return handle_errors(lambda: f(*args, **kwargs))
    return wrapper


class LLGenGroup(click.Group):
    """A click group whose subcommands all run under ``handle_errors``, and
    whose usage errors (an unknown option or command, a bad option value, a
    missing argument) are one ``llgen: error:`` line and exit 2 as well,
    instead of click's usage block."""

    def invoke(self, ctx: click.Context) -> Any:
        return handle_errors(lambda: super(LLGenGroup, self).invoke(ctx))

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except click.exceptions.Abort:       # SIGINT while click parsed the command line
            click.echo(f"{PROG}: aborted", err=True)
            sys.exit(ABORTED)
        except getattr(click.exceptions, "NoArgsIsHelpError", ()) as e:     # plain `llgen`: the help
            click.echo(e.format_message())
            sys.exit(0)
        except click.ClickException as e:
            hint = f" ({PROG} --help)" if isinstance(e, click.UsageError) else ""
            click.echo(f"{PROG}: error: {limits.cut(_first_line(e.format_message()))}{hint}", err=True)
            sys.exit(2)
        sys.exit(code if isinstance(code, int) else 0)


# ------------------------------------------------------- enumerated options
from ll_codegen.core.dtypes import DTYPE_BYTES, INDEX_DTYPES  # noqa: E402
from ll_codegen.core.target import CUDA_ARCHS, HIP_WAVE32, HIP_WAVE64  # noqa: E402
from ll_codegen.plan.mma import AB_TYPES  # noqa: E402
from ll_codegen.plan.reduce import COMBINES, REDUCE_DTYPES  # noqa: E402

DTYPES = tuple(DTYPE_BYTES)
MMA_DTYPES = tuple(AB_TYPES)
TARGETS = ("cuda", "hip")
ARCHS = CUDA_ARCHS + HIP_WAVE64 + HIP_WAVE32
STRATEGY_CHOICES = ("auto", "noop", "register", "shuffle", "smem", "shuffle+smem", "store", "load", "copy", "tma")
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


def _spec_option(flag: str, help: str, required: bool = True) -> Callable[..., Any]:
    return click.option(flag, flag.lstrip("-"), required=required, metavar=("A.yaml" if flag == "--src" else "B.yaml"),
                        type=click.Path(dir_okay=False), help=help)


# ----------------------------------------------------------------- commands
@click.group(cls=LLGenGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name=PROG, message="%(prog)s %(version)s")
def main() -> None:
    """Linear-layout conversions for CUDA/HIP: inspect layouts, plan and
    generate conversions.

    Shell completion (bash): eval "$(_LLGEN_COMPLETE=bash_source llgen)"
    (zsh_source, fish_source for zsh and fish)."""


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--shape", default=None, metavar="N,N",
              help="Tensor shape, e.g. 64,64 (overrides the spec's 'shape').")
@click.option("--json", "as_json", is_flag=True, help="Print the bases as JSON (DESIGN.md's form).")
@click.option("--svg", "svg_path", default=None, metavar="FILE", type=click.Path(dir_okay=False),
              help="Draw the tensor grid as an SVG picture to FILE (and print its path instead of the text).")
def show(spec: str, shape: Optional[str], as_json: bool, svg_path: Optional[str]) -> None:
    """Print the linear layout of SPEC (a YAML spec file), or with --svg
    draw it to a picture and print the picture's path."""
    if svg_path is not None:
        if as_json:
            raise CLIError("--svg draws the layout and prints the picture's path, --json prints its bases: give one")
        check_targets([svg_path], "--svg")           # before any work: a bad target is reported first
    s = load_spec(spec, shape_override=shape)
    L = s.linear
    if svg_path is not None:      # the picture is the output: its path, not a second copy of the grid as text
        title = f"{s.kind} {'x'.join(map(str, s.shape))}  ({quote_path(os.path.basename(s.source))})"
        svg = render_svg(L, title, element_bits=element_bits_of(s.layout))
        write_all({svg_path: svg}, "--svg", announce=say)
        return
    text = json_text(layout_json(L)) if as_json else render_text(L, s.kind, s.shape, layout_params(s.layout),
                                                                  source=s.source)
    click.echo(text, nl=not text.endswith("\n"))


# ------------------------------------------------- plan / convert / verify
def _options(*opts: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """One decorator applying the click options ``opts`` (in ``--help`` order)."""
    return lambda f: functools.reduce(lambda g, o: o(g), reversed(opts), f)


def _conversion_options(required: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Options shared by ``plan``, ``convert`` and ``verify`` (the enumerated
    ones are ``click.Choice``s: checked by click and offered by shell
    completion; the rest validated by the planner -- a bad value is one
    ``llgen: error:`` line, exit 2).  ``verify`` takes --corpus instead of
    --src/--dst, so there they are not required."""
    return _options(
            _spec_option("--src", "Source layout spec (distributed; or a shared/global memory layout: a load).",
                         required),
            _spec_option("--dst", "Destination layout spec (distributed; or a shared/global memory layout: a store).",
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


def _check_outputs(output: str, target: str, name: str, emit: tuple[str, ...], given: Optional[str]) -> None:
    """Every file a command will write, checked before any planning: a folder,
    FIFO or device in the way is reported at once, not after the work of a
    large tile (``write_all`` checks them again before writing)."""
    check_output_dir(output, "-o")
    if given is not None:
        check_name(given)               # a bad --name is reported as such, not as a bad file name
    check_targets([os.path.join(output, f) for f in output_names(target, name, emit or None)], "-o", make_dirs=True)


def _generator_options(default: str, emit: str, plan_type: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """-o, --name, --emit, --plan and --json of the commands generating one operation's files (gather, mma, reduce)."""
    return _options(
        click.option("-o", "--output", "output", default=".", show_default=True, metavar="DIR",
                     type=click.Path(file_okay=False), help="Folder to write into (created if missing)."),
        click.option("--name", default=None, metavar="NAME",
                     help=f"C identifier for the namespace and file names (default: {default})."),
        click.option("--emit", "emit", multiple=True, type=CommaChoice(EMIT_CHOICES),
                     help=f"{emit}; repeatable or a comma list (default header,harness)."),
        click.option("--plan", "show_plan", is_flag=True, help="Print the plan instead of writing files."),
        click.option("--json", "as_json", is_flag=True, help=f"With --plan: the plan as JSON ({plan_type}.to_json())."))


def _given(*opts: tuple[str, Any], tail: str = "") -> None:
    """An empty spec path, or a missing option, is one error line."""
    for o in [o for o, v in opts if v == ""][:1]:
        raise CLIError(f"{o} '': an empty path (a spec file)")
    missing = [o for o, v in opts if v is None or v == ()]
    if missing:
        raise CLIError(f"missing option {' and '.join(missing)}{tail}")


def _generate(files_of: Callable[[], Any], default: str, output: str, target: str, name: Optional[str],
              emit: tuple[str, ...], show_plan: bool, as_json: bool) -> None:
    """Outputs checked before planning (``default``: the name without --name), then the plan printed or the files."""
    from ll_codegen.api import write_rendered
    if as_json and not show_plan:
        raise CLIError("--json needs --plan (the files are the output otherwise)")
    if not show_plan:
        _check_outputs(output, target, name if name is not None else default, emit, name)
    g = files_of()
    if show_plan:
        text = g.plan.to_json() if as_json else g.plan.summary()
        click.echo(text, nl=not text.endswith("\n"))
        return
    write_rendered(g.files, output, "-o", announce=say)


def _need(src: Optional[str], dst: Optional[str]) -> None:
    _given(("--src", src), ("--dst", dst), tail=" (a spec file each)")


_DTYPE_HELP = "Element type (only its width matters)."
_SCRATCH_BUFFERS = click.option(
    "--scratch-buffers", "scratch_buffers", default="1", show_default=True, type=click.Choice(["1", "2"]),
    callback=lambda ctx, param, v: int(v),
    help="2: no barrier before a shared-memory conversion's stores; the caller alternates two scratch "
         "buffers of kSmemBytes between consecutive conversions (see the header's Barriers line).")
_SCRATCH_PER_WARP = click.option(
    "--scratch-per-warp", "scratch_per_warp", is_flag=True,
    help="A warp-local shared-memory conversion keeps each warp in its own kSmemBytes/kWarps slice and "
         "issues only warp barriers; the caller guarantees no other warp used that slice since the last "
         "__syncthreads() (see the header's Barriers line).")


@main.command()
@_conversion_options()
@click.option("--dtype", default="f16", show_default=True, type=click.Choice(DTYPES), help=_DTYPE_HELP)
@click.option("--json", "as_json", is_flag=True,
              help="Print the plan as JSON (the text the plan's to_json() returns).")
@_SCRATCH_BUFFERS
@_SCRATCH_PER_WARP
def plan(src: str, dst: str, target: str, arch: Optional[str], strategy: str, swizzle: str,
         smem_budget: int, shape: Optional[str], strides: Optional[str], warps: Optional[int], dtype: str,
         as_json: bool, scratch_buffers: int, scratch_per_warp: bool) -> None:
    """Plan the conversion from --src to --dst and print it: strategy,
    register permutation, shuffle rounds, shared memory and swizzle, predicted
    wavefronts and bank conflicts, and every candidate with its score,
    cheapest first."""
    from ll_codegen.api import plan_conversion
    _need(src, dst)
    p = plan_conversion(src, dst, dtype=dtype, target=target, arch=arch, strategy=strategy, swizzle=swizzle,
                        smem_budget=smem_budget, shape=shape, strides=strides, warps=warps,
                        scratch_buffers=scratch_buffers, scratch_per_warp=scratch_per_warp)
    text = p.to_json() if as_json else p.summary()
    click.echo(text, nl=not text.endswith("\n"))


@main.command()
@_conversion_options()
@click.option("--dtype", default="f16", show_default=True, type=click.Choice(DTYPES), help=_DTYPE_HELP)
@click.option("-o", "--output", "output", default=".", show_default=True, metavar="DIR",
              type=click.Path(file_okay=False), help="Folder to write into (created if missing).")
@click.option("--name", default=None, metavar="NAME",
              help="C identifier for the namespace and file names (default: <src stem>_to_<dst stem>).")
@click.option("--emit", "emit", multiple=True, type=CommaChoice(EMIT_CHOICES),
              help="header, harness, bench or all; repeatable or a comma list (default header,harness).")
@_SCRATCH_BUFFERS
@_SCRATCH_PER_WARP
def convert(src: str, dst: str, target: str, arch: Optional[str], strategy: str, swizzle: str,
            smem_budget: int, shape: Optional[str], strides: Optional[str], warps: Optional[int], dtype: str,
            output: str, name: Optional[str], emit: tuple[str, ...], scratch_buffers: int,
            scratch_per_warp: bool) -> None:
    """Generate the conversion from --src to --dst: a header with the
    device function (and a test harness, a round-trip bench); prints each
    written path.  Same inputs give byte-identical files.  Every target is
    checked before anything is written, and all files are written or none."""
    from ll_codegen.api import conversion_files, write_rendered
    _need(src, dst)
    _check_outputs(output, target, name if name is not None else default_name(src, dst), emit, name)
    conv = conversion_files(src, dst, dtype=dtype, target=target, arch=arch, strategy=strategy, swizzle=swizzle,
                            smem_budget=smem_budget, shape=shape, name=name, emit=emit or None, strides=strides,
                            warps=warps, scratch_buffers=scratch_buffers, scratch_per_warp=scratch_per_warp)
    write_rendered(conv.files, output, "-o", announce=say)


@main.command()
@_conversion_options(required=False)
@click.option("--dtype", "dtypes", multiple=True, type=CommaChoice(DTYPES),
              help="Element type(s): repeatable or a comma list (default f16).")
@click.option("--corpus", default=None, metavar="FILE", type=click.Path(dir_okay=False),
              help="YAML list of conversions to verify instead of --src/--dst.")
@click.option("--runs", default=2, show_default=True, type=click.IntRange(1, limits.MAX_RUNS),
              help="Random tensors per conversion.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, limits.MAX_SEED), help="Random seed.")
@click.option("--host", is_flag=True, help="Run CUDA harnesses on the host SIMT runtime instead of a GPU.")
def verify(src: Optional[str], dst: Optional[str], target: str, arch: Optional[str], strategy: str, swizzle: str,
           smem_budget: int, shape: Optional[str], strides: Optional[str], warps: Optional[int],
           dtypes: tuple[str, ...], corpus: Optional[str], runs: int, seed: int, host: bool) -> None:
    """Compile and run generated harnesses and check them bit for bit: one
    conversion (--src/--dst, one row per --dtype) or every entry of --corpus.
    CUDA runs on the GPU (CuPy), or on the host SIMT runtime with --host; HIP
    runs on the host SIMT runtime (wave64 or wave32).  Prints a table; exit
    status 1 on any failure."""
    from ll_codegen.jobs import VerifyJob as Job, load_corpus, needs_gpu, needs_host, plan_jobs, run_jobs
    if runs < 1:
        raise CLIError(f"--runs must be at least 1, got {runs}")
    if strides is not None:
        raise CLIError("--stride: verify runs global tiles at padded strides of its own")
    if corpus:
        if src or dst:
            raise CLIError("give either --corpus or --src/--dst, not both")
        jobs = load_corpus(corpus)
    else:
        _need(src, dst)
        dts = limits.dtype_list([d.strip() for v in (dtypes or ("f16",)) for d in v.split(",") if d.strip()], "--dtype")
        if not dts:
            raise CLIError("--dtype: no element type given")
        jobs = [Job(pair=f"{os.path.basename(src)} -> {os.path.basename(dst)}", src=src, dst=dst, dtypes=tuple(dts),
                    target=target, arch=arch, strategy=strategy, swizzle=swizzle, smem_budget=smem_budget,
                    shape=shape, name=None)]
    planned = plan_jobs(jobs)                 # every input checked before looking for a GPU
    from ll_codegen.run import gpu
    reason = gpu.available() if needs_gpu(planned, host) else None
    if reason is not None:
        raise CLIError(f"cannot verify: {reason} (--host runs on the CPU)")
    from ll_codegen.run import host as host_runtime
    if needs_host(planned, host) and host_runtime.compiler() is None:
        raise CLIError("cannot verify: the host SIMT runtime (HIP rows, --host) needs clang++ (apt-get install clang)")
    rows, failed = run_jobs(planned, runs=runs, seed=seed, echo=click.echo, host=host)
    if failed:
        raise click.exceptions.Exit(1)


@main.command()
@_spec_option("--src", "Source layout spec (a distributed layout).")
@_spec_option("--dst", "Destination layout spec (a distributed layout).")
@click.option("--dtype", default="f16", show_default=True, type=click.Choice(DTYPES), help=_DTYPE_HELP)
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
    _need(src, dst)
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


GATHER_STRATEGIES = ("auto", "shuffle", "smem")


@main.command()
@click.option("--src", "src", default=None, metavar="SRC.yaml", type=click.Path(dir_okay=False),
              help="Source layout spec (distributed).")
@click.option("--index", "index", default=None, metavar="IDX.yaml", type=click.Path(dir_okay=False),
              help="Index layout spec (distributed; the output has this layout and shape).")
@click.option("--axis", default=None, type=int, metavar="N", help="The gather axis (a tensor dim).")
@click.option("--dtype", default="f16", show_default=True, type=click.Choice(DTYPES), help=_DTYPE_HELP)
@click.option("--index-dtype", "index_dtype", default="i32", show_default=True, type=click.Choice(tuple(INDEX_DTYPES)),
              help="Index element type.")
@click.option("--target", default="cuda", show_default=True, type=click.Choice(TARGETS), help="Target.")
@click.option("--arch", default=None, type=click.Choice(ARCHS),
              help="Architecture of --target: sm_* for cuda (default sm_90), gfx* for hip (default gfx90a).")
@click.option("--strategy", default="auto", show_default=True, type=click.Choice(GATHER_STRATEGIES),
              help="Force a strategy (shuffle needs a warp-local gather; an illegal one is an error).")
@_generator_options("<src stem>_gather<axis>", "header, harness, bench (CUDA) or all", "GatherPlan")
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
    _given(("--src", src), ("--index", index), ("--axis", axis))
    _generate(lambda: files_of(src, index, axis, dtype, index_dtype, target, arch, strategy, name, emit or None),
              gather_name(src, axis), output, target, name, emit, show_plan, as_json)


@main.command()
@_spec_option("--acc", "Accumulator layout spec (nvidia_mma: version [3, 0] wgmma, [2, 0] mma.sync), M x N.")
@_spec_option("--a", "Operand A spec, M x K: a shared layout (wgmma) or a dot_operand register layout.")
@_spec_option("--b", "Operand B spec, K x N: a shared layout (wgmma) or a dot_operand register layout (mma.sync).")
@click.option("--dtype", default="f16", show_default=True, type=click.Choice(MMA_DTYPES),
              help="Operand type (tf32 is stored as 32-bit floats).")
@click.option("--acc-dtype", "acc_dtype", default="f32", show_default=True, type=click.Choice(("f32", "f16", "i32")),
              help="Accumulator type (f32 for floats, i32 for i8/u8).")
@click.option("--target", default="cuda", show_default=True, type=click.Choice(TARGETS), help="Target.")
@click.option("--arch", default=None, type=click.Choice(ARCHS),
              help="Architecture: sm_90a for wgmma (default sm_90a with a v3 accumulator), sm_80+ for mma.sync.")
@_generator_options("<acc stem>_mma", "header, harness or all", "MmaPlan")
def mma(acc: str, a: str, b: str, dtype: str, acc_dtype: str, target: str, arch: Optional[str], output: str,
        name: Optional[str], emit: tuple[str, ...], show_plan: bool, as_json: bool) -> None:
    """Generate acc += A @ B for one CTA tile: mma(acc, a, b) issuing every
    wgmma.mma_async (operands in shared memory through matrix descriptors
    derived from the layouts' offsets, or A in registers) or mma.sync (register
    operands), with fence()/commit()/wait<N>() for wgmma.  Writes a header and
    a test harness (prints each path), or with --plan prints the plan."""
    from ll_codegen.api import mma_files
    _given(("--acc", acc), ("--a", a), ("--b", b))
    _generate(lambda: mma_files(acc, a, b, dtype=dtype, acc_dtype=acc_dtype, target=target, arch=arch, name=name,
                                emit=emit or None), mma_name(acc), output, target, name, emit, show_plan, as_json)


@main.command()
@_spec_option("--src", "Source layout spec (distributed).", required=False)
@click.option("--dim", "dims", multiple=True, metavar="D", help="A tensor dim to reduce; repeatable or a comma list.")
@click.option("--op", "combine", default="sum", show_default=True, type=click.Choice(COMBINES), help="The combine.")
@click.option("--dtype", default="f32", show_default=True, type=click.Choice(REDUCE_DTYPES), help="Element type.")
@click.option("--target", default="cuda", show_default=True, type=click.Choice(TARGETS), help="Target.")
@click.option("--arch", default=None, type=click.Choice(ARCHS),
              help="Architecture of --target: sm_* for cuda (default sm_90), gfx* for hip (default gfx90a).")
@_generator_options("<src stem>_<op><dims>", "header, harness or all", "ReducePlan")
def reduce(src: Optional[str], dims: tuple[str, ...], combine: str, dtype: str, target: str, arch: Optional[str],
           output: str, name: Optional[str], emit: tuple[str, ...], show_plan: bool, as_json: bool) -> None:
    """Generate dst = reduce(src, dims, op) (Triton's tt.reduce) in the slice layout of --dim: reduce() and
    broadcast() in a header, and a test harness (prints each path), or with --plan prints the plan."""
    from ll_codegen.api import parse_dims, reduce_files
    _given(("--src", src), ("--dim", dims))
    _generate(lambda: reduce_files(src, dims, combine, dtype, target, arch, name, emit or None),
              reduce_name(src, parse_dims(dims), combine), output, target, name, emit, show_plan, as_json)


@main.command()
@click.argument("directory", required=False, default=None, metavar="[DIR]", type=click.Path(file_okay=False))
@click.option("-o", "--output", "output", default=None, metavar="OUTDIR", type=click.Path(file_okay=False),
              help="Write (or with --check compare) here instead of DIR (CI regenerates into a temporary folder).")
@click.option("--manifest", default=None, metavar="FILE", type=click.Path(dir_okay=False),
              help="The manifest (default: DIR/manifest.yaml).")
@click.option("--check", is_flag=True, help="Write nothing; exit status 1 if the folder is not up to date.")
def regenerate(directory: Optional[str], output: Optional[str], manifest: Optional[str], check: bool) -> None:
    """Regenerate a checkout's generated/ folder from its manifest.yaml.

    DIR is the checkout's generated/ folder (default: ./generated, else the
    checkout llgen runs from); the manifest's spec paths are relative to the
    folder above it (the checkout's root), so it works from any directory and
    from an installed llgen.  python -m ll_codegen.regenerate is the same
    command."""
    code = R.run(MANIFEST_COMMANDS, directory, output=output, manifest=manifest, check=check,
                 echo=lambda line: say([line], wrote=not check))
    if code:
        raise click.exceptions.Exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()


#: The commands a ``generated/manifest.yaml`` entry may use, whose option parsers are its grammar.
MANIFEST_COMMANDS = {"convert": convert, "gather": gather, "mma": mma, "reduce": reduce}
