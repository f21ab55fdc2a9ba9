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
#include "common.cuh"
#include "async_copy.cuh"
#include "gmem_tiles.cuh"

namespace gemmlab {

template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int NT, int STAGES, int PADA,
          int GROUP>
__global__ void __launch_bounds__(NT)
sgemm_hopper_simt(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                  float beta, float* __restrict__ C, float* __restrict__ W) {
    constexpr int WARPS = NT / 32;
    constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
    constexpr int WSUBM = WM / WMITER;
    constexpr int WSUBN = WN / WNITER;
    constexpr int LDA = BM + PADA;
    constexpr int A_STAGE = BK * LDA;
    constexpr int B_STAGE = BK * BN;
    constexpr int FM = WMITER * TM;  // fragment lengths
    constexpr int FN = WNITER * TN;
    static_assert(NT % 32 == 0 && (BM / WM) * (BN / WN) == WARPS, "the warp tiles must cover the block tile");
    static_assert(WMITER >= 1 && (WM * WN) % (32 * TM * TN * WNITER) == 0, "WMITER must be a whole number");
    static_assert((WSUBM / TM) * (WSUBN / TN) == 32, "a warp's 32 threads must tile one sub-tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BN % 4 == 0 && PADA % 4 == 0, "16-byte granularity");
    static_assert((BM * BK) % NT == 0, "the threads must split the A tile evenly");
    static_assert((BN * BK / 4) % NT == 0, "the threads must split the B tile evenly in float4s");
    static_assert(STAGES >= 2 && GROUP >= 1, "a pipeline needs two stages; GROUP >= 1");

    extern __shared__ __align__(16) float smem[];
    float* As = smem;
    float* Bs = smem + STAGES * A_STAGE;

    // Swizzled tile order on a 1-D grid: GROUP row-tiles of one column band, then the next band.
    const int tilesM = (M + BM - 1) / BM, tilesN = (N + BN - 1) / BN;
    const int pid = blockIdx.x;
    const int perGroup = GROUP * tilesN;
    const int firstM = (pid / perGroup) * GROUP;
    const int groupRows = min(tilesM - firstM, GROUP);
    const int tileM = firstM + (pid % perGroup) % groupRows;
    const int tileN = (pid % perGroup) / groupRows;
    const int row0 = tileM * BM, col0 = tileN * BN;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warpRow = warp / (BN / WN), warpCol = warp % (BN / WN);
    const int tRow = lane / (WSUBN / TN), tCol = lane % (WSUBN / TN);
    const int aOff = warpRow * WM + tRow * TM;  // this thread's fragment offsets in a k-row
    const int bOff = warpCol * WN + tCol * TN;
    const bool vecB = (N % 4 == 0) && aligned16(B);
    const bool vecC = (N % 4 == 0) && aligned16(C);
    // Split-K: slice z of gridDim.z takes K-tiles [tBegin, tEnd).
    const int allTiles = (K + BK - 1) / BK;
    const int perSlice = (allTiles + gridDim.z - 1) / gridDim.z;
    const int tBegin = min(allTiles, (int)blockIdx.z * perSlice);
    const int tiles = min(allTiles, tBegin + perSlice) - tBegin;

    auto load_tile = [&](int t, int s) {
        if (t >= tiles) return;
        const int k0 = (tBegin + t) * BK;
        float* as = As + s * A_STAGE;
        float* bs = Bs + s * B_STAGE;
#pragma unroll
        for (int r = 0; r < (BM * BK) / NT; ++r) {
            const int i = threadIdx.x + r * NT;
            const int m = i / BK, k = i % BK;
            const bool ok = (row0 + m < M) && (k0 + k < K);
            cp_async4(&as[k * LDA + m], ok ? A + (long long)(row0 + m) * K + k0 + k : A, ok);
        }
#pragma unroll
        for (int r = 0; r < (BN * BK / 4) / NT; ++r) {
            const int i = threadIdx.x + r * NT;
            const int k = i / (BN / 4), n = (i % (BN / 4)) * 4;
            const int gk = k0 + k, gn = col0 + n;
            float* dst = &bs[k * BN + n];
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

    // Read step k's fragments of one stage into registers.
    auto load_frags = [&](const float* as, const float* bs, int k, float (&fa)[FM], float (&fb)[FN]) {
#pragma unroll
        for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 a = load_float4(&as[k * LDA + aOff + wm * WSUBM + i]);
                fa[wm * TM + i + 0] = a.x; fa[wm * TM + i + 1] = a.y;
                fa[wm * TM + i + 2] = a.z; fa[wm * TM + i + 3] = a.w;
            }
#pragma unroll
        for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 b = load_float4(&bs[k * BN + bOff + wn * WSUBN + j]);
                fb[wn * TN + j + 0] = b.x; fb[wn * TN + j + 1] = b.y;
                fb[wn * TN + j + 2] = b.z; fb[wn * TN + j + 3] = b.w;
            }
    };

    float acc[FM][FN] = {{0.0f}};
    float fa[2][FM];
    float fb[2][FN];

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
        load_frags(as, bs, 0, fa[0], fb[0]);
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (k + 1 < BK) load_frags(as, bs, k + 1, fa[(k + 1) & 1], fb[(k + 1) & 1]);  // next, early
#pragma unroll
            for (int m = 0; m < FM; ++m)
#pragma unroll
                for (int n = 0; n < FN; ++n) acc[m][n] += fa[k & 1][m] * fb[k & 1][n];
        }
    }
    cp_async_wait<0>();

    // With split-K the partial sums go to this slice's workspace plane, unscaled; the
    // reduction applies alpha and beta once. Otherwise the usual epilogue.
    const bool split = gridDim.z > 1;
    float* out = split ? W + (long long)blockIdx.z * M * N : C;
    const float outAlpha = split ? 1.0f : alpha;
    const float outBeta = split ? 0.0f : beta;
    const bool vecOut = split ? ((N % 4 == 0) && aligned16(W)) : vecC;
#pragma unroll
    for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int r = row0 + aOff + wm * WSUBM + i;
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int j = 0; j < TN; j += 4) {
                    const int c = col0 + bOff + wn * WSUBN + j;
                    const float* a = &acc[wm * TM + i][wn * TN + j];
                    store4(out, M, N, r, c, make_float4(a[0], a[1], a[2], a[3]), outAlpha, outBeta, vecOut);
                }
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
