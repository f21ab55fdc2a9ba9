// Rung 15 - the copy engine feeds the FFMA core (Hopper only).
// Idea: in rung 14 the same 256 threads issue the global loads, the transposing stores, the
//   cp.async copies with their addresses and predicates, the barrier and the FFMAs: a tenth of
//   the main loop is not FFMA. Here a producer warpgroup (40 registers) owns every copy - one
//   lane per row issues a cp.async.bulk (TMA's non-tensor mode) of that row of A or B into its
//   stage, completing on the stage's full mbarrier - and two math warpgroups (232 registers
//   through setmaxnreg, where the whole block would get 168) only wait, read fragments,
//   multiply 8x16 outputs a thread and free the stage on its empty mbarrier.
// Should move: the FFMA share of the main loop from rung 14's 90% (gemmlab analyze: 94% here)
//   and the issue slots the math warps lose to copies; measured against rung 14, the table
//   shows what the copy engine is worth to FP32 GEMM.
//
// Notes on the choices:
//   - the copy engine does not transpose, so A stays in rows of BK floats, padded to BK + 4: a
//     thread reads its 8 rows 4 K values at a time (ptxas merges the K pairs into LDS.128), and
//     the padding puts the 8 rows a quarter-warp reads 20 words apart (BK = 16): no conflict;
//   - any shape: the copies need 16-byte rows (K % 4, N % 4, aligned bases), otherwise the
//     producer warpgroup copies element by element into the same stages; zeros past M, N and K
//     are written by the producer, so the math needs no predicate;
//   - split-K over gridDim.z and the swizzled tile order are rung 13's.
#include "ffma_order.cuh"
#include "gmem_tiles.cuh"
#include "hgemm/hopper.cuh"

namespace gemmlab {
namespace tma_ffma {

// `bytes` (a multiple of 16) from global `src` to shared `dst` (both 16-byte aligned) by the
// copy engine; the bytes count as a transaction on `bar`.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     hg::smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(hg::smem_u32(bar))
                 : "memory");
}

}  // namespace tma_ffma

// BM x BN block tile of 8 warps with 64 x 64 warp tiles (8 x 16 outputs a thread); BK K values a
// stage; STAGES stages in flight.
template <int BM, int BN, int BK, int STAGES, int GROUP, int ORDER>
__global__ void __launch_bounds__(384, 1)
sgemm_tma_ffma(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
               float beta, float* __restrict__ C, float* __restrict__ W) {
    constexpr int WM = 64, WN = 64, TM = 8, TN = 16;
    constexpr int LM = 8;                         // a warp's lanes along M (and 4 along N)
    constexpr int LDA = BK + 4;                   // A rows padded by 16 bytes: conflict-free reads
    constexpr int A_STAGE = BM * LDA, B_STAGE = BK * BN;  // floats
    constexpr int STAGE = A_STAGE + B_STAGE;
    static_assert((BM / WM) * (BN / WN) == 8, "8 math warps of 64 x 64");
    static_assert(BK % 4 == 0 && BK >= 4, "A rows are whole 16-byte copies");
    static_assert((A_STAGE * 4) % 16 == 0 && (STAGE * 4) % 16 == 0, "stages stay 16-byte aligned");
    static_assert(STAGES >= 2 && GROUP >= 1, "a pipeline needs two stages; GROUP >= 1");

    extern __shared__ __align__(16) float smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];

    int row0, col0, tBegin, tiles;
    swizzled_tile<BM, BN, GROUP>(M, N, row0, col0);
    k_slice<BK>(K, tBegin, tiles);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            hop::mbar_init(&full[s], 128);  // every producer thread arrives (one with the byte count)
            hop::mbar_init(&empty[s], 256);  // every math thread, after its own reads of the stage
        }
        hop::fence_barrier_init();  // visible to the copy engine too
    }
    __syncthreads();

    if (warp < 4) {  // the producer warpgroup
        hop::setmaxnreg_dec<40>();
        // One uniform choice for the block: bulk copies need 16-byte aligned rows.
        const bool vec = (K % 4 == 0) && (N % 4 == 0) && aligned16(A) && aligned16(B);
        const int rowsA = max(0, min(BM, M - row0)), cols = max(0, min(BN, N - col0));
        for (int t = 0; t < tiles; ++t) {
            const int s = t % STAGES;
            if (t >= STAGES) hop::mbar_wait(&empty[s], (t / STAGES - 1) & 1);
            float* as = smem + s * STAGE;
            float* bs = as + A_STAGE;
            const int k0 = (tBegin + t) * BK;
            const int kin = max(0, min(BK, K - k0));  // K values of this stage inside the matrix
            if (vec) {
                if (warp == 0) {
                    if (lane == 0) hop::mbar_expect_tx(&full[s], 4u * (rowsA * kin + kin * cols));
                    __syncwarp();
                    // A: one copy per row inside M; B: one per K row inside K
#pragma unroll 1
                    for (int r = lane; r < rowsA; r += 32)
                        if (kin > 0) tma_ffma::bulk_copy(as + r * LDA, A + (long long)(row0 + r) * K + k0, 4u * kin, &full[s]);
#pragma unroll 1
                    for (int k = lane; k < kin; k += 32)
                        if (cols > 0) tma_ffma::bulk_copy(bs + k * BN, B + (long long)(k0 + k) * N + col0, 4u * cols, &full[s]);
                    if (lane != 0) hop::mbar_arrive(&full[s]);  // lane 0 arrived with the byte count
                } else {
                    // the rest of the producer warpgroup writes the zeros past the edges (never
                    // where a copy lands): A's K tail and rows past M, B's columns past N and
                    // rows past K - nothing at all for a tile inside the matrix
                    const int p = threadIdx.x - 32;  // 0..95
                    if (kin < BK || rowsA < BM)
#pragma unroll 1
                        for (int i = p; i < BM * BK; i += 96) {
                            const int r = i / BK, k = i % BK;
                            if (r >= rowsA || k >= kin) as[r * LDA + k] = 0.0f;
                        }
                    if (kin < BK || cols < BN)
#pragma unroll 1
                        for (int i = p; i < BK * BN; i += 96) {
                            const int k = i / BN, n = i % BN;
                            if (k >= kin || n >= cols) bs[k * BN + n] = 0.0f;
                        }
                    hop::mbar_arrive(&full[s]);
                }
            } else {
                // Any shape and alignment: the producer warpgroup copies element by element,
                // zeros outside the matrix.
                const int p = threadIdx.x;  // 0..127
#pragma unroll 1
                for (int i = p; i < BM * BK; i += 128) {
                    const int r = i / BK, k = i % BK;
                    as[r * LDA + k] = (r < rowsA && k < kin) ? A[(long long)(row0 + r) * K + k0 + k] : 0.0f;
                }
#pragma unroll 1
                for (int i = p; i < BK * BN; i += 128) {
                    const int k = i / BN, n = i % BN;
                    bs[k * BN + n] = (k < kin && n < cols) ? B[(long long)(k0 + k) * N + col0 + n] : 0.0f;
                }
                hop::mbar_arrive(&full[s]);
            }
        }
        return;
    }

    // The math warpgroups: warp w of 8 takes warp tile (w / (BN / WN), w % (BN / WN)); lane l
    // takes rows l % 8 + 8 i (i < 8) and columns (l / 8) * 4 + 16 c .. + 3 (c < 4) of it.
    hop::setmaxnreg_inc<232>();
    const int w = warp - 4;
    const int wm0 = (w / (BN / WN)) * WM, wn0 = (w % (BN / WN)) * WN;
    const int aRow = wm0 + lane % LM, bCol = wn0 + (lane / LM) * 4;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int t = 0; t < tiles; ++t) {
        const int s = t % STAGES;
        hop::mbar_wait(&full[s], (t / STAGES) & 1);
        const float* as = smem + s * STAGE + aRow * LDA;
        const float* bs = smem + s * STAGE + A_STAGE + bCol;
#pragma unroll
        for (int kp = 0; kp < BK / 2; ++kp) {  // K values 2 kp and 2 kp + 1
            float fa0[TM], fa1[TM], fb0[TN], fb1[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                const float2 v = *reinterpret_cast<const float2*>(as + i * LM * LDA + 2 * kp);
                fa0[i] = v.x;
                fa1[i] = v.y;
            }
#pragma unroll
            for (int c = 0; c < TN / 4; ++c) {
                const float4 v0 = load_float4(bs + (2 * kp) * BN + c * 16);
                const float4 v1 = load_float4(bs + (2 * kp + 1) * BN + c * 16);
                fb0[4 * c] = v0.x; fb0[4 * c + 1] = v0.y; fb0[4 * c + 2] = v0.z; fb0[4 * c + 3] = v0.w;
                fb1[4 * c] = v1.x; fb1[4 * c + 1] = v1.y; fb1[4 * c + 2] = v1.z; fb1[4 * c + 3] = v1.w;
            }
            outer_product<TM, TN, ORDER>(acc, fa0, fb0);
            outer_product<TM, TN, ORDER>(acc, fa1, fb1);
        }
        // Each thread releases its own reads of stage s: the arrive orders them before the
        // producer's next writes there (one arrival a warp after __syncwarp would rely on the
        // warp barrier's ordering, which compute-sanitizer's racecheck does not follow).
        hop::mbar_arrive(&empty[s]);
    }

    // With split-K the unscaled partial sums go to this slice's workspace plane and the
    // reduction kernel applies alpha and beta once.
    const bool split = gridDim.z > 1;
    float* out = split ? W + (long long)blockIdx.z * M * N : C;
    const float a = split ? 1.0f : alpha, b = split ? 0.0f : beta;
    const bool vecC = (N % 4 == 0) && aligned16(out);
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int c = 0; c < TN / 4; ++c)
            store4(out, M, N, row0 + aRow + i * LM, col0 + bCol + c * 16,
                   make_float4(acc[i][4 * c], acc[i][4 * c + 1], acc[i][4 * c + 2], acc[i][4 * c + 3]), a, b, vecC);
}

}  // namespace gemmlab
