// Rung 3 - shared-memory cache blocking.
// Idea: the block stages a BLOCK x BLOCK tile of A and of B in shared memory, then every
//   thread reads its K-slice from there: each global element is loaded once per block
//   instead of once per thread, BLOCK times less global traffic.
// Should move: DRAM/L2 traffic falls ~BLOCK x; the bottleneck moves to shared-memory
//   loads (two LDS per FMA) - expect MIO-throttle stalls to dominate.
#include "common.cuh"

namespace gemmlab {

template <int BLOCK>
__global__ void sgemm_smem_blocking(int M, int N, int K, float alpha, const float* __restrict__ A,
                                    const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ float As[BLOCK * BLOCK];
    __shared__ float Bs[BLOCK * BLOCK];

    const int tr = threadIdx.x / BLOCK;  // row inside the tile
    const int tc = threadIdx.x % BLOCK;  // column inside the tile (consecutive per warp)
    const int row = blockIdx.y * BLOCK + tr;
    const int col = blockIdx.x * BLOCK + tc;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BLOCK) {
        // Out-of-range elements load as zero so the inner loop needs no predicates.
        As[tr * BLOCK + tc] = (row < M && k0 + tc < K) ? A[(long long)row * K + k0 + tc] : 0.0f;
        Bs[tr * BLOCK + tc] = (k0 + tr < K && col < N) ? B[(long long)(k0 + tr) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BLOCK; ++k) {
            acc += As[tr * BLOCK + k] * Bs[k * BLOCK + tc];
        }
        __syncthreads();  // nobody overwrites the tiles while others still read them
    }
    if (row < M && col < N) {
        epilogue(C, (long long)row * N + col, acc, alpha, beta);
    }
}

}  // namespace gemmlab
