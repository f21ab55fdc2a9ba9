// bgemm rung 1 - the batch on the grid's z axis.
// Idea: a batch of independent GEMMs is one launch: blockIdx.z picks the matrix (looping by
//   gridDim.z past 65535), each block offsets A, B and C by that matrix's batch strides, and
//   the tile loop is SGEMM rung 12's (warptiles fed by a STAGES-deep cp.async ring; the shared
//   pieces come from sgemm/warptile.cuh). Many small matrices fill the GPU together where one
//   launch each would leave most SMs idle and pay a launch per matrix.
// Should move: at small sizes (batch x 128^3, 256^3) the achieved occupancy and SM throughput
//   rise toward the large-matrix figures; at large sizes it matches rung 12 (same inner loop).
// Alignment: a batch offset of i * stride floats keeps 16-byte alignment only when the stride
//   is a multiple of 4, so the vector paths are decided per matrix, from its own pointers.
// Why not call rung 12: its tile loop lives inside the __global__ sgemm_async_pipeline, not in a
//   __device__ function that takes offset pointers, and sgemm/ is not this ladder's to refactor.
//   So this rung keeps its own copy of that short loop (as rungs 10, 12 and 13 each keep theirs)
//   and takes every piece below it from sgemm/warptile.cuh: the cp.async tile copies, the commit
//   and wait, the fragment loads, the outer product and the predicated epilogue.
#include "sgemm/warptile.cuh"

namespace gemmlab {

template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int NT, int STAGES, int PADA>
__global__ void __launch_bounds__(NT)
bgemm_batched_pipeline(int M, int N, int K, float alpha, const float* __restrict__ A0, long long strideA,
                       const float* __restrict__ B0, long long strideB, float beta, float* __restrict__ C0,
                       long long strideC, int batch) {
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
    const int tiles = (K + BK - 1) / BK;

    for (int b = blockIdx.z; b < batch; b += gridDim.z) {
        const float* A = A0 + (long long)b * strideA;  // 64-bit: batch * stride passes 2^31
        const float* B = B0 + (long long)b * strideB;
        float* C = C0 + (long long)b * strideC;
        const bool vecB = (N % 4 == 0) && aligned16(B);
        const bool vecC = (N % 4 == 0) && aligned16(C);

        auto load_tile = [&](int t, int s) {
            if (t < tiles) {
                cp_async_tiles<BM, BN, BK, NT, LDA>(As + s * A_STAGE, Bs + s * B_STAGE, A, B, M, N, K, row0, col0,
                                                    t * BK, vecB);
            }
        };

        float acc[W::FM][W::FN] = {{0.0f}};
        float fa[W::FM];
        float fb[W::FN];

        // The previous matrix's last tile may still be read by a slower warp: no stage is
        // refilled before everyone has left it.
        __syncthreads();
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            load_tile(s, s);
            cp_async_commit();  // one group per stage, even when empty, so the counting stays uniform
        }
        for (int t = 0; t < tiles; ++t) {
            cp_async_wait<STAGES - 2>();  // tile t has landed for this thread...
            __syncthreads();              // ...for everyone, and stage (t-1) % STAGES is free
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
        cp_async_wait<0>();  // no copy may still target shared memory past this matrix
        W::store(C, M, N, row0 + aOff, col0 + bOff, acc, alpha, beta, vecC);
    }
}

}  // namespace gemmlab
