// Seed 004 - "Register Outer Product" (4 x 4 per thread, float4 loads).
// Idea: a DM x DN block owns a 4DM x 4DN tile of C; thread (ty, tx) keeps the 4 x 4 block
//   at rows 4*ty.., cols 4*tx.. in registers. For each k of the K-tile it reads a column
//   fragment a_reg[4] of A and a row fragment b_reg[4] of B (one float4 from shared
//   memory) and accumulates their outer product: 16 FMAs for 5 shared loads. Both tiles
//   come from global memory as float4 where the rows are 16-byte aligned.
// Should move: FMAs per shared-load instruction rise to 16/5 (LDS.128 for B) and global
//   load instructions fall ~4x, so issue slots go to FFMA: fewer MIO-throttle stalls and
//   higher SM throughput. Still scalar: the four A reads per k (rows 4*BK floats apart, so
//   a warp spanning several ty has bank conflicts) - s4_smem_transpose fixes that.
#include "common.cuh"

namespace gemmlab {
namespace detail {

// The four floats p[0..3] of which only the first n are in bounds (n may be <= 0 or > 4);
// the rest read as zero. vec: the caller proved p is 16-byte aligned.
__device__ __forceinline__ float4 fetch4(const float* __restrict__ p, int n, bool vec) {
    if (vec && n >= 4) return load_float4(p);
    float4 v;
    v.x = n > 0 ? p[0] : 0.0f;
    v.y = n > 1 ? p[1] : 0.0f;
    v.z = n > 2 ? p[2] : 0.0f;
    v.w = n > 3 ? p[3] : 0.0f;
    return v;
}

}  // namespace detail

template <int DM, int DN, int BK>
__global__ void __launch_bounds__(DM * DN)
sgemm_outer4x4(int M, int N, int K, float alpha, const float* __restrict__ A,
               const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int NT = DM * DN;  // threads per block; blockDim = (DN, DM)
    constexpr int BM = 4 * DM;   // rows of C per block
    constexpr int BN = 4 * DN;   // columns of C per block
    static_assert(DM >= 1 && DN >= 1 && BK >= 1, "sizes must be positive");
    static_assert(NT <= 1024, "at most 1024 threads per block");
    static_assert(BK % 4 == 0, "A tile rows are loaded as float4: BK % 4 == 0");
    static_assert(4 * (BM * BK + BK * BN) <= 48 * 1024, "static shared memory <= 48 KiB");

    __shared__ __align__(16) float As[BM][BK];
    __shared__ __align__(16) float Bs[BK][BN];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int tid = ty * DN + tx;
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;
    // Block-uniform: every row of A (B) starts 16-byte aligned when K (N) % 4 == 0 and the
    // base pointer is aligned; tile column offsets are multiples of 4.
    const bool vec_a = (K % 4 == 0) && aligned16(A);
    const bool vec_b = (N % 4 == 0) && aligned16(B);

    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // A tile (BM x BK) as float4s along K; consecutive threads take consecutive float4s.
        constexpr int VA = BM * BK / 4;
#pragma unroll
        for (int l = 0; l < (VA + NT - 1) / NT; ++l) {
            const int v = tid + l * NT;
            if (VA % NT == 0 || v < VA) {
                const int r = v / (BK / 4);
                const int c = (v % (BK / 4)) * 4;
                const int gr = row0 + r;
                const int gk = k0 + c;
                const bool in = gr < M && gk < K;
                store_float4(&As[r][c],
                             detail::fetch4(A + (in ? (long long)gr * K + gk : 0ll), in ? K - gk : 0, vec_a));
            }
        }
        // B tile (BK x BN) as float4s along N.
        constexpr int VB = BK * BN / 4;
#pragma unroll
        for (int l = 0; l < (VB + NT - 1) / NT; ++l) {
            const int v = tid + l * NT;
            if (VB % NT == 0 || v < VB) {
                const int r = v / DN;  // BN / 4 == DN float4s per row
                const int c = (v % DN) * 4;
                const int gk = k0 + r;
                const int gc = col0 + c;
                const bool in = gk < K && gc < N;
                store_float4(&Bs[r][c],
                             detail::fetch4(B + (in ? (long long)gk * N + gc : 0ll), in ? N - gc : 0, vec_b));
            }
        }
        __syncthreads();  // tiles complete before anyone reads them

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a_reg[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a_reg[i] = As[4 * ty + i][k];
            const float4 b4 = *reinterpret_cast<const float4*>(&Bs[k][4 * tx]);
            const float b_reg[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += a_reg[i] * b_reg[j];
        }
        __syncthreads();  // nobody overwrites the tiles while others still read them
    }

#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int row = row0 + 4 * ty + i;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int col = col0 + 4 * tx + j;
            if (row < M && col < N) epilogue(C, (long long)row * N + col, acc[i][j], alpha, beta);
        }
    }
}

}  // namespace gemmlab
