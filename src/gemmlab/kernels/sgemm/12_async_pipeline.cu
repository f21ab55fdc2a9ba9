// Rung 12 - multi-stage pipeline with asynchronous copies (cp.async).
// Idea: rung 10's warptiled compute, fed by a STAGES-deep ring of shared-memory tiles
//   filled with cp.async: the copies for tile t+STAGES-1 are in flight while tile t is
//   computed, they skip the register file, and one __syncthreads per tile suffices.
//   A is transposed on the way in with 4-byte copies (As[k][m], rows padded by PADA floats
//   so the transposing writes spread over the banks); B moves in 16-byte copies.
// Should move: long-scoreboard stalls (waiting on global loads) fall; barrier stalls
//   fall (one barrier per K-tile instead of two); registers no longer stage tiles.
#include "warptile.cuh"

namespace gemmlab {

template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int NT, int STAGES, int PADA>
__global__ void __launch_bounds__(NT)
sgemm_async_pipeline(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                     float beta, float* __restrict__ C) {
    using W = WarpTile<WM, WN, WNITER, TM, TN>;
    constexpr int LDA = BM + PADA;
    constexpr int A_STAGE = BK * LDA;  // floats per stage
    constexpr int B_STAGE = BK * BN;
    static_assert(NT % 32 == 0 && (BM / WM) * (BN / WN) == NT / 32, "the warp tiles must cover the block tile");
    static_assert(BN % 4 == 0 && PADA % 4 == 0, "16-byte granularity");
    static_assert(STAGES >= 2, "a pipeline needs at least two stages");

    extern __shared__ __align__(16) float smem[];
    float* As = smem;                     // STAGES x [BK][LDA]
    float* Bs = smem + STAGES * A_STAGE;  // STAGES x [BK][BN]

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int aOff = (warp / (BN / WN)) * WM + (lane / (W::WSUBN / TN)) * TM;
    const int bOff = (warp % (BN / WN)) * WN + (lane % (W::WSUBN / TN)) * TN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool vecB = (N % 4 == 0) && aligned16(B);
    const bool vecC = (N % 4 == 0) && aligned16(C);
    const int tiles = (K + BK - 1) / BK;

    // Issue the copies of K-tile `t` into stage `s` (nothing, past the last tile).
    auto load_tile = [&](int t, int s) {
        if (t < tiles) {
            cp_async_tiles<BM, BN, BK, NT, LDA>(As + s * A_STAGE, Bs + s * B_STAGE, A, B, M, N, K, row0, col0,
                                                t * BK, vecB);
        }
    };

    float acc[W::FM][W::FN] = {{0.0f}};
    float fa[W::FM];
    float fb[W::FN];

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        load_tile(s, s);
        cp_async_commit();  // one group per stage, even when empty, so the counting stays uniform
    }
    for (int t = 0; t < tiles; ++t) {
        // This thread's copies of tile t have landed; the barrier makes everyone's visible
        // and guarantees that nobody still computes on the stage about to be refilled
        // (the one tile t-1 used).
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        load_tile(t + STAGES - 1, (t + STAGES - 1) % STAGES);
        cp_async_commit();

        const float* as = As + (t % STAGES) * A_STAGE;
        const float* bs = Bs + (t % STAGES) * B_STAGE;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            W::template load<LDA, BN>(as, bs, k, aOff, bOff, fa, fb);
            W::fma(acc, fa, fb);
        }
    }
    cp_async_wait<0>();  // no copy may still target shared memory when the block exits
    W::store(C, M, N, row0 + aOff, col0 + bOff, acc, alpha, beta, vecC);
}

}  // namespace gemmlab
