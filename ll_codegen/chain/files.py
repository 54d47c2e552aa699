"""The files of a planned chain: every step's header (and harness) under the chosen layouts,
the index header of the relabelled indices, each free tensor's chosen layout as a spec
file (``<name>_<tensor>.yaml``, what ``llgen convert`` and the kernel's other tools read),
and for a pre-shuffled global tensor its offline reorder (``<name>_<tensor>_reorder.py``, numpy,
and ``<name>_<tensor>_reorder.cuh``, CUDA kernels; each with the inverse)."""
from __future__ import annotations

import os
from collections.abc import Sequence

import yaml

from ll_codegen.api import check_name, layout_text, parse_emit
from ll_codegen.chain import preshuffle
from ll_codegen.chain.candidates import Placement
from ll_codegen.chain.description import Chain, Tensor
from ll_codegen.chain.search import ROUNDS, ChainPlan, step_specs
from ll_codegen.core.dtypes import dtype_bits
from ll_codegen.emit.index_map import index_header
from ll_codegen.emit.render import file_names
from ll_codegen.emit.reorder import reorder_cuda, reorder_python
from ll_codegen.layouts.show import layout_params
from ll_codegen.operations import command_line, operation_of, render_files
from ll_codegen.spec import flow_yaml


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
    out += [f for t in chain.tensors if t.free is not None and t.free.space == "global"
            for f in reorder_file_names(chain, name, t.name)]
    return out + ([file_names(chain.target, f"{name}_indices")["header"]] if chain.indices else [])


def reorder_file_names(chain: Chain, name: str, tensor: str) -> list[str]:
    """The offline reorder of a pre-shuffled tensor: ``<chain>_<tensor>_reorder.py`` (numpy) and
    the CUDA (HIP) header ``<chain>_<tensor>_reorder.cuh``."""
    return [f"{name}_{tensor}_reorder.py", file_names(chain.target, f"{name}_{tensor}_reorder")["header"]]


def shuffle_offsets(t: Tensor, p: Placement) -> tuple[int, ...]:
    """A free global tensor's packed offsets under its placement: the pre-shuffle's, or the
    reference tile's own (the tensor as written, packed tile by tile)."""
    return p.offsets or preshuffle.reference_offsets(t.spec.linear)


def _reorder_files(cp: ChainPlan, name: str, t: Tensor, p: Placement, command: str) -> dict[str, str]:
    dtype = next(s.dtype for s in cp.chain.steps if t.name in (s.src, s.dst))
    offset = preshuffle.offset_mapping(shuffle_offsets(t, p), t.spec.shape)["offset"]
    how = p.label if p.offsets else "the reference layout as written (no pre-shuffle was cheaper)"
    py, cuh = reorder_file_names(cp.chain, name, t.name)
    args = (f"{name}_{t.name}_reorder", t.name, offset, t.spec.shape, dtype_bits(dtype), command, how)
    return {py: reorder_python(*args), cuh: reorder_cuda(*args, target=cp.chain.target)}


def spec_file(cp: ChainPlan, tensor: str, p: Placement, command: str) -> str:
    """A free tensor's chosen layout as a spec file: how it was found, the costs, the spec.  A
    pre-shuffled tensor's file is the packed buffer's spec (what its steps' headers load), its
    offset bases in the comments."""
    t = cp.chain.tensor(tensor)
    if p.offsets:
        head = [f"# {tensor}: the pre-shuffled global layout {command} chose",
                f"# found as {p.label}; chain cost {cp.cost:.2f} (reference {cp.identity_cost:.2f})",
                "# a tile is packed into one dense run: packed offset bit i holds the element at offset[i]",
                "# (reorder it offline with the generated reorder module or kernel)",
                f"#   {p.text}"]
        return "\n".join(head + [f"{k}: {flow_yaml(v)}" for k, v in preshuffle.packed_mapping(t.spec.shape).items()]) \
            + "\n"
    text = p.text or flow_yaml(_reference_mapping(t))
    head = [f"# {tensor}: the layout {command} chose (free {t.free.space})",
            f"# found as {p.label}; chain cost {cp.cost:.2f} (reference {cp.identity_cost:.2f})"]
    body = [f"{k}: {flow_yaml(v)}" for k, v in yaml.safe_load(text).items()]
    return "\n".join(head + body) + "\n"


def _reference_mapping(t) -> dict:
    """The reference spec's mapping (the parameters of its layout object, and its shape)."""
    params = {k: list(v) if isinstance(v, tuple) else v for k, v in layout_params(t.spec.layout).items()
              if k != "rank"}
    return {**params, "shape": list(t.spec.shape)}


def _source(source: str | os.PathLike, root: str | None) -> str:
    """A spec's path as the headers record it: relative to ``root`` when given."""
    return os.path.relpath(os.fspath(source), root) if root else os.fspath(source)


def chain_files(cp: ChainPlan, name: str, file_arg: str, emit: Sequence[str] | str | None = None,
                root: str | None = None) -> dict[str, str]:
    """file name -> text: per step the ``emit`` kinds its operation has (header and harness by
    default), rendered from the step's plan under the chosen layouts; and ``<name>_indices``
    (the relabelled indices' maps) when the chain has free indices.  ``file_arg``: the chain
    file as the user gave it (recorded in every header's command); ``root``: the folder the
    spec paths in the headers' layout comments are written relative to (``llgen regenerate``:
    the checkout, so the headers do not depend on where it lies)."""
    check_name(name)
    kinds = tuple(k for k in parse_emit(emit) if k != "bench")
    command = command_line("chain", file=file_arg, rounds=None if cp.rounds == ROUNDS else cp.rounds, name=name)
    choice, layouts = dict(cp.choice), dict(cp.layouts)
    files: dict[str, str] = {}
    for k, (step, plan) in enumerate(zip(cp.chain.steps, cp.plans)):
        s_spec, d_spec = step_specs(cp.chain, step, choice, layouts)
        have = [x for x in kinds if x in operation_of(plan).kinds(plan)]
        files.update(render_files(plan, step_name(name, k, step.src, step.dst), have, command,
                                  layout_text(s_spec.linear, s_spec, _source(s_spec.source, root)),
                                  layout_text(d_spec.linear, d_spec, _source(d_spec.source, root))))
    for tensor, p in cp.layouts:
        files[spec_file_name(name, tensor)] = spec_file(cp, tensor, p, command)
        if cp.chain.tensor(tensor).free.space == "global":
            files.update(_reorder_files(cp, name, cp.chain.tensor(tensor), p, command))
    if cp.choice:
        index_file = file_names(cp.chain.target, f"{name}_indices")["header"]
        files[index_file] = index_header(cp.choice, command, cp.chain.target)
    return files
