"""The plan emulator and the bank counter, checked WITHOUT the planner:
hand-built plans on small hand-made layouts, the shuffle intrinsics' edge
cases, and classic shared-memory access patterns counted by hand."""
import json
import os

import numpy as np
import pytest

from ll_codegen.verify.emulate.banks import count_wavefronts, measure_smem, min_wavefronts
from ll_codegen.verify.emulate.common import SmemError, shfl_source
from ll_codegen.verify.emulate.convert import check_plan, emulate
from ll_codegen.verify.emulate.reference import reference
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.model import AccessCost, LaneSelect, RegisterPlan, ShufflePlan, ShuffleRound, SmemAccess, SmemPlan, SmemRound, XorForm
from ll_codegen.plan.plans import ConvertPlan
from ll_codegen.plan.swizzle import predict_wavefronts
from ll_codegen.core.target import get_target

CUDA, HIP64, HIP32 = get_target("cuda"), get_target("hip", "gfx90a"), get_target("hip", "gfx1030")
LANES32 = [[0, 1], [0, 2], [0, 4], [0, 8], [0, 16]]


def make_plan(src, dst, elem_bytes, target="cuda", arch=None, **kw):
    t = get_target(target, arch)
    return ConvertPlan(
        strategy=kw.pop("strategy"), dtype={1: "u8", 2: "f16", 4: "f32", 8: "f64"}[elem_bytes],
        elem_bytes=elem_bytes, target=t.name, arch=t.arch, warp_size=t.warp_size,
        num_warps=src.in_dim_size("warp"), n_src=src.in_dim_size("register"),
        n_dst=dst.in_dim_size("register"), src_bases={}, dst_bases={},
        shape=tuple(src.out_dim_sizes.values()), **kw)


# ----------------------------------------------------------------- reference
def test_reference_reads_the_layout():
    # 2 regs x 4 lanes x 2 warps over a 4x4 tensor
    L = LinearLayout({"register": [[0, 1]], "lane": [[0, 2], [1, 0]], "warp": [[2, 0]]}, ["dim0", "dim1"])
    t = np.arange(16, dtype=np.uint32).reshape(4, 4)
    regs, _ = reference(L, L, t)
    assert regs.shape == (2, 4, 2)
    for w in range(2):
        for l in range(4):
            for r in range(2):
                c = L.apply(register=r, lane=l, warp=w)
                assert regs[w, l, r] == t[c["dim0"], c["dim1"]]
    # warp 1, lane 3, register 1: dim0 = 1 ^ 2 = 3, dim1 = 1 ^ 2 = 3
    assert regs[1, 3, 1] == t[3, 3]


def test_reference_rejects_blocks():
    L = LinearLayout({"register": [[1]], "lane": [], "block": [[2]]}, ["dim0"])
    with pytest.raises(ValueError):
        reference(L, L, np.zeros(4, np.uint8))


# ------------------------------------------------------------ register plans
def test_register_permutation():
    # 32 lanes own dim1; the two register bits swap order
    src = LinearLayout({"register": [[1, 0], [2, 0]], "lane": [[0, 1], [0, 2], [0, 4], [0, 8], [0, 16]]},
                       ["dim0", "dim1"])
    dst = LinearLayout({"register": [[2, 0], [1, 0]], "lane": src.bases["lane"]}, ["dim0", "dim1"])
    # dst reg i = (i0 -> dim0 bit 1, i1 -> dim0 bit 0) = src reg with the bits swapped
    plan = make_plan(src, dst, 4, strategy="register", register=RegisterPlan((0, 2, 1, 3)))
    for seed in range(3):
        check_plan(plan, src, dst, seed)
    bad = make_plan(src, dst, 4, strategy="register", register=RegisterPlan((0, 1, 2, 3)))
    with pytest.raises(AssertionError, match="register 1"):
        check_plan(bad, src, dst, 0)


def test_dst_copies_fill_broadcast_registers():
    src = LinearLayout({"register": [[1, 0]], "lane": LANES32}, ["dim0", "dim1"])
    dst = LinearLayout({"register": [[1, 0], [0, 0]], "lane": LANES32}, ["dim0", "dim1"])
    plan = make_plan(src, dst, 2, strategy="register", register=RegisterPlan((0, 1, 0, 1)))
    check_plan(plan, src, dst, 1)
    # canonical registers only, then copies 2 <- 0, 3 <- 1
    with pytest.raises(AssertionError, match="dst_from_src|fills"):
        emulate(make_plan(src, dst, 2, strategy="register", register=RegisterPlan((0, 1))),
                np.zeros((1, 32, 2), np.uint16))


# --------------------------------------------------------------- shuffles
# Paper Fig. 4 inside a 32-lane warp: tensor 2 x 32(x64).  src: register bit 0 -> dim0,
# lanes -> dim1.  dst: lane bit 0 -> dim0, register bit 0 -> dim1 bit 0.  Element (i, j)
# sits in src lane j register i and in dst lane (j & ~1) | i register j & 1.
# dst lane u register r needs element (u & 1, (u & ~1) | r): src lane (u & ~1) | r, reg u & 1.
#   round 0 (r = u & 1): source lane u itself   (lane_xor 0); sender t sends reg t & 1
#   round 1 (r = u&1^1): source lane u ^ 1      (lane_xor 1); sender t = u ^ 1 sends reg (t & 1) ^ 1
# With an extra common register bit (dim1 bit 5, register bit 1 in both) vec = 2: the payload
# carries registers (c, c | 2).
def _fig4(vec):
    sreg, dreg = [[1, 0]], [[0, 1]]
    if vec == 2:
        sreg, dreg = sreg + [[0, 32]], dreg + [[0, 32]]
    src = LinearLayout({"register": sreg, "lane": LANES32}, ["dim0", "dim1"])
    dst = LinearLayout({"register": dreg, "lane": [[1, 0], [0, 2], [0, 4], [0, 8], [0, 16]]}, ["dim0", "dim1"])
    pack = (lambda c: (c,)) if vec == 1 else (lambda c: (c, c | 2))
    rounds = (ShuffleRound(send=(pack(0), pack(1)), lane_xor=0, recv=(pack(0), pack(1))),
              ShuffleRound(send=(pack(1), pack(0)), lane_xor=1, recv=(pack(1), pack(0))))
    return src, dst, rounds


def _shuffle_plan(src, dst, w, rounds, vec, src_lane=None, target="cuda", arch=None):
    sp = ShufflePlan(vec=vec, words=2 if w == 8 else 1, send_select=LaneSelect((1,)),
                     recv_select=LaneSelect((1,)), src_lane=src_lane, rounds=rounds)
    return make_plan(src, dst, w, target, arch, strategy="shuffle", shuffle=sp)


@pytest.mark.parametrize("w", [1, 2, 4, 8])
@pytest.mark.parametrize("src_lane", [None, (1, 2, 4, 8, 16)])
def test_xor_shuffle_transpose(w, src_lane):
    src, dst, rounds = _fig4(1)
    for target, arch in (("cuda", None), ("hip", "gfx1030")):
        check_plan(_shuffle_plan(src, dst, w, rounds, 1, src_lane, target, arch), src, dst, w)


@pytest.mark.parametrize("w", [1, 2])
def test_vectorised_shuffle(w):
    src, dst, rounds = _fig4(2)
    check_plan(_shuffle_plan(src, dst, w, rounds, 2), src, dst, 3)


def test_shuffle_wrong_round_is_caught():
    src, dst, rounds = _fig4(1)
    wrong = (rounds[0], ShuffleRound(send=rounds[1].send, lane_xor=2, recv=rounds[1].recv))
    with pytest.raises(AssertionError, match="shuffle plan"):
        check_plan(_shuffle_plan(src, dst, 4, wrong, 1), src, dst, 0)


def test_out_of_range_xor_mask_differs_between_cuda_and_hip():
    # lane_xor 33 on a 32-lane warp: CUDA drops bit 5 (reads lane ^ 1, correct);
    # HIP's __shfl_xor sees index >= 32 and returns the lane's own value.
    src, dst, rounds = _fig4(1)
    r33 = (rounds[0], ShuffleRound(send=rounds[1].send, lane_xor=33, recv=rounds[1].recv))
    check_plan(_shuffle_plan(src, dst, 4, r33, 1), src, dst, 0)
    with pytest.raises(AssertionError):
        check_plan(_shuffle_plan(src, dst, 4, r33, 1, target="hip", arch="gfx1030"), src, dst, 0)
    # as an index shuffle (src_lane given), 33 wraps mod 32 on both
    check_plan(_shuffle_plan(src, dst, 4, r33, 1, (1, 2, 4, 8, 16), "hip", "gfx1030"), src, dst, 0)


def test_shfl_semantics_cuda():
    L = np.arange(32)
    # idx, width 32: srcLane mod 32
    assert shfl_source("cuda", 32, 5, 33, xor=False) == 1
    assert shfl_source("cuda", 32, 5, -1, xor=False) == 31
    # idx, width 8: lane 13 is in segment 8..15; srcLane 3 -> 11, srcLane 9 -> 9 & 7 = 1 -> 9
    assert shfl_source("cuda", 32, 13, 3, xor=False, width=8) == 11
    assert shfl_source("cuda", 32, 13, 9, xor=False, width=8) == 9
    # xor, width 32: mask 32 has no bit in [4:0] -> own lane; mask 33 -> lane ^ 1
    assert (shfl_source("cuda", 32, L, 32, xor=True) == L).all()
    assert (shfl_source("cuda", 32, L, 33, xor=True) == L ^ 1).all()
    # xor, width 8: lane 3 ^ 8 = 11 is a later segment -> own value; lane 11 ^ 8 = 3 is earlier -> 3
    assert shfl_source("cuda", 32, 3, 8, xor=True, width=8) == 3
    assert shfl_source("cuda", 32, 11, 8, xor=True, width=8) == 3
    with pytest.raises(ValueError):
        shfl_source("cuda", 64, L, 1, xor=True)


def test_shfl_semantics_hip():
    L64 = np.arange(64)
    # __shfl: (srcLane & (width-1)) + segment base
    assert shfl_source("hip", 64, 7, 65, xor=False) == 1
    assert shfl_source("hip", 64, 40, 70, xor=False, width=32) == 32 + 6
    assert shfl_source("hip", 32, 7, -1, xor=False) == 31
    # __shfl_xor on wave64: 32 is a real lane bit; 64 and 65 leave the wave -> own lane
    assert (shfl_source("hip", 64, L64, 32, xor=True) == L64 ^ 32).all()
    assert (shfl_source("hip", 64, L64, 64, xor=True) == L64).all()
    assert (shfl_source("hip", 64, L64, 65, xor=True) == L64).all()
    # wave32: mask 33 -> own lane (CUDA would give lane ^ 1)
    assert (shfl_source("hip", 32, np.arange(32), 33, xor=True) == np.arange(32)).all()
    # width 16: lane 20 ^ 16 = 4 (earlier group, allowed); lane 4 ^ 16 = 20 >= 16 -> own
    assert shfl_source("hip", 64, 20, 16, xor=True, width=16) == 4
    assert shfl_source("hip", 64, 4, 16, xor=True, width=16) == 4


def test_shuffle_on_wave64():
    # same transpose on 64 lanes (tensor 2 x 64)
    lanes = [[0, 1 << k] for k in range(6)]
    src = LinearLayout({"register": [[1, 0]], "lane": lanes}, ["dim0", "dim1"])
    dst = LinearLayout({"register": [[0, 1]], "lane": [[1, 0]] + lanes[1:]}, ["dim0", "dim1"])
    _, _, rounds = _fig4(1)
    check_plan(_shuffle_plan(src, dst, 8, rounds, 1, None, "hip", "gfx90a"), src, dst, 0)
    check_plan(_shuffle_plan(src, dst, 8, rounds, 1, (1, 2, 4, 8, 16, 32), "hip", "gfx90a"), src, dst, 0)


# ------------------------------------------------------------ shared memory
# 4 x 32 tensor, f32, one warp (optionally a second, broadcast warp).
# src: registers -> dim0 (4 contiguous elements), lane -> dim1.
# dst: registers -> dim1 bits 0,1; lanes 0,1 -> dim0, lanes 2..4 -> dim1 bits 2..4.
# Memory layout: identity on the flattened tensor, offset = i | j << 2 (elements), 512 bytes.
#   store: lane l writes regs 0..3 (elements (0..3, l)) as one 16-byte vector at 16 l.
#   load r: lane u reads (u & 3, r | (u >> 2) << 2) at 4 ((u & 3) | (u >> 2) << 4) + 16 r.
# Banks: store, 16-byte vectors, 4 phases of 8 lanes, 128 contiguous bytes each -> 4 wavefronts, 0 conflicts.
#   load: word (u & 3) + 16 (u >> 2) + 4 r -> banks {0..3, 16..19} (+4r), 4 words per bank -> 4, 3 conflicts.
def _smem_case(w=4, warps=1, skip=None, **over):
    wb = [[0, 0]] if warps == 2 else []
    src = LinearLayout({"register": [[1, 0], [2, 0]], "lane": LANES32, "warp": wb}, ["dim0", "dim1"])
    dst = LinearLayout({"register": [[0, 1], [0, 2]], "lane": [[1, 0], [2, 0], [0, 4], [0, 8], [0, 16]],
                        "warp": wb}, ["dim0", "dim1"])
    m = dict(
        layout={}, swizzle="none", store_vec=4, load_vec=1, vector_bytes=4 * w, bytes=128 * w,
        store_base=XorForm(tuple(4 * w << k for k in range(5)), (0,) * len(wb)),
        load_base=XorForm((w, 2 * w, 16 * w, 32 * w, 64 * w), (0,) * len(wb)),
        store_warp_skip=(warps - 1) if skip is None else skip,
        rounds=(SmemRound(stores=(SmemAccess((0, 1, 2, 3), 0),),
                          loads=tuple(SmemAccess((r,), 4 * w * r) for r in range(4))),),
        store=AccessCost(4, 0, 1, 4), load=AccessCost(4, 3, 4, 16))
    m.update(over)
    return src, dst, make_plan(src, dst, w, strategy="smem", smem=SmemPlan(**m))


def test_smem_identity_layout_roundtrip_and_costs():
    src, dst, plan = _smem_case()
    check_plan(plan, src, dst, 0)
    st, ld = measure_smem(plan)
    assert st.uniform and ld.uniform
    assert st.as_access_cost() == plan.smem.store == AccessCost(4, 0, 1, 4)
    assert ld.as_access_cost() == plan.smem.load == AccessCost(4, 3, 4, 16)


def test_smem_two_byte_elements():
    # f16: store 8-byte vectors (2 phases of 16 lanes, 128 B each -> 2, 0 conflicts);
    # load words ((u & 3) + 16 (u >> 2)) * 2 // 4 = (u & 3) // 2 + 8 k (k = u >> 2 in 0..7): banks
    # {0,1,8,9,16,17,24,25}, k and k + 4 share a bank -> 2 distinct words per bank -> 2, 1 conflict.
    src, dst, plan = _smem_case(w=2, store=AccessCost(2, 0, 1, 2), load=AccessCost(2, 1, 4, 8))
    check_plan(plan, src, dst, 0)
    st, ld = measure_smem(plan)
    assert (st.as_access_cost(), ld.as_access_cost()) == (plan.smem.store, plan.smem.load)


def test_smem_broadcast_warp_skips_stores():
    src, dst, plan = _smem_case(warps=2)                   # warp 1 holds copies: only warp 0 stores
    check_plan(plan, src, dst, 0)
    st, ld = measure_smem(plan)
    assert st.instructions == 1 and ld.instructions == 4
    _, _, plan0 = _smem_case(warps=2, skip=0)               # both store the same bytes: no race
    check_plan(plan0, src, dst, 0)


def test_smem_errors():
    src, dst, plan = _smem_case()
    rounds = plan.smem.rounds
    # misaligned 16-byte store
    _, _, p = _smem_case(rounds=(SmemRound((SmemAccess((0, 1, 2, 3), 4),), rounds[0].loads),))
    with pytest.raises(SmemError, match="misaligned"):
        emulate(p, np.zeros((1, 32, 4), np.uint32))
    # out of bounds (buffer too small)
    _, _, p = _smem_case(bytes=256)
    with pytest.raises(SmemError, match="out of bounds"):
        emulate(p, np.zeros((1, 32, 4), np.uint32))
    # loads before anything is stored read poison
    _, _, p = _smem_case(rounds=(SmemRound((), rounds[0].loads), SmemRound(rounds[0].stores, ())))
    with pytest.raises(SmemError, match="poison"):
        emulate(p, np.zeros((1, 32, 4), np.uint32))
    # a race: every lane stores register 0 at the same word
    _, _, p = _smem_case(store_base=XorForm((0,) * 5),
                         rounds=(SmemRound((SmemAccess((0,), 0),), rounds[0].loads),))
    with pytest.raises(SmemError, match="race"):
        emulate(p, np.arange(128, dtype=np.uint32).reshape(1, 32, 4))


def test_ldmatrix_x1_semantics():
    # One 8x8 b16 matrix at rows of 16 bytes, row r at byte 16 r (lane r provides it).
    # Non-trans: thread t gets elements (t // 4, 2 (t % 4)) and (t // 4, 2 (t % 4) + 1).
    # .trans:    thread t gets elements (2 (t % 4), t // 4) and (2 (t % 4) + 1, t // 4).
    # src: a layout that stores the matrix row-major with plain 2-byte stores:
    # element (i, j) = lane (j | (i & 3) << 3), register i >> 2.
    src = LinearLayout({"register": [[4, 0]], "lane": [[0, 1], [0, 2], [0, 4], [1, 0], [2, 0]]},
                       ["dim0", "dim1"])
    for trans in (False, True):
        if trans:   # thread t: regs -> dim0 bit 0; lane bits 0,1 -> dim0 bits 1,2; lane bits 2..4 -> dim1
            dst = LinearLayout({"register": [[1, 0]], "lane": [[2, 0], [4, 0], [0, 1], [0, 2], [0, 4]]},
                               ["dim0", "dim1"])
        else:       # regs -> dim1 bit 0; lane bits 0,1 -> dim1 bits 1,2; lane bits 2..4 -> dim0
            dst = LinearLayout({"register": [[0, 1]], "lane": [[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]]},
                               ["dim0", "dim1"])
        m = SmemPlan(
            layout={}, swizzle="none", store_vec=1, load_vec=2, vector_bytes=16, bytes=128,
            store_base=XorForm((2, 4, 8, 16, 32)), load_base=XorForm((16, 32, 64, 0, 0)),
            store_warp_skip=0,
            rounds=(SmemRound(tuple(SmemAccess((r,), 64 * r) for r in range(2)), (SmemAccess((0, 1), 0),)),),
            store=AccessCost(1, 0, 2, 2), load=AccessCost(1, 0, 1, 1),
            load_instr="matrix.trans" if trans else "matrix")
        plan = make_plan(src, dst, 2, strategy="smem", smem=m)
        check_plan(plan, src, dst, 0)
        st, ld = measure_smem(plan)
        # store: 2-byte, one phase of 32 lanes, 64 contiguous bytes -> 1; ldmatrix x1: 8 rows of
        # 16 contiguous bytes, lanes 8..31 inactive -> 1 phase -> 1 wavefront
        assert (st.as_access_cost(), ld.as_access_cost()) == (m.store, m.load)


# ------------------------------------------------------------- bank counter
def _wf(addrs, v, t=CUDA):
    a = np.asarray(addrs)
    return count_wavefronts(a, v, t), min_wavefronts(a, v, t)


H100_PHASES = json.load(open(os.path.join(os.path.dirname(__file__), "data", "h100_shared_phases.json")))["probes"]


@pytest.mark.parametrize("probe", [p for p in H100_PHASES if not (p["op"] == "cp" and p["bytes"] == 16)],
                         ids=lambda p: f"{p['bytes']}B_{p['op']}_{p['case']}")
def test_bank_model_equals_h100_measurements(probe):
    """One-instruction probes measured with ncu on an H100 (gpu_tests/ncu_phases.py): the brute-force
    counter on the addresses and Lemma 9.4 on the lane bases both give the measured wavefronts and
    conflicts -- broadcast lane bits 0/1 of 8/16-byte loads halve the phases, of stores never; 4/8-byte
    cp.async count as stores (16-byte ones are recorded, not modelled: see that script)."""
    a, load = np.array(probe["offsets"]), probe["op"] == "ld"
    w = count_wavefronts(a, probe["bytes"], CUDA, load)
    measured = (probe["wavefronts"], probe["bank_conflicts"])
    assert (w, w - min_wavefronts(a, probe["bytes"], CUDA, load)) == measured
    lanes = [int(a[1 << k] ^ a[0]) for k in range(5)]
    assert predict_wavefronts(lanes, probe["bytes"], CUDA, load=load) == measured


def test_quad_merge_is_nvidia_loads_only():
    bc1 = [16, 0, 32, 64, 128]                   # 16-byte accesses, lane bit 1 a broadcast
    assert predict_wavefronts(bc1, 16, CUDA, load=True) == (2, 0)
    assert predict_wavefronts(bc1, 16, CUDA, load=False) == (4, 0)
    assert predict_wavefronts([16 * 64, 0, 16 * 128, 0, 0], 16, HIP64, load=True) == predict_wavefronts(
        [16 * 64, 0, 16 * 128, 0, 0], 16, HIP64, load=False)


def test_bank_counter_classic_patterns():
    L = np.arange(32)
    # stride-1 4-byte: 32 words in 32 banks -> 1
    assert _wf(4 * L, 4) == (1, 1)
    # stride-2 words: words 0, 2, ..., 62 -> 16 even banks, 2 words each -> 2
    assert _wf(8 * L, 4) == (2, 1)
    # all lanes the same word: a broadcast -> 1
    assert _wf(np.full(32, 12), 4) == (1, 1)
    # column of a 32x32 float tile: addr 128 l -> word 32 l, all in bank 0 -> 32
    assert _wf(128 * L, 4) == (32, 1)
    # padded column (row stride 33 words): banks l % 32 distinct -> 1
    assert _wf(132 * L, 4) == (1, 1)
    # 16-byte contiguous: phases of 128 // 16 = 8 lanes, each 128 contiguous bytes -> 4 x 1
    assert _wf(16 * L, 16) == (4, 4)
    # 8-byte contiguous: phases of 16 lanes, each 128 bytes -> 2 x 1
    assert _wf(8 * L, 8) == (2, 2)
    # 1-byte contiguous: one phase of 32 lanes touching words 0..7 -> 1
    assert _wf(L, 1) == (1, 1)
    # 2-byte, stride 64 bytes: word 16 l -> banks 0 and 16, 16 distinct words each -> 16
    assert _wf(64 * L, 2) == (16, 1)
    # 16-byte, stride 32 bytes: per phase of 8 lanes words 8l..8l+3 (l = 0..7) -> banks hit twice -> 2 x 4
    assert _wf(32 * L, 16) == (8, 4)
    # 4-byte, two lanes per word pair swapped: still a permutation of 32 words -> 1
    assert _wf(4 * (L ^ 1), 4) == (1, 1)


def test_bank_counter_inactive_lanes_and_wave64():
    # ldmatrix x1: 8 row providers, 16 contiguous bytes each, lanes 8..31 inactive -> 1 phase, 1 wavefront
    a = np.full(32, -1)
    a[:8] = 16 * np.arange(8)
    assert _wf(a, 16) == (1, 1)
    # ldmatrix x2 with rows of both matrices in the same 128 bytes phase-wise: 2 phases -> 2
    a[8:16] = 128 + 16 * np.arange(8)
    assert _wf(a, 16) == (2, 2)
    # all inactive -> 0
    assert _wf(np.full(32, -1), 4) == (0, 0)
    # wave64, 4-byte contiguous: 2 phases of 32 lanes -> 2, minimum 2
    assert _wf(4 * np.arange(64), 4, HIP64) == (2, 2)
    # wave64, 1-byte stride 4: phases of 32 lanes (128 // 4), 32 distinct words each -> 2 x 1
    assert _wf(4 * np.arange(64), 1, HIP64) == (2, 2)
    # wave64 column access, stride 128 bytes: each phase 32 words in bank 0 -> 2 x 32
    assert _wf(128 * np.arange(64), 4, HIP64) == (64, 2)


def test_measure_flags_non_uniform_instructions():
    # the 16-byte store split into an 8-byte store (regs 0,1) and two 4-byte stores (2 and 3):
    #   8-byte at stride 16: phases of 16 lanes, words 4l, 4l+1 -> lanes l and l+8 share banks -> 2 per
    #   phase, 2 phases -> 4 wavefronts (minimum 2, 2 conflicts);
    #   4-byte at stride 16: one phase, words 4l -> 8 banks x 4 words -> 4 (minimum 1, 3 conflicts).
    src, dst, plan = _smem_case()
    rounds = (SmemRound((SmemAccess((0, 1), 0), SmemAccess((2,), 8), SmemAccess((3,), 12)),
                        plan.smem.rounds[0].loads),)
    _, _, p2 = _smem_case(rounds=rounds)
    check_plan(p2, src, dst, 0)
    st, _ = measure_smem(p2)
    assert not st.uniform
    assert (st.wavefronts, st.bank_conflicts, st.instructions, st.total_wavefronts) == (4, 3, 3, 12)


def test_check_dispatches_on_the_operation():
    """The registry's ``check`` runs the emulator of ``plan.operation`` (every operation has one) and
    catches a corrupted plan of each kind it is given."""
    import random
    from dataclasses import replace
    from ll_codegen.plan.gather import plan_gather
    from ll_codegen.spec import spec_from_dict
    from ll_codegen.operations import OPERATIONS, check
    from ll_codegen.testing.corpus import GATHER_NAMED
    from toolchain import random_memory_plans
    assert all(callable(op.emulate) for op in OPERATIONS.values())   # tma and mma: tests/test_tma.py, test_mma.py
    src = LinearLayout({"register": [[0, 1], [0, 2]], "lane": [[0, 4], [0, 8], [0, 16], [1, 0], [2, 0]],
                        "warp": [[4, 0]], "block": []}, ["dim0", "dim1"])
    dst = LinearLayout({"register": [[1, 0], [2, 0]], "lane": [[4, 0], [0, 1], [0, 2], [0, 4], [0, 8]],
                        "warp": [[0, 16]], "block": []}, ["dim0", "dim1"])
    from ll_codegen.plan.planner import plan_conversion
    conv = plan_conversion(src, dst, "f16", "cuda")
    assert conv.operation == "convert"
    check(conv, 1)
    L = spec_from_dict(GATHER_NAMED[0].src).linear
    g = plan_gather(L, L, 1, "f32", strategy="shuffle")
    check(g, 2)
    with pytest.raises(AssertionError):
        check(replace(g, shuffle=replace(g.shuffle, v_lane=tuple(x ^ 1 for x in g.shuffle.v_lane))), 2)
    seen = set()
    for *_, plan in random_memory_plans(random.Random(3), "cuda", "sm_90", 32, 12, ["f16", "f32"]):
        check(plan, 4)
        seen.add(plan.operation)
    assert seen == {"store", "load"}
