// Rung 10 - warptiling.
// Idea: add the warp as a level between block and thread. Each warp owns a WM x WN
//   sub-tile of the block tile and walks it in WMITER x WNITER steps; inside one step its
//   32 threads cover a compact WSUBM x WSUBN patch, so the shared-memory addresses a warp
//   reads at once are few and contiguous (broadcasts, no conflicts) and a thread's
//   registers hold WMITER*TM + WNITER*TN fragment values reused across the whole warp tile.
// Should move: shared-memory wavefronts per request and MIO-throttle stalls fall; FFMA
//   share of issued instructions rises; registers per thread ~ WMITER*TM*WNITER*TN + frags.
#include "gmem_tiles.cuh"

namespace gemmlab {

template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int NT>
__global__ void __launch_bounds__(NT)
sgemm_warptiling(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                 float beta, float* __restrict__ C) {
    constexpr int WARPS = NT / 32;
    constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
    constexpr int WSUBM = WM / WMITER;
    constexpr int WSUBN = WN / WNITER;
    static_assert(NT % 32 == 0, "whole warps");
    static_assert((BM / WM) * (BN / WN) == WARPS, "the warp tiles must cover the block tile exactly");
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must divide the block tile");
    static_assert(WMITER >= 1 && (WM * WN) % (32 * TM * TN * WNITER) == 0, "WMITER must be a whole number");
    static_assert(WM % WMITER == 0 && WN % WNITER == 0, "sub-tiles must divide the warp tile");
    static_assert((WSUBM / TM) * (WSUBN / TN) == 32, "a warp's 32 threads must tile one sub-tile");
    static_assert(WSUBM % TM == 0 && WSUBN % TN == 0, "thread tiles must divide a sub-tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0 && BN % 4 == 0, "float4 granularity");

    __shared__ __align__(16) float As[BK * BM];  // transposed: As[k * BM + m]
    __shared__ __align__(16) float Bs[BK * BN];

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warpRow = warp / (BN / WN), warpCol = warp % (BN / WN);
    const int tRow = lane / (WSUBN / TN), tCol = lane % (WSUBN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool vecA = (K % 4 == 0) && aligned16(A);
    const bool vecB = (N % 4 == 0) && aligned16(B);
    const bool vecC = (N % 4 == 0) && aligned16(C);

    float acc[WMITER * TM][WNITER * TN] = {{0.0f}};
    float regM[WMITER * TM];
    float regN[WNITER * TN];

    for (int k0 = 0; k0 < K; k0 += BK) {
        load_a_transposed<BM, BK, NT, BM>(As, A, M, K, row0, k0, vecA);
        load_b<BN, BK, NT, BN>(Bs, B, K, N, k0, col0, vecB);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
                for (int i = 0; i < TM; i += 4) {
                    const float4 a = load_float4(&As[k * BM + warpRow * WM + wm * WSUBM + tRow * TM + i]);
                    regM[wm * TM + i + 0] = a.x; regM[wm * TM + i + 1] = a.y;
                    regM[wm * TM + i + 2] = a.z; regM[wm * TM + i + 3] = a.w;
                }
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int j = 0; j < TN; j += 4) {
                    const float4 b = load_float4(&Bs[k * BN + warpCol * WN + wn * WSUBN + tCol * TN + j]);
                    regN[wn * TN + j + 0] = b.x; regN[wn * TN + j + 1] = b.y;
                    regN[wn * TN + j + 2] = b.z; regN[wn * TN + j + 3] = b.w;
                }
#pragma unroll
            for (int m = 0; m < WMITER * TM; ++m)
#pragma unroll
                for (int n = 0; n < WNITER * TN; ++n) acc[m][n] += regM[m] * regN[n];
        }
        __syncthreads();
    }

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
