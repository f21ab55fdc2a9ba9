// Rung 5 - 2D blocktiling.
// Idea: each thread computes a TM x TN block of C as an outer product of TM values of A
//   and TN values of B held in registers: TM + TN shared loads feed TM * TN FMAs.
// Should move: shared loads per FMA fall from (1+TM)/TM to (TM+TN)/(TM*TN) (1/4 for 8x8);
//   FFMA share of issued instructions rises; registers per thread rise (~128).
#include "common.cuh"

namespace gemmlab {

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_blocktiling_2d(int M, int N, int K, float alpha, const float* __restrict__ A,
                     const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int NT = (BM / TM) * (BN / TN);
    static_assert(BM % TM == 0 && BN % TN == 0, "thread tiles must divide the block tile");
    static_assert((BM * BK) % NT == 0, "the threads must split the A tile evenly");
    static_assert((BK * BN) % NT == 0, "the threads must split the B tile evenly");
    __shared__ float As[BM * BK];
    __shared__ float Bs[BK * BN];

    const int tid = threadIdx.x;
    const int row0 = (tid / (BN / TN)) * TM;
    const int col0 = (tid % (BN / TN)) * TN;
    const int blockRow = blockIdx.y * BM;
    const int blockCol = blockIdx.x * BN;

    float acc[TM][TN] = {{0.0f}};
    float regM[TM];
    float regN[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int r = 0; r < (BM * BK) / NT; ++r) {
            const int i = tid + r * NT;
            const int gr = blockRow + i / BK, gk = k0 + i % BK;
            As[i] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < (BK * BN) / NT; ++r) {
            const int i = tid + r * NT;
            const int gk = k0 + i / BN, gc = blockCol + i % BN;
            Bs[i] = (gk < K && gc < N) ? B[(long long)gk * N + gc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int m = 0; m < TM; ++m) regM[m] = As[(row0 + m) * BK + k];
#pragma unroll
            for (int n = 0; n < TN; ++n) regN[n] = Bs[k * BN + col0 + n];
#pragma unroll
            for (int m = 0; m < TM; ++m)
#pragma unroll
                for (int n = 0; n < TN; ++n) acc[m][n] += regM[m] * regN[n];
        }
        __syncthreads();
    }
#pragma unroll
    for (int m = 0; m < TM; ++m) {
        const int gr = blockRow + row0 + m;
#pragma unroll
        for (int n = 0; n < TN; ++n) {
            const int gc = blockCol + col0 + n;
            if (gr < M && gc < N) epilogue(C, (long long)gr * N + gc, acc[m][n], alpha, beta);
        }
    }
}

}  // namespace gemmlab
