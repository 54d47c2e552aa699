"""The files of a planned chain: every step's header (and harness) under the chosen layouts,
the index header of the relabelled indices, and each free tensor's chosen layout as a spec
file (``<name>_<tensor>.yaml``, what ``llgen convert`` and the kernel's other tools read)."""
from __future__ import annotations

import os
from collections.abc import Sequence

import yaml

from ll_codegen.api import check_name, layout_text, parse_emit
from ll_codegen.chain.candidates import Placement
from ll_codegen.chain.description import Chain
from ll_codegen.chain.search import ROUNDS, ChainPlan, tensor_spec
from ll_codegen.emit.index_map import index_header
from ll_codegen.emit.render import file_names
from ll_codegen.layouts.show import layout_params
from ll_codegen.operations import command_line, operation_of, render_files


def step_name(name: str, k: int, src: str, dst: str) -> str:
    """The name of step ``k``'s files and namespace: ``<chain>_<k>_<src>_to_<dst>``."""
    return f"{name}_{k}_{src}_to_{dst}"


def spec_file_name(name: str, tensor: str) -> str:
    """The spec file of a free tensor's chosen layout: ``<chain>_<tensor>.yaml``."""
    return f"{name}_{tensor}.yaml"


def chain_file_names(chain: Chain, name: str, emit: Sequence[str] | str | None = None) -> list[str]:
    """The files ``chain_files`` writes, known before any planning (every operation has a header
    and a harness; a chain writes no bench)."""
    kinds = [k for k in parse_emit(emit) if k != "bench"]
    out = [file_names(chain.target, step_name(name, k, s.src, s.dst))[kind]
           for k, s in enumerate(chain.steps) for kind in kinds]
    out += [spec_file_name(name, t.name) for t in chain.tensors if t.free is not None]
    return out + ([file_names(chain.target, f"{name}_indices")["header"]] if chain.indices else [])


def spec_file(cp: ChainPlan, tensor: str, p: Placement, command: str) -> str:
    """A free tensor's chosen layout as a spec file: how it was found, the costs, the spec."""
    t = cp.chain.tensor(tensor)
    text = p.text or yaml.safe_dump(_reference_mapping(t), default_flow_style=True, sort_keys=False,
                                    width=1 << 20).strip()
    head = [f"# {tensor}: the layout {command} chose (free {t.free.space})",
            f"# found as {p.label}; chain cost {cp.cost:.2f} (reference {cp.identity_cost:.2f})"]
    body = [f"{k}: {_flow(v)}" for k, v in yaml.safe_load(text).items()]
    return "\n".join(head + body) + "\n"


def _flow(v) -> str:
    """One YAML value on one line (lists of bases in flow style)."""
    return yaml.safe_dump(v, default_flow_style=True, width=1 << 20).removesuffix("\n...\n").strip()


def _reference_mapping(t) -> dict:
    """The reference spec's mapping (the parameters of its layout object, and its shape)."""
    params = {k: list(v) if isinstance(v, tuple) else v for k, v in layout_params(t.spec.layout).items()
              if k != "rank"}
    return {**params, "shape": list(t.spec.shape)}


def chain_files(cp: ChainPlan, name: str, file_arg: str, emit: Sequence[str] | str | None = None) -> dict[str, str]:
    """file name -> text: per step the ``emit`` kinds its operation has (header and harness by
    default), rendered from the step's plan under the chosen layouts; and ``<name>_indices``
    (the relabelled indices' maps) when the chain has free indices.  ``file_arg``: the chain
    file as the user gave it (recorded in every header's command)."""
    check_name(name)
    kinds = tuple(k for k in parse_emit(emit) if k != "bench")
    command = command_line("chain", file=file_arg, rounds=None if cp.rounds == ROUNDS else cp.rounds, name=name)
    choice, layouts = dict(cp.choice), dict(cp.layouts)
    files: dict[str, str] = {}
    for k, (step, plan) in enumerate(zip(cp.chain.steps, cp.plans)):
        src, dst = cp.chain.tensor(step.src), cp.chain.tensor(step.dst)
        s_spec, d_spec = tensor_spec(src, choice, layouts), tensor_spec(dst, choice, layouts)
        have = [x for x in kinds if x in operation_of(plan).kinds(plan)]
        files.update(render_files(plan, step_name(name, k, step.src, step.dst), have, command,
                                  layout_text(s_spec.linear, s_spec, os.fspath(s_spec.source)),
                                  layout_text(d_spec.linear, d_spec, os.fspath(d_spec.source))))
    for tensor, p in cp.layouts:
        files[spec_file_name(name, tensor)] = spec_file(cp, tensor, p, command)
    if cp.choice:
        index_file = file_names(cp.chain.target, f"{name}_indices")["header"]
        files[index_file] = index_header(cp.choice, command, cp.chain.target)
    return files
