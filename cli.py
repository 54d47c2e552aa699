"""``llgen``: the command-line entry point (click).

Commands are added to the ``main`` group with ``@main.command()``.  The group
class, ``LLGenGroup``, runs every command under ``handle_errors``: a user
error (``USER_ERRORS``: SpecError, LayoutError and any other ValueError,
OSError, YAML and Jinja2 errors, ``CLIError``) becomes ONE line on stderr,
``llgen: error: <message>``, and exit status 2 -- never a traceback.  Any
other exception is a bug: one line ``llgen: internal error: ...`` and exit
status 1 (set ``LLGEN_DEBUG=1`` to get the traceback instead).  Files are
written with ``write_atomic`` (temp file + ``os.replace``), after everything
they depend on has been computed, so a failing command leaves no
half-written output.
"""
from __future__ import annotations

import functools
import os
import sys
import tempfile
from typing import Any, Callable, Optional

import click
import yaml

from ll_codegen.layouts import LayoutError
from ll_codegen.show import element_bits_of, json_text, layout_json, layout_params, render_svg, render_text
from ll_codegen.spec import SpecError, load_spec

try:  # jinja2 is a dependency, but the CLI must not need it to report errors
    from jinja2 import TemplateError as _TemplateError
except ImportError:  # pragma: no cover
    _TemplateError = ValueError  # type: ignore[misc,assignment]

__all__ = ["main", "LLGenGroup", "CLIError", "USER_ERRORS", "handle_errors", "command_with_errors",
           "write_atomic", "error_line"]

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
        where = e.filename if e.filename is not None else ""
        return f"{where}: {e.strerror}" if where else e.strerror
    if isinstance(e, yaml.MarkedYAMLError) and e.problem_mark is not None:
        m = e.problem_mark
        return f"{m.name}: line {m.line + 1}, column {m.column + 1}: {e.problem or e.context or 'malformed YAML'}"
    msg = _first_line(str(e))
    if isinstance(e, KeyError) and msg.startswith(("'", '"')):
        msg = msg[1:-1] if len(msg) > 1 and msg[-1] == msg[0] else msg
    return msg or type(e).__name__


def _fail(e: BaseException, internal: bool = False) -> "None":
    if internal:
        if os.environ.get("LLGEN_DEBUG"):
            raise e
        click.echo(f"{PROG}: internal error: {type(e).__name__}: {error_line(e)} "
                   f"(set LLGEN_DEBUG=1 for the traceback)", err=True)
        raise click.exceptions.Exit(1)
    click.echo(f"{PROG}: error: {error_line(e)}", err=True)
    raise click.exceptions.Exit(2)


def handle_errors(fn: Callable[..., Any]) -> Callable[[], Any]:
    """Run ``fn()``; user errors become one stderr line and exit 2."""
    try:
        return fn()
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
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
    """A click group whose subcommands all run under ``handle_errors``."""

    def invoke(self, ctx: click.Context) -> Any:
        return handle_errors(lambda: super(LLGenGroup, self).invoke(ctx))


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same folder and
    ``os.replace``: readers see the old file or the whole new one, never a
    part; on any error the temp file is removed and ``path`` is untouched."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, **({} if mode == "wb" else {"encoding": "utf-8", "newline": "\n"})) as fh:
            fh.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ----------------------------------------------------------------- commands
@click.group(cls=LLGenGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Linear-layout conversions for CUDA/HIP: inspect layouts, plan and
    generate conversions."""


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--shape", default=None, metavar="N,N",
              help="Tensor shape, e.g. 64,64 (overrides the spec's 'shape').")
@click.option("--json", "as_json", is_flag=True, help="Print the bases as JSON (DESIGN.md's form).")
@click.option("--svg", "svg_path", default=None, metavar="FILE", type=click.Path(dir_okay=False),
              help="Also draw the tensor grid as an SVG picture to FILE.")
def show(spec: str, shape: Optional[str], as_json: bool, svg_path: Optional[str]) -> None:
    """Print the linear layout of SPEC (a YAML spec file)."""
    s = load_spec(spec, shape_override=shape)
    L = s.linear
    if as_json:
        text = json_text(layout_json(L))
    else:
        text = render_text(L, s.kind, s.shape, layout_params(s.layout), source=s.source)
    if svg_path:
        title = f"{s.kind} {'x'.join(map(str, s.shape))}  ({os.path.basename(s.source)})"
        svg = render_svg(L, title, element_bits=element_bits_of(s.layout))
        write_atomic(svg_path, svg)
    click.echo(text, nl=not text.endswith("\n"))


if __name__ == "__main__":  # pragma: no cover
    main()
