// AMD CDNA matrix instructions (v_mfma_*) on the host SIMT runtime (included at the end of
// simt_host.h, after hopper.h, whose operand records and products it reuses).  Generated HIP
// headers call llgen_host::mfma under LLGEN_HOST_SIMT instead of the __builtin_amdgcn_mfma_*.
//
// Semantics: AMD Instinct MI300 (CDNA3) and MI200 (CDNA2) ISA, "Matrix Arithmetic Instructions",
// dense single-block MFMA of a wave64: D (M x N) = A (M x K) B (K x N) + C with M = N = 32 or 16.
// With P = K M / 64 elements of A (and of B) per lane, packed from bit 0 of consecutive VGPRs:
//   A[i][k]: lane (k / P) M + i, item k % P;    B[k][j]: lane (k / P) N + j, item k % P;
//   C/D[i][j] (32-bit): VGPR 4 (i / (4 G)) + i % 4 of lane ((i / 4) % G) N + j, G = 64 / N.
// Products accumulate in k order in float (f16 / bf16 sources: exact for the checks' integers)
// or in wrapping int32 (i8).  The instruction is wave-collective: every lane of the wave issues
// the same one with the same shape and types, or it is reported as divergence.
#pragma once

namespace llgen_host {

// v_mfma_{f32,i32}_MxNxK* (wave-collective): a, b the lane's source VGPRs, c/d its accumulators
inline void mfma(int m, int n, int k, MmaType ab, MmaType acc, const uint32_t* a, const uint32_t* b,
                 const uint32_t* c, uint32_t* d) {
    Fiber& f = self();
    MmaOperands& o = hopper().ops[self_id()];
    o = MmaOperands();
    o.m = m, o.n = n, o.k = k, o.ab = ab, o.bt = ab, o.acc = acc, o.a = a, o.b = b, o.c = c, o.d = d;
    f.op = WarpOp::kMfma;
    warp_op(f);
}

inline bool mfma_shape_ok(const MmaOperands& o) {
    bool square = o.m == o.n && (o.m == 32 || o.m == 16);
    bool floats = (o.ab == MmaType::kF16 || o.ab == MmaType::kBF16) && o.acc == MmaType::kF32;
    bool ints = o.ab == MmaType::kS8 && o.acc == MmaType::kS32;
    int items = o.k * o.m / 64;  // per lane: 4 (f16 / bf16; CDNA2 i8) or 8 (CDNA3 i8)
    return square && (floats ? items == 4 : ints && (items == 4 || items == 8));
}

// the wave at w0 runs its MFMA once every lane issued it (resolve_warps calls this)
inline bool mfma_op(int w0, int lanes) {
    auto& ops = hopper().ops;
    const MmaOperands& o = ops[w0];
    if (lanes != 64 || !mfma_shape_ok(o)) {
        error(where(w0) + ": v_mfma " + std::to_string(o.m) + "x" + std::to_string(o.n) + "x" + std::to_string(o.k) +
              " with these types is not modelled (32x32 / 16x16, f16 / bf16 -> f32 or i8 -> i32; 64 lanes)");
        return true;
    }
    const int M = o.m, N = o.n, K = o.k, P = K * M / 64, G = 64 / N;
    const unsigned eb = element_bytes(o.ab), per = 4 / eb;
    Product p;
    p.rows = M, p.n = N, p.k = K, p.ab = o.ab, p.bt = o.bt, p.acc = o.acc;
    p.a.assign(M * K, 0), p.b.assign(N * K, 0), p.c.assign(M * N, 0);
    for (int l = 0; l < 64; ++l) {
        const MmaOperands& q = ops[w0 + l];
        if (q.m != o.m || q.n != o.n || q.k != o.k || q.ab != o.ab || q.acc != o.acc) {
            error("wave divergence: " + where(w0 + l) + " issues a different v_mfma than " + where(w0));
            return true;
        }
        for (int s = 0; s < P; ++s) {
            const int kk = (l / M) * P + s;  // lane = (k / P) M + i, item = k % P (M = N)
            p.a[(l % M) * K + kk] = element_of(q.a[s / per], eb, s % per);
            p.b[(l % N) * K + kk] = element_of(q.b[s / per], eb, s % per);
        }
        for (int r = 0; r < M * N / 64; ++r)
            p.c[((r / 4) * 4 * G + ((l / N) % G) * 4 + r % 4) * N + l % N] = q.c[r];
    }
    p.compute();
    for (int l = 0; l < 64; ++l)
        for (int r = 0; r < M * N / 64; ++r)
            ops[w0 + l].d[r] = p.c[((r / 4) * 4 * G + ((l / N) % G) * 4 + r % 4) * N + l % N];
    return true;
}

}  // namespace llgen_host
