// Rung 1 - naive.
// Idea: one thread per element of C, each reading a row of A and a column of B straight
//   from global memory. threadIdx.x walks the ROWS of C, so the 32 threads of a warp read
//   32 different rows of A (stride K) and write 32 rows of C: no coalescing at all.
// Should move: nothing yet - this is the floor every later rung is measured against
//   (global load efficiency ~1/32, DRAM and L1 throughput dominated by wasted sectors).
#include "common.cuh"

namespace gemmlab {

template <int BLOCK>
__global__ void sgemm_naive(int M, int N, int K, float alpha, const float* __restrict__ A,
                            const float* __restrict__ B, float beta, float* __restrict__ C) {
    const int row = blockIdx.x * BLOCK + threadIdx.x;  // x -> rows: the uncoalesced choice
    const int col = blockIdx.y * BLOCK + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += A[(long long)row * K + k] * B[(long long)k * N + col];
        }
        epilogue(C, (long long)row * N + col, acc, alpha, beta);
    }
}

}  // namespace gemmlab
