// Rung 14 - FP32-accurate GEMM on the tensor cores (3xTF32), beyond the SIMT ladder.
// Idea: a tensor core multiplies TF32 (10-bit mantissa) operands. Split each fp32 value
//   into big = tf32(x) and small = tf32(x - big): big + small carries ~22 of fp32's 24
//   mantissa bits. Then a*b ~ a_big*b_big + a_big*b_small + a_small*b_big (the dropped
//   a_small*b_small term is ~2^-22 relative), three mma.sync.m16n8k8.tf32 with fp32
//   accumulation instead of one FFMA per product: the FP32 answer at tensor-core speed.
//   The harness checks it against the same fp64 bounds as every FP32 rung; plain 1xTF32
//   would fail them (relative error ~1e-4).
// Should move: the SASS holds HMMA instead of FFMA; the FMA-pipe ceiling (67 TFLOP/s)
//   no longer binds, so time falls below cuBLAS's FP32 SIMT kernels.
// Layout: block BM x BN, warps of WM x WN, K-tiles of BK staged by a STAGES-deep cp.async
//   ring. A tile row-major with stride BK+4 and B tile with stride BN+8 make the fragment
//   reads conflict-free (lane g = lane/4, t = lane%4 hits bank 4g+t, resp. 8t+g).
#include "common.cuh"
#include "async_copy.cuh"

namespace gemmlab {

__device__ __forceinline__ unsigned to_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

// Split x into tf32 big and small parts (as 32-bit patterns the mma reads).
__device__ __forceinline__ void split_tf32(float x, unsigned& big, unsigned& small) {
    big = to_tf32(x);
    small = to_tf32(x - __uint_as_float(big));
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
sgemm_tf32x3(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
             float beta, float* __restrict__ C) {
    constexpr int NT = (BM / WM) * (BN / WN) * 32;
    constexpr int MI = WM / 16;  // mma tiles per warp along M
    constexpr int NI = WN / 8;   // and along N
    constexpr int LDA = BK + 4;
    constexpr int LDB = BN + 8;
    constexpr int A_STAGE = BM * LDA;
    constexpr int B_STAGE = BK * LDB;
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 8 == 0, "warp tiles of whole mma tiles");
    static_assert(BK % 8 == 0, "K-tiles of whole k8 steps");
    static_assert((BM * BK / 4) % NT == 0 && (BK * BN / 4) % NT == 0, "threads split the tiles in float4s");
    static_assert(STAGES >= 2, "a pipeline needs two stages");

    extern __shared__ __align__(16) float smem[];
    float* As = smem;
    float* Bs = smem + STAGES * A_STAGE;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wRow = (warp / (BN / WN)) * WM, wCol = (warp % (BN / WN)) * WN;
    const int g = lane / 4, t = lane % 4;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool vecA = (K % 4 == 0) && aligned16(A);
    const bool vecB = (N % 4 == 0) && aligned16(B);
    const int tiles = (K + BK - 1) / BK;

    auto load_tile = [&](int kt, int s) {
        if (kt >= tiles) return;
        const int k0 = kt * BK;
        float* as = As + s * A_STAGE;
        float* bs = Bs + s * B_STAGE;
#pragma unroll
        for (int r = 0; r < (BM * BK / 4) / NT; ++r) {
            const int i = threadIdx.x + r * NT;
            const int m = i / (BK / 4), k = (i % (BK / 4)) * 4;
            const int gm = row0 + m, gk = k0 + k;
            float* dst = &as[m * LDA + k];
            if (vecA) {
                const int valid = (gm < M && gk < K) ? 4 * min(4, K - gk) : 0;
                cp_async16(dst, valid ? A + (long long)gm * K + gk : A, valid);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const bool ok = gm < M && gk + j < K;
                    cp_async4(dst + j, ok ? A + (long long)gm * K + gk + j : A, ok);
                }
            }
        }
#pragma unroll
        for (int r = 0; r < (BK * BN / 4) / NT; ++r) {
            const int i = threadIdx.x + r * NT;
            const int k = i / (BN / 4), n = (i % (BN / 4)) * 4;
            const int gk = k0 + k, gn = col0 + n;
            float* dst = &bs[k * LDB + n];
            if (vecB) {
                const int valid = (gk < K && gn < N) ? 4 * min(4, N - gn) : 0;
                cp_async16(dst, valid ? B + (long long)gk * N + gn : B, valid);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const bool ok = gk < K && gn + j < N;
                    cp_async4(dst + j, ok ? B + (long long)gk * N + gn + j : B, ok);
                }
            }
        }
    };

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        load_tile(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < tiles; ++kt) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();  // tile kt visible to all; the stage refilled next is no longer read
        load_tile(kt + STAGES - 1, (kt + STAGES - 1) % STAGES);
        cp_async_commit();

        const float* as = As + (kt % STAGES) * A_STAGE;
        const float* bs = Bs + (kt % STAGES) * B_STAGE;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            unsigned aBig[MI][4], aSmall[MI][4];
#pragma unroll
            for (int i = 0; i < MI; ++i) {
                const float* p = as + (wRow + i * 16 + g) * LDA + kk + t;
                split_tf32(p[0], aBig[i][0], aSmall[i][0]);             // (g,     t)
                split_tf32(p[8 * LDA], aBig[i][1], aSmall[i][1]);       // (g + 8, t)
                split_tf32(p[4], aBig[i][2], aSmall[i][2]);             // (g,     t + 4)
                split_tf32(p[8 * LDA + 4], aBig[i][3], aSmall[i][3]);   // (g + 8, t + 4)
            }
#pragma unroll
            for (int j = 0; j < NI; ++j) {
                const float* p = bs + (kk + t) * LDB + wCol + j * 8 + g;
                unsigned bBig[2], bSmall[2];
                split_tf32(p[0], bBig[0], bSmall[0]);        // (k = t,     n = g)
                split_tf32(p[4 * LDB], bBig[1], bSmall[1]);  // (k = t + 4, n = g)
#pragma unroll
                for (int i = 0; i < MI; ++i) {
                    // small terms first, so they are not lost against the large partial sum
                    mma_tf32(acc[i][j], aSmall[i], bBig);
                    mma_tf32(acc[i][j], aBig[i], bSmall);
                    mma_tf32(acc[i][j], aBig[i], bBig);
                }
            }
        }
    }
    cp_async_wait<0>();

#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) {
            const int r = row0 + wRow + i * 16 + g;
            const int c = col0 + wCol + j * 8 + 2 * t;
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // rows g and g + 8
                const int rr = r + 8 * h;
                if (rr >= M) continue;
                if (c < N) epilogue(C, (long long)rr * N + c, acc[i][j][2 * h], alpha, beta);
                if (c + 1 < N) epilogue(C, (long long)rr * N + c + 1, acc[i][j][2 * h + 1], alpha, beta);
            }
        }
}

}  // namespace gemmlab
