// Rung 4 - 1D blocktiling.
// Idea: each thread computes TM results of one column of C. The B value it needs for a
//   given k is loaded from shared memory once and reused TM times from a register, so
//   shared loads per FMA fall from 2 to (1 + TM) / TM.
// Should move: MIO-throttle stalls and LDS instructions per FMA fall ~TM/2 x; arithmetic
//   intensity per block rises with the larger BM x BN tile.
#include "common.cuh"

namespace gemmlab {

template <int BM, int BN, int BK, int TM>
__global__ void __launch_bounds__((BM * BN) / TM)
sgemm_blocktiling_1d(int M, int N, int K, float alpha, const float* __restrict__ A,
                     const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int NT = (BM * BN) / TM;
    static_assert(BM % TM == 0, "TM must divide BM");
    static_assert((BM * BK) % NT == 0, "the threads must split the A tile evenly");
    static_assert((BK * BN) % NT == 0, "the threads must split the B tile evenly");
    __shared__ float As[BM * BK];
    __shared__ float Bs[BK * BN];

    const int tid = threadIdx.x;
    const int col = tid % BN;         // this thread's column inside the tile
    const int row0 = (tid / BN) * TM;  // first of its TM rows
    const int blockRow = blockIdx.y * BM;
    const int blockCol = blockIdx.x * BN;

    float acc[TM] = {0.0f};
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
            const float b = Bs[k * BN + col];  // one shared load, TM uses
#pragma unroll
            for (int m = 0; m < TM; ++m) {
                acc[m] += As[(row0 + m) * BK + k] * b;
            }
        }
        __syncthreads();
    }
    const int gc = blockCol + col;
#pragma unroll
    for (int m = 0; m < TM; ++m) {
        const int gr = blockRow + row0 + m;
        if (gr < M && gc < N) {
            epilogue(C, (long long)gr * N + gc, acc[m], alpha, beta);
        }
    }
}

}  // namespace gemmlab
