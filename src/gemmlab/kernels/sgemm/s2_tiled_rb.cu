// Seed 002 - "tiled", "tiled_rb1x4", "tiled_rb2x4" as one template (seed 004's
// "Shared_memory" and "Using Float4" are points of it too).
// Idea: a TS x TS block stages a (TS*RM) x BK tile of A and a BK x (TS*RN) tile of B in
//   shared memory; each thread then keeps an RM x RN block of CONTIGUOUS outputs
//   (rows RM*ty.., cols RN*tx..) in registers, so every value it reads from shared memory
//   feeds RN (for A) or RM (for B) FMAs instead of one. RM = RN = 1 is plain tiling.
//   VEC is the width of the global loads: 1 = scalar, 4 = float4 where the rows allow it.
// Should move: shared loads per FMA fall from 2 to 1/RN + 1/RM, so MIO-throttle and
//   barrier stalls per instruction fall (seed 002: 20 -> 13 -> 4.7 cycles MIO throttle for
//   1x1 -> 1x4 -> 2x4) at the price of occupancy; VEC = 4 cuts global load instructions ~4x.
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

template <int TS, int BK, int RM, int RN, int VEC>
__global__ void __launch_bounds__(TS * TS)
sgemm_tiled_rb(int M, int N, int K, float alpha, const float* __restrict__ A,
               const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int NT = TS * TS;  // threads per block
    constexpr int BM = TS * RM;  // rows of C per block
    constexpr int BN = TS * RN;  // columns of C per block
    static_assert(TS >= 1 && BK >= 1 && RM >= 1 && RN >= 1, "sizes must be positive");
    static_assert(NT <= 1024, "at most 1024 threads per block");
    static_assert(VEC == 1 || VEC == 4, "VEC (global load width) is 1 or 4");
    static_assert(VEC == 1 || BN % 4 == 0, "float4 B loads need TS*RN % 4 == 0");
    static_assert(4 * (BM * BK + BK * BN) <= 48 * 1024, "static shared memory <= 48 KiB");
    // float4 A loads need whole float4s along a K-tile row; otherwise A stays scalar.
    constexpr bool VEC_A = VEC == 4 && BK % 4 == 0;
    constexpr bool VEC_B = VEC == 4;

    __shared__ __align__(16) float As[BM][BK];
    __shared__ __align__(16) float Bs[BK][BN];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int tid = ty * TS + tx;
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;
    // Block-uniform: rows of A (B) start 16-byte aligned when K (N) % 4 == 0 and the base is
    // aligned; tile column offsets are multiples of 4 (BK % 4 == 0, BN % 4 == 0).
    const bool vec_a = VEC_A && (K % 4 == 0) && aligned16(A);
    const bool vec_b = VEC_B && (N % 4 == 0) && aligned16(B);

    float acc[RM][RN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < RN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // ---- A tile (BM x BK): out-of-range elements load as zero ----
        if constexpr (VEC_A) {
            constexpr int V = BM * BK / 4;  // float4s in the tile
#pragma unroll
            for (int l = 0; l < (V + NT - 1) / NT; ++l) {
                const int v = tid + l * NT;
                if (V % NT == 0 || v < V) {
                    const int r = v / (BK / 4);
                    const int c = (v % (BK / 4)) * 4;
                    const int gr = row0 + r;
                    const int gk = k0 + c;
                    const bool in = gr < M && gk < K;  // no pointer is formed past the data
                    const float4 x = detail::fetch4(A + (in ? (long long)gr * K + gk : 0ll), in ? K - gk : 0, vec_a);
                    store_float4(&As[r][c], x);
                }
            }
        } else {
            constexpr int E = BM * BK;
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
        }
        // ---- B tile (BK x BN) ----
        if constexpr (VEC_B) {
            constexpr int V = BK * BN / 4;
#pragma unroll
            for (int l = 0; l < (V + NT - 1) / NT; ++l) {
                const int v = tid + l * NT;
                if (V % NT == 0 || v < V) {
                    const int r = v / (BN / 4);
                    const int c = (v % (BN / 4)) * 4;
                    const int gk = k0 + r;
                    const int gc = col0 + c;
                    const bool in = gk < K && gc < N;
                    const float4 x = detail::fetch4(B + (in ? (long long)gk * N + gc : 0ll), in ? N - gc : 0, vec_b);
                    store_float4(&Bs[r][c], x);
                }
            }
        } else {
            constexpr int E = BK * BN;
#pragma unroll
            for (int l = 0; l < (E + NT - 1) / NT; ++l) {
                const int e = tid + l * NT;
                if (E % NT == 0 || e < E) {
                    const int r = e / BN;
                    const int c = e % BN;
                    const int gk = k0 + r;
                    const int gc = col0 + c;
                    Bs[r][c] = (gk < K && gc < N) ? B[(long long)gk * N + gc] : 0.0f;
                }
            }
        }
        __syncthreads();  // tiles complete before anyone reads them

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[RM];
            float b[RN];
#pragma unroll
            for (int i = 0; i < RM; ++i) a[i] = As[ty * RM + i][k];
#pragma unroll
            for (int j = 0; j < RN; ++j) b[j] = Bs[k][tx * RN + j];
#pragma unroll
            for (int i = 0; i < RM; ++i)
#pragma unroll
                for (int j = 0; j < RN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();  // nobody overwrites the tiles while others still read them
    }

#pragma unroll
    for (int i = 0; i < RM; ++i) {
        const int row = row0 + ty * RM + i;
#pragma unroll
        for (int j = 0; j < RN; ++j) {
            const int col = col0 + tx * RN + j;
            if (row < M && col < N) epilogue(C, (long long)row * N + col, acc[i][j], alpha, beta);
        }
    }
}

}  // namespace gemmlab
