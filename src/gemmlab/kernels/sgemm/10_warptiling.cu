// Rung 10 - warptiling.
// Idea: add the warp as a level between block and thread. Each warp owns a WM x WN
//   sub-tile of the block tile and walks it in WMITER x WNITER steps; inside one step its
//   32 threads cover a compact WSUBM x WSUBN patch, so the shared-memory addresses a warp
//   reads at once are few and contiguous (broadcasts, no conflicts) and a thread's
//   registers hold WMITER*TM + WNITER*TN fragment values reused across the whole warp tile.
// Should move: shared-memory wavefronts per request and MIO-throttle stalls fall; FFMA
//   share of issued instructions rises; registers per thread ~ WMITER*TM*WNITER*TN + frags.
#include "warptile.cuh"

namespace gemmlab {

template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int NT>
__global__ void __launch_bounds__(NT)
sgemm_warptiling(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                 float beta, float* __restrict__ C) {
    using W = WarpTile<WM, WN, WNITER, TM, TN>;
    static_assert(NT % 32 == 0, "whole warps");
    static_assert((BM / WM) * (BN / WN) == NT / 32, "the warp tiles must cover the block tile exactly");
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must divide the block tile");
    static_assert(BK % 4 == 0 && BN % 4 == 0, "float4 granularity");

    __shared__ __align__(16) float As[BK * BM];  // transposed: As[k * BM + m]
    __shared__ __align__(16) float Bs[BK * BN];

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warpRow = warp / (BN / WN), warpCol = warp % (BN / WN);
    const int aOff = warpRow * WM + (lane / (W::WSUBN / TN)) * TM;  // first row of this thread's fragments
    const int bOff = warpCol * WN + (lane % (W::WSUBN / TN)) * TN;  // and first column
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool vecA = (K % 4 == 0) && aligned16(A);
    const bool vecB = (N % 4 == 0) && aligned16(B);
    const bool vecC = (N % 4 == 0) && aligned16(C);

    float acc[W::FM][W::FN] = {{0.0f}};
    float fa[W::FM];
    float fb[W::FN];

    for (int k0 = 0; k0 < K; k0 += BK) {
        load_a_transposed<BM, BK, NT, BM>(As, A, M, K, row0, k0, vecA);
        load_b<BN, BK, NT, BN>(Bs, B, K, N, k0, col0, vecB);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            W::template load<BM, BN>(As, Bs, k, aOff, bOff, fa, fb);
            W::fma(acc, fa, fb);
        }
        __syncthreads();
    }
    W::store(C, M, N, row0 + aOff, col0 + bOff, acc, alpha, beta, vecC);
}

}  // namespace gemmlab
