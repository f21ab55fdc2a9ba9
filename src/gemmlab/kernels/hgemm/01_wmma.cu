// Tensor-core rung 1 - nvcuda::wmma on shared-memory tiles.
// Idea: the SGEMM ladder's block tiling, but the inner product of each warp is done by the
//   tensor cores: a warp owns a WM x WN tile of C as (WM/16) x (WN/16) 16x16 wmma fragments
//   and multiplies 16x16x16 fp16/bf16 fragments loaded from shared memory, accumulating in
//   fp32. Loads are 16-byte vectors where K % 8 == 0 (A) and N % 8 == 0 (B) and the base is
//   aligned, scalar otherwise, zero-filled past the edges: any M, N, K works.
// Output: C is fp32 (alpha * A@B + beta * C; C not read when beta == 0).
// Should move: over the best SIMT rung, FLOP/s jump by several times (tensor pipe instead of
//   FFMA); the limit becomes shared-memory traffic: wmma::load_matrix_sync from the padded
//   tiles, single buffering (one barrier pair per K-tile) and synchronous global loads, so
//   expect long-scoreboard and barrier stalls to dominate (rung 2 attacks them).
#include <mma.h>

#include "hgemm_common.cuh"

namespace gemmlab {

template <int BF16> struct WmmaElem { typedef __half type; };
template <> struct WmmaElem<1> { typedef __nv_bfloat16 type; };

template <int BF16, int BM, int BN, int BK, int WM, int WN>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
hgemm_wmma(int M, int N, int K, float alpha, const hg::bits16* __restrict__ A, const hg::bits16* __restrict__ B,
           float beta, float* __restrict__ C) {
    using namespace nvcuda;
    typedef typename WmmaElem<BF16>::type T;
    constexpr int NWARP = (BM / WM) * (BN / WN);
    constexpr int NT = NWARP * 32;
    constexpr int MI = WM / 16, NI = WN / 16;
    constexpr int LDA = BK + 8, LDB = BN + 8;  // +8 elements: 16 bytes of padding per row
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must divide the block tile");
    static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0, "wmma works on 16x16x16 fragments");
    static_assert(NT <= 1024, "at most 1024 threads");

    __shared__ __align__(32) hg::bits16 As[BM * LDA];
    __shared__ __align__(32) hg::bits16 Bs[BK * LDB];
    __shared__ __align__(32) float stage[NWARP][16 * 16];  // one fragment's way out, per warp

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wr = (warp / (BN / WN)) * WM, wc = (warp % (BN / WN)) * WN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool vecA = (K % 8 == 0) && hg::aligned16(A);
    const bool vecB = (N % 8 == 0) && hg::aligned16(B);

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[MI][NI];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    for (int k0 = 0; k0 < K; k0 += BK) {
        // A tile: BM x BK, B tile: BK x BN, zeros past the edges.
        if (vecA) {
            for (int i = tid; i < BM * BK / 8; i += NT) {
                const int r = i / (BK / 8), c = (i % (BK / 8)) * 8;
                uint4 v = make_uint4(0, 0, 0, 0);
                if (row0 + r < M && k0 + c < K) v = *reinterpret_cast<const uint4*>(A + (size_t)(row0 + r) * K + k0 + c);
                *reinterpret_cast<uint4*>(&As[r * LDA + c]) = v;
            }
        } else {
            for (int i = tid; i < BM * BK; i += NT) {
                const int r = i / BK, c = i % BK;
                As[r * LDA + c] = (row0 + r < M && k0 + c < K) ? A[(size_t)(row0 + r) * K + k0 + c] : hg::bits16(0);
            }
        }
        if (vecB) {
            for (int i = tid; i < BK * BN / 8; i += NT) {
                const int r = i / (BN / 8), c = (i % (BN / 8)) * 8;
                uint4 v = make_uint4(0, 0, 0, 0);
                if (k0 + r < K && col0 + c < N) v = *reinterpret_cast<const uint4*>(B + (size_t)(k0 + r) * N + col0 + c);
                *reinterpret_cast<uint4*>(&Bs[r * LDB + c]) = v;
            }
        } else {
            for (int i = tid; i < BK * BN; i += NT) {
                const int r = i / BN, c = i % BN;
                Bs[r * LDB + c] = (k0 + r < K && col0 + c < N) ? B[(size_t)(k0 + r) * N + col0 + c] : hg::bits16(0);
            }
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[MI];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb[NI];
#pragma unroll
            for (int i = 0; i < MI; ++i)
                wmma::load_matrix_sync(fa[i], reinterpret_cast<const T*>(&As[(wr + i * 16) * LDA + kk]), LDA);
#pragma unroll
            for (int j = 0; j < NI; ++j)
                wmma::load_matrix_sync(fb[j], reinterpret_cast<const T*>(&Bs[kk * LDB + wc + j * 16]), LDB);
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        __syncthreads();
    }

    // Epilogue: each fragment goes through the warp's 16x16 staging tile (the fragment's
    // register layout is opaque), then out with predicated, row-contiguous stores.
#pragma unroll
    for (int i = 0; i < MI; ++i) {
#pragma unroll
        for (int j = 0; j < NI; ++j) {
            wmma::store_matrix_sync(stage[warp], acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                const int r = row0 + wr + i * 16 + e / 16, c = col0 + wc + j * 16 + e % 16;
                if (r < M && c < N) {
                    float* out = C + (size_t)r * N + c;
                    *out = hg::epilogue(stage[warp][e], alpha, beta, out);
                }
            }
            __syncwarp();
        }
    }
}

}  // namespace gemmlab
