"""Brute-force shared-memory bank and global-sector counters: the costs the
planner reports, measured from the byte addresses plans actually execute.

Bank model and the numbers the planner must match
-------------------------------------------------
For ONE warp-wide instruction with byte address ``a[l]`` per lane (``-1`` =
inactive), access size ``v`` bytes (16 for ldmatrix/stmatrix rows, whose
active lanes are the ``8x`` row providers):

* lanes are served in phases of ``P = wavefront_bytes // max(v, bank_bytes)``
  consecutive lanes (one phase if ``P >= warp size``); an 8/16-byte vector
  LOAD on NVIDIA whose every quad of lanes reads at most two distinct
  addresses is served in phases of ``2P`` lanes (``Target.load_quad_merge``,
  measured: ``gpu_tests/ncu_phases.py``);
* in a phase, the touched words are ``a // bank_bytes + k`` for
  ``k < max(1, v // bank_bytes)`` over the active lanes, deduplicated
  (sub-word accesses touch the one word that holds them; equal words are a
  broadcast, not a conflict);
* wavefronts(phase) = max over banks ``b`` of the number of distinct words
  ``word % banks == b`` (0 for a phase with no active lane);
* ``wavefronts`` = sum over phases;
* ``minimal`` = sum over phases with an active lane of
  ``max(1, ceil(distinct bytes touched in the phase / wavefront_bytes))``
  -- a phase of ``P`` lanes touches at most ``wavefront_bytes`` distinct
  bytes, so this is the number of phases that contain an active lane (a
  double phase may touch twice that: 2 with a conflict-free layout);
* ``bank_conflicts`` = ``wavefronts - minimal``.

``measure_smem(plan)`` replays every instruction of every (storing) warp and
round and reports, per kind (store, load), ``wavefronts`` and
``bank_conflicts`` per instruction (they must agree over all instructions;
otherwise the maximum is reported and ``uniform`` is False),
``instructions`` per warp over all rounds (a storing warp for stores) and
``total_wavefronts`` per warp (sum over its instructions; the maximum over
warps).  The planner's ``SmemPlan.store``/``load`` (``AccessCost``) must
match them.  ``per_instruction`` lists (round, index, warp, wavefronts, bank
conflicts) of every warp-wide instruction: summed, the CTA's totals.

``measure_memory(plan)`` does the same for a memory plan's access: shared ->
``MeasuredCost``; global -> ``GlobalCost`` (distinct 32-byte sectors per warp
instruction, and the fewest any layout could touch).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ll_codegen.core.target import Target, get_target
from ll_codegen.plan.model import AccessCost, GlobalCost
from ll_codegen.plan.plans import Transfer, without_via
from ll_codegen.verify.emulate.common import global_addresses, smem_access, store_warps


def _distinct(values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the valid values sorted along the last axis, invalid ones first as -1; the mask of the first
    occurrence of each valid value there): the mask summed along that axis counts the distinct values."""
    v = np.sort(np.where(valid, values, -1), axis=-1)
    first = np.ones(v.shape, dtype=bool)
    first[..., 1:] = v[..., 1:] != v[..., :-1]
    return v, first & (v >= 0)


def _phase_costs(a: np.ndarray, P: int, access_bytes: int, target: Target) -> tuple[np.ndarray, np.ndarray]:
    """(wavefronts, minimal) per row of ``a`` (rows x lanes, -1 inactive) served in phases of ``P`` lanes."""
    n, lanes = a.shape
    pad = -lanes % P
    if pad:
        a = np.concatenate([a, np.full((n, pad), -1, dtype=a.dtype)], axis=1)
    ph = a.reshape(n, -1, P)                                               # rows x phases x lanes
    valid = (ph >= 0)[..., None]
    nw = max(1, access_bytes // target.bank_bytes)
    words = (ph[..., None] // target.bank_bytes + np.arange(nw)).reshape(*ph.shape[:2], -1)
    words, first = _distinct(words, np.broadcast_to(valid, (*ph.shape, nw)).reshape(words.shape))
    banks = np.where(first, words % target.banks, 0)
    flat = (np.arange(banks.shape[0] * banks.shape[1]).reshape(banks.shape[:2])[..., None] * target.banks
            + banks)[first]
    per_bank = np.bincount(flat, minlength=banks.shape[0] * banks.shape[1] * target.banks)
    wave = per_bank.reshape(*banks.shape[:2], target.banks).max(axis=-1)
    nbytes = _distinct((ph[..., None] + np.arange(access_bytes)).reshape(*ph.shape[:2], -1),
                       np.broadcast_to(valid, (*ph.shape, access_bytes)).reshape(*ph.shape[:2], -1))[1].sum(axis=-1)
    active = valid[..., 0].any(axis=-1)
    minimal = np.where(active, np.maximum(1, -(-nbytes // target.wavefront_bytes)), 0)
    return wave.sum(axis=-1), minimal.sum(axis=-1)


def access_costs(addresses: np.ndarray, access_bytes: int, target: Target,
                 load: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(wavefronts, minimal wavefronts) of every warp-wide access of ``addresses`` (accesses x lanes byte
    addresses, -1 inactive), each as the module docstring counts it, as two int arrays."""
    a = np.asarray(addresses, dtype=np.int64)
    a = a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)
    P = max(1, target.wavefront_bytes // max(access_bytes, target.bank_bytes))
    double = np.zeros(a.shape[0], dtype=bool)
    if target.merges_quads(access_bytes, load) and a.shape[1] >= 4:
        quads = a[:, :a.shape[1] - a.shape[1] % 4].reshape(a.shape[0], -1, 4)
        double = (_distinct(quads, quads >= 0)[1].sum(axis=-1) <= 2).all(axis=-1)   # double phases
    wave, minimal = np.zeros(a.shape[0], dtype=np.int64), np.zeros(a.shape[0], dtype=np.int64)
    for rows, p in ((~double, P), (double, min(2 * P, a.shape[1]))):
        if rows.any():
            wave[rows], minimal[rows] = _phase_costs(a[rows], p, access_bytes, target)
    return wave, minimal


def count_wavefronts(addresses: np.ndarray, access_bytes: int, target: Target, load: bool = False) -> int:
    """Wavefronts of one warp-wide access (addresses per lane, -1 inactive); module docstring."""
    return int(access_costs(np.ravel(addresses)[None], access_bytes, target, load)[0][0])


def min_wavefronts(addresses: np.ndarray, access_bytes: int, target: Target, load: bool = False) -> int:
    """The minimum any layout could reach for this access's active lanes; module docstring."""
    return int(access_costs(np.ravel(addresses)[None], access_bytes, target, load)[1][0])


@dataclass(frozen=True)
class MeasuredCost:
    wavefronts: int          # per instruction (max if not uniform)
    bank_conflicts: int      # per instruction (max if not uniform)
    instructions: int        # per warp, over all rounds
    total_wavefronts: int    # per warp (max over warps)
    uniform: bool            # all instructions of this kind had the same wavefronts and conflicts
    per_instruction: tuple[tuple[int, int, int, int, int], ...] = ()   # (round, index, warp, wavefronts, conflicts)

    def as_access_cost(self) -> AccessCost:
        return AccessCost(self.wavefronts, self.bank_conflicts, self.instructions, self.total_wavefronts)


def _measured(rows: list[tuple[int, int, int, int]], lane_addr: list[np.ndarray], target: Target, load: bool,
              instructions: int, warps) -> MeasuredCost:
    """The ``MeasuredCost`` of warp-wide accesses: ``rows`` (round, index, warp, access bytes) with their
    lane addresses, counted together per access size."""
    if not rows:
        return MeasuredCost(0, 0, 0, 0, True, ())
    wave, mn = np.zeros(len(rows), dtype=np.int64), np.zeros(len(rows), dtype=np.int64)
    size = np.array([r[3] for r in rows])
    addrs = np.stack(lane_addr)
    for v in np.unique(size):
        wave[size == v], mn[size == v] = access_costs(addrs[size == v], int(v), target, load)
    per = tuple((r, i, w, int(x), int(x - m)) for (r, i, w, _), x, m in zip(rows, wave, mn))
    totals = {int(w): 0 for w in warps}
    for _, _, w, x, _ in per:
        totals[w] += x
    seen = {(x, c) for *_, x, c in per}
    return MeasuredCost(max(s[0] for s in seen), max(s[1] for s in seen), instructions, max(totals.values()),
                        len(seen) == 1, per)


def _measure(plan: Transfer, target: Target, which: str) -> MeasuredCost:
    m = plan.smem
    base, instr = (m.store_base, m.store_instr) if which == "store" else (m.load_base, m.load_instr)
    warps = store_warps(plan) if which == "store" else np.arange(plan.num_warps)
    rows, addrs, n = [], [], 0
    for ri, rnd in enumerate(m.rounds):
        accs = rnd.stores if which == "store" else rnd.loads
        n += len(accs)
        for ai, acc in enumerate(accs):
            _, _, _, lane_addr, access = smem_access(plan, acc, base, instr, warps)
            for wi, w in enumerate(warps):
                rows.append((ri, ai, int(w), access))
                addrs.append(np.ravel(lane_addr[wi]))
    return _measured(rows, addrs, target, which == "load" and instr == "vector", n, warps)


def measure_smem(plan: Transfer, target: Target | None = None) -> tuple[MeasuredCost, MeasuredCost]:
    """(store, load) costs measured from the actual addresses of every instruction (of a staged
    conversion: its shared-memory step, ``plan.smem``)."""
    if plan.operation != "convert" or not plan.through_smem:
        raise ValueError("not a shared-memory plan")
    target = target or get_target(plan.target, plan.arch)
    return _measure(plan, target, "store"), _measure(plan, target, "load")


def measure_memory(plan: Transfer, target: Target | None = None, strides=None):
    """Brute-force cost of a memory plan's access (for a ``via`` plan, the access after or before its
    conversion) from the addresses it executes:
    shared -> ``MeasuredCost`` (bank model above); global -> ``GlobalCost``
    (distinct 32-byte sectors per warp instruction).  Warps with ``warp & warp_skip`` issue nothing."""
    m = plan.memory
    plan = without_via(plan)
    target = target or get_target(plan.target, plan.arch)
    warps = np.arange(plan.num_warps)
    warps = warps[(warps & m.warp_skip) == 0]       # a store's warps holding copies; a relayout's load's too
    if m.space == "shared":
        rows, addrs = [], []
        for ai, acc in enumerate(m.accesses):
            _, _, _, lane_addr, access = smem_access(plan, acc, m.base, m.instr, warps)
            for wi, w in enumerate(warps):
                rows.append((0, ai, int(w), access))
                addrs.append(np.ravel(lane_addr[wi]))
        return _measured(rows, addrs, target, m.direction == "load" and m.instr == "vector", len(m.accesses), warps)
    strides = tuple(strides) if strides is not None else m.strides
    nbytes = m.vec * plan.elem_bytes
    lanes_on = (np.arange(plan.warp_size) & m.lane_skip) == 0
    worst = best = 0
    totals = np.zeros(len(warps), dtype=np.int64)
    for acc in m.accesses:
        elem, _ = global_addresses(plan, acc, warps, strides)
        start = elem[:, :, 0] * plan.elem_bytes                              # (nw, L) byte address
        for wi in range(len(warps)):
            b = (start[wi][lanes_on][:, None] + np.arange(nbytes)[None, :]).ravel()
            sec = np.unique(b // 32).size
            worst = max(worst, sec)
            best = max(best, -(-np.unique(b).size // 32))
            totals[wi] += sec
    return GlobalCost(worst, best, len(m.accesses), int(totals.max()) if len(totals) else 0)
