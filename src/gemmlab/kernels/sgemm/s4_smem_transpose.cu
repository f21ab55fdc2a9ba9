// Seed 004 - "A Shared Memory Transpose".
// Idea: store the A tile TRANSPOSED in shared memory (As[BK][BM]) so that, like B, a
//   column fragment of A is contiguous: the compute loop reads both fragments with float4
//   (LDS.128). A DM x DN block owns a (TM*DM) x (TN*DN) tile of C; thread (ty, tx) holds
//   TM x TN outputs made of 4 x 4 blocks at rows c*4*DM + 4*ty.. and columns
//   d*4*DN + 4*tx.. (c < TM/4, d < TN/4), so the float4 fragment reads of a warp stay
//   contiguous (B) or broadcast (A). Tiles come from global memory as float4 where aligned;
//   the transpose happens on the way into shared memory (four scalar stores).
// Should move: shared-load instructions per FMA fall to (TM + TN)/4 per TM*TN FMAs
//   (1/16 of an LDS per FMA at 8 x 8), so MIO-throttle stalls drop and FFMA issue rises
//   versus s4_outer_product. Expect some bank conflicts on the transposed A stores
//   (shared store wavefronts > requests) - that cost is paid once per tile, not per k.
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

template <int DM, int DN, int BK, int TM, int TN>
__global__ void __launch_bounds__(DM * DN)
sgemm_smem_transpose(int M, int N, int K, float alpha, const float* __restrict__ A,
                     const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int NT = DM * DN;  // threads per block; blockDim = (DN, DM)
    constexpr int BM = TM * DM;  // rows of C per block
    constexpr int BN = TN * DN;  // columns of C per block
    constexpr int FM = TM / 4;   // float4 fragments of A per thread and k
    constexpr int FN = TN / 4;   // float4 fragments of B per thread and k
    static_assert(DM >= 1 && DN >= 1 && BK >= 1 && TM >= 1 && TN >= 1, "sizes must be positive");
    static_assert(NT <= 1024, "at most 1024 threads per block");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "fragments are float4: TM % 4 == 0 and TN % 4 == 0");
    static_assert(BK % 4 == 0, "A tile rows are loaded as float4: BK % 4 == 0");
    static_assert(4 * (BK * BM + BK * BN) <= 48 * 1024, "static shared memory <= 48 KiB");

    __shared__ __align__(16) float As[BK][BM];  // transposed: As[k][m] = A[row0 + m][k0 + k]
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

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // A tile (BM x BK): float4 along K from global, four scalar stores down As's columns.
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
                const float4 x = detail::fetch4(A + (in ? (long long)gr * K + gk : 0ll), in ? K - gk : 0, vec_a);
                As[c + 0][r] = x.x;
                As[c + 1][r] = x.y;
                As[c + 2][r] = x.z;
                As[c + 3][r] = x.w;
            }
        }
        // B tile (BK x BN) as float4s along N, not transposed.
        constexpr int VB = BK * BN / 4;
#pragma unroll
        for (int l = 0; l < (VB + NT - 1) / NT; ++l) {
            const int v = tid + l * NT;
            if (VB % NT == 0 || v < VB) {
                const int r = v / (BN / 4);
                const int c = (v % (BN / 4)) * 4;
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
            float a_reg[TM];
            float b_reg[TN];
#pragma unroll
            for (int f = 0; f < FM; ++f) {
                const float4 a4 = *reinterpret_cast<const float4*>(&As[k][f * 4 * DM + 4 * ty]);
                a_reg[4 * f + 0] = a4.x;
                a_reg[4 * f + 1] = a4.y;
                a_reg[4 * f + 2] = a4.z;
                a_reg[4 * f + 3] = a4.w;
            }
#pragma unroll
            for (int f = 0; f < FN; ++f) {
                const float4 b4 = *reinterpret_cast<const float4*>(&Bs[k][f * 4 * DN + 4 * tx]);
                b_reg[4 * f + 0] = b4.x;
                b_reg[4 * f + 1] = b4.y;
                b_reg[4 * f + 2] = b4.z;
                b_reg[4 * f + 3] = b4.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a_reg[i] * b_reg[j];
        }
        __syncthreads();  // nobody overwrites the tiles while others still read them
    }

    // acc[4*f + i][4*g + j] is C[row0 + f*4*DM + 4*ty + i][col0 + g*4*DN + 4*tx + j].
#pragma unroll
    for (int f = 0; f < FM; ++f) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int row = row0 + f * 4 * DM + 4 * ty + i;
#pragma unroll
            for (int g = 0; g < FN; ++g) {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int col = col0 + g * 4 * DN + 4 * tx + j;
                    if (row < M && col < N)
                        epilogue(C, (long long)row * N + col, acc[4 * f + i][4 * g + j], alpha, beta);
                }
            }
        }
    }
}

}  // namespace gemmlab
