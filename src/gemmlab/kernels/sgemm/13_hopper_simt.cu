// Rung 13 - gemmlab's own FP32 SIMT kernel for Hopper.
// Idea: rung 12's cp.async ring and warptiles, plus what the fastest SIMT GEMMs add:
//   - fragment double buffering: the A/B register fragments of step k+1 are read from
//     shared memory while the FMAs of step k run, so LDS latency hides behind FFMA;
//   - a block-index swizzle: consecutive blocks take GROUP row-tiles of one column band,
//     so tiles that share A rows and B columns run together and reuse them from L2;
//   - split-K for shapes with too few output tiles to fill the GPU (8192x128x8192 has 64
//     tiles for 132 SMs): gridDim.z slices of K write fp32 partial tiles to a workspace and
//     sgemm_splitk_reduce sums them in a fixed order (deterministic, unlike atomics) and
//     applies alpha and beta;
//   - one barrier per K-tile, zero-filled edges, float4 where aligned (as rungs 10-12).
// Should move: issue-slot share of FFMA towards its ceiling (~94% with 8x8 fragments);
//   short-scoreboard (LDS) stalls fall; L2 hit rate rises on large problems; skinny
//   shapes fill every SM instead of half of them.
#include "warptile.cuh"

namespace gemmlab {

template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int NT, int STAGES, int PADA,
          int GROUP>
__global__ void __launch_bounds__(NT)
sgemm_hopper_simt(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                  float beta, float* __restrict__ C, float* __restrict__ W) {
    using WT = WarpTile<WM, WN, WNITER, TM, TN>;
    constexpr int LDA = BM + PADA;
    constexpr int A_STAGE = BK * LDA;
    constexpr int B_STAGE = BK * BN;
    static_assert(NT % 32 == 0 && (BM / WM) * (BN / WN) == NT / 32, "the warp tiles must cover the block tile");
    static_assert(BN % 4 == 0 && PADA % 4 == 0, "16-byte granularity");
    static_assert(STAGES >= 2 && GROUP >= 1, "a pipeline needs two stages; GROUP >= 1");

    extern __shared__ __align__(16) float smem[];
    float* As = smem;
    float* Bs = smem + STAGES * A_STAGE;

    int row0, col0;
    swizzled_tile<BM, BN, GROUP>(M, N, row0, col0);

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int aOff = (warp / (BN / WN)) * WM + (lane / (WT::WSUBN / TN)) * TM;
    const int bOff = (warp % (BN / WN)) * WN + (lane % (WT::WSUBN / TN)) * TN;
    const bool vecB = (N % 4 == 0) && aligned16(B);

    int tBegin, tiles;
    k_slice<BK>(K, tBegin, tiles);

    auto load_tile = [&](int t, int s) {
        if (t < tiles) {
            cp_async_tiles<BM, BN, BK, NT, LDA>(As + s * A_STAGE, Bs + s * B_STAGE, A, B, M, N, K, row0, col0,
                                                (tBegin + t) * BK, vecB);
        }
    };

    float acc[WT::FM][WT::FN] = {{0.0f}};
    float fa[2][WT::FM];
    float fb[2][WT::FN];

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        load_tile(s, s);
        cp_async_commit();
    }
    for (int t = 0; t < tiles; ++t) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();  // tile t visible to all; everyone is done with the stage refilled next
        load_tile(t + STAGES - 1, (t + STAGES - 1) % STAGES);
        cp_async_commit();

        const float* as = As + (t % STAGES) * A_STAGE;
        const float* bs = Bs + (t % STAGES) * B_STAGE;
        WT::template load<LDA, BN>(as, bs, 0, aOff, bOff, fa[0], fb[0]);
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (k + 1 < BK) WT::template load<LDA, BN>(as, bs, k + 1, aOff, bOff, fa[(k + 1) & 1], fb[(k + 1) & 1]);
            WT::fma(acc, fa[k & 1], fb[k & 1]);  // step k's FMAs while step k+1's loads are in flight
        }
    }
    cp_async_wait<0>();

    // With split-K the partial sums go to this slice's workspace plane, unscaled; the
    // reduction applies alpha and beta once. Otherwise the usual epilogue.
    if (gridDim.z > 1) {
        WT::store(W + (long long)blockIdx.z * M * N, M, N, row0 + aOff, col0 + bOff, acc, 1.0f, 0.0f,
                  (N % 4 == 0) && aligned16(W));
    } else {
        WT::store(C, M, N, row0 + aOff, col0 + bOff, acc, alpha, beta, (N % 4 == 0) && aligned16(C));
    }
}

// C = alpha * sum_z W[z] + beta * C, summed in slice order so results are reproducible.
__global__ void sgemm_splitk_reduce(int M, int N, int S, float alpha, const float* __restrict__ W, float beta,
                                    float* __restrict__ C) {
    const long long total = (long long)M * N;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        float sum = 0.0f;
        for (int z = 0; z < S; ++z) sum += W[z * total + i];
        epilogue(C, i, sum, alpha, beta);
    }
}

}  // namespace gemmlab
