// Rung 12 - multi-stage pipeline with asynchronous copies (cp.async).
// Idea: rung 10's warptiled compute, fed by a STAGES-deep ring of shared-memory tiles
//   filled with cp.async: the copies for tile t+STAGES-1 are in flight while tile t is
//   computed, they skip the register file, and one __syncthreads per tile suffices.
//   A is transposed on the way in with 4-byte copies (As[k][m], rows padded by PADA floats
//   so the transposing writes spread over the banks); B moves in 16-byte copies.
// Should move: long-scoreboard stalls (waiting on global loads) fall; barrier stalls
//   fall (one barrier per K-tile instead of two); registers no longer stage tiles.
#include "common.cuh"
#include "async_copy.cuh"
#include "gmem_tiles.cuh"

namespace gemmlab {

template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int NT, int STAGES, int PADA>
__global__ void __launch_bounds__(NT)
sgemm_async_pipeline(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                     float beta, float* __restrict__ C) {
    constexpr int WARPS = NT / 32;
    constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
    constexpr int WSUBM = WM / WMITER;
    constexpr int WSUBN = WN / WNITER;
    constexpr int LDA = BM + PADA;
    constexpr int A_STAGE = BK * LDA;  // floats per stage
    constexpr int B_STAGE = BK * BN;
    static_assert(NT % 32 == 0 && (BM / WM) * (BN / WN) == WARPS, "the warp tiles must cover the block tile");
    static_assert(WMITER >= 1 && (WM * WN) % (32 * TM * TN * WNITER) == 0, "WMITER must be a whole number");
    static_assert((WSUBM / TM) * (WSUBN / TN) == 32, "a warp's 32 threads must tile one sub-tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BN % 4 == 0 && PADA % 4 == 0, "16-byte granularity");
    static_assert((BM * BK) % NT == 0, "the threads must split the A tile evenly");
    static_assert((BN * BK / 4) % NT == 0, "the threads must split the B tile evenly in float4s");
    static_assert(STAGES >= 2, "a pipeline needs at least two stages");

    extern __shared__ __align__(16) float smem[];
    float* As = smem;                     // STAGES x [BK][LDA]
    float* Bs = smem + STAGES * A_STAGE;  // STAGES x [BK][BN]

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warpRow = warp / (BN / WN), warpCol = warp % (BN / WN);
    const int tRow = lane / (WSUBN / TN), tCol = lane % (WSUBN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool vecB = (N % 4 == 0) && aligned16(B);
    const bool vecC = (N % 4 == 0) && aligned16(C);
    const int tiles = (K + BK - 1) / BK;

    // Issue the copies of K-tile `t` into stage `s` (nothing, past the last tile).
    auto load_tile = [&](int t, int s) {
        if (t >= tiles) return;
        const int k0 = t * BK;
        float* as = As + s * A_STAGE;
        float* bs = Bs + s * B_STAGE;
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
    };

    float acc[WMITER * TM][WNITER * TN] = {{0.0f}};
    float regM[WMITER * TM];
    float regN[WNITER * TN];

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        load_tile(s, s);
        cp_async_commit();  // one group per stage, even when empty, so the counting stays uniform
    }
    for (int t = 0; t < tiles; ++t) {
        // This thread's copies of tile t have landed; the barrier makes everyone's visible
        // and guarantees that nobody still computes on the stage about to be refilled
        // (the one tile t-1 used).
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        load_tile(t + STAGES - 1, (t + STAGES - 1) % STAGES);
        cp_async_commit();

        const float* as = As + (t % STAGES) * A_STAGE;
        const float* bs = Bs + (t % STAGES) * B_STAGE;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
                for (int i = 0; i < TM; i += 4) {
                    const float4 a = load_float4(&as[k * LDA + warpRow * WM + wm * WSUBM + tRow * TM + i]);
                    regM[wm * TM + i + 0] = a.x; regM[wm * TM + i + 1] = a.y;
                    regM[wm * TM + i + 2] = a.z; regM[wm * TM + i + 3] = a.w;
                }
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int j = 0; j < TN; j += 4) {
                    const float4 b = load_float4(&bs[k * BN + warpCol * WN + wn * WSUBN + tCol * TN + j]);
                    regN[wn * TN + j + 0] = b.x; regN[wn * TN + j + 1] = b.y;
                    regN[wn * TN + j + 2] = b.z; regN[wn * TN + j + 3] = b.w;
                }
#pragma unroll
            for (int m = 0; m < WMITER * TM; ++m)
#pragma unroll
                for (int n = 0; n < WNITER * TN; ++n) acc[m][n] += regM[m] * regN[n];
        }
    }
    cp_async_wait<0>();  // no copy may still target shared memory when the block exits

#pragma unroll
    for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int r = row0 + warpRow * WM + wm * WSUBM + tRow * TM + i;
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int j = 0; j < TN; j += 4) {
                    const int c = col0 + warpCol * WN + wn * WSUBN + tCol * TN + j;
                    const float* a = &acc[wm * TM + i][wn * TN + j];
                    store4(C, M, N, r, c, make_float4(a[0], a[1], a[2], a[3]), alpha, beta, vecC);
                }
        }
}

}  // namespace gemmlab
