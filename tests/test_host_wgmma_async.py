"""wgmma is asynchronous on the host SIMT runtime (``ll_codegen/simt/wgmma.h``), and the PTX
check reads the wait that ends it.

PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate": a wgmma.mma_async reads its
operands and writes its accumulator registers between its issue and the ``wgmma.wait_group``
that covers its committed group.  The kernels below run a generated mma header
(``examples/hopper``'s 128x128x64 f16 wgmma, both operands in shared memory) in a two-stage TMA
pipeline written here by hand with the runtime's TMA and mbarrier calls -- the control an author
writes around generated code -- and each control bug must come back as ONE error line:

* a stage released to the TMA producer before the wait covering its wgmma (the producer's TMA
  load lands on operand bytes a wgmma in flight still reads);
* the accumulator read (the ``wait_acc`` pin) or written before its wait;
* a wrong-parity mbarrier wait (the producer's wait returns at once and its TMA load overwrites a
  stage: one line naming the barrier, the parity waited for and the barrier's phase, not one
  race per byte);
* a missing wgmma.fence, a wait_group that no commit precedes, a thread exiting with a wgmma in
  flight.

The correct pipeline's result is compared with numpy (A_0 B + A_1 B + A_2 B: three k-iterations,
each A tile loaded by TMA into one of the two stages).  Then the mutation: ``wait_acc`` rendered
with ``wait<1>()`` (one group left in flight where the accumulator is read) must fail both the
host run of the generated harness and the PTX check (the interpreter's register in flight, and
the expected ``wgmma.wait_group 0``).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from ll_codegen.api import plan_mma
from ll_codegen.emit.render import file_names
from ll_codegen.operations import write_files
from ll_codegen.run import host, ptx_check

pytestmark = pytest.mark.compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOPPER = os.path.join(ROOT, "examples", "hopper")

if host.compiler() is None:
    pytest.skip("no clang++ for the host SIMT runtime (apt-get install clang)", allow_module_level=True)


def wgmma_plan():
    """acc 128x128 f32 += A 128x64 (K-major, 128B swizzle) * B 64x128 (MN-major, 128B swizzle), f16."""
    return plan_mma(os.path.join(HOPPER, "wgmma_acc_128x128.yaml"), os.path.join(HOPPER, "a_smem_128x64.yaml"),
                    os.path.join(HOPPER, "b_smem_64x128.yaml"), "f16", "f32", "cuda", "sm_90a")


# A_it[m][k] (k-iteration it = 0, 1, 2, one above the other) and B[k][n]: small integers, so every
# product and sum is exact in f32
A = ((np.arange(3 * 128)[:, None] * 3 + np.arange(64)[None, :] * 5) % 7 - 3).astype(np.float16)
B = ((np.arange(64)[:, None] * 7 + np.arange(128)[None, :] * 3) % 5 - 2).astype(np.float16)

DRIVER = r"""
#include <cuda.h>
#include "wg.cuh"

using namespace llgen_host;
alignas(1024) unsigned char smem[1024 + 3 * 16384];
static uint16_t g_a[3 * 128][64] __attribute__((aligned(128)));  // A_it (M x K) of k-iteration it, K innermost
static uint16_t g_b[64 * 128];                                 // B (K x N) row-major
static float out[128 * 128];                                   // the accumulator, row-major

#define SMEM_BASE extern __shared__ __align__(1024) unsigned char smem[]; \
    const unsigned base = unsigned(__cvta_generic_to_shared(smem)); (void)base

// Two A stages filled by TMA (thread 128, warp 4, produces), one B tile the warpgroup stores; three
// k-iterations: wait for the stage, fence, mma, commit, wait<1> (the previous iteration's group is
// done), release that iteration's stage.  mode 0: as written; 1: release the current stage (its
// wgmma still in flight); 2: the producer waits on the empty barrier with the wrong parity; 3:
// wait<1> and read the accumulator (the pin) with the last group in flight; 4: write acc[0]
// between the issue and the wait; 5: no wgmma.fence before the first mma; 6: exit without the
// final wait; 7: the final wait without the commit of the last mma
__global__ void k_pipeline(const CUtensorMap* map, int mode) {
    SMEM_BASE;
    const unsigned full[2] = {base, base + 8}, empty[2] = {base + 16, base + 24};
    unsigned char* const stage[2] = {smem + 1024, smem + 1024 + 16384};
    unsigned char* const b_tile = smem + 1024 + 2 * 16384;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    if (tid == 0)
        for (int s = 0; s < 2; ++s) mbarrier_init(full[s], 1), mbarrier_init(empty[s], 1);
    if (tid < 128)
        for (int o = tid; o < wg::kTileBytesB / 2; o += 128) st_lds(b_tile + 2 * o, &g_b[wg::b_tile_index(o)], 2);
    __syncthreads();
    if (tid >= 128) {  // warp 4: its lane 0 produces
        for (int it = 0; it < 3 && tid == 128; ++it) {
            const int s = it % 2;
            if (it >= 2)  // the stage's reader released it: phase 0 of empty[s] (parity 0)
                while (!mbarrier_try_wait_parity(empty[s], mode == 2 ? 1 : 0)) {}
            mbarrier_arrive_expect_tx(full[s], 16384);
            int c[2] = {0, 128 * it};
            tma_load(map, unsigned(__cvta_generic_to_shared(stage[s])), full[s], c);
        }
        return;
    }
    wg::fence_smem();
    float acc[wg::kAccRegs];
    for (int it = 0; it < 3; ++it) {
        const int s = it % 2;
        while (!mbarrier_try_wait_parity(full[s], (it / 2) & 1)) {}
        if (mode != 5) wg::fence();
        wg::mma(acc, stage[s], b_tile, it > 0);
        if (mode == 4 && it == 2 && tid == 5) acc[0] = 1.0f;
        if (mode != 7 || it < 2) wg::commit();
        wg::wait<1>();
        if (tid == 0) {
            if (mode == 1) mbarrier_arrive(empty[s]);                    // too early
            else if (it >= 1) mbarrier_arrive(empty[(it - 1) % 2]);
        }
    }
    if (mode == 6) return;
    if (mode == 3) {
        for (int r = 0; r < wg::kAccRegs; ++r) wg::detail::pin_f(acc[r]);
        return;
    }
    wg::wait_acc(acc);
    for (int r = 0; r < wg::kAccRegs; ++r) out[wg::acc_index(r, lane, warp)] = acc[r];
}

int main(int argc, char** argv) {
    int mode = std::atoi(argv[1]);
    FILE* f = std::fopen(argv[2], "rb");
    if (!f || std::fread(g_a, 2, 3 * 128 * 64, f) != 3 * 128 * 64 || std::fread(g_b, 2, 64 * 128, f) != 64 * 128)
        return 1;
    std::fclose(f);
    CUtensorMap map;
    cuuint64_t dims[2] = {64, 3 * 128}, strides[1] = {64 * 2};
    cuuint32_t box[2] = {64, 128}, es[2] = {1, 1};
    if (cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, g_a, dims, strides, box, es,
                               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return 1;
    for (auto& e : launch(160, 32, smem, sizeof smem, [&] { k_pipeline(&map, mode); }))
        std::printf("ERR %s\n", e.c_str());
    FILE* o = std::fopen(argv[3], "wb");
    std::fwrite(out, 4, 128 * 128, o);
    std::fclose(o);
    return 0;
}
"""


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("wgmma_async"))
    write_files(wgmma_plan(), directory, "wg", emit=("header",))
    exe, log = host.build(directory, [], "pipeline", driver=DRIVER)
    assert exe is not None, log
    fin = os.path.join(directory, "in.bin")
    with open(fin, "wb") as fh:
        fh.write(A.tobytes() + B.tobytes())

    def go(mode: int) -> tuple[list[str], np.ndarray]:
        fout = os.path.join(directory, f"out{mode}.bin")
        proc = subprocess.run([exe, str(mode), fin, fout], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        errors = [line[4:] for line in proc.stdout.splitlines() if line.startswith("ERR ")]
        return errors, np.fromfile(fout, np.float32).reshape(128, 128)
    yield go
    shutil.rmtree(directory, ignore_errors=True)


def one_error(errors: list[str]) -> str:
    assert len(errors) == 1, errors
    return errors[0]


def test_the_pipeline_computes_at_the_waits(pipeline):
    """As written: no error, and acc = A_0 B + A_1 B + A_2 B (the first k-iteration ignores acc)."""
    errors, acc = pipeline(0)
    assert errors == []
    want = sum(A[128 * it:128 * (it + 1)].astype(np.float64) @ B.astype(np.float64) for it in range(3))
    assert np.array_equal(acc, want.astype(np.float32))


def test_releasing_a_stage_before_its_wait_is_one_race(pipeline):
    """The consumer arrives on the stage's empty barrier right after commit(): the producer's next
    TMA load lands on the A tile the wgmma of that stage still reads."""
    e = one_error(pipeline(1)[0])
    assert e.startswith("race: the TMA load issued by thread 128 (warp 4, lane 0) writes shared bytes 1024..17407 "
                        "(16384 bytes) that the wgmma #"), e
    assert "of warpgroup 0 (m64n128k16, A descriptor 0x" in e and "still reads (no wgmma.wait_group covered it" in e


def test_a_wrong_parity_wait_is_one_line(pipeline):
    """The producer waits on empty[0] for parity 1 while the barrier is in its phase 0: the wait
    returns at once (parity 1 names the phase before the first), and the TMA load that follows
    overwrites the first load's bytes -- reported as the parity, once."""
    e = one_error(pipeline(2)[0])
    assert e.startswith("thread 128 (warp 4, lane 0): wrong mbarrier parity: mbarrier.try_wait.parity on the "
                        "mbarrier at 16 waited for parity 1 while the barrier is in phase 0 (parity 0)"), e
    assert "the phase before the first" in e and "the phase it needs has parity 0" in e


def test_reading_the_accumulator_before_its_wait(pipeline):
    """wait<1>() leaves the last group in flight; the accumulator pin (what wait_acc does after its
    wait) reads a register that group writes."""
    e = one_error(pipeline(3)[0])
    assert re.match(r"thread 0 \(warp 0, lane 0\) reads its accumulator register d\d+ of the wgmma #\d+ of "
                    r"warpgroup 0 \(m64n128k16, A descriptor 0x[0-9a-f]+, B descriptor 0x[0-9a-f]+\) before a "
                    r"wgmma.wait_group covered it", e), e


def test_writing_the_accumulator_before_its_wait(pipeline):
    e = one_error(pipeline(4)[0])
    assert e.startswith("thread 5 (warp 0, lane 5) wrote its accumulator register d0 of the wgmma #"), e
    assert "while it was in flight" in e


def test_a_missing_fence(pipeline):
    e = one_error(pipeline(5)[0])
    assert e.startswith("thread 0 (warp 0, lane 0): missing wgmma.fence before the wgmma #1 of warpgroup 0"), e


def test_exiting_with_a_wgmma_in_flight(pipeline):
    e = one_error(pipeline(6)[0])
    assert e.startswith("thread 0 (warp 0, lane 0) exits with the wgmma #") and "in flight" in e, e


def test_a_wait_without_commit(pipeline):
    e = one_error(pipeline(7)[0])
    assert "wgmma.wait_group 1 with the wgmma #" in e and "not committed" in e, e


# ------------------------------------------------------------ the mutation: wait_acc leaves a group in flight
WAIT_ACC = (r"template <int N = 0>(\n__device__ __forceinline__ void wait_acc\()", r"template <int N = 1>\1")


def render_mutated(directory: str, plan, mutate: bool) -> None:
    write_files(plan, directory, "m", emit=("header", "harness"))
    if mutate:
        path = os.path.join(directory, file_names(plan.target, "m")["header"])
        text, n = re.subn(WAIT_ACC[0], WAIT_ACC[1], open(path).read(), count=1)
        assert n == 1, "wait_acc's default N = 0 not found in the rendered header"
        open(path, "w").write(text)


@pytest.mark.parametrize("mutate", [False, True])
def test_wait_acc_leaving_a_group_in_flight_fails_on_the_host(tmp_path, mutate):
    plan = wgmma_plan()
    render_mutated(str(tmp_path), plan, mutate)
    r, = host.verify_host([("m", plan)], runs=1, seed=2, sources=str(tmp_path))
    if not mutate:
        assert r.ok, r.message
        return
    assert not r.ok
    assert "reads its accumulator register d" in r.message and "before a wgmma.wait_group covered it" in r.message


@pytest.mark.parametrize("mutate", [False, True])
def test_wait_acc_leaving_a_group_in_flight_fails_the_ptx_check(tmp_path, mutate):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc")
    plan = wgmma_plan()
    render_mutated(str(tmp_path), plan, mutate)
    ptx, log = ptx_check.compile_ptx(nvcc, str(tmp_path / "m_harness.cu"), plan.arch, str(tmp_path / "m.ptx"))
    assert ptx, log
    problems = ptx_check.check(plan, ptx, "m")
    if not mutate:
        assert problems == []
        return
    # the interpreter: the harness reads an accumulator register of the wgmma still in flight
    assert len(problems) == 1 and re.search(r"register %f\d+ read while the wgmma.mma_async of PTX line \d+ "
                                            r"writing it is in flight", problems[0]), problems
    # the structure alone (behaviour off still runs the interpreter): each thread's wgmma.wait_group
    # operand against the plan's 0
    from ll_codegen.verify.ptx.sim import parse
    from ll_codegen.operations import operation_of
    kernel = parse(ptx)["m_harness"]
    op, want = operation_of(plan).harness, operation_of(plan).ptx
    data = op.data(plan, np.random.default_rng(0), "")
    events = run_events_ignoring_inflight(kernel, data.args, plan)
    wants, shfl = want.wants(plan, data.args, "", 0, 0)
    diff = ptx_check.compare("thread 0", wants, shfl, [e for e in events if want.counts(e)], want.trim)
    assert len(diff) == 1 and "wgmma.wait_group.sync.aligned extra=('0x1',); the plan says" in diff[0] \
        and diff[0].endswith("extra=('0x0',)"), diff


def run_events_ignoring_inflight(kernel, args, plan):
    """Thread 0's events up to the first read of a register in flight (the interpreter stops there)."""
    from ll_codegen.verify.ptx.ops import PtxError
    from ll_codegen.verify.ptx.sim import Machine
    m = Machine(kernel, args, plan.threads, plan.smem_bytes, plan.warp_size)
    with pytest.raises(PtxError):
        m.run()
    return m.threads[0].events


# ------------------------------------------------------------ the GEMM example, its stage released early
def test_gemm_example_releasing_a_stage_before_its_wait(tmp_path):
    """``examples/kernels/gemm_wgmma.cu`` with its consumers' ``wait<IN_FLIGHT>()`` (in the control
    both GEMMs share, ``gemm_hopper.h``) made ``wait<IN_FLIGHT + 1>()``: the stage of k-step kt - 1
    goes back to the TMA producer while that step's wgmma may still read it.  On the host, six
    k-steps over the stage ring: the producer's reload of a stage lands on bytes a wgmma in flight
    reads -- one race line."""
    import test_gemm_wgmma as gemm
    control = os.path.join(os.path.dirname(gemm.KERNEL), "gemm_hopper.h")
    text = open(control).read()
    wait = "Op::template wait<IN_FLIGHT>();"
    assert text.count(wait) == 1
    (tmp_path / "gemm_hopper.h").write_text(text.replace(wait, "Op::template wait<IN_FLIGHT + 1>();"))
    plan = os.path.join(os.path.dirname(gemm.KERNEL), "gemm_hopper_plan.h")  # the control's other header
    (tmp_path / "gemm_hopper_plan.h").write_text(open(plan).read())
    kernel = tmp_path / "gemm_wgmma_early_release.cu"      # includes the mutated "gemm_hopper.h" beside it
    kernel.write_text(open(gemm.KERNEL).read())
    path, log = host.build(str(tmp_path), [], exe="gemm", sources=gemm.GENERATED,
                           driver=gemm.DRIVER % {"kernel": str(kernel)}, defines=["LLGEN_HOST_SIMT",
                                                                                  "LLGEN_GEMM_SKIP_AGREEMENT_CHECKS=1"])
    assert path, log
    M, N, K = 128, 256, 6 * 64
    a = np.ones((M, K), np.float16)
    b = np.ones((K, N), np.float16)
    inp, outp = tmp_path / "in.bin", tmp_path / "out.bin"
    # f16, f32 C, one 128 x 256 tile, K whole (splits 1, dp 1), one CTA, in order, no shares
    inp.write_bytes(np.array([0, 0, M, N, K, 256, 1, 1, 1, 0, 0], np.int32).tobytes() + a.tobytes() + b.tobytes())
    proc = subprocess.run([path, str(inp), str(outp)], capture_output=True, text=True, timeout=300)
    errors = [line for line in proc.stdout.splitlines() if line.startswith("ERR ")]
    assert proc.returncode == 5 and len(errors) == 1, proc.stdout + proc.stderr
    assert re.match(r"ERR block 0: race: the TMA load issued by thread 0 \(warp 0, lane 0\) writes shared bytes "
                    r"\d+\.\.\d+ \(\d+ bytes\) that the wgmma #\d+ of warpgroup [12] \(m64n256k16, A descriptor "
                    r"0x[0-9a-f]+, B descriptor 0x[0-9a-f]+\) still reads \(no wgmma.wait_group covered it",
                    errors[0]), errors[0]
