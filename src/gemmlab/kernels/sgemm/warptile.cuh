// The warptile pieces shared by rungs 10, 12 and 13: the async tile copies that fill a
// shared-memory stage, the per-k fragment loads, the outer product, and the epilogue.
// Each rung's file keeps its own main loop, which is where the rungs differ.
#pragma once
#include "async_copy.cuh"
#include "gmem_tiles.cuh"

namespace gemmlab {

// Warp-tile geometry: a warp covers WM x WN in WMITER x WNITER sub-tiles of WSUBM x WSUBN,
// each thread a TM x TN piece of every sub-tile.
template <int WM, int WN, int WNITER, int TM, int TN>
struct WarpTile {
    static constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
    static constexpr int WSUBM = WM / WMITER;
    static constexpr int WSUBN = WN / WNITER;
    static constexpr int FM = WMITER * TM;  // fragment lengths per thread
    static constexpr int FN = WNITER * TN;
    static_assert(WMITER >= 1 && (WM * WN) % (32 * TM * TN * WNITER) == 0, "WMITER must be a whole number");
    static_assert(WM % WMITER == 0 && WN % WNITER == 0, "sub-tiles must divide the warp tile");
    static_assert((WSUBM / TM) * (WSUBN / TN) == 32, "a warp's 32 threads must tile one sub-tile");
    static_assert(WSUBM % TM == 0 && WSUBN % TN == 0, "thread tiles must divide a sub-tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "fragments are read as float4");

    // Step k's fragments: As is k-major with row length LDA, Bs k-major with row length LDB;
    // aOff/bOff are this thread's first row/column inside the block tile.
    template <int LDA, int LDB>
    static __device__ __forceinline__ void load(const float* as, const float* bs, int k, int aOff, int bOff,
                                                float (&fa)[FM], float (&fb)[FN]) {
#pragma unroll
        for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 a = load_float4(&as[k * LDA + aOff + wm * WSUBM + i]);
                fa[wm * TM + i + 0] = a.x; fa[wm * TM + i + 1] = a.y;
                fa[wm * TM + i + 2] = a.z; fa[wm * TM + i + 3] = a.w;
            }
#pragma unroll
        for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 b = load_float4(&bs[k * LDB + bOff + wn * WSUBN + j]);
                fb[wn * TN + j + 0] = b.x; fb[wn * TN + j + 1] = b.y;
                fb[wn * TN + j + 2] = b.z; fb[wn * TN + j + 3] = b.w;
            }
    }

    static __device__ __forceinline__ void fma(float (&acc)[FM][FN], const float (&fa)[FM], const float (&fb)[FN]) {
#pragma unroll
        for (int m = 0; m < FM; ++m)
#pragma unroll
            for (int n = 0; n < FN; ++n) acc[m][n] += fa[m] * fb[n];
    }

    // out[r, c] = alpha * acc + beta * out for this thread's outputs (r0, c0: its first).
    static __device__ __forceinline__ void store(float* out, int M, int N, int r0, int c0, const float (&acc)[FM][FN],
                                                 float alpha, float beta, bool vec_ok) {
#pragma unroll
        for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                const int r = r0 + wm * WSUBM + i;
#pragma unroll
                for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                    for (int j = 0; j < TN; j += 4) {
                        const float* a = &acc[wm * TM + i][wn * TN + j];
                        store4(out, M, N, r, c0 + wn * WSUBN + j, make_float4(a[0], a[1], a[2], a[3]), alpha, beta,
                               vec_ok);
                    }
            }
    }
};

// Issue the cp.async copies of one K-tile: A (BM x BK at row0, k0) transposed into
// as[k * LDA + m] with 4-byte copies, B (BK x BN at k0, col0) into bs[k * BN + n] with
// 16-byte copies where the rows allow it. Out-of-range elements are zero-filled.
template <int BM, int BN, int BK, int NT, int LDA>
__device__ __forceinline__ void cp_async_tiles(float* as, float* bs, const float* __restrict__ A,
                                               const float* __restrict__ B, int M, int N, int K, int row0, int col0,
                                               int k0, bool vecB) {
    static_assert((BM * BK) % NT == 0, "the threads must split the A tile evenly");
    static_assert((BN * BK / 4) % NT == 0, "the threads must split the B tile evenly in float4s");
#pragma unroll
    for (int r = 0; r < (BM * BK) / NT; ++r) {
        const int i = threadIdx.x + r * NT;  // consecutive threads walk k: coalesced reads
        const int m = i / BK, k = i % BK;
        const bool ok = (row0 + m < M) && (k0 + k < K);
        cp_async4(&as[k * LDA + m], ok ? A + (long long)(row0 + m) * K + k0 + k : A, ok);
    }
#pragma unroll
    for (int r = 0; r < (BN * BK / 4) / NT; ++r) {
        const int i = threadIdx.x + r * NT;
        const int k = i / (BN / 4), n = (i % (BN / 4)) * 4;
        const int gk = k0 + k, gn = col0 + n;
        float* dst = &bs[k * BN + n];
        if (vecB) {
            const int valid = (gk < K && gn < N) ? 4 * min(4, N - gn) : 0;
            cp_async16(dst, valid ? B + (long long)gk * N + gn : B, valid);
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const bool ok = gk < K && gn + j < N;
                cp_async4(dst + j, ok ? B + (long long)gk * N + gn + j : B, ok);
            }
        }
    }
}

}  // namespace gemmlab
