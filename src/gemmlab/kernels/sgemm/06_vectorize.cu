// Rung 6 - vectorised memory access (float4) with A transposed in shared memory.
// Idea: global loads and C stores move 16 bytes per instruction (LDG.E.128/STG.E.128),
//   and A is stored transposed (As[k][m]) so a thread's TM values of A, like its TN values
//   of B, are contiguous in shared memory and load as LDS.128.
// Should move: global and shared load instructions fall ~4x; SASS shows LDS.128 and
//   LDG.E.128; the scalar path (unaligned rows, edge tiles) keeps every shape correct.
#include "common.cuh"

namespace gemmlab {

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_vectorize(int M, int N, int K, float alpha, const float* __restrict__ A,
                const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int NT = (BM / TM) * (BN / TN);
    static_assert(BM % TM == 0 && BN % TN == 0, "thread tiles must divide the block tile");
    static_assert(BK % 4 == 0 && BN % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "float4 granularity");
    static_assert((BM * BK / 4) % NT == 0, "the threads must split the A tile evenly in float4s");
    static_assert((BK * BN / 4) % NT == 0, "the threads must split the B tile evenly in float4s");
    __shared__ __align__(16) float As[BK * BM];  // transposed: As[k * BM + m]
    __shared__ __align__(16) float Bs[BK * BN];

    const int tid = threadIdx.x;
    const int row0 = (tid / (BN / TN)) * TM;
    const int col0 = (tid % (BN / TN)) * TN;
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
                const float* p = A + (long long)gr * K;
                const bool row_ok = gr < M;
                v.x = (row_ok && gk + 0 < K) ? p[gk + 0] : 0.0f;
                v.y = (row_ok && gk + 1 < K) ? p[gk + 1] : 0.0f;
                v.z = (row_ok && gk + 2 < K) ? p[gk + 2] : 0.0f;
                v.w = (row_ok && gk + 3 < K) ? p[gk + 3] : 0.0f;
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
                const float* p = B + (long long)gk * N;
                const bool row_ok = gk < K;
                v.x = (row_ok && gc + 0 < N) ? p[gc + 0] : 0.0f;
                v.y = (row_ok && gc + 1 < N) ? p[gc + 1] : 0.0f;
                v.z = (row_ok && gc + 2 < N) ? p[gc + 2] : 0.0f;
                v.w = (row_ok && gc + 3 < N) ? p[gc + 3] : 0.0f;
            }
            store_float4(&Bs[k * BN + c], v);
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
            for (int n = 0; n < TN; n += 4) {
                const float4 b = load_float4(&Bs[k * BN + col0 + n]);
                regN[n] = b.x; regN[n + 1] = b.y; regN[n + 2] = b.z; regN[n + 3] = b.w;
            }
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
        if (gr >= M) break;
#pragma unroll
        for (int n = 0; n < TN; n += 4) {
            const int gc = blockCol + col0 + n;
            float* p = C + (long long)gr * N + gc;
            if (vecC && gc + 3 < N) {
                float4 out;
                if (beta == 0.0f) {  // C is not read when beta == 0
                    out = make_float4(alpha * acc[m][n], alpha * acc[m][n + 1], alpha * acc[m][n + 2],
                                      alpha * acc[m][n + 3]);
                } else {
                    const float4 c = load_float4(p);
                    out = make_float4(alpha * acc[m][n] + beta * c.x, alpha * acc[m][n + 1] + beta * c.y,
                                      alpha * acc[m][n + 2] + beta * c.z, alpha * acc[m][n + 3] + beta * c.w);
                }
                store_float4(p, out);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (gc + j < N) epilogue(C, (long long)gr * N + gc + j, acc[m][n + j], alpha, beta);
                }
            }
        }
    }
}

}  // namespace gemmlab
