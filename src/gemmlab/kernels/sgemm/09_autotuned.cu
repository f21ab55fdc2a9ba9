// Rung 9 - autotuned blocktiling: the block and thread tiles become free parameters.
// Idea: NUM_THREADS threads per block whatever the tiles, each computing MI x NI sub-tiles
//   of TM x TN, so BM, BN, BK, TM, TN and NUM_THREADS span seed 000's sweep (BK 8..64,
//   TM/TN 4..32, BM/BN 64..256, 256 threads) and a tuner can pick the best point per GPU;
//   built with what worked in rungs 6-8 (float4, linearised Bs, padded As).
// Should move: the best point differs per GPU (the sweep's heat map). At the defaults vs
//   rung 6: half the barriers and global-load rounds per FLOP, no shared bank conflicts
//   (ncu), same occupancy (2 blocks/SM); throughput the best of rungs 6-9.
// Layout: the threads form a 16-column grid (TR = NUM_THREADS/16 rows); one pass of the
//   grid covers WM x WN = TR*TM x 16*TN of C, and thread (tr, tc) computes the sub-tiles at
//   rows wm*WM + tr*TM, columns wn*WN + tc*TN (wm < BM/WM, wn < BN/WN). So every thread
//   holds BM*BN/NUM_THREADS accumulators whatever TM and TN (they set how its outputs are
//   spread and how wide its shared reads are); at most 128 are allowed (256 spill). The
//   seed's constraints are the static_asserts below; the spec mirrors them.
// Defaults: BM = BN = 128, BK = 16, TM = TN = 8, 256 threads - a reasoned Hopper choice
//   until the tuner exists: 8x8 outputs per thread (64 FFMA per 4 LDS.128) under 128
//   registers, so 2 blocks (16 warps) fit per SM; BK = 16 halves rung 6's barriers per
//   FLOP; 16.3 KiB of shared memory.
// Kept from rungs 6-8: float4 global loads and stores (scalar fallback for unaligned rows
//   and edge tiles), A transposed in shared memory, Bs in rung 7's linearised layout (per
//   WN-column group, the thread columns' chunk h side by side: conflict-free B fragment
//   loads without extra shared memory), As rows padded by 4 floats as in rung 8, and the A
//   tile loaded so that one warp instruction covers 16 rows x 2 float4s (32 bytes, one
//   sector, per row): with the pad, the 4 transposed scalar stores of a warp then hit 32
//   distinct banks for every BK (rung 8's order leaves BK >= 16 with a 2-way conflict).
#include "common.cuh"

namespace gemmlab {

// Row `row` (of `rows`), columns col..col+3 (of `cols`) of a row-major matrix with leading
// dimension `cols`: one float4 when in bounds and `vec` (rows 16-byte aligned), else scalar
// loads with zeros outside the matrix.
__device__ __forceinline__ float4 load4_guarded(const float* __restrict__ P, int row, int rows, int col, int cols,
                                                bool vec) {
    const long long base = (long long)row * cols;
    if (vec && row < rows && col + 3 < cols) return load_float4(P + base + col);
    const bool ok = row < rows;
    float4 v;
    v.x = (ok && col + 0 < cols) ? P[base + col + 0] : 0.0f;
    v.y = (ok && col + 1 < cols) ? P[base + col + 1] : 0.0f;
    v.z = (ok && col + 2 < cols) ? P[base + col + 2] : 0.0f;
    v.w = (ok && col + 3 < cols) ? P[base + col + 3] : 0.0f;
    return v;
}

template <int BM, int BN, int BK, int TM, int TN, int NUM_THREADS>
__global__ void __launch_bounds__(NUM_THREADS)
sgemm_autotuned(int M, int N, int K, float alpha, const float* __restrict__ A,
                const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int NT = NUM_THREADS;
    constexpr int TC = 16;       // thread columns of the grid
    constexpr int TR = NT / TC;  // thread rows of the grid
    constexpr int WM = TR * TM;  // rows of C one pass of the thread grid covers
    constexpr int WN = TC * TN;  // columns of C one pass covers
    constexpr int MI = BM / WM;  // sub-tiles per thread, down
    constexpr int NI = BN / WN;  // and across
    constexpr int PADA = 4;      // As row padding (rung 8): 16-byte aligned, shifts row k by 4k banks
    constexpr int BMP = BM + PADA;
    constexpr int KQ = BK / 4;                 // float4s per row of the A tile
    constexpr int KL = (KQ % 2 == 0) ? 2 : 1;  // float4s of one row per warp instruction
    // seed 001/000 constraints
    static_assert((NT * 4) % BK == 0, "NUM_THREADS*4 must be a multiple of BK (seed 001)");
    static_assert((NT * 4) % BN == 0, "NUM_THREADS*4 must be a multiple of BN (seed 001)");
    static_assert((BM * BK) % (4 * NT) == 0, "BM*BK must be a multiple of 4*NUM_THREADS (float4 A loads)");
    static_assert((BN * BK) % (4 * NT) == 0, "BN*BK must be a multiple of 4*NUM_THREADS (float4 B loads)");
    static_assert(NT % TC == 0, "NUM_THREADS must be a multiple of 16 (16-column thread grid)");
    static_assert(BM % WM == 0, "BM must be a multiple of TM*NUM_THREADS/16 (16*TM at 256 threads)");
    static_assert(BN % WN == 0, "BN must be a multiple of 16*TN");
    static_assert(BM * BN <= 128 * NT, "at most 128 accumulators per thread (256 cannot stay in registers)");
    // float4 granularity of the global and shared accesses
    static_assert(BK % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "BK, TM and TN must be multiples of 4");
    __shared__ __align__(16) float As[BK * BMP];  // transposed and padded: As[k * BMP + m]
    __shared__ __align__(16) float Bs[BK * BN];   // linearised: see the B store below

    const int tid = threadIdx.x;
    const int tc = tid % TC;
    const int tr = tid / TC;
    const int blockRow = blockIdx.y * BM;
    const int blockCol = blockIdx.x * BN;
    // float4 global access needs every row start 16-byte aligned.
    const bool vecA = (K % 4 == 0) && aligned16(A);
    const bool vecB = (N % 4 == 0) && aligned16(B);
    const bool vecC = (N % 4 == 0) && aligned16(C);

    // Thread tid loads float4s i = tid + r*NT of each tile. A order: KL consecutive float4s
    // of a row, then the next row (a warp instruction covers 16 rows x 32 bytes, one sector
    // each); B order: row by row, as rung 6. All of a tile's global loads are issued before
    // its shared stores; a tile entirely inside A (or B) with aligned rows takes a branch-free
    // float4 path, edge tiles the guarded one.
    constexpr int RA = (BM * KQ) / NT, RB = (BK * BN / 4) / NT;
    float acc[MI * TM][NI * TN] = {{0.0f}};
    float regM[MI * TM];
    float regN[NI * TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        // Block-uniform: is every float4 of this tile in bounds and 16-byte aligned?
        const bool fullA = vecA && blockRow + BM <= M && k0 + BK <= K;
        const bool fullB = vecB && blockCol + BN <= N && k0 + BK <= K;
        float4 va[RA], vb[RB];
#pragma unroll
        for (int r = 0; r < RA; ++r) {
            const int i = tid + r * NT;
            const int m = (i / KL) % BM, k = ((i / (KL * BM)) * KL + i % KL) * 4;
            va[r] = fullA ? load_float4(A + (long long)(blockRow + m) * K + k0 + k)
                          : load4_guarded(A, blockRow + m, M, k0 + k, K, vecA);
        }
#pragma unroll
        for (int r = 0; r < RB; ++r) {
            const int i = tid + r * NT;
            const int k = i / (BN / 4), c = (i % (BN / 4)) * 4;
            vb[r] = fullB ? load_float4(B + (long long)(k0 + k) * N + blockCol + c)
                          : load4_guarded(B, k0 + k, K, blockCol + c, N, vecB);
        }
#pragma unroll
        for (int r = 0; r < RA; ++r) {
            const int i = tid + r * NT;
            const int m = (i / KL) % BM, k = ((i / (KL * BM)) * KL + i % KL) * 4;
            As[(k + 0) * BMP + m] = va[r].x;
            As[(k + 1) * BMP + m] = va[r].y;
            As[(k + 2) * BMP + m] = va[r].z;
            As[(k + 3) * BMP + m] = va[r].w;
        }
#pragma unroll
        for (int r = 0; r < RB; ++r) {
            const int i = tid + r * NT;
            const int k = i / (BN / 4), c = (i % (BN / 4)) * 4;
            // Column c = g*WN + t*TN + 4h + j (thread column t, chunk h) lives at
            // g*WN + h*(4*TC) + t*4 + j: the float4s the 16 thread columns read together
            // for one (g, h) are consecutive. c % 4 == 0 and TN % 4 == 0: one float4 store
            // (indexed in float4s so the compiler sees the 16-byte alignment: STS.128).
            const int w = c % WN;
            reinterpret_cast<float4*>(Bs)[k * (BN / 4) + (c - w) / 4 + ((w % TN) / 4) * TC + w / TN] = vb[r];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int wm = 0; wm < MI; ++wm)
#pragma unroll
                for (int q = 0; q < TM; q += 4) {
                    const float4 a = load_float4(&As[k * BMP + wm * WM + tr * TM + q]);
                    regM[wm * TM + q] = a.x; regM[wm * TM + q + 1] = a.y;
                    regM[wm * TM + q + 2] = a.z; regM[wm * TM + q + 3] = a.w;
                }
#pragma unroll
            for (int wn = 0; wn < NI; ++wn)
#pragma unroll
                for (int h = 0; h < TN; h += 4) {
                    const float4 b = load_float4(&Bs[k * BN + wn * WN + h * TC + tc * 4]);
                    regN[wn * TN + h] = b.x; regN[wn * TN + h + 1] = b.y;
                    regN[wn * TN + h + 2] = b.z; regN[wn * TN + h + 3] = b.w;
                }
#pragma unroll
            for (int m = 0; m < MI * TM; ++m)
#pragma unroll
                for (int n = 0; n < NI * TN; ++n) acc[m][n] += regM[m] * regN[n];
        }
        __syncthreads();
    }
#pragma unroll
    for (int m = 0; m < MI * TM; ++m) {
        const int gr = blockRow + (m / TM) * WM + tr * TM + m % TM;
        if (gr >= M) continue;
#pragma unroll
        for (int n = 0; n < NI * TN; n += 4) {
            const int gc = blockCol + (n / TN) * WN + tc * TN + n % TN;
            const long long idx = (long long)gr * N + gc;
            if (vecC && gc + 3 < N) {
                float4 out;
                if (beta == 0.0f) {  // C is not read when beta == 0
                    out = make_float4(alpha * acc[m][n], alpha * acc[m][n + 1], alpha * acc[m][n + 2],
                                      alpha * acc[m][n + 3]);
                } else {
                    const float4 c = load_float4(C + idx);
                    out = make_float4(alpha * acc[m][n] + beta * c.x, alpha * acc[m][n + 1] + beta * c.y,
                                      alpha * acc[m][n + 2] + beta * c.z, alpha * acc[m][n + 3] + beta * c.w);
                }
                store_float4(C + idx, out);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (gc + j < N) epilogue(C, idx + j, acc[m][n + j], alpha, beta);
                }
            }
        }
    }
}

}  // namespace gemmlab
