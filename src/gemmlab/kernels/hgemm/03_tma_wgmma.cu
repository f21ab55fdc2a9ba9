// Tensor-core rung 3 - Hopper's own data path: TMA bulk tensor copies completing on mbarriers,
// wgmma reading both operands straight from shared memory, STAGES tiles in flight.
// Idea: rung 2's threads spent issue slots on cp.async address arithmetic and ldmatrix, and a
//   warp's mma.sync is 16x8x16. Here one thread asks the copy engine (TMA) for whole tiles
//   (A: 128x64, B: 64xBN, with the hardware's 128-byte swizzle), each tile's bytes counted down
//   on an mbarrier; the 4 warps of a warpgroup then issue wgmma.m64nBNk16, an asynchronous
//   64xBNx16 product whose operands come from shared memory through descriptors, so registers
//   hold only accumulators. B stays row-major in global memory and is read N-major (the
//   instruction's transpose flag), so no copy of B is made.
// Output: fp32 C (alpha * A@B + beta * C; C not read when beta == 0), stored from registers.
// Needs: sm_90a; K % 8 == 0 and N % 8 == 0 (TMA wants 16-byte row strides) and 16-byte aligned
//   A and B; M is free; edges of M, N and K are zero-filled by TMA and masked at the store.
// Should move: SASS shows HGMMA instead of HMMA; tensor-pipe utilisation rises against rung 2.
//   One warpgroup both waits for data and multiplies, and a __syncthreads ends every K tile
//   before its stage is refilled, so copies and math still take turns (rung 4's job).
#include "hopper.cuh"
#include "wgmma_ops.cuh"

namespace gemmlab {

template <int BF16, int BN, int STAGES>
__global__ void __launch_bounds__(128, 1)
hgemm_tma_wgmma(const __grid_constant__ hop::TmaMap tmA, const __grid_constant__ hop::TmaMap tmB, int M, int N, int K,
                float alpha, float beta, float* __restrict__ C) {
    constexpr int BM = 128, BK = 64;              // BK * 2 bytes = one 128-byte swizzled row
    constexpr int A_BYTES = BM * BK * 2;          // [BM][64] rows of 128 bytes
    constexpr int B_CHUNK = BK * 128;             // [BK][64 columns] rows of 128 bytes
    constexpr int B_BYTES = (BN / 64) * B_CHUNK;  // BN/64 chunks of 64 columns
    constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    static_assert(BN == 64 || BN == 128 || BN == 256, "wgmma N is 64, 128 or 256 here");
    static_assert(STAGES >= 2, "a pipeline needs at least two stages");

    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long full[STAGES];
    // the 128-byte swizzle repeats every 1024 bytes of shared address: align the tiles to it
    unsigned char* smem = smem_raw + ((1024 - (hg::smem_u32(smem_raw) & 1023)) & 1023);

    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int tiles = (K + BK - 1) / BK;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) hop::mbar_init(&full[s], 1);
        hop::fence_barrier_init();
    }
    __syncthreads();

    auto issue = [&](int t) {  // one thread: both tiles of K step t into stage t % STAGES
        const int s = t % STAGES;
        unsigned char* as = smem + s * STAGE_BYTES;
        unsigned char* bs = as + A_BYTES;
        hop::mbar_expect_tx(&full[s], STAGE_BYTES);
        hop::tma_load_2d(as, tmA, &full[s], t * BK, m0);
#pragma unroll
        for (int c = 0; c < BN / 64; ++c) hop::tma_load_2d(bs + c * B_CHUNK, tmB, &full[s], n0 + 64 * c, t * BK);
    };
    if (tid == 0)
        for (int t = 0; t < STAGES && t < tiles; ++t) issue(t);

    float acc[2][BN / 2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[h][i] = 0.0f;

    for (int t = 0; t < tiles; ++t) {
        const int s = t % STAGES;
        hop::mbar_wait(&full[s], (t / STAGES) & 1);
        const unsigned char* as = smem + s * STAGE_BYTES;
        const unsigned char* bs = as + A_BYTES;
        hop::fence_operands(acc[0]);
        hop::fence_operands(acc[1]);
        hop::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            // B: 16 K rows further is 16 * 128 bytes; N-major, 64-column chunks B_CHUNK apart
            const unsigned long long db = hop::make_desc(bs + kk * 16 * 128, B_CHUNK, 1024);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                // A: rows 64h.., and 16 elements (32 bytes) further along K inside the swizzled row
                const unsigned long long da = hop::make_desc(as + h * 64 * 128 + kk * 32, 16, 1024);
                hop::wgmma<BN, BF16, 1>(acc[h], da, db, 1);
            }
        }
        hop::wgmma_commit();
        hop::wgmma_wait<0>();
        hop::fence_operands(acc[0]);
        hop::fence_operands(acc[1]);
        __syncthreads();  // every warp is done reading stage s: it may be refilled
        if (tid == 0 && t + STAGES < tiles) issue(t + STAGES);
    }

#pragma unroll
    for (int h = 0; h < 2; ++h) hop::store_acc(acc[h], C, M, N, m0 + 64 * h, n0, tid, alpha, beta);
}

}  // namespace gemmlab
