"""``llgen``: the command-line entry point (click).

Commands are added to the ``main`` group (``cli/app.py``) with ``@main.command()``:
``show`` and ``regenerate`` here, the conversion family (``plan``, ``convert``,
``bench``) in ``cli/conversion.py``, ``verify`` in ``cli/verify.py``, the generators (``gather``, ``mma``,
``reduce``) in ``cli/generators.py``, the options they share in ``cli/options.py``.
The group class, ``LLGenGroup``, runs every command under ``handle_errors``: a user
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

import json
import os
from typing import Optional

import click

from ll_codegen import regenerate as R
from ll_codegen.cli.app import (ABORTED, PROG, USER_ERRORS, CLIError, LLGenGroup, command_with_errors, error_line,
                                handle_errors, main, say)
from ll_codegen.cli.conversion import bench, convert, plan
from ll_codegen.cli.verify import verify
from ll_codegen.cli.generators import gather, mma, reduce
from ll_codegen.cli.chain import chain
from ll_codegen.cli.options import CommaChoice
from ll_codegen.core.files import check_targets, quote_path, write_all, write_atomic
from ll_codegen.layouts.show import element_bits_of, json_text, layout_json, layout_params, render_svg, render_text
from ll_codegen.spec import load_spec, ttgir_listing
from ll_codegen.ttgir import listing_text, split_selector

__all__ = ["main", "LLGenGroup", "CLIError", "USER_ERRORS", "handle_errors", "command_with_errors",
           "write_atomic", "error_line", "CommaChoice", "say", "PROG", "ABORTED", "MANIFEST_COMMANDS",
           "show", "plan", "convert", "verify", "bench", "gather", "mma", "reduce", "chain", "regenerate"]


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--shape", default=None, metavar="N,N",
              help="Tensor shape, e.g. 64,64 (overrides the spec's 'shape').")
@click.option("--json", "as_json", is_flag=True, help="Print the bases as JSON (DESIGN.md's form).")
@click.option("--svg", "svg_path", default=None, metavar="FILE", type=click.Path(dir_okay=False),
              help="Draw the tensor grid as an SVG picture to FILE (and print its path instead of the text).")
def show(spec: str, shape: Optional[str], as_json: bool, svg_path: Optional[str]) -> None:
    """Print the linear layout of SPEC (a YAML spec file, or one layout of a
    Triton TTGIR dump as FILE.ttgir#ALIAS), or with --svg draw it to a
    picture and print the picture's path.  A TTGIR dump alone (FILE.ttgir)
    lists every layout attribute in it: alias, kind, llgen spec, shapes, bases."""
    selection = split_selector(spec)
    if selection is not None and not selection[1] and shape is None:
        if svg_path is not None:
            raise CLIError(f"--svg draws one layout: choose one as {spec}#ALIAS (llgen show {spec} lists them)")
        items = ttgir_listing(spec)
        text = json.dumps({"file": spec, "layouts": items}, indent=1) if as_json else listing_text(spec, items)
        click.echo(text, nl=not text.endswith("\n"))
        return
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



@main.command()
@click.argument("directory", required=False, default=None, metavar="[DIR]", type=click.Path(file_okay=False))
@click.option("-o", "--output", "output", default=None, metavar="OUTDIR", type=click.Path(file_okay=False),
              help="Write (or with --check compare) here instead of DIR (CI regenerates into a temporary folder).")
@click.option("--manifest", default=None, metavar="FILE", type=click.Path(dir_okay=False),
              help="The manifest (default: DIR/manifest.yaml).")
@click.option("--check", is_flag=True, help="Write nothing; exit status 1 if the folder is not up to date.")
@click.option("--only", default=None, metavar="REGEX",
              help="Only the entries whose --name matches (re.search), into -o OUTDIR (a build's header folder).")
def regenerate(directory: Optional[str], output: Optional[str], manifest: Optional[str], check: bool,
               only: Optional[str]) -> None:
    """Regenerate a checkout's generated/ folder from its manifest.yaml.

    DIR is the checkout's generated/ folder (default: ./generated, else the
    checkout llgen runs from); the manifest's spec paths are relative to the
    folder above it (the checkout's root), so it works from any directory and
    from an installed llgen.  python -m ll_codegen.regenerate is the same
    command."""
    code = R.run(MANIFEST_COMMANDS, directory, output=output, manifest=manifest, check=check,
                 echo=lambda line: say([line], wrote=not check), only=only)
    if code:
        raise click.exceptions.Exit(code)



#: The commands a ``generated/manifest.yaml`` entry may use, whose option parsers are its grammar.
MANIFEST_COMMANDS = {"convert": convert, "gather": gather, "mma": mma, "reduce": reduce, "chain": chain}
