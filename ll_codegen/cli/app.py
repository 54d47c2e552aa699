"""The ``llgen`` click group and its error contract.

The group class, ``LLGenGroup``, runs every command under ``handle_errors``: a user
error (``USER_ERRORS``: SpecError, LayoutError and any other ValueError,
OSError, YAML and Jinja2 errors, ``CLIError``) becomes ONE line on stderr,
``llgen: error: <message>``, and exit status 2 -- never a traceback.  Any
other exception is a bug: one line ``llgen: internal error: ...`` and exit
status 1 (set ``LLGEN_DEBUG=1`` to get the traceback instead).  ``say`` prints a
command's listing of written paths in one write, before the files are committed.
"""
from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable, Sequence

import click
import yaml

from ll_codegen import __version__
from ll_codegen.core import limits
from ll_codegen.core.files import quote_path
from ll_codegen.layouts.base import LayoutError
from ll_codegen.spec import SpecError

try:  # jinja2 is a dependency, but the CLI must not need it to report errors
    from jinja2 import TemplateError as _TemplateError
except ImportError:  # pragma: no cover
    _TemplateError = ValueError  # type: ignore[misc,assignment]

__all__ = ["main", "LLGenGroup", "CLIError", "USER_ERRORS", "handle_errors", "command_with_errors", "error_line",
           "say", "PROG", "ABORTED"]

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


def _stdout_open() -> bool:
    """Whether standard output can be written: Python sets ``sys.stdout`` to None when the process
    started with file descriptor 1 closed (``llgen ... >&-``).  A stream without a descriptor
    (click's CliRunner) counts as open."""
    if sys.stdout is None:
        return False
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):
        return True
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


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
        if not _stdout_open():
            # every command prints (a listing, a plan, a table): with file descriptor 1 closed that output
            # would vanish and, worse, the next file opened would take descriptor 1
            click.echo(f"{PROG}: error: standard output is closed (nothing was done)", err=True)
            sys.exit(2)
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


def _print_include_dir(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """``--include-dir``: the folder of the host runtime's headers (``llgen_host.h``, ``simt_host.h``,
    ``hopper.h``, ``hip/``) as installed, for ``-I`` (or ``-isystem``) of an author's own build."""
    if not value or ctx.resilient_parsing:
        return
    from ll_codegen.run.host import SIMT_DIR
    click.echo(SIMT_DIR)
    ctx.exit(0)


@click.group(cls=LLGenGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name=PROG, message="%(prog)s %(version)s")
@click.option("--include-dir", is_flag=True, expose_value=False, is_eager=True, callback=_print_include_dir,
              help="Print the folder holding the host runtime's headers (llgen_host.h, simt_host.h, hip/) and exit: "
                   "clang++ -I \"$(llgen --include-dir)\" ...")
def main() -> None:
    """Linear-layout conversions for CUDA/HIP: inspect layouts, plan and
    generate conversions.

    Shell completion (bash): eval "$(_LLGEN_COMPLETE=bash_source llgen)"
    (zsh_source, fish_source for zsh and fish)."""
