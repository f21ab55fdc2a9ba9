// Rung 15 - the copy engine feeds the FFMA core (Hopper only).
// Idea: in rung 14 the same 256 threads issue the global loads, the transposing stores, the
//   cp.async copies with their addresses and predicates, the barrier and the FFMAs: a tenth of
//   the main loop is not FFMA. Here one producer thread brings a whole stage with two TMA tensor
//   copies (one box of A, one of B, described by tensor maps made once on the host) onto the
//   stage's full mbarrier, and two math warpgroups (232 registers through setmaxnreg, where the
//   whole block would get 168) only wait, read fragments, multiply 8x16 outputs a thread and
//   free the stage on its empty mbarrier.
// Should move: the FFMA share of the main loop from rung 14's 90% (gemmlab analyze: 94% here)
//   and the issue slots the math warps lose to copies; measured against rung 14, the table
//   shows what the copy engine is worth to FP32 GEMM.
//
// Notes on the choices:
//   - the first build fed each stage with 272 cp.async.bulk copies, one per row of A and B:
//     Nsight Compute showed the math warps stalled on the full barrier (long scoreboard 9.4 of
//     12.7 cycles an instruction, issue slots 23% busy, DRAM 0.8%) - 23.5% of cuBLAS. Two tensor
//     copies a stage are what the copy engine is built for;
//   - the copy engine does not transpose, so A stays in rows of BK floats; the tensor map's
//     swizzle (one row's span: BK * 4 bytes) permutes each row's 16-byte chunks by the row, so
//     the 8 rows a quarter-warp reads with LDS.128 fall in 8 distinct bank groups (a_index);
//   - TMA writes zeros past M, N and K, so edge tiles need neither predicates nor a zeroing
//     pass; shapes whose rows are not 16-byte multiples (K or N not a multiple of 4) cannot be
//     described by a tensor map, and there (maps == 0) the producer warpgroup copies element by
//     element into the same swizzled stages;
//   - split-K over gridDim.z and the swizzled tile order are rung 13's.
#include "ffma_order.cuh"
#include "gmem_tiles.cuh"
#include "hgemm/hopper.cuh"

namespace gemmlab {
namespace tma_ffma {

// Where A's element (r, k) lies in a stage: rows of BK floats whose 16-byte chunks TMA's
// swizzle (CUTLASS's Swizzle<log2(BK / 4), 4, 3>, its span one row) XORs with bits of the row.
template <int BK>
__device__ __forceinline__ int a_chunk_xor(int r) {
    constexpr int ROW_BYTES = 4 * BK;
    return (r / (128 / ROW_BYTES)) & (ROW_BYTES / 16 - 1);
}

template <int BK>
__device__ __forceinline__ int a_index(int r, int k) {
    return r * BK + 4 * ((k / 4) ^ a_chunk_xor<BK>(r)) + k % 4;
}

__device__ __forceinline__ float component(const float4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

}  // namespace tma_ffma

// BM x BN block tile of 8 warps with 64 x 64 warp tiles (8 x 16 outputs a thread); BK K values a
// stage; STAGES stages in flight. tmA / tmB: tensor maps over A (MxK, box BM x BK, swizzled) and
// B (KxN, box BK x BN), used when `maps` is 1; A and B themselves serve the element-wise path.
template <int BM, int BN, int BK, int STAGES, int GROUP, int ORDER>
__global__ void __launch_bounds__(384, 1)
sgemm_tma_ffma(const __grid_constant__ hop::TmaMap tmA, const __grid_constant__ hop::TmaMap tmB, int M, int N, int K,
               float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
               float* __restrict__ C, float* __restrict__ W, int maps) {
    constexpr int WM = 64, WN = 64, TM = 8, TN = 16;
    constexpr int LM = 8;                                 // a warp's lanes along M (and 4 along N)
    constexpr int A_STAGE = BM * BK, B_STAGE = BK * BN;  // floats
    constexpr int STAGE = A_STAGE + B_STAGE;
    static_assert((BM / WM) * (BN / WN) == 8, "8 math warps of 64 x 64");
    static_assert(BK == 8 || BK == 16 || BK == 32, "A rows span a TMA swizzle: 32, 64 or 128 bytes");
    static_assert((A_STAGE * 4) % 1024 == 0 && (STAGE * 4) % 1024 == 0, "stages keep the swizzle's 1024-byte alignment");
    static_assert(STAGES >= 2 && GROUP >= 1, "a pipeline needs two stages; GROUP >= 1");

    // the swizzle repeats every 1024 bytes of shared address: align the stages to it
    extern __shared__ unsigned char smem_raw[];
    float* smem = reinterpret_cast<float*>(smem_raw + ((1024 - (hg::smem_u32(smem_raw) & 1023)) & 1023));
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];

    int row0, col0, tBegin, tiles;
    swizzled_tile<BM, BN, GROUP>(M, N, row0, col0);
    k_slice<BK>(K, tBegin, tiles);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            hop::mbar_init(&full[s], maps ? 1 : 128);  // the copying thread (with the bytes), or all 128
            hop::mbar_init(&empty[s], 256);  // every math thread, after its own reads of the stage
        }
        hop::fence_barrier_init();  // visible to the copy engine too
    }
    __syncthreads();

    if (warp < 4) {  // the producer warpgroup
        hop::setmaxnreg_dec<40>();
        if (maps) {
            if (threadIdx.x == 0)
#pragma unroll 1
                for (int t = 0; t < tiles; ++t) {
                    const int s = t % STAGES;
                    if (t >= STAGES) hop::mbar_wait(&empty[s], (t / STAGES - 1) & 1);
                    float* as = smem + s * STAGE;
                    const int k0 = (tBegin + t) * BK;
                    // whole boxes, zeros past the edges included, so the byte count is constant
                    hop::mbar_expect_tx(&full[s], 4u * STAGE);
                    hop::tma_load_2d(as, tmA, &full[s], k0, row0);
                    hop::tma_load_2d(as + A_STAGE, tmB, &full[s], col0, k0);
                }
        } else {
            // Rows TMA cannot describe: the producer warpgroup copies element by element into
            // the same layout, zeros outside the matrix.
            const int p = threadIdx.x;  // 0..127
#pragma unroll 1
            for (int t = 0; t < tiles; ++t) {
                const int s = t % STAGES;
                if (t >= STAGES) hop::mbar_wait(&empty[s], (t / STAGES - 1) & 1);
                float* as = smem + s * STAGE;
                float* bs = as + A_STAGE;
                const int k0 = (tBegin + t) * BK;
#pragma unroll 1
                for (int i = p; i < BM * BK; i += 128) {
                    const int r = i / BK, k = i % BK;
                    as[tma_ffma::a_index<BK>(r, k)] =
                        (row0 + r < M && k0 + k < K) ? A[(long long)(row0 + r) * K + k0 + k] : 0.0f;
                }
#pragma unroll 1
                for (int i = p; i < BK * BN; i += 128) {
                    const int k = i / BN, n = i % BN;
                    bs[k * BN + n] = (k0 + k < K && col0 + n < N) ? B[(long long)(k0 + k) * N + col0 + n] : 0.0f;
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

    // The 8 rows of a thread lie 8 apart, so their chunks share one XOR (a_chunk_xor).
    const int chunk_xor = tma_ffma::a_chunk_xor<BK>(aRow);
    for (int t = 0; t < tiles; ++t) {
        const int s = t % STAGES;
        hop::mbar_wait(&full[s], (t / STAGES) & 1);
        const float* as = smem + s * STAGE + aRow * BK;
        const float* bs = smem + s * STAGE + A_STAGE + bCol;
#pragma unroll
        for (int q = 0; q < BK / 4; ++q) {  // K values 4 q .. 4 q + 3: one LDS.128 a row
            float4 fa[TM];
#pragma unroll
            for (int i = 0; i < TM; ++i) fa[i] = load_float4(as + i * LM * BK + 4 * (q ^ chunk_xor));
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                float a[TM], b[TN];
#pragma unroll
                for (int i = 0; i < TM; ++i) a[i] = tma_ffma::component(fa[i], kk);
#pragma unroll
                for (int c = 0; c < TN / 4; ++c) {
                    const float4 v = load_float4(bs + (4 * q + kk) * BN + c * 16);
                    b[4 * c] = v.x; b[4 * c + 1] = v.y; b[4 * c + 2] = v.z; b[4 * c + 3] = v.w;
                }
                outer_product<TM, TN, ORDER>(acc, a, b);
            }
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
