// Seed 004 - "Increase Work Per Thread" (strided S x S mapping).
// Idea: a D x D block owns an L x L tile of C with L = S*D, and thread (ty, tx) computes
//   the S x S outputs (ty + i*D, tx + j*D): outputs strided by D, so at every step i, j
//   the D threads of a row still read D consecutive floats of the B tile and write D
//   consecutive floats of C (conflict-free, coalesced) while each thread keeps S*S
//   accumulators. Each A value read from shared memory feeds S FMAs, each B value S.
// Should move: arithmetic intensity per block rises S x (global and shared loads per FMA
//   fall from 2 to 2/S): fewer MIO-throttle stalls and more FMAs per issued instruction
//   than seed 004's "Shared_memory" (s4_shared_memory), at lower occupancy.
#include "common.cuh"

namespace gemmlab {

template <int D, int BK, int S>
__global__ void __launch_bounds__(D * D)
sgemm_strided(int M, int N, int K, float alpha, const float* __restrict__ A,
              const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int NT = D * D;  // threads per block
    constexpr int L = S * D;   // side of the block's tile of C
    static_assert(D >= 1 && BK >= 1 && S >= 1, "sizes must be positive");
    static_assert(NT <= 1024, "at most 1024 threads per block");
    static_assert(4 * 2 * L * BK <= 48 * 1024, "static shared memory <= 48 KiB");

    __shared__ float As[L][BK];
    __shared__ float Bs[BK][L];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int tid = ty * D + tx;
    const int row0 = blockIdx.y * L;
    const int col0 = blockIdx.x * L;

    float acc[S][S];
#pragma unroll
    for (int i = 0; i < S; ++i)
#pragma unroll
        for (int j = 0; j < S; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // Consecutive threads load consecutive elements of a tile row (coalesced); the
        // loops stride by the thread count and out-of-range elements load as zero.
        constexpr int E = L * BK;  // elements per tile (both tiles have L * BK)
#pragma unroll
        for (int l = 0; l < (E + NT - 1) / NT; ++l) {
            const int e = tid + l * NT;
            if (E % NT == 0 || e < E) {
                const int r = e / BK;
                const int c = e % BK;
                const int gr = row0 + r;
                const int gk = k0 + c;
                As[r][c] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.0f;
            }
        }
#pragma unroll
        for (int l = 0; l < (E + NT - 1) / NT; ++l) {
            const int e = tid + l * NT;
            if (E % NT == 0 || e < E) {
                const int r = e / L;
                const int c = e % L;
                const int gk = k0 + r;
                const int gc = col0 + c;
                Bs[r][c] = (gk < K && gc < N) ? B[(long long)gk * N + gc] : 0.0f;
            }
        }
        __syncthreads();  // tiles complete before anyone reads them

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[S];
            float b[S];
#pragma unroll
            for (int i = 0; i < S; ++i) a[i] = As[ty + i * D][k];
#pragma unroll
            for (int j = 0; j < S; ++j) b[j] = Bs[k][tx + j * D];
#pragma unroll
            for (int i = 0; i < S; ++i)
#pragma unroll
                for (int j = 0; j < S; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();  // nobody overwrites the tiles while others still read them
    }

#pragma unroll
    for (int i = 0; i < S; ++i) {
        const int row = row0 + ty + i * D;
#pragma unroll
        for (int j = 0; j < S; ++j) {
            const int col = col0 + tx + j * D;
            if (row < M && col < N) epilogue(C, (long long)row * N + col, acc[i][j], alpha, beta);
        }
    }
}

}  // namespace gemmlab
