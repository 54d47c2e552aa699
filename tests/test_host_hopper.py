"""Hopper's asynchronous operations on the host SIMT runtime
(``ll_codegen/simt/hopper.h``, ``ll_codegen/simt/cuda.h``): hand-written CUDA
kernels compiled for the host, their shared-memory images and registers
compared with numpy expectations written here from the PTX ISA's definitions
(TMA swizzle, wgmma canonical layouts and register fragments, mma.sync
fragments), plus the errors the runtime must report.

One driver holds every kernel (one compile); ``run(case, inp)`` runs one.
Needs clang++; skipped without it.
"""
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest

from ll_codegen.run import host

pytestmark = pytest.mark.compile

if host.compiler() is None:
    pytest.skip("no clang++ for the host SIMT runtime (apt-get install clang)", allow_module_level=True)

DRIVER = r"""
#include <cuda.h>
#include <map>

using namespace llgen_host;
alignas(1024) unsigned char smem[65536];
static std::vector<unsigned char> in;   // the test's input bytes
static std::vector<unsigned char> out;  // what the case writes back
template <typename T> static T* in_at(size_t off) { return reinterpret_cast<T*>(in.data() + off); }

#define SMEM_BASE extern __shared__ __align__(1024) unsigned char smem[]; \
    const unsigned base = unsigned(__cvta_generic_to_shared(smem)); (void)base

// ---- TMA: global tensor of uint16, W x H (innermost W), row pitch 208 bytes
constexpr int W = 104, H = 90;
static uint16_t gmem[H][W] __attribute__((aligned(128)));
static CUtensorMap make_map(CUtensorMapSwizzle swz, unsigned box0 = 64, unsigned box1 = 64, unsigned es1 = 1) {
    CUtensorMap map;
    cuuint64_t dims[2] = {W, H}, strides[1] = {W * 2};
    cuuint32_t box[2] = {box0, box1}, es[2] = {1, es1};
    CUresult r = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, gmem, dims, strides, box, es,
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, swz, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) std::printf("ERR encode failed\n");
    return map;
}
static void fill_gmem() {
    for (int r = 0; r < H; ++r)
        for (int c = 0; c < W; ++c) gmem[r][c] = uint16_t((r * 131 + c * 7919 + 17) & 0xffff);
}

// mode 0: wait, then read; mode 1: read without waiting (a race); mode 2: misaligned destination;
// mode 3: the barrier expects two arrivals and gets one (deadlock); mode 4: the first box's innermost
// coordinate (3 f16 = 6 bytes) is not 16-byte aligned
__global__ void k_tma_load(const CUtensorMap* map, int mode) {
    SMEM_BASE;
    const unsigned bar = base;
    if (threadIdx.x == 0) mbarrier_init(bar, mode == 3 ? 2 : 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        mbarrier_arrive_expect_tx(bar, 2 * 8192);
        int c1[2] = {mode == 4 ? 3 : 8, 16}, c2[2] = {64, -8};
        tma_load(map, base + (mode == 2 ? 1024 + 128 : 1024), bar, c1);
        tma_load(map, base + 9216, bar, c2);
    }
    if (mode != 1)
        while (!mbarrier_try_wait_parity(bar, 0)) {}
    for (int i = threadIdx.x; i < 8192; i += blockDim.x) {
        uint16_t v;
        ld_lds(smem + 1024 + 2 * i, &v, 2);
        std::memcpy(out.data() + 2 * i, &v, 2);
    }
}

// a box narrower than the swizzle span (32 f16 = 64 B rows, 128B swizzle) and every other row
// (elementStrides {1, 2}): 8 rows of 64 bytes, 128 bytes apart
__global__ void k_tma_narrow(const CUtensorMap* map) {
    SMEM_BASE;
    if (threadIdx.x == 0) {
        mbarrier_init(base, 1);
        mbarrier_arrive_expect_tx(base, 8 * 64);
        int c[2] = {8, 4};
        tma_load(map, base + 1024, base, c);
        while (!mbarrier_try_wait_parity(base, 0)) {}
        for (int i = 0; i < 1024; ++i) {  // (the padding is never written: read the image raw)
            out[i] = smem[1024 + i];
        }
    }
}

__global__ void k_tma_store(const CUtensorMap* map, int col = 72, int row = 60) {
    SMEM_BASE;
    for (int i = threadIdx.x; i < 8192; i += blockDim.x) {
        unsigned char v = (unsigned char)((i * 37 + 5) & 0xff);
        st_lds(smem + 1024 + i, &v, 1);
    }
    __syncthreads();
    fence_proxy_async();
    if (threadIdx.x == 0) {
        int c[2] = {col, row};  // 72, 60: cols 72..135 (W = 104), rows 60..123 (H = 90): clipped
        tma_store(map, base + 1024, c);
        bulk_commit_group();
        bulk_wait_group_read(0);
    }
}

// 2-stage pipeline over 4 boxes: thread 127 produces (TMA into stage it % 2 once the stage's
// "empty" barrier says its 128 readers are done), every thread consumes; mode 1: the producer
// learns that the readers are done from a plain flag instead (no ordering: a race)
static volatile int g_flag = 0;
__global__ void k_pipeline(const CUtensorMap* map, int mode) {
    SMEM_BASE;
    const unsigned full[2] = {base, base + 8}, empty[2] = {base + 16, base + 24};
    if (threadIdx.x == 0)
        for (int s = 0; s < 2; ++s) mbarrier_init(full[s], 1), mbarrier_init(empty[s], 128);
    __syncthreads();
    uint32_t sum = 0;
    for (int it = 0; it < (mode ? 3 : 4); ++it) {
        const int s = it % 2;
        const unsigned phase = (it / 2) & 1;
        if (mode && it == 2) {  // warp 3 spins (yielding through __syncwarp) until warp 0 is done
            if (threadIdx.x < 96) break;
            do __syncwarp(); while (!g_flag);  // the lanes leave together
        }
        if (threadIdx.x == 127) {
            if (it >= 2 && !mode)
                while (!mbarrier_try_wait_parity(empty[s], phase ^ 1)) {}
            mbarrier_arrive_expect_tx(full[s], 8192);
            int c[2] = {0, 16 * it};
            tma_load(map, base + 1024 + s * 8192, full[s], c);
        }
        if (mode && it == 2) break;
        while (!mbarrier_try_wait_parity(full[s], phase)) {}
        for (int i = threadIdx.x; i < 4096; i += 128) {
            uint16_t v;
            ld_lds(smem + 1024 + s * 8192 + 2 * i, &v, 2);
            sum += v;
        }
        if (mode && it == 1 && threadIdx.x == 0) g_flag = 1;
        if (!mode) mbarrier_arrive(empty[s]);
    }
    std::memcpy(out.data() + 4 * threadIdx.x, &sum, 4);
}

// TMA loads A (64 x 64) and B (8 x 64) f16 tiles, 128B-swizzled, then four m64n8k16 wgmma steps
// read them through K-major descriptors (start advanced 32 bytes per step)
__global__ void k_tma_wgmma(const CUtensorMap* map_a, const CUtensorMap* map_b) {
    SMEM_BASE;
    const unsigned bar = base, a = base + 1024, b = base + 1024 + 8192;
    if (threadIdx.x == 0) mbarrier_init(bar, 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        mbarrier_arrive_expect_tx(bar, 8192 + 1024);
        int ca[2] = {0, 0}, cb[2] = {0, 64};
        tma_load(map_a, a, bar, ca);
        tma_load(map_b, b, bar, cb);
    }
    while (!mbarrier_try_wait_parity(bar, 0)) {}
    uint32_t d[4] = {0, 0, 0, 0};
    const uint64_t sw128 = uint64_t(1) << 62, sbo = uint64_t(1024 >> 4) << 32, lbo = uint64_t(1) << 16;
    wgmma_fence();  // PTX ISA: before the first wgmma (d was written by this thread)
    for (int s = 0; s < 4; ++s)
        wgmma(8, MmaType::kF16, MmaType::kF32, false, false, sw128 | sbo | lbo | ((a + 32 * s) >> 4), nullptr,
              sw128 | sbo | lbo | ((b + 32 * s) >> 4), d, s > 0);
    wgmma_commit_group();
    wgmma_wait_group(0);
    std::memcpy(out.data() + threadIdx.x * 16, d, 16);
}

// ---- wgmma: input header, then the shared image (from byte 1024), then A registers
struct WgmmaCase {
    int n, ab, acc, tnsp_a, tnsp_b, use_regs, ksteps, scale_first;
    uint64_t a_desc, b_desc, a_step, b_step;  // descriptors of k-step 0, advance per k-step
    int image_bytes, threads, exit_from, pad;
};
__global__ void k_wgmma(const WgmmaCase* p, const unsigned char* image, const uint32_t* regs) {
    SMEM_BASE;
    for (int i = threadIdx.x; i < p->image_bytes; i += blockDim.x) st_lds(smem + 1024 + i, image + i, 1);
    __syncthreads();
    fence_proxy_async();
    if (int(threadIdx.x) >= p->exit_from) return;  // a warpgroup member that leaves
    uint32_t d[128];
    for (int i = 0; i < p->n / 2; ++i) d[i] = 0;
    for (int s = 0; s < p->ksteps; ++s) {
        wgmma_fence();
        wgmma(p->n, MmaType(p->ab), MmaType(p->acc), p->tnsp_a, p->tnsp_b, p->a_desc + s * p->a_step,
              p->use_regs ? regs + (s * 128 + threadIdx.x) * 4 : nullptr, p->b_desc + s * p->b_step, d,
              s > 0 || p->scale_first);
        wgmma_commit_group();
    }
    wgmma_wait_group(0);
    std::memcpy(out.data() + threadIdx.x * (p->n / 2) * 4, d, (p->n / 2) * 4);
}

// ---- mma.sync: header, then per lane a[4], b[2], c[4]
struct MmaCase { int m, n, k, ab, acc, cwords; };
__global__ void k_mma(const MmaCase* p, const uint32_t* frags) {
    const uint32_t* f = frags + threadIdx.x * 10;
    uint32_t d[4] = {0, 0, 0, 0};
    mma_sync(p->m, p->n, p->k, MmaType(p->ab), MmaType(p->acc), f, f + 4, f + 6, d);
    std::memcpy(out.data() + threadIdx.x * p->cwords * 4, d, p->cwords * 4);
}

static void report(const std::vector<std::string>& errors) {
    for (auto& e : errors) std::printf("ERR %s\n", e.c_str());
}

int main(int argc, char** argv) {
    if (argc != 4) return 2;
    std::string name = argv[1];
    if (FILE* f = std::fopen(argv[2], "rb")) {
        int ch;
        while ((ch = std::fgetc(f)) != EOF) in.push_back((unsigned char)ch);
        std::fclose(f);
    }
    std::memset(smem, 0, sizeof smem);
    if (name.rfind("tma_load", 0) == 0) {
        int mode = name == "tma_load" ? 0 : name == "tma_load_nowait" ? 1 : name == "tma_load_misaligned" ? 2
                 : name == "tma_load_coord" ? 4 : 3;
        fill_gmem();
        CUtensorMap map = make_map(CU_TENSOR_MAP_SWIZZLE_128B);
        out.assign(16384, 0);
        report(launch(128, 32, smem, 1024 + 16384, [&] { k_tma_load(&map, mode); }));
    } else if (name == "tma_narrow") {
        fill_gmem();
        CUtensorMap map = make_map(CU_TENSOR_MAP_SWIZZLE_128B, 32, 16, 2);
        out.assign(1024, 0);
        std::memset(smem + 1024, 0xee, 1024);
        report(launch(32, 32, smem, 1024 + 1024, [&] { k_tma_narrow(&map); }));
    } else if (name.rfind("pipeline", 0) == 0) {
        fill_gmem();
        CUtensorMap map = make_map(CU_TENSOR_MAP_SWIZZLE_128B);
        out.assign(512, 0);
        report(launch(128, 32, smem, 1024 + 16384, [&] { k_pipeline(&map, name == "pipeline" ? 0 : 1); }));
    } else if (name == "tma_wgmma") {  // input: the 72 x 64 f16 tensor
        static uint16_t ab[72][64] __attribute__((aligned(128)));
        std::memcpy(ab, in.data(), sizeof ab);
        CUtensorMap ma, mb;
        cuuint64_t dims[2] = {64, 72}, strides[1] = {128};
        cuuint32_t box_a[2] = {64, 64}, box_b[2] = {64, 8}, es[2] = {1, 1};
        for (auto [m, box] : {std::pair{&ma, box_a}, std::pair{&mb, box_b}})
            if (cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, ab, dims, strides, box, es,
                                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                       CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE))
                std::printf("ERR encode failed\n");
        out.assign(128 * 16, 0);
        report(launch(128, 32, smem, 1024 + 8192 + 1024, [&] { k_tma_wgmma(&ma, &mb); }));
    } else if (name.rfind("tma_store", 0) == 0) {  // tma_store, tma_store_<col>_<row>
        int col = 72, row = 60;
        if (name != "tma_store") std::sscanf(name.c_str(), "tma_store_%d_%d", &col, &row);
        for (auto& row : gmem)
            for (auto& v : row) v = 0xaaaa;
        CUtensorMap map = make_map(CU_TENSOR_MAP_SWIZZLE_128B);
        report(launch(128, 32, smem, 1024 + 8192, [&] { k_tma_store(&map, col, row); }));
        out.assign(sizeof gmem, 0);
        std::memcpy(out.data(), gmem, sizeof gmem);
    } else if (name == "encode") {  // one line per attempt: the CUresult
        struct Try { uintptr_t shift; cuuint64_t stride; cuuint32_t box0, box1, es; int swz; };
        const Try tries[] = {{0, 208, 64, 64, 1, 3}, {8, 208, 64, 64, 1, 3}, {0, 200, 64, 64, 1, 3},
                             {0, 208, 64, 257, 1, 3}, {0, 208, 128, 8, 1, 3}, {0, 208, 64, 64, 9, 3},
                             {0, 208, 4, 8, 1, 0}, {0, 208, 32, 8, 1, 1}, {0, 208, 16, 8, 1, 1}};
        for (const Try& t : tries) {
            CUtensorMap map;
            cuuint64_t dims[2] = {W, H}, strides[1] = {t.stride};
            cuuint32_t box[2] = {t.box0, t.box1}, es[2] = {t.es, 1};
            CUresult r = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
                                                reinterpret_cast<char*>(gmem) + t.shift, dims, strides, box, es,
                                                CU_TENSOR_MAP_INTERLEAVE_NONE, CUtensorMapSwizzle(t.swz),
                                                CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
            std::printf("RESULT %d\n", int(r));
        }
    } else if (name == "wgmma") {
        const WgmmaCase* p = in_at<WgmmaCase>(0);
        out.assign(128 * (p->n / 2) * 4, 0);
        const unsigned char* image = in.data() + sizeof(WgmmaCase);
        const uint32_t* regs = reinterpret_cast<const uint32_t*>(image + p->image_bytes);
        report(launch(p->threads, 32, smem, 1024 + p->image_bytes, [&] { k_wgmma(p, image, regs); }));
    } else if (name == "mma") {
        const MmaCase* p = in_at<MmaCase>(0);
        out.assign(32 * p->cwords * 4, 0);
        const uint32_t* frags = reinterpret_cast<const uint32_t*>(in.data() + sizeof(MmaCase));
        report(launch(32, 32, smem, 16, [&] { k_mma(p, frags); }));
    } else {
        return 2;
    }
    FILE* f = std::fopen(argv[3], "wb");
    std::fwrite(out.data(), 1, out.size(), f);
    std::fclose(f);
    return 0;
}
"""

MMA_TYPES = {"f16": 0, "bf16": 1, "tf32": 2, "e4m3": 3, "e5m2": 4, "s8": 5, "u8": 6, "f32": 7, "s32": 8}
BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1, "f32": 4, "s32": 4}


def encode(t, v):
    """The bits of the small integer v in element type t (exact)."""
    v = int(v)
    if t in ("s8", "u8", "s32"):
        return v & {1: 0xFF, 4: 0xFFFFFFFF}[BYTES[t]]
    if t == "f16":
        return int(np.float16(v).view(np.uint16))
    if t in ("bf16", "tf32", "f32"):
        w = int(np.float32(v).view(np.uint32))
        return w >> 16 if t == "bf16" else w
    man_bits, bias = (3, 7) if t == "e4m3" else (2, 15)
    if v == 0:
        return 0
    e = abs(v).bit_length() - 1
    man = (abs(v) - (1 << e)) << man_bits >> e
    assert (man >> man_bits) == 0 and ((1 << e) + (man << e >> man_bits)) == abs(v)
    return (0x80 if v < 0 else 0) | ((e + bias) << man_bits) | man


def decode_acc(t, words):
    if t == "f32":
        return words.view(np.float32).astype(np.float64)
    if t == "s32":
        return words.view(np.int32).astype(np.float64)
    return words.astype(np.uint16).view(np.float16).astype(np.float64)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("hopper"))
    exe, log = host.build(directory, [], "hopper", driver=DRIVER)
    assert exe is not None, log

    def go(case: str, inp: bytes = b"") -> tuple[list[str], bytes, str]:
        fin, fout = os.path.join(directory, "in.bin"), os.path.join(directory, "out.bin")
        with open(fin, "wb") as fh:
            fh.write(inp)
        proc = subprocess.run([exe, case, fin, fout], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        errors = [line[4:] for line in proc.stdout.splitlines() if line.startswith("ERR ")]
        with open(fout, "rb") as fh:
            return errors, fh.read(), proc.stdout

    yield go
    shutil.rmtree(directory, ignore_errors=True)


# ------------------------------------------------------------ TMA
W, H = 104, 90
GMEM = ((np.arange(H)[:, None] * 131 + np.arange(W)[None, :] * 7919 + 17) & 0xFFFF).astype(np.uint16)


def swizzle(addr, bits):
    """The TMA / wgmma swizzle of an absolute shared address: bits [4, 4+b) ^= bits [7, 7+b)."""
    return addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)


def tma_box_image(col0, row0, smem_addr):
    """{absolute shared byte address: value} of a 64x64 f16 box loaded with 128B swizzle."""
    image = {}
    for r in range(64):
        for c in range(64):
            gr, gc = row0 + r, col0 + c
            v = int(GMEM[gr, gc]) if 0 <= gr < H and 0 <= gc < W else 0
            a = swizzle(smem_addr + r * 128 + c * 2, 3)
            image[a], image[a + 1] = v & 0xFF, v >> 8
    return image


def test_tma_load_swizzle_128b_and_out_of_bounds(run):
    errors, data, _ = run("tma_load")
    assert errors == []
    want = np.zeros(16384, np.uint8)
    for addr, v in {**tma_box_image(8, 16, 1024), **tma_box_image(64, -8, 9216)}.items():
        want[addr - 1024] = v
    got = np.frombuffer(data, np.uint8)
    assert np.array_equal(got, want)
    # the out-of-bounds box has zero rows (row < 0) and zero columns (col >= W)
    assert np.count_nonzero(got[8192:]) > 0 and not np.array_equal(got[:8192], got[8192:])


def test_tma_narrow_box_rows_are_padded_to_the_swizzle_span(run):
    # as an H200 does: rows of a box narrower than the span sit `span` bytes apart (swizzled
    # within); elementStrides[1] = 2 takes every other row (ceil(16 / 2) = 8 rows, tx 512 bytes)
    errors, data, _ = run("tma_narrow")
    assert errors == []
    want = np.full(1024, 0xEE, np.uint8)
    for r in range(8):
        for c in range(32):
            v = int(GMEM[4 + 2 * r, 8 + c])
            a = swizzle(1024 + r * 128 + c * 2, 3) - 1024
            want[a], want[a + 1] = v & 0xFF, v >> 8
    assert np.array_equal(np.frombuffer(data, np.uint8), want)


def test_tma_store_clips_at_the_tensor_bounds(run):
    errors, data, _ = run("tma_store")
    assert errors == []
    got = np.frombuffer(data, np.uint16).reshape(H, W)
    tile = np.array([(i * 37 + 5) & 0xFF for i in range(8192)], np.uint8)
    want = np.full((H, W), 0xAAAA, np.uint16)
    for r in range(64):
        for c in range(64):
            gr, gc = 60 + r, 72 + c
            if gr < H and gc < W:
                a = swizzle(1024 + r * 128 + c * 2, 3) - 1024
                want[gr, gc] = int(tile[a]) | (int(tile[a + 1]) << 8)
    assert np.array_equal(got, want)


def test_tensor_map_encode_validates(run):
    _, _, stdout = run("encode")
    results = [int(line.split()[1]) for line in stdout.splitlines() if line.startswith("RESULT")]
    # ok; address not 16-aligned; stride not a multiple of 16; box 257; inner box 256 B > 128 B
    # swizzle span; elementStrides 9; inner box 8 B; inner 64 B > 32 B span; inner 32 B == span
    assert results == [0, 1, 1, 1, 1, 1, 1, 1, 0]


def test_tma_pipeline_orders_through_full_and_empty_barriers(run):
    errors, data, _ = run("pipeline")
    assert errors == []
    got = np.frombuffer(data, np.uint32)
    want = np.zeros(128, np.int64)
    for it in range(4):
        stage = np.zeros(8192, np.uint8)
        base = 1024 + (it % 2) * 8192
        for addr, v in tma_box_image(0, 16 * it, base).items():
            stage[addr - base] = v
        want += stage.view(np.uint16).astype(np.int64).reshape(32, 128).sum(axis=0)
    assert np.array_equal(got, want.astype(np.uint32))


def test_tma_overwriting_a_stage_without_the_empty_barrier_is_a_race(run):
    errors, _, _ = run("pipeline_flag")
    assert any("race: the TMA load issued by thread 127" in e and "read, unordered" in e for e in errors), errors


# ------------------------------------------------------------ wgmma
def desc(start, lbo, sbo, layout, base=0):
    """wgmma matrix descriptor: start, LBO, SBO >> 4 in bits 0-13, 16-29, 32-45; base offset
    49-51; layout 62-63 (0 none, 1 128B, 2 64B, 3 32B swizzle)."""
    return ((start >> 4) & 0x3FFF) | (((lbo >> 4) & 0x3FFF) << 16) | (((sbo >> 4) & 0x3FFF) << 32) \
        | (base << 49) | (layout << 62)


def place(image, addr, values, eb):
    """Write the eb-byte element bits `values` at the absolute shared addresses `addr` (image from 1024)."""
    for a, v in zip(addr, values):
        image[a - 1024:a - 1024 + eb] = np.frombuffer(int(v).to_bytes(eb, "little"), np.uint8)


def kmajor_addr(start, mn, k, eb, swz_bytes, lbo, sbo):
    """PTX canonical K-major layout (8-row core matrices / swizzle atoms), then the swizzle."""
    if swz_bytes == 0:
        off = (mn % 8) * 16 + (mn // 8) * sbo + (k * eb) % 16 + (k * eb // 16) * lbo
        return start + off
    off = (mn % 8) * swz_bytes + (mn // 8) * sbo + k * eb
    return swizzle(start + off, {32: 1, 64: 2, 128: 3}[swz_bytes])


def mnmajor_addr(start, mn, k, eb, swz_bytes, lbo, sbo):
    c = mn * eb
    if swz_bytes == 0:
        return start + c % 16 + (c // 16) * sbo + (k % 8) * 16 + (k // 8) * lbo
    off = c % swz_bytes + (c // swz_bytes) * lbo + (k % 8) * swz_bytes + (k // 8) * sbo
    return swizzle(start + off, {32: 1, 64: 2, 128: 3}[swz_bytes])


def d_fragment(n):
    """wgmma f32 accumulator fragment: (thread, register) -> (row, col) of the 64 x n D."""
    rows, cols = np.zeros((128, n // 2), int), np.zeros((128, n // 2), int)
    for t in range(128):
        w, lane = divmod(t, 32)
        g, q = divmod(lane, 4)
        for r in range(n // 2):
            j, i = divmod(r, 4)
            rows[t, r] = 16 * w + g + 8 * (i // 2)
            cols[t, r] = 8 * j + 2 * q + i % 2
    return rows, cols


def wgmma_run(run, n, a, b, a_addr, b_addr, a_descs, b_descs, tnsp_a=0, tnsp_b=0, regs=None, threads=128,
              exit_from=128, ab="f16", acc="f32"):
    """a: 64 x K, b: n x K small integers of type `ab`; a_addr(m, k) / b_addr(nn, k) -> absolute
    address; descriptors (of k-step 0, advance per k-step of 32 bytes of K)."""
    k_total, eb = a.shape[1], BYTES[ab]
    image = np.zeros(16384, np.uint8)
    if regs is None:
        place(image, [a_addr(m, k) for m in range(64) for k in range(k_total)],
              [encode(ab, a[m, k]) for m in range(64) for k in range(k_total)], eb)
    place(image, [b_addr(c, k) for c in range(n) for k in range(k_total)],
          [encode(ab, b[c, k]) for c in range(n) for k in range(k_total)], eb)
    ksteps = k_total * eb // 32
    header = struct.pack("<8i4Q4i", n, MMA_TYPES[ab], MMA_TYPES[acc], tnsp_a, tnsp_b, regs is not None, ksteps,
                         0, a_descs[0], b_descs[0], a_descs[1], b_descs[1], 16384, threads, exit_from, 0)
    reg_bytes = b"" if regs is None else regs.astype(np.uint32).tobytes()
    errors, data, _ = run("wgmma", header + image.tobytes() + reg_bytes)
    if errors:
        return errors, None
    f16acc = acc == "f16"
    words = np.frombuffer(data, np.uint32).reshape(128, n // 2)[:, :n // 4 if f16acc else n // 2]
    if f16acc:  # register 2 j + i holds the halves of f32 registers 4 j + 2 i, 4 j + 2 i + 1
        words = np.stack([words & 0xFFFF, words >> 16], axis=2).reshape(128, n // 2)
    d = np.zeros((64, n))
    rows, cols = d_fragment(n)
    d[rows, cols] = decode_acc(acc, words.astype(np.uint32))
    return errors, d


def small(shape, seed):
    return np.random.default_rng(seed).integers(-4, 5, size=shape).astype(np.float32)


def test_wgmma_kmajor_128b_swizzle_with_k_advance(run):
    # A 64 x 64 and B 8 x 64, K-major 128B-swizzled atoms (8 rows x 128 B, SBO 1024);
    # four m64n8k16 steps, each descriptor's start advanced by 32 bytes
    a, b = small((64, 64), 1), small((8, 64), 2)
    A, B = 1024, 1024 + 8192
    errors, d = wgmma_run(run, 8, a, b,
                          lambda m, k: kmajor_addr(A, m, k, 2, 128, 0, 1024),
                          lambda c, k: kmajor_addr(B, c, k, 2, 128, 0, 1024),
                          (desc(A, 16, 1024, 1), 2), (desc(B, 16, 1024, 1), 2))
    assert errors == []
    assert np.array_equal(d, a @ b.T)


def test_wgmma_mn_major_128b(run):
    # A and B transposed (imm-trans 1): MN-major atoms of 64 f16 x 8 K rows (1024 B); SBO = the
    # stride of 8-K-row groups; n = 64; k-steps advance by 2 SBO
    a, b = small((64, 32), 3), small((64, 32), 4)
    A, B = 1024, 1024 + 4096
    errors, d = wgmma_run(run, 64, a, b,
                          lambda m, k: mnmajor_addr(A, m, k, 2, 128, 0, 1024),
                          lambda c, k: mnmajor_addr(B, c, k, 2, 128, 0, 1024),
                          (desc(A, 0, 1024, 1), 2048 >> 4), (desc(B, 0, 1024, 1), 2048 >> 4), tnsp_a=1, tnsp_b=1)
    assert errors == []
    assert np.array_equal(d, a @ b.T)


def test_wgmma_no_swizzle_lbo_sbo(run):
    # core matrices of 8 rows x 16 B: A with SBO 128 (8-row groups adjacent) and LBO 1024 (second
    # K half after all of them); B MN-major without swizzle, n = 16: SBO 256 between 8-column
    # groups, LBO 128 between 8-K-row groups
    a, b = small((64, 16), 5), small((16, 16), 6)
    A, B = 1024, 1024 + 4096
    errors, d = wgmma_run(run, 16, a, b,
                          lambda m, k: kmajor_addr(A, m, k, 2, 0, 1024, 128),
                          lambda c, k: mnmajor_addr(B, c, k, 2, 0, 128, 256),
                          (desc(A, 1024, 128, 0), 0), (desc(B, 128, 256, 0), 0), tnsp_b=1)
    assert errors == []
    assert np.array_equal(d, a @ b.T)


@pytest.mark.parametrize("swz,layout", [(64, 2), (32, 3)])
def test_wgmma_kmajor_64b_32b_swizzle(run, swz, layout):
    a, b = small((64, 16), 7), small((8, 16), 8)
    A, B = 1024, 1024 + 8192
    errors, d = wgmma_run(run, 8, a, b,
                          lambda m, k: kmajor_addr(A, m, k, 2, swz, 0, 8 * swz),
                          lambda c, k: kmajor_addr(B, c, k, 2, swz, 0, 8 * swz),
                          (desc(A, 16, 8 * swz, layout), 0), (desc(B, 16, 8 * swz, layout), 0))
    assert errors == []
    assert np.array_equal(d, a @ b.T)


@pytest.mark.parametrize("ab,acc", [("tf32", "f32"), ("bf16", "f32"), ("e4m3", "f32"), ("e5m2", "f16"),
                                    ("s8", "s32"), ("u8", "s32"), ("f16", "f16")])
def test_wgmma_element_types(run, ab, acc):
    # K-major 128B atoms hold 128 / e elements of a row: K = 32 bytes per step, two steps
    eb = BYTES[ab]
    k = 64 // eb
    lo, hi = {"u8": (0, 256), "s8": (-128, 128)}.get(ab, (-4, 5))
    a = np.random.default_rng(20).integers(lo, hi, size=(64, k)).astype(np.float64)
    b = np.random.default_rng(21).integers(lo, hi, size=(16, k)).astype(np.float64)
    A, B = 1024, 1024 + 8192
    errors, d = wgmma_run(run, 16, a, b, lambda m, kk: kmajor_addr(A, m, kk, eb, 128, 0, 1024),
                          lambda c, kk: kmajor_addr(B, c, kk, eb, 128, 0, 1024),
                          (desc(A, 16, 1024, 1), 2), (desc(B, 16, 1024, 1), 2), ab=ab, acc=acc)
    assert errors == []
    assert np.array_equal(d, a @ b.T)


def test_wgmma_a_from_registers(run):
    # A fragment (PTX "Register Fragments", like mma.m16n8k16 per warp): register i, half h of
    # thread 32 w + 4 g + q: row 16 w + g + 8 (i % 2), column 2 q + h + 8 (i // 2)
    a, b = small((64, 16), 9), small((8, 16), 10)
    regs = np.zeros((128, 4), np.uint32)
    for t in range(128):
        w, lane = divmod(t, 32)
        g, q = divmod(lane, 4)
        for i in range(4):
            for h in range(2):
                v = int(np.float16(a[16 * w + g + 8 * (i % 2), 2 * q + h + 8 * (i // 2)]).view(np.uint16))
                regs[t, i] |= v << (16 * h)
    B = 1024 + 8192
    errors, d = wgmma_run(run, 8, a, b, None, lambda c, k: kmajor_addr(B, c, k, 2, 128, 0, 1024),
                          (0, 0), (desc(B, 16, 1024, 1), 0), regs=regs)
    assert errors == []
    assert np.array_equal(d, a @ b.T)


def test_tma_then_wgmma(run):
    # the canonical Hopper pattern: TMA (128B swizzle) writes the tiles wgmma reads (K-major, SBO 1024)
    ab = small((72, 64), 18)
    errors, data, _ = run("tma_wgmma", ab.astype(np.float16).tobytes())
    assert errors == []
    got = np.frombuffer(data, np.float32).reshape(128, 4)
    d = np.zeros((64, 8), np.float32)
    rows, cols = d_fragment(8)
    d[rows, cols] = got
    assert np.array_equal(d, ab[:64] @ ab[64:].T)


def test_wgmma_missing_warpgroup_member(run):
    a, b = small((64, 16), 11), small((8, 16), 12)
    A, B = 1024, 1024 + 8192
    args = (lambda m, k: kmajor_addr(A, m, k, 2, 128, 0, 1024), lambda c, k: kmajor_addr(B, c, k, 2, 128, 0, 1024),
            (desc(A, 16, 1024, 1), 0), (desc(B, 16, 1024, 1), 0))
    errors, _ = wgmma_run(run, 8, a, b, *args, threads=96)
    assert any("warp 3 is not in the block" in e for e in errors), errors
    errors, _ = wgmma_run(run, 8, a, b, *args, exit_from=96)
    assert any("warp 3 has exited" in e for e in errors), errors


def test_wgmma_descriptor_base_offset(run):
    # as an H200 does: base offset 0 swizzles absolute addresses (what TMA writes), whatever the
    # start; base offset b reads a pattern that starts b rows early: row ((address >> 7) - b)
    a, b = small((64, 16), 13), small((8, 16), 14)
    A, B = 1024, 1024 + 8192 + 128
    a_addr = lambda m, k: kmajor_addr(A, m, k, 2, 128, 0, 1024)  # noqa: E731
    errors, d = wgmma_run(run, 8, a, b, a_addr, lambda c, k: kmajor_addr(B, c, k, 2, 128, 0, 1024),
                          (desc(A, 16, 1024, 1), 0), (desc(B, 16, 1024, 1), 0))
    assert errors == [] and np.array_equal(d, a @ b.T)

    def relative(c, k):  # the 128B pattern of an atom starting at B (row 0 at B, not at 1024 k)
        lin = B + (c % 8) * 128 + k * 2
        return lin ^ ((((lin >> 7) - (B >> 7)) & 7) << 4)
    errors, d = wgmma_run(run, 8, a, b, a_addr, relative, (desc(A, 16, 1024, 1), 0),
                          (desc(B, 16, 1024, 1, base=(B >> 7) & 7), 0))
    assert errors == [] and np.array_equal(d, a @ b.T)


# ------------------------------------------------------------ mma.sync
@pytest.mark.parametrize("ab,acc", [("f16", "f32"), ("f16", "f16"), ("bf16", "f32"), ("tf32", "f32"),
                                    ("s8", "s32"), ("u8", "s32"), ("e4m3", "f32"), ("e5m2", "f32")])
def test_mma_sync(run, ab, acc):
    # PTX "Matrix Fragments for mma.m16n8k16 / m16n8k8 / m16n8k32": g = lane / 4, q = lane % 4,
    # per = elements per register, K = 32 bytes; A register i, element h: (g + 8 (i % 2),
    # per q + h + K/2 (i // 2)); B register i, element h: (k per q + h + K/2 i, n g);
    # C/D f32/s32 register i: (g + 8 (i // 2), 2 q + i % 2); f16 register i, half h: (g + 8 i, 2 q + h)
    eb = BYTES[ab]
    per, k = 4 // eb, 32 // eb
    rng = np.random.default_rng(15)
    lo, hi = {"u8": (0, 256), "s8": (-128, 128)}.get(ab, (-4, 5))
    a, b, c = (rng.integers(lo, hi, size=shape).astype(np.float64) for shape in ((16, k), (k, 8), (16, 8)))
    if acc == "f16":  # sums above 2048 are rounded (to nearest even, once)
        c[::3] = (c[::3] + 2048).astype(np.float16)
    frags = np.zeros((32, 10), np.uint32)
    for lane in range(32):
        g, q = divmod(lane, 4)
        for i in range(4):
            for h in range(per):
                frags[lane, i] |= encode(ab, a[g + 8 * (i % 2), per * q + h + k // 2 * (i // 2)]) << (8 * eb * h)
        for i in range(2):
            for h in range(per):
                frags[lane, 4 + i] |= encode(ab, b[per * q + h + k // 2 * i, g]) << (8 * eb * h)
        if acc == "f16":
            for i in range(2):
                for h in range(2):
                    frags[lane, 6 + i] |= encode("f16", c[g + 8 * i, 2 * q + h]) << (16 * h)
        else:
            for i in range(4):
                frags[lane, 6 + i] = encode(acc, c[g + 8 * (i // 2), 2 * q + i % 2])
    cwords = 2 if acc == "f16" else 4
    header = struct.pack("<6i", 16, 8, k, MMA_TYPES[ab], MMA_TYPES[acc], cwords)
    errors, data, _ = run("mma", header + frags.tobytes())
    assert errors == []
    got = np.frombuffer(data, np.uint32).reshape(32, cwords)
    d = np.zeros((16, 8))
    for lane in range(32):
        g, q = divmod(lane, 4)
        if acc == "f16":
            for i in range(2):
                for h in range(2):
                    d[g + 8 * i, 2 * q + h] = decode_acc("f16", np.array([got[lane, i] >> (16 * h) & 0xFFFF]))[0]
        else:
            for i in range(4):
                d[g + 8 * (i // 2), 2 * q + i % 2] = decode_acc(acc, got[lane, i:i + 1].copy())[0]
    want = a @ b + c
    assert np.array_equal(d, want.astype(np.float16) if acc == "f16" else want)
    assert acc != "f16" or not np.array_equal(d, want)


# ------------------------------------------------------------ errors
def test_tma_misaligned_destination(run):
    errors, _, _ = run("tma_load_misaligned")
    assert any("not 1024-byte aligned" in e for e in errors), errors


def test_tma_inner_coordinate_not_16_byte_aligned(run):
    """An innermost coordinate of 3 f16 elements (6 bytes): an illegal instruction on an H200, so
    one error naming the thread and the values -- not a copy that the GPU would never make."""
    errors, _, _ = run("tma_load_coord")
    assert len(errors) == 1, errors
    assert errors[0].startswith("thread 0 (warp 0, lane 0): cp.async.bulk.tensor (TMA load) at coordinates (3, 16)")
    assert "3 x 2 bytes = 6 is not a multiple of 16 bytes" in errors[0]
    errors, _, _ = run("tma_store_4_0")           # stores too: 8 bytes
    assert len(errors) == 1 and "(TMA store) at coordinates (4, 0)" in errors[0] and "= 8 is not" in errors[0], errors


@pytest.mark.parametrize("col, row, dim", [(-8, 60, 0), (72, -4, 1)])
def test_tma_store_at_a_negative_coordinate(run, col, row, dim):
    """A store box starting before the tensor faults on an H200 (loads zero-fill there, stores clip
    only past the end): one error with the thread and the coordinate; the tensor is left alone."""
    errors, data, _ = run(f"tma_store_{col}_{row}")
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"thread 0 (warp 0, lane 0): cp.async.bulk.tensor (TMA store) at coordinates "
                                f"({col}, {row})")
    assert f"coordinate {dim} is {(col, row)[dim]} < 0" in errors[0]
    assert np.all(np.frombuffer(data, np.uint16) == 0xAAAA)


def test_reading_a_tma_tile_before_the_wait_is_a_race(run):
    errors, _, _ = run("tma_load_nowait")
    assert any("race" in e for e in errors), errors


def test_barrier_that_never_completes_deadlocks(run):
    errors, _, _ = run("tma_load_deadlock")
    assert any("deadlock" in e and "mbarrier" in e and "1 of 2 arrivals" in e for e in errors), errors
