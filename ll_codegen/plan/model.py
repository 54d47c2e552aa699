"""The parts plans are made of: pure, serialisable data read by the emulator, the
cost report and the renderer.  Nothing here plans (``planner.py``); the plan
types that compose these parts are in ``plans.py``.

Conventions shared by every plan
--------------------------------
* Each thread holds ``src[0..n_src)`` before and ``dst[0..n_dst)`` after the
  conversion (elements of ``elem_bytes`` bytes, raw bits).
* ``lane`` is the thread's index in its warp, ``warp`` the warp index.
* A ``XorForm`` is a linear map of (lane, warp) over F2:
  ``value = XOR of lane_coefs[k] for each bit k set in lane, XOR likewise for warp``.
  Shared-memory addresses are ``base(lane, warp) ^ offset`` with ``offset`` a
  per-instruction constant, so lane/warp arithmetic happens once per thread.
* A ``LaneSelect`` is a small runtime index ``c(lane)``: bit j of c is the parity of
  ``lane & masks[j]``.  Shuffle rounds whose registers depend on the lane list one
  choice per value of c (paper 000 §5.4: the registers sent and received move
  with the lane when G is non-empty).  Its argument is the thread index ``tid = lane
  + warp_size * warp``: mask bits above the lane's read the warp id (a warp-uniform
  choice, ``shuffle.per_warp``); masks within the lane bits read the lane alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Sequence

from ll_codegen.core import f2
from ll_codegen.core.limits import short
from ll_codegen.plan.words import compose_ops, lane_perms, perm_count


@dataclass(frozen=True)
class XorForm:
    lane: tuple[int, ...]
    warp: tuple[int, ...] = ()

    def __call__(self, lane: int, warp: int = 0) -> int:
        v = 0
        for k, c in enumerate(self.lane):
            if lane >> k & 1:
                v ^= c
        for k, c in enumerate(self.warp):
            if warp >> k & 1:
                v ^= c
        return v

    @property
    def support(self) -> int:
        """OR of all values the form can take a bit in (bits that may be set)."""
        m = 0
        for c in self.lane + self.warp:
            m |= c
        return m


@dataclass(frozen=True)
class LaneSelect:
    masks: tuple[int, ...] = ()

    def __call__(self, lane: int) -> int:
        return sum((bin(lane & m).count("1") & 1) << j for j, m in enumerate(self.masks))

    @property
    def size(self) -> int:
        return 1 << len(self.masks)


@dataclass(frozen=True)
class RegisterPlan:
    """``dst[i] = src[dst_from_src[i]]`` (paper §5.4, intra-thread exchange)."""
    dst_from_src: tuple[int, ...]


@dataclass(frozen=True)
class ShuffleRound:
    """One round: every lane sends one payload and receives one.

    ``send[c]``: source registers packed (lowest first) into the payload when
    ``send_select(lane) == c``.  The lane reads from
    ``src_lane(lane) ^ lane_xor`` and unpacks the payload into the destination
    registers ``recv[recv_select(lane)]``."""
    send: tuple[tuple[int, ...], ...]
    lane_xor: int
    recv: tuple[tuple[int, ...], ...]


def word_view(plan) -> int:
    """Elements per 32-bit word when the generated code moves 8/16-bit data
    as packed words (both register counts divide), else 0."""
    per = 4 // plan.elem_bytes if plan.elem_bytes < 4 else 0
    return per if per and plan.n_src % per == 0 and plan.n_dst % per == 0 else 0


def swap_stages(final: Sequence[tuple[int, ...]], xors: Sequence[int]) -> list[list[tuple[int, ...]]]:
    """The register tuples each swap stage writes so that ``final`` holds after the last.

    Stage k replaces tuple t by its partner ``t ^ xors[k]`` (every register
    xored) in the lanes whose select bit k is set; it must write its
    successors' needs, and reads those and their partners.  Example:
    ``swap_stages([(0,), (1,)], [1, 2])`` -> ``[[(0,), (1,), (2,), (3,)], [(0,), (1,)]]``
    (the first stage also writes (2,) and (3,), which the second reads)."""
    offsets = tuple(r ^ final[0][0] for r in final[0])      # every tuple is a translate t[0] ^ offsets
    return [[tuple(k ^ o for o in offsets) for k in stage] for stage in _stage_keys([t[0] for t in final], xors)]


def _stage_keys(final: Sequence[int], xors: Sequence[int]) -> list[list[int]]:
    """``swap_stages`` on the tuples' first registers (what identifies a translate)."""
    need = list(dict.fromkeys(final))
    out = []
    for x in reversed(xors):
        out.append(need)
        need = list(dict.fromkeys(need + [k ^ x for k in need]))
    return out[::-1]


def with_partners(tuples: Sequence[tuple[int, ...]], x: int) -> list[tuple[int, ...]]:
    """``tuples`` and, after them, each one's partner ``t ^ x`` (what a swap stage reads)."""
    return list(dict.fromkeys(list(tuples) + [tuple(r ^ x for r in t) for t in tuples]))


@dataclass(frozen=True)
class ShufflePlan:
    """Warp-shuffle conversion (paper 000 §5.4).

    ``vec`` elements travel per payload; a payload is ``words`` 32-bit words
    (2 for 8-byte elements).  ``src_lane`` is None when the source lane is
    ``lane ^ lane_xor`` (an xor shuffle), else the images (lanes) of the bits of the
    thread index ``tid = lane + warp_size * warp``: the lane bits', then, where the source
    lane depends on the warp id (``shuffle.per_warp``), the warp bits'.  ``sets`` records the paper's I, E, F, G, V, R as tensor bit
    vectors for the reader.

    Lane-dependent registers take one of two forms per side.  Select trees
    (``send_swaps`` empty): each round lists a register tuple per value of
    ``send_select`` and picks one (``send_select.size - 1`` selects per word
    and round).  Swap stages (Triton's "swap" method, a butterfly): the round
    lists one tuple, and before the rounds a lane whose select bit j is set
    exchanges registers ``r <-> r ^ send_swaps[j]``, stage by stage -- one
    select per word a stage writes (``swap_stages``), so a c-way choice costs
    log2(c) stages instead of c - 1 selects per round.  ``recv_swaps`` is the
    same after the rounds, on the destination registers.  A fused side
    (``send_fused``/``recv_fused``; 8/16-bit data in the word view, CUDA) builds
    each of its words by byte permutes whose selectors depend on the lane
    (``words.lane_perm``: one a word from two words, a byte transpose's share
    from four), neither form's selects; possible when no word draws on more
    than four words over all select values."""
    vec: int
    words: int
    send_select: LaneSelect
    recv_select: LaneSelect
    src_lane: tuple[int, ...] | None
    rounds: tuple[ShuffleRound, ...]
    sets: dict[str, tuple[int, ...]] = field(default_factory=dict)
    send_swaps: tuple[int, ...] = ()
    recv_swaps: tuple[int, ...] = ()
    send_fused: bool = False
    recv_fused: bool = False

    @property
    def shuffles(self) -> int:
        """Warp shuffles per thread: a round whose source lane is the lane itself
        (``lane ^ 0``) moves its payload in registers."""
        return self.words * sum(1 for r in self.rounds if self.src_lane is not None or r.lane_xor)

    @property
    def selects(self) -> int:
        """Lane-dependent selects per thread, send and receive side (the cost model's count); a
        fused side has none: its lane-dependent words are byte permutes (``send_fused``)."""
        def side(sel: LaneSelect, swaps: tuple[int, ...], firsts: list[int], fused: bool) -> int:
            if fused:
                return 0
            if swaps:
                return sum(len(stage) for stage in _stage_keys(firsts, swaps))
            return len(self.rounds) * (sel.size - 1)
        return self.words * (side(self.send_select, self.send_swaps, [r.send[0][0] for r in self.rounds],
                                  self.send_fused)
                             + side(self.recv_select, self.recv_swaps, [r.recv[0][0] for r in self.rounds],
                                    self.recv_fused))

    def send_words(self, per: int) -> list[tuple[tuple[tuple[int, int], ...], ...]]:
        """Word view (``per`` elements a word): every payload word, round by round, as its
        elements (source word, index) for each value of ``send_select``."""
        return list(_send_words(tuple((self.sent(rnd), len(rnd.send[0])) for rnd in self.rounds), per))

    def recv_words(self, per: int, copies: Sequence[tuple[int, int]] = ()
                   ) -> dict[int, tuple[tuple[tuple[tuple[int, int], int] | None, ...], ...]]:
        """Word view: destination word j -> its elements ((round, payload word), index) for each
        value of ``recv_select``; ``copies`` (the plan's ``dst_copies``) are composed in."""
        received = tuple(self.received(rnd) for rnd in self.rounds)
        return dict(_recv_words(received, self.recv_select.size, per, tuple(copies)))

    def pack_ops(self, per: int, copies: Sequence[tuple[int, int]] = ()) -> int:
        """Byte permutes per thread, as rendered: payloads built from source words and
        destination words from payloads (``compose_ops``; a payload that is a whole source
        word in order is free; compiled once each), a fused side's words one lane-dependent
        permute each (``words.lane_perms``).  ``per``: elements a 32-bit register
        (``word_view``); 0 when each element is its own register: vec - 1 to pack and to
        unpack each round.  ``copies``: the plan's ``dst_copies``, which the word view
        composes into the destination words."""
        if not per:
            return len(self.rounds) * (self.vec - 1) * 2 if self.vec > 1 else 0

        def side(words: list, fused: bool, swaps: tuple[int, ...]) -> int:
            if fused:
                return perm_count(lane_perms(words, per))
            # either form composes each alternative once; the receive side's swap stages
            # compose after the swaps, once for every lane (the c = 0 words)
            return compose_ops(per, *(alt for alts in words for alt in (alts[:1] if swaps else alts)))
        return (side(self.send_words(per), self.send_fused, ())
                + side(list(self.recv_words(per, copies).values()), self.recv_fused, self.recv_swaps))

    def lane_form(self, lane_bits: int) -> XorForm | None:
        """The source lane before a round's xor as a form of the lane and the warp id: ``src_lane``
        split at ``lane_bits`` (None for an xor shuffle)."""
        if self.src_lane is None:
            return None
        return XorForm(tuple(self.src_lane[:lane_bits]), tuple(self.src_lane[lane_bits:]))

    def sent(self, rnd: ShuffleRound) -> tuple[tuple[int, ...], ...]:
        """The round's source registers for each value of ``send_select`` (either form)."""
        return _choices(rnd.send, self.send_select, self.send_swaps)

    def received(self, rnd: ShuffleRound) -> tuple[tuple[int, ...], ...]:
        """The round's destination registers for each value of ``recv_select`` (either form)."""
        return _choices(rnd.recv, self.recv_select, self.recv_swaps)


@lru_cache(maxsize=1 << 10)            # pure; a plan's forms (select trees, swaps, fused) share their words
def _send_words(sent: tuple[tuple[tuple[tuple[int, ...], ...], int], ...], per: int
                ) -> tuple[tuple[tuple[tuple[int, int], ...], ...], ...]:
    """``ShufflePlan.send_words`` of the rounds' (sent registers per select value, payload length)."""
    return tuple(tuple(tuple((r // per, r % per) for r in t[i:i + per]) for t in regs)
                 for regs, n in sent for i in range(0, n, per))


@lru_cache(maxsize=1 << 10)            # pure; a plan's forms (select trees, swaps, fused) share their words
def _recv_words(received: tuple[tuple[tuple[int, ...], ...], ...], size: int, per: int,
                copies: tuple[tuple[int, int], ...]) -> tuple[tuple[int, tuple], ...]:
    """``ShufflePlan.recv_words`` of the rounds' received registers (``received[i][c]``: round i's
    for select value c), as (word, alternatives) pairs of tuples."""
    out: dict[int, list] = {}
    for c in range(size):
        src_of = {r: ((i, k // per), k % per) for i, got in enumerate(received) for k, r in enumerate(got[c])}
        src_of.update((a, src_of[b]) for a, b in copies if b in src_of)
        for j in sorted({r // per for r in src_of}):
            out.setdefault(j, []).append(tuple(src_of.get(r) for r in range(j * per, (j + 1) * per)))
    return tuple((j, tuple(alts)) for j, alts in out.items())


def _choices(listed: tuple[tuple[int, ...], ...], sel: LaneSelect,
             swaps: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    return _swapped(listed[0], sel.size, swaps) if swaps else listed


@lru_cache(maxsize=1 << 12)            # pure; the word views ask for every round's registers, form after form
def _swapped(first: tuple[int, ...], size: int, swaps: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(r ^ f2.apply(swaps, c) for r in first) for c in range(size))


@dataclass(frozen=True)
class SmemAccess:
    """One access at byte address ``base ^ offset``.  For ``vector``
    instructions ``regs`` are packed lowest address first.  For matrix
    instructions (``ldmatrix``/``stmatrix``, m8n8, b16, ``x = len(regs) *
    elem_bytes // 4`` matrices) ``regs`` are packed into x 32-bit words, word m
    holding ``regs[m * 4 // elem_bytes : (m + 1) * 4 // elem_bytes]`` (lowest
    register in the low bits); ``base`` is then the address of the row that
    this lane provides (lane 8m + r gives row r of matrix m)."""
    regs: tuple[int, ...]
    offset: int


@dataclass(frozen=True)
class AccessCost:
    """Per warp-wide instruction (all instructions of one kind share the
    pattern by linearity) and in total over all warps' instructions."""
    wavefronts: int          # per instruction
    bank_conflicts: int      # wavefronts beyond the minimum, per instruction
    instructions: int        # per warp, over all rounds
    total_wavefronts: int    # per warp, over all rounds


#: named barriers of a CTA (PTX ISA "bar.sync / barrier.sync": ids 0..15; 0 is ``__syncthreads()``'s)
BARRIER_IDS = range(1, 16)


@dataclass(frozen=True)
class Barrier:
    """A named barrier standing in for ``__syncthreads()``: ``bar.sync id, threads`` (PTX ISA
    "bar.sync / barrier.sync").  The barrier completes when ``threads`` threads -- whole warps,
    a multiple of the warp size -- arrived at ``id``, so a plan's barriers need only the warps that
    call it: ``threads`` is the plan's ``num_warps * warp_size``, and the block's other warps (a
    producer warp group) neither call nor wait.  Id 0 is ``__syncthreads()``'s barrier and is not
    offered (a named use of it would meet the block's own ``__syncthreads()``)."""
    id: int
    threads: int

    @property
    def call(self) -> str:
        """The PTX instruction, as a reader of the header sees it."""
        return f"bar.sync {self.id}, {self.threads}"


def parse_barrier(value: Any, target: str = "cuda") -> int | None:
    """The barrier id of a ``--barrier`` value: ``None``/``"block"`` -> None (``__syncthreads()``),
    an id 1..15 (int or digits) -> that id.  ValueError in one line for anything else, for id 0, and
    on HIP targets, whose ISA has no named barriers (``s_barrier`` is the workgroup's one barrier)."""
    if value is None or value == "block":
        return None
    text = str(value).strip()
    if isinstance(value, bool) or not (isinstance(value, int) or text.isdigit()):
        hint = ("; ID:THREADS is not offered: the barrier counts the threads that call the header, kThreads"
                if ":" in text else "")
        raise ValueError(f"--barrier {short(value)}: give block (__syncthreads()) or a named barrier id "
                         f"{BARRIER_IDS.start}..{BARRIER_IDS.stop - 1}{hint}")
    bid = int(text) if len(text) <= 3 else -1
    if bid not in BARRIER_IDS:
        why = " (0 is __syncthreads()'s barrier)" if bid == 0 else ""
        raise ValueError(f"--barrier {bid if bid >= 0 else short(value)}: a named barrier id is "
                         f"{BARRIER_IDS.start}..{BARRIER_IDS.stop - 1}{why}")
    if target != "cuda":
        raise ValueError(f"--barrier {bid}: named barriers are not on {target} targets (block is the only barrier)")
    return bid


@dataclass(frozen=True)
class SmemRound:
    stores: tuple[SmemAccess, ...]
    loads: tuple[SmemAccess, ...]


@dataclass(frozen=True)
class SmemPlan:
    """Conversion through shared memory (paper 000 §5.4 "Optimal swizzling",
    App. 9.2).  ``layout`` is the memory layout as bases, ``offset`` (elements)
    -> tensor dims, and ``round`` the register vectors split over rounds;
    ``store_vec``/``load_vec`` elements per lane per access; ``vector_bytes``
    the contiguous bytes of the widest access tile.  A warp
    stores only if ``warp & store_warp_skip == 0`` (warps that hold broadcast
    copies do not store twice).  A barrier precedes each round's stores and
    separates them from its loads: ``__syncthreads()``; with ``barrier ==
    "warp"`` the second one is warp-scope (``__syncwarp()``), which suffices
    because every warp loads only bytes it stored itself (``swizzle.warp_local``).
    With ``buffers == 2`` round 0 has no barrier before its stores: the caller
    alternates two scratch buffers between consecutive conversions, and the
    (block-wide) barrier between the stores and loads of the call in between
    already ordered every earlier read of this buffer.  With ``per_warp``
    (a warp-local plan, ``--scratch-per-warp``) warp w touches only bytes
    ``[w * bytes / warps, (w + 1) * bytes / warps)`` -- the warp bits are the
    top offset bits -- and the barrier before the stores is warp-scope too: the
    caller guarantees that those bytes were last used by warp w (or that a
    block barrier came since).  ``named_barrier``: each block barrier is that named barrier over
    the plan's threads instead of ``__syncthreads()`` (warp-specialised kernels)."""
    layout: dict[str, Any]
    swizzle: str                      # "optimal" | "none"
    store_vec: int
    load_vec: int
    vector_bytes: int
    bytes: int
    store_base: XorForm
    load_base: XorForm
    store_warp_skip: int
    rounds: tuple[SmemRound, ...]
    store: AccessCost
    load: AccessCost
    store_instr: str = "vector"
    load_instr: str = "vector"
    barrier: str = "block"            # "block" | "warp"
    buffers: int = 1                  # 2: the caller alternates two scratch buffers (no barrier before round 0)
    per_warp: bool = False            # each warp in its own slice of the scratch: both barriers warp-scope
    named_barrier: Barrier | None = None   # the block barriers as bar.sync id, threads (None: __syncthreads())

    def pack_ops(self, per: int, n_dst: int, copies: Sequence[tuple[int, int]] = ()) -> int:
        """Byte permutes (``__byte_perm``, SASS ``PRMT``) one thread issues in the word view (``per``
        8/16-bit elements a 32-bit word, ``word_view``; 0: none): the stored words composed of
        source register words, and the ``n_dst / per`` destination words composed of loaded words
        (broadcast ``copies`` (register, the one it copies) filled from the register they copy) --
        ``words.compose_ops`` of the words the emitter composes.  A word that is one whole source
        (loaded) word in order costs none."""
        if not per:
            return 0
        stored: list[list[tuple[tuple, int]]] = []
        loaded: dict[int, tuple[tuple, int]] = {}
        for i, rnd in enumerate(self.rounds):
            for a in rnd.stores:
                stored += [[(("s", r // per), r % per) for r in a.regs[k:k + per]] for k in range(0, len(a.regs), per)]
            for k, a in enumerate(rnd.loads):
                loaded.update((r, (("v", i, k, j // per), j % per)) for j, r in enumerate(a.regs))
        copy_of = dict(copies)
        dst = [[loaded.get(copy_of.get(r, r)) for r in range(j * per, (j + 1) * per)] for j in range(n_dst // per)]
        return compose_ops(per, *stored) + compose_ops(per, *dst)

    @property
    def warp_barriers(self) -> int:
        """Warp-scope barriers per call: each round's stores -> loads one, in a warp-local plan, and the
        one before the stores with per-warp slices."""
        return len(self.rounds) * (2 if self.per_warp else 1) if self.barrier == "warp" else 0

    @property
    def block_barriers(self) -> int:
        """``__syncthreads()`` per call: two per round, less the warp-scope ones and, with two
        scratch buffers, the one before the first stores."""
        return 2 * len(self.rounds) - self.warp_barriers - (self.buffers == 2)


@dataclass(frozen=True)
class GlobalAccess:
    """One access to a global tile: the thread's coordinate along dim ``d`` is
    ``coord_base[d](lane, warp) ^ coords[d]``; ``regs`` are packed lowest
    address first along the contiguous dim."""
    regs: tuple[int, ...]
    coords: tuple[int, ...]


@dataclass(frozen=True)
class GlobalCost:
    """Per warp-wide instruction (the maximum over instructions and warps) at
    the strides ``MemoryPlan.strides``: 32-byte ``sectors`` touched and the
    fewest any access of the same bytes could touch (``min_sectors``);
    ``instructions`` (= requests) per warp and ``total_sectors`` per warp."""
    sectors: int
    min_sectors: int
    instructions: int
    total_sectors: int


@dataclass(frozen=True)
class MemoryPlan:
    """Registers <-> memory laid out as given: the distributed side's
    registers are stored to (``direction="store"``) or loaded from (``"load"``)
    a shared tile or a global tile.

    Shared (``space="shared"``): ``layout`` is the tile's bases (``offset`` in
    elements -> tensor dims, bijective); access ``a`` of a thread is at byte
    ``base(lane, warp) ^ a.offset`` of the tile (``SmemAccess``: vector or
    ldmatrix/stmatrix, as in ``SmemPlan``); ``cost`` is an ``AccessCost``.

    Global (``space="global"``): element ``(c_0, ..., c_{r-1})`` lives at
    ``tile + sum_d c_d * stride_d`` (elements) with ``stride[order[0]] = 1``;
    access ``a`` touches coordinates ``coord_base[d](lane, warp) ^ a.coords[d]``
    (``GlobalAccess``, ``vec`` consecutive elements along ``order[0]``);
    ``cost`` is a ``GlobalCost`` at ``strides``.

    Stores skip warps with ``warp & warp_skip != 0`` (they hold broadcast
    copies) and, for global stores, lanes with ``lane & lane_skip != 0``; a
    relayout's load skips its store's warps (their registers feed nothing).
    Loads fill the canonical registers; the plan's ``dst_copies`` fills
    the broadcast ones."""
    space: str                        # shared | global
    direction: str                    # store | load
    instr: str                        # vector | matrix | matrix.trans
    vec: int                          # elements per lane per access
    vector_bytes: int
    layout: dict[str, Any]            # shared: {"offset": bases}; global: {"order": [...], "alignment": n}
    bytes: int                        # the dense tile's bytes
    alignment: int                    # bytes the tile's base address must be aligned to
    accesses: tuple[Any, ...]         # SmemAccess (shared) or GlobalAccess (global)
    cost: Any                         # AccessCost (shared) or GlobalCost (global)
    base: XorForm | None = None                       # shared
    coord_base: tuple[XorForm, ...] = ()              # global
    strides: tuple[int, ...] = ()                     # global: strides the cost is predicted for
    warp_skip: int = 0
    lane_skip: int = 0


@dataclass(frozen=True)
class Candidate:
    strategy: str
    score: float
    detail: str


_INSTR = {("vector", "store"): "st", ("vector", "load"): "ld", ("matrix", "store"): "stmatrix",
          ("matrix", "load"): "ldmatrix", ("matrix.trans", "store"): "stmatrix.trans",
          ("matrix.trans", "load"): "ldmatrix.trans"}


def instruction_name(target: str, access: str, direction: str, nbytes: int, space: str = "shared") -> str:
    """The target's name of one memory access: PTX for CUDA (``st.shared``,
    ``ldmatrix.trans``, ``ld.global``), the instruction for HIP
    (``ds_write_b64``, ``ds_read_u16``, ``global_load_dwordx4``)."""
    if target != "hip":
        name = _INSTR[access, direction]
        return f"{name}.{space}" if access == "vector" else name
    bits = 8 * nbytes
    if space == "global":
        if bits < 32:       # loads zero-extend: global_load_ubyte/ushort; stores: global_store_byte/short
            return (("global_store_" if direction == "store" else "global_load_u")
                    + ("byte" if bits == 8 else "short"))
        op = "global_store" if direction == "store" else "global_load"
        return f"{op}_dword" + (f"x{bits // 32}" if bits > 32 else "")
    return f"ds_write_b{bits}" if direction == "store" else f"ds_read_{'u' if bits < 32 else 'b'}{bits}"


def shuffle_name(target: str) -> str:
    """The instruction one warp shuffle (``__shfl``/``__shfl_xor`` of 32 bits)
    compiles to: ``shfl.sync`` (PTX) or ``ds_bpermute_b32`` (AMDGPU)."""
    return "ds_bpermute_b32" if target == "hip" else "shfl.sync"
