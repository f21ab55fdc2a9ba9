// Tensor-core rung 4 - warp specialisation: a producer warpgroup feeds two consumer warpgroups
// through full/empty mbarrier pairs, registers moved to the consumers with setmaxnreg.
// Idea: in rung 3 the same warps waited for copies and multiplied, and a block-wide barrier
//   ended every K tile. Now warpgroup 0 only issues TMA copies (one thread; the warpgroup gives
//   its registers back, setmaxnreg.dec to 40), and warpgroups 1 and 2 only multiply (setmaxnreg
//   .inc to 232), each a 64 x BN half of a 128 x BN tile, so BN = 256 fits: 128 fp32
//   accumulators per thread. A stage is refilled as soon as both consumers have released it on
//   its empty barrier; a consumer keeps one wgmma group in flight (wait_group 1) and releases
//   the stage of the group before. No __syncthreads in the main loop.
// Output: fp32 C (alpha * A@B + beta * C; C not read when beta == 0), stored from registers.
// Needs: sm_90a; K % 8 == 0 and N % 8 == 0 and 16-byte aligned A and B (TMA); M is free.
// Should move: tensor-pipe utilisation toward its peak (the copy engine and the math now
//   overlap); against rung 3 barrier stalls vanish and the 128x256 tile halves the shared-memory
//   traffic per flop.
#include "hopper.cuh"
#include "wgmma_ops.cuh"

namespace gemmlab {

template <int BF16, int BN, int STAGES>
__global__ void __launch_bounds__(384, 1)
hgemm_warp_specialized(const __grid_constant__ hop::TmaMap tmA, const __grid_constant__ hop::TmaMap tmB, int M, int N,
                       int K, float alpha, float beta, float* __restrict__ C) {
    constexpr int BM = 128, BK = 64;
    constexpr int A_BYTES = BM * BK * 2;
    constexpr int B_CHUNK = BK * 128;
    constexpr int B_BYTES = (BN / 64) * B_CHUNK;
    constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    constexpr int CONSUMER_WARPS = 8;  // each releases a stage once its own wgmma has finished
    static_assert(BN == 64 || BN == 128 || BN == 256, "wgmma N is 64, 128 or 256 here");
    static_assert(STAGES >= 2, "a pipeline needs at least two stages");

    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    unsigned char* smem = smem_raw + ((1024 - (hg::smem_u32(smem_raw) & 1023)) & 1023);

    const int tid = threadIdx.x, wg = tid / 128, t = tid % 128;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int tiles = (K + BK - 1) / BK;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            hop::mbar_init(&full[s], 1);
            hop::mbar_init(&empty[s], CONSUMER_WARPS);
        }
        hop::fence_barrier_init();
    }
    __syncthreads();

    if (wg == 0) {  // producer
        hop::setmaxnreg_dec<40>();
        if (t == 0) {
            for (int k = 0; k < tiles; ++k) {
                const int s = k % STAGES;
                if (k >= STAGES) hop::mbar_wait(&empty[s], (k / STAGES - 1) & 1);
                unsigned char* as = smem + s * STAGE_BYTES;
                unsigned char* bs = as + A_BYTES;
                hop::mbar_expect_tx(&full[s], STAGE_BYTES);
                hop::tma_load_2d(as, tmA, &full[s], k * BK, m0);
#pragma unroll
                for (int c = 0; c < BN / 64; ++c)
                    hop::tma_load_2d(bs + c * B_CHUNK, tmB, &full[s], n0 + 64 * c, k * BK);
            }
        }
    } else {  // consumers: warpgroup 1 rows 0..63, warpgroup 2 rows 64..127
        hop::setmaxnreg_inc<232>();
        const int half = wg - 1;
        float acc[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
        for (int k = 0; k < tiles; ++k) {
            const int s = k % STAGES;
            hop::mbar_wait(&full[s], (k / STAGES) & 1);
            const unsigned char* as = smem + s * STAGE_BYTES + half * 64 * 128;
            const unsigned char* bs = smem + s * STAGE_BYTES + A_BYTES;
            hop::fence_operands(acc);
            hop::wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk)
                hop::wgmma<BN, BF16, 1>(acc, hop::make_desc(as + kk * 32, 16, 1024),
                                        hop::make_desc(bs + kk * 16 * 128, B_CHUNK, 1024), 1);
            hop::wgmma_commit();
            hop::wgmma_wait<1>();  // the group of K tile k-1 is done: its stage may be refilled
            hop::fence_operands(acc);
            if (k > 0 && t % 32 == 0) hop::mbar_arrive(&empty[(k - 1) % STAGES]);
        }
        hop::wgmma_wait<0>();
        hop::fence_operands(acc);
        hop::store_acc(acc, C, M, N, m0 + 64 * half, n0, t, alpha, beta);
    }
}

}  // namespace gemmlab
