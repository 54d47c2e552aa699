"""Regenerate the curated conversions of a checkout's ``generated/`` folder::

    llgen regenerate [DIR] [-o OUTDIR] [--manifest FILE] [--check]
    python -m ll_codegen.regenerate ...          # the same command, same arguments

``DIR`` is the checkout's ``generated/`` folder (default: ``./generated`` when
the current folder has one, else the checkout this package was imported
from); it holds ``manifest.yaml``, which lists each conversion as the argument
list of ``llgen convert`` (``args``; spec paths relative to the folder above
``DIR``, the checkout's root) -- or of ``llgen gather`` with ``command:
gather`` --, the strategy the planner must choose (``expect``) and a
``note``.  Each entry is parsed by its command's own
option parser and emitted with ``--emit all`` (header, harness, and a bench
for register conversions and CUDA gathers) into ``DIR`` (or ``-o OUTDIR``), together with
``README.md`` (a table of every conversion with its strategy and predicted
bank conflicts).  Everything is rendered in memory first and then written
all or none; the output depends only on the manifest, the spec files and the
templates, so CI regenerates into a temporary folder and diffs it against
``generated/``.  With ``--check`` nothing is written: the exit status is 1 if
the folder differs from what would be written.  Paths are taken from the
arguments, never from where the package is installed, so it works from any
directory and from an installed ``llgen``.

Stale generated sources (``*.cuh``, ``*.cu``, ``*.h``, ``*.hip`` no entry
produces) are removed when the output folder is the manifest's folder.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Any, Mapping

from ll_codegen.api import conversion_files, gather_files, mma_files
from ll_codegen.core.files import check_output_dir, quote_path, write_all
from ll_codegen.core.limits import short
from ll_codegen.plan.model import ConversionPlan
from ll_codegen.spec import SpecError, parse_yaml, read_spec_text

#: The checkout this package was imported from (in an installed copy: site-packages, with no generated/).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFEST = os.path.join(ROOT, "generated", "manifest.yaml")
SOURCE_EXTS = (".cuh", ".cu", ".h", ".hip")
STRATEGIES = ("noop", "register", "shuffle", "smem", "store", "load", "copy", "tma", "wgmma", "mma.sync")

#: manifest command -> (the API function rendering its files, the options it needs)
COMMAND_FILES = {"convert": (conversion_files, ("src", "dst")), "gather": (gather_files, ("src", "index", "axis")),
                 "mma": (mma_files, ("acc", "a", "b"))}
COMMANDS = tuple(COMMAND_FILES)


@dataclass
class Entry:
    args: str
    expect: str | None
    note: str
    command: str = "convert"
    conv: Any = None            # api.Conversion or api.Generated: .plan, .name, .command, .files
    params: dict[str, Any] | None = None


def load_manifest(path: str) -> list[Entry]:
    data = parse_yaml(read_spec_text(path, "manifest"), path)     # the same limits as a spec file
    if not isinstance(data, list) or not data:
        raise SpecError(path, "top level", "expected a non-empty list of {args, expect, note} entries")
    out = []
    for i, e in enumerate(data, 1):
        if not isinstance(e, dict) or not isinstance(e.get("args"), str):
            raise SpecError(path, f"entry {i}", "expected a mapping with 'args' (a string of llgen convert arguments)")
        unknown = set(e) - {"args", "expect", "note", "command"}
        if unknown:
            raise SpecError(path, f"entry {i}.{sorted(unknown)[0]}",
                            "unknown field (allowed: args, expect, note, command)")
        expect, command = e.get("expect"), e.get("command", "convert")
        if command not in COMMANDS:
            raise SpecError(path, f"entry {i}.command", f"{short(command)} is not one of {', '.join(COMMANDS)}")
        if expect is not None and expect not in STRATEGIES:
            raise SpecError(path, f"entry {i}.expect", f"{short(expect)} is not one of {', '.join(STRATEGIES)}")
        out.append(Entry(e["args"], expect, str(e.get("note", "")).strip(), command))
    return out


def build(entries: list[Entry], manifest: str, parsers: Mapping[str, Any], root: str | None = None) -> dict[str, str]:
    """Plan and render every entry; returns file name -> text (README.md
    included).  ``parsers``: the click command of each manifest command
    (``cli.MANIFEST_COMMANDS``: ``llgen convert``'s and ``llgen gather``'s own
    option parsers are the manifest's grammar; passed in, so that this module
    does not import the CLI that runs it).  ``manifest`` names the manifest in messages; spec paths are
    opened relative to ``root`` (default: ``ROOT``, the checkout this package
    was imported from; ``run`` passes the folder above the manifest's)."""
    root = ROOT if root is None else root
    import click
    files: dict[str, str] = {}
    for i, e in enumerate(entries, 1):
        where = f"{manifest}: entry {i}"
        try:
            ctx = parsers[e.command].make_context(e.command, shlex.split(e.args))
        except click.exceptions.ClickException as err:
            raise ValueError(f"{where}: args: {err.format_message()}") from None
        p = dict(ctx.params)
        if p.pop("output") != "." or p.pop("emit"):
            raise ValueError(f"{where}: args: leave out -o and --emit (regenerate writes every kind to OUTDIR)")
        files_of, needed = COMMAND_FILES[e.command]
        if any(p.get(k) in (None, "") for k in needed):
            raise ValueError(f"{where}: args: {' and '.join('--' + k for k in needed)} are required")
        if e.command != "convert" and (p.pop("show_plan") or p.pop("as_json")):
            raise ValueError(f"{where}: args: leave out --plan and --json")
        try:
            e.conv = files_of(emit=("all",), root=root, **p)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        e.params = p
        if e.expect is not None and e.conv.plan.strategy != e.expect:
            raise ValueError(f"{where}: the planner chose {e.conv.plan.strategy}, the manifest expects {e.expect}")
        for fname, text in e.conv.files.items():
            if fname in files:
                raise ValueError(f"{where}: {fname} is also written by an earlier entry (give another --name)")
            files[fname] = text
    files["README.md"] = readme(entries)
    return files


def _conflicts(plan) -> str:
    m = getattr(plan, "smem", None)
    if m is None or not isinstance(plan, ConversionPlan):
        return "—"
    return f"{m.store.bank_conflicts} / {m.load.bank_conflicts}"


def _instrs(plan) -> str:
    if plan.operation == "mma":
        return f"{len(plan.steps)} x {plan.instr}"
    if not isinstance(plan, ConversionPlan):          # a gather
        if plan.shuffle is not None:
            return f"{plan.shuffle.shuffles} shuffles, {len(plan.shuffle.outs[0].cands)} candidates/element"
        return f"{plan.smem_bytes} B, {plan.n_idx} loads"
    if plan.smem is not None:
        m = plan.smem
        return f"{m.bytes} B, {len(m.rounds)} round(s), st {m.store_instr} / ld {m.load_instr}"
    if plan.shuffle is not None:
        s = plan.shuffle
        return f"{len(s.rounds)} round(s) x {s.words} word(s)"
    if plan.strategy == "register":
        return f"{plan.n_dst} register moves"
    return "—"


def readme(entries: list[Entry]) -> str:
    lines = [
        "# generated/",
        "",
        "Curated conversions, memory accesses and gathers emitted by `llgen convert --emit all` / `llgen gather --emit all` (header, test harness, and a bench for register conversions and CUDA gathers).",
        "Do not edit: this folder, this README included, is produced by one command from the repository root,",
        "",
        "```sh",
        "llgen regenerate            # or: python -m ll_codegen.regenerate; llgen regenerate --check",
        "```",
        "",
        "driven by `generated/manifest.yaml` (each entry's `llgen convert` or `llgen gather` arguments). CI regenerates into a",
        "temporary folder and diffs it against this one, so a change to the planner, the templates or a spec",
        "shows up here. Each header's opening comment records the exact `llgen convert` command, both layouts",
        "and the full plan with every scored candidate.",
        "",
        "Predicted bank conflicts are per warp-wide shared-memory instruction (wavefronts beyond the minimum),",
        "store / load.",
        "",
        "| name | src -> dst | dtype | target | strategy | data movement | bank conflicts (st / ld) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for e in entries:
        c, p = e.conv, e.params
        name = {k: f"`{os.path.basename(str(v))}`" for k, v in p.items() if isinstance(v, str)}
        pair = {"convert": lambda: f"{name['src']} -> {name['dst']}",
                "gather": lambda: f"gather {name['src']} by {name['index']}, axis {p['axis']}",
                "mma": lambda: f"{name['acc']} += {name['a']} x {name['b']}"}[e.command]()
        lines.append(f"| `{c.name}` | {pair} | {c.plan.dtype} | {c.plan.target} {c.plan.arch} | "
                     f"{c.plan.strategy} | {_instrs(c.plan)} | {_conflicts(c.plan)} |")
    lines += ["", "## Conversions and gathers", ""]
    for e in entries:
        c = e.conv
        lines.append(f"### `{c.name}` — {c.plan.strategy}")
        lines.append("")
        if e.note:
            lines += [e.note, ""]
        lines.append("Files: " + ", ".join(f"`{f}`" for f in c.files))
        lines += ["", "```sh", c.command, "```", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _stale(outdir: str, keep: set[str]) -> list[str]:
    return sorted(f for f in os.listdir(outdir)
                  if f.endswith(SOURCE_EXTS) and f not in keep and os.path.isfile(os.path.join(outdir, f)))


def locate(directory: str | None, manifest: str | None) -> str:
    """The manifest to use: ``--manifest``, ``DIR/manifest.yaml``,
    ``./generated/manifest.yaml``, or the importing checkout's."""
    if manifest is not None and directory is not None:
        raise ValueError("give DIR or --manifest, not both")
    if manifest is not None:
        if manifest == "":
            raise ValueError("--manifest '': an empty path")
        return manifest
    if directory is not None:
        if directory == "":
            raise ValueError("DIR '': an empty path (the checkout's generated/ folder)")
        return os.path.join(directory, "manifest.yaml")
    here = os.path.join("generated", "manifest.yaml")
    if os.path.isfile(here):
        return here
    if os.path.isfile(MANIFEST):
        return MANIFEST
    raise ValueError("no generated/manifest.yaml in the current folder: give the checkout's generated/ folder "
                     "(llgen regenerate PATH/generated)")


def run(parsers: Mapping[str, Any], directory: str | None = None, output: str | None = None,
        manifest: str | None = None, check: bool = False, echo=print) -> int:
    """``llgen regenerate`` (``parsers``: as for ``build``): 0 when written or up to date, 1 when ``check``
    finds the folder out of date; raises ValueError/OSError (one line) for bad
    input, with nothing written."""
    manifest = locate(directory, manifest)
    if not os.path.isfile(manifest):
        raise OSError(2, "no manifest here (DIR is a checkout's generated/ folder)", manifest)
    outdir = output if output is not None else (os.path.dirname(manifest) or ".")
    check_output_dir(outdir, "-o" if output is not None else "DIR")
    entries = load_manifest(manifest)
    files = build(entries, manifest, parsers, root=os.path.dirname(os.path.dirname(os.path.abspath(manifest))))
    own_folder = os.path.abspath(outdir) == os.path.dirname(os.path.abspath(manifest))
    if check:
        bad = []
        for fname, text in files.items():
            path = os.path.join(outdir, fname)
            try:
                with open(path, encoding="utf-8", newline="") as fh:
                    same = fh.read() == text
            except (OSError, UnicodeError):
                same = False
            if not same:
                bad.append(fname)
        if os.path.isdir(outdir):
            bad += _stale(outdir, set(files))
        for f in bad:
            echo(f"out of date: {quote_path(os.path.join(outdir, f))}")
        return 1 if bad else 0
    write_all({os.path.join(outdir, fname): text for fname, text in files.items()},
              "-o" if output is not None else "DIR", make_dirs=True)
    removed = _stale(outdir, set(files)) if own_folder else []
    for f in removed:
        os.unlink(os.path.join(outdir, f))
    echo(f"wrote {len(files) - 1} sources for {len(entries)} entries and README.md to {quote_path(outdir)}"
         + (f"; removed {len(removed)} stale file(s)" if removed else ""))
    return 0
