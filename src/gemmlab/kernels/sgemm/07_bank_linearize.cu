// Rung 7 - shared-memory bank conflicts removed by a linearised (permuted) Bs layout.
// Idea: store each row of Bs with its columns permuted so that the float4s the thread
//   columns read at the same time lie side by side: the warp's LDS.128 of its TN values of
//   B hit distinct banks (rung 6's reads of B are 2-way conflicted); no extra shared memory,
//   still one STS.128 per float4 of B. Everything else is rung 6 unchanged.
// Should move: shared load bank conflicts (ncu l1tex__data_bank_conflicts_pipe_lsu_mem_
//   shared_op_ld; shared wavefronts per LDS.128 of B 4 -> 2) drop to ~0; shared stores
//   unchanged (A's transposed scalar stores keep their 2-way conflict: rung 8 pads that);
//   throughput at least rung 6's, more where the kernel is shared-memory bound.
// Layout: rung 6 keeps Bs in row order, Bs[k][c]. Thread column tc (TC = BN/TN of them)
//   reads its TN values of row k as TN/4 LDS.128 at columns tc*TN + 4h (h = 0..TN/4-1).
//   With TN = 8 the 16 thread columns of a warp start 32 bytes apart, so only every other
//   group of 4 banks is used and each used group holds 4 different float4s: 4 shared
//   wavefronts per B fragment load where 2 would do. Rung 7 stores
//       column c = tc*TN + 4h + j   (tc = c / TN, h = (c % TN) / 4, j = c % 4)
//       at Bs[k*BN + h*(4*TC) + tc*4 + j]
//   i.e. row k holds first the h = 0 quarter-slices of all thread columns, then the h = 1
//   ones, and so on; chunk h of thread column tc is read at h*(4*TC) + tc*4, consecutive
//   float4s across the warp (the minimum number of wavefronts). Because TN % 4 == 0, the
//   4 columns c..c+3 of one float4 of B (c % 4 == 0) always belong to one thread column and
//   chunk, so the global->shared copy stays one STS.128 per float4, to a permuted address
//   (a warp's 32 STS.128 still cover 512 contiguous bytes: no store conflict either). With
//   TN = 4 the permutation is the identity. The seed's kernel 7 linearises with scalar
//   stores and hard-wired BN = 128, TN = 8; this is the same idea for any BN, TN that keeps
//   the 16-byte accesses (the seed's write-up blames its slowdown on losing them).
#include "common.cuh"

namespace gemmlab {

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_bank_linearize(int M, int N, int K, float alpha, const float* __restrict__ A,
                     const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int TC = BN / TN;  // thread columns of the block
    constexpr int NT = (BM / TM) * TC;
    static_assert(BM % TM == 0 && BN % TN == 0, "thread tiles must divide the block tile");
    static_assert(BK % 4 == 0 && BN % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "float4 granularity");
    static_assert((BM * BK / 4) % NT == 0, "the threads must split the A tile evenly in float4s");
    static_assert((BK * BN / 4) % NT == 0, "the threads must split the B tile evenly in float4s");
    __shared__ __align__(16) float As[BK * BM];  // transposed: As[k * BM + m]
    __shared__ __align__(16) float Bs[BK * BN];  // linearised: column c of row k at k*BN + lin(c)

    const int tid = threadIdx.x;
    const int tc = tid % TC;
    const int row0 = (tid / TC) * TM;
    const int blockRow = blockIdx.y * BM;
    const int blockCol = blockIdx.x * BN;
    // float4 global access needs every row start 16-byte aligned.
    const bool vecA = (K % 4 == 0) && aligned16(A);
    const bool vecB = (N % 4 == 0) && aligned16(B);
    const bool vecC = (N % 4 == 0) && aligned16(C);

    float acc[TM][TN] = {{0.0f}};
    float regM[TM];
    float regN[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int r = 0; r < (BM * BK / 4) / NT; ++r) {
            const int i = tid + r * NT;  // which float4 of the BM x BK tile
            const int m = i / (BK / 4), k = (i % (BK / 4)) * 4;
            const int gr = blockRow + m, gk = k0 + k;
            float4 v;
            if (vecA && gr < M && gk + 3 < K) {
                v = load_float4(A + (long long)gr * K + gk);
            } else {
                const bool row_ok = gr < M;
                const long long base = (long long)gr * K;
                v.x = (row_ok && gk + 0 < K) ? A[base + gk + 0] : 0.0f;
                v.y = (row_ok && gk + 1 < K) ? A[base + gk + 1] : 0.0f;
                v.z = (row_ok && gk + 2 < K) ? A[base + gk + 2] : 0.0f;
                v.w = (row_ok && gk + 3 < K) ? A[base + gk + 3] : 0.0f;
            }
            As[(k + 0) * BM + m] = v.x;
            As[(k + 1) * BM + m] = v.y;
            As[(k + 2) * BM + m] = v.z;
            As[(k + 3) * BM + m] = v.w;
        }
#pragma unroll
        for (int r = 0; r < (BK * BN / 4) / NT; ++r) {
            const int i = tid + r * NT;
            const int k = i / (BN / 4), c = (i % (BN / 4)) * 4;
            const int gk = k0 + k, gc = blockCol + c;
            float4 v;
            if (vecB && gk < K && gc + 3 < N) {
                v = load_float4(B + (long long)gk * N + gc);
            } else {
                const bool row_ok = gk < K;
                const long long base = (long long)gk * N;
                v.x = (row_ok && gc + 0 < N) ? B[base + gc + 0] : 0.0f;
                v.y = (row_ok && gc + 1 < N) ? B[base + gc + 1] : 0.0f;
                v.z = (row_ok && gc + 2 < N) ? B[base + gc + 2] : 0.0f;
                v.w = (row_ok && gc + 3 < N) ? B[base + gc + 3] : 0.0f;
            }
            // c..c+3 belong to thread column c / TN, chunk (c % TN) / 4: one permuted float4
            store_float4(&Bs[k * BN + ((c % TN) / 4) * (4 * TC) + (c / TN) * 4], v);
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int m = 0; m < TM; m += 4) {
                const float4 a = load_float4(&As[k * BM + row0 + m]);
                regM[m] = a.x; regM[m + 1] = a.y; regM[m + 2] = a.z; regM[m + 3] = a.w;
            }
#pragma unroll
            for (int n = 0; n < TN; n += 4) {  // chunk h = n / 4: TC consecutive float4s
                const float4 b = load_float4(&Bs[k * BN + (n / 4) * (4 * TC) + tc * 4]);
                regN[n] = b.x; regN[n + 1] = b.y; regN[n + 2] = b.z; regN[n + 3] = b.w;
            }
#pragma unroll
            for (int m = 0; m < TM; ++m)
#pragma unroll
                for (int n = 0; n < TN; ++n) acc[m][n] += regM[m] * regN[n];
        }
        __syncthreads();
    }
    const int col0 = tc * TN;
#pragma unroll
    for (int m = 0; m < TM; ++m) {
        const int gr = blockRow + row0 + m;
        if (gr >= M) break;
#pragma unroll
        for (int n = 0; n < TN; n += 4) {
            const int gc = blockCol + col0 + n;
            const long long idx = (long long)gr * N + gc;
            if (vecC && gc + 3 < N) {
                float4 out;
                if (beta == 0.0f) {  // C is not read when beta == 0
                    out = make_float4(alpha * acc[m][n], alpha * acc[m][n + 1], alpha * acc[m][n + 2],
                                      alpha * acc[m][n + 3]);
                } else {
                    const float4 c = load_float4(C + idx);
                    out = make_float4(alpha * acc[m][n] + beta * c.x, alpha * acc[m][n + 1] + beta * c.y,
                                      alpha * acc[m][n + 2] + beta * c.z, alpha * acc[m][n + 3] + beta * c.w);
                }
                store_float4(C + idx, out);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (gc + j < N) epilogue(C, idx + j, acc[m][n + j], alpha, beta);
                }
            }
        }
    }
}

}  // namespace gemmlab
