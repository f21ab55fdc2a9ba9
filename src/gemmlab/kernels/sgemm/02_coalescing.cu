// Rung 2 - global-memory coalescing.
// Idea: same arithmetic as rung 1, but consecutive threads of a warp now take
//   consecutive COLUMNS of C: the warp reads one A element (broadcast) and 32 adjacent
//   B elements (one 128-byte line) per k, and writes 32 adjacent C elements.
// Should move: global load efficiency from ~1/32 to ~1; DRAM/L1 sectors per request fall
//   about 8x; expect several times rung 1's GFLOP/s.
#include "common.cuh"

namespace gemmlab {

template <int BLOCK>
__global__ void sgemm_coalescing(int M, int N, int K, float alpha, const float* __restrict__ A,
                                 const float* __restrict__ B, float beta, float* __restrict__ C) {
    // A 1-D block of BLOCK*BLOCK threads covers a BLOCK x BLOCK tile of C, row by row.
    const int row = blockIdx.y * BLOCK + threadIdx.x / BLOCK;
    const int col = blockIdx.x * BLOCK + threadIdx.x % BLOCK;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += A[(long long)row * K + k] * B[(long long)k * N + col];
        }
        epilogue(C, (long long)row * N + col, acc, alpha, beta);
    }
}

}  // namespace gemmlab
