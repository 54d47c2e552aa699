"""``llgen chain``: a chain's free layouts chosen, every step planned and generated."""
from __future__ import annotations

import os

import click

from ll_codegen.chain.search import ROUNDS
from ll_codegen.cli.app import CLIError, main, say
from ll_codegen.cli.options import generator_options
from ll_codegen.core.files import check_output_dir, check_targets

__all__ = ["chain"]


@main.command()
@click.argument("chain_file", metavar="CHAIN.yaml", type=click.Path(dir_okay=False))
@click.option("--rounds", default=ROUNDS, show_default=True, type=click.IntRange(0, 16),
              help="Rounds of the local search (bit transpositions) after the aligned candidates; 0: none.")
@generator_options("the chain file's stem", "header, harness or all, per step", "ChainPlan")
def chain(chain_file: str, rounds: int, output: str, name: str | None, emit: tuple[str, ...], show_plan: bool,
          as_json: bool) -> None:
    """Plan a chain of operations whose in-between layouts are free (docs/chains.md): the free
    indices' relabelling and the free tensors' layouts are chosen with the planner's cost
    model, summed over the steps.  Prints the choice (each free layout as a spec to paste)
    and each step's cost against the reference choice, then writes every step's header (and
    harness) under the chosen layouts, the index header NAME_indices.cuh and each free
    tensor's spec NAME_<tensor>.yaml; with --plan prints every step's plan instead."""
    from ll_codegen.api import check_name
    from ll_codegen.chain.description import load_chain
    from ll_codegen.chain.files import chain_file_names, chain_files
    from ll_codegen.chain.report import chain_json, chain_summary
    from ll_codegen.chain.search import plan_chain
    if as_json and not show_plan:
        raise CLIError("--json needs --plan (the files are the output otherwise)")
    if name is None:
        name = os.path.splitext(os.path.basename(chain_file))[0].replace("-", "_")
    check_name(name)
    c = load_chain(chain_file)
    if not show_plan:                  # every output checked before the planning
        check_output_dir(output, "-o")
        check_targets([os.path.join(output, f) for f in chain_file_names(c, name, emit or None)], "-o",
                      make_dirs=True)
    cp = plan_chain(c, rounds)
    if show_plan:
        if as_json:
            click.echo(chain_json(cp))
            return
        parts = [chain_summary(cp)] + [f"\nstep {k} ({s.src} -> {s.dst}):\n{p.summary()}"
                                       for k, (s, p) in enumerate(zip(c.steps, cp.plans))]
        click.echo("\n".join(parts))
        return
    from ll_codegen.api import write_rendered
    files = chain_files(cp, name, chain_file, emit or None)
    click.echo(chain_summary(cp))
    write_rendered(files, output, "-o", announce=say)
