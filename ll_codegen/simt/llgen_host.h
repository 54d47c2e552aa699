// llgen_host.h -- run your own CUDA (or HIP) kernel on llgen's host SIMT runtime.
//
// The runtime that checks generated code (simt_host.h: one fiber per thread, warp shuffles and
// barriers with the hardware's semantics, race / uninitialised-read / alignment checks on shared
// memory, TMA, mbarriers, wgmma, mma.sync, mfma) runs any kernel written against the CUDA subset it
// models, compiled for the CPU:
//
//   clang++ -std=c++17 -I <ll_codegen>/simt -I <your generated headers> -include llgen_host.h main.cpp
//
// The public surface:
//
//   void* llgen_host::device_malloc(size_t bytes);   // "global memory": guarded, bounds-checked
//   void  llgen_host::device_free(void* p);
//   LLGEN_HOST_SHARED(smem, bytes);                   // defines the buffer a kernel's
//                                                     // `extern __shared__ ... smem[]` names (file scope)
//   std::vector<std::string> llgen_host::launch_grid(Dim3 grid, int threads, unsigned char* shared,
//                                                    size_t shared_bytes, std::function<void()> kernel,
//                                                    int warp_size = 32);
//
// launch_grid runs `kernel` (a lambda calling your __global__ function with its arguments) once
// per block of `grid`, blockIdx real, blockDim.x = threads, on `shared_bytes` bytes of `shared`;
// it returns the errors seen, each naming the thread, its warp and lane and the block: races (one
// report per conflicting access), reads of shared bytes never written, misaligned accesses,
// generated code's global accesses outside every device_malloc buffer, deadlocks.  A plain C++
// access of your own code past a device_malloc buffer hits a guard page: the runtime then prints
// one line naming the address, the buffer it overran and the thread and block, and exits with
// status 3 instead of crashing.  __half/__half2, __nv_bfloat16/__nv_bfloat162 and the fp8 types
// (__nv_fp8_e4m3, __nv_fp8_e5m2, their x2/x4 forms, __nv_cvt_*) come from <cuda_fp16.h>,
// <cuda_bf16.h> and <cuda_fp8.h> in the same folder (host stand-ins: storage and the device's
// round-to-nearest-even conversions, fp8 saturation as the PTX ISA's cvt .satfinite).
#pragma once
#include "simt_host.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>

namespace llgen_host {

namespace detail {
struct Mapping {
    void* base;          // what mmap returned: guard page, data pages, guard page
    size_t length;
    uintptr_t begin, end;  // the user's bytes (end-aligned against the upper guard page)
};
inline std::map<uintptr_t, Mapping>& mappings() {
    static std::map<uintptr_t, Mapping> m;
    return m;
}

inline void on_fault(int, siginfo_t* info, void*) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
    char msg[320];
    const Mapping* near = nullptr;
    for (const auto& kv : mappings()) {
        const Mapping& m = kv.second;
        const uintptr_t lo = reinterpret_cast<uintptr_t>(m.base), hi = lo + m.length;
        if (a >= lo && a < hi) near = &m;
    }
    int n = std::snprintf(msg, sizeof msg, "llgen_host: out-of-bounds global access at %#llx",
                          static_cast<unsigned long long>(a));
    if (near)
        n += std::snprintf(msg + n, sizeof msg - n, " (byte offset %lld of the %llu-byte buffer at %#llx)",
                           static_cast<long long>(a) - static_cast<long long>(near->begin),
                           static_cast<unsigned long long>(near->end - near->begin),
                           static_cast<unsigned long long>(near->begin));
    if (g_block && g_block->current >= 0)
        n += std::snprintf(msg + n, sizeof msg - n, " by %s", where(g_block->current).c_str());
    std::snprintf(msg + n, sizeof msg - n, "\n");
    ssize_t ignored = write(2, msg, std::strlen(msg));
    (void)ignored;
    _exit(3);
}
}  // namespace detail

// Global memory for a kernel: `bytes` ending right at a PROT_NONE guard page (and one more below),
// so an access past the end faults; registered, so generated code's accesses are bounds-checked.
// 16-byte aligned (its end too, for the sizes a tile needs; a size not a multiple of 16 leaves up
// to 15 bytes of slack before the upper guard page).
inline void* device_malloc(size_t bytes) {
    static bool installed = false;
    if (!installed) {
        struct sigaction sa = {};
        sa.sa_sigaction = detail::on_fault;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGSEGV, &sa, nullptr);
        sigaction(SIGBUS, &sa, nullptr);
        installed = true;
    }
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t data = (bytes + 15) / 16 * 16, pages = (data + page - 1) / page * page;
    const size_t length = pages + 2 * page;
    void* base = mmap(nullptr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return nullptr;
    char* first = static_cast<char*>(base) + page;
    mprotect(first, pages, PROT_READ | PROT_WRITE);
    char* user = first + pages - data;
    const uintptr_t begin = reinterpret_cast<uintptr_t>(user);
    detail::mappings()[begin] = {base, length, begin, begin + bytes};
    global_buffers().emplace_back(begin, begin + bytes);
    return user;
}

inline void device_free(void* p) {
    auto& m = detail::mappings();
    const auto it = m.find(reinterpret_cast<uintptr_t>(p));
    if (it == m.end()) return;
    auto& bufs = global_buffers();
    bufs.erase(std::remove_if(bufs.begin(), bufs.end(), [&](const auto& r) { return r.first == it->first; }),
               bufs.end());
    munmap(it->second.base, it->second.length);
    m.erase(it);
}

// Runs `kernel` for every block of `grid` (x fastest), each a launch() of `threads` threads; returns
// every block's errors (each names its thread and block).
inline std::vector<std::string> launch_grid(Dim3 grid, int threads, unsigned char* shared, size_t shared_bytes,
                                            std::function<void()> kernel, int warp_size = 32) {
    std::vector<std::string> all;
    for (unsigned z = 0; z < std::max(grid.z, 1u); ++z)
        for (unsigned y = 0; y < std::max(grid.y, 1u); ++y)
            for (unsigned x = 0; x < std::max(grid.x, 1u); ++x) {
                Dim3 b;
                b.x = x, b.y = y, b.z = z;
                for (auto& e : launch(threads, warp_size, shared, shared_bytes, kernel, b, grid)) all.push_back(e);
                if (all.size() >= 16) return all;
            }
    return all;
}

}  // namespace llgen_host

// The dynamic shared-memory buffer a kernel's `extern __shared__ unsigned char NAME[]` refers to.
#define LLGEN_HOST_SHARED(NAME, BYTES) alignas(1024) unsigned char NAME[BYTES]
