// Rung 14 - a cuBLAS-class SIMT kernel: the shape of cuBLAS's own FP32 kernel on Hopper
// (8 warps, BK = 8, 3 stages, 128 outputs a thread), built so its SASS looks like cuBLAS's.
// Idea: rung 13's loop is a fifth non-FFMA (per-copy addresses, predicates, branches) and
//   stalls where cuBLAS's does not. Here an aligned problem runs straight-line copies (one
//   predicated 16-byte load or cp.async each, addresses moved by a constant); A is loaded a
//   tile ahead of its transposing shared stores; 8x16 thread tiles in strided float4 chunks
//   read every fragment with one conflict-free 128-bit LDS; the barrier sits in the last
//   K-step; the FFMA order is a parameter. Details beside each piece below; measurements in
//   docs/ladder.md (rung 14).
// Should move: FFMA share of the main loop 79% -> ~90% (gemmlab analyze); issue slots busy
//   towards cuBLAS's 91%, wait and long-scoreboard stalls down to its level (gemmlab profile).
//
// Notes on the choices:
//   - an unaligned or odd problem (one uniform branch per block) runs the same loop with
//     element-wise copies;
//   - A's loads start right after the barrier of the tile before, a whole tile ahead of their
//     stores. Issued in the same tile, ptxas sinks them next to the stores, which then wait on
//     global latency (long-scoreboard stalls). 4-byte cp.async copies for A, as cuBLAS uses,
//     measured 3-5% slower here;
//   - LDA = 4 (mod 8): the transposing stores of a warp hit 32 distinct banks;
//   - the next tile's first fragments are read right after the barrier inside the last
//     K-step, so the barrier hides behind that step's FFMAs (one barrier per K-tile);
//   - the block-index swizzle and the deterministic split-K of rung 13 are kept;
//   - STREAMK = 1 or 2 runs the same main loop under a stream-K schedule (stream_k.cuh) for
//     shapes whose tile count leaves the last wave part-empty (3072^3: 288 tiles, 2.2 waves);
//   - the epilogue writes each row of a thread's chunk as one 128-bit store: a warp's store
//     covers whole 32-byte sectors (64 contiguous bytes a row), so staging C through shared
//     memory would not cut sectors further.
#include "async_copy.cuh"
#include "ffma_order.cuh"
#include "gmem_tiles.cuh"
#include "stream_k.cuh"

namespace gemmlab {

// A 16-byte global load predicated in the instruction itself (zeros when !ok): no branch, so
// the per-tile copies of an aligned problem are straight-line code.
__device__ __forceinline__ float4 ldg4_or_zero(const float* p, bool ok) {
    float4 v;
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n"
        " mov.b32 %0, 0;\n mov.b32 %1, 0;\n mov.b32 %2, 0;\n mov.b32 %3, 0;\n"
        " @p ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];\n}\n"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(p), "r"((int)ok));
    return v;
}

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int NT, int STAGES, int PADA, int GROUP,
          int ORDER>
struct BigTile {
    static constexpr int LDA = BM + PADA;
    static constexpr int A_STAGE = BK * LDA;
    static constexpr int B_STAGE = BK * BN;
    static constexpr int LM = WM / TM, LN = WN / TN;  // lanes along M and N inside a warp
    static constexpr int MCH = TM / 4, NCH = TN / 4;  // a thread's float4 chunks along M and N
    static constexpr int A_VECS = BM * BK / 4 / NT;   // float4s of A a thread brings per K-tile
    static constexpr int B_VECS = BK * BN / 4 / NT;
    static constexpr int A_ROW_STEP = NT / (BK / 4);  // rows between a thread's A float4s
    static constexpr int B_ROW_STEP = NT / (BN / 4);
    static_assert(NT == (BM / WM) * (BN / WN) * 32, "one warp per warp tile");
    static_assert(LM * LN == 32 && WM % TM == 0 && WN % TN == 0, "a warp's lanes tile its warp tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0 && BN % 4 == 0 && PADA % 4 == 0, "float4 granularity");
    static_assert(BK % 2 == 0, "the fragment buffers alternate, so a K-tile has an even step count");
    static_assert(A_VECS * NT * 4 == BM * BK && B_VECS * NT * 4 == BK * BN, "the threads split the tiles evenly");
    static_assert(NT % (BK / 4) == 0 && NT % (BN / 4) == 0, "whole rows of 16-byte words per pass");
    static_assert(STAGES >= 2 && GROUP >= 1, "a pipeline needs two stages; GROUP >= 1");
    static_assert(A_VECS <= 32, "aRowsIn keeps one bit per A float4 of a thread in 32 bits");

    // Where this thread's fragments sit in the block tile: chunk c of its A fragment is rows
    // a_off() + c*LM*4 .. +3, chunk c of its B fragment columns b_off() + c*LN*4 .. +3.
    static __device__ __forceinline__ int a_off() {
        return (threadIdx.x / 32 / (BN / WN)) * WM + (threadIdx.x % 32 % LM) * 4;
    }
    static __device__ __forceinline__ int b_off() {
        return (threadIdx.x / 32 % (BN / WN)) * WN + (threadIdx.x % 32 / LM) * 4;
    }

    // The K-tiles [tBegin, tBegin + tiles) of the output tile at (row0, col0), summed into acc
    // (which starts at zero here). VEC: K and N multiples of 4 and A, B 16-byte aligned, so every
    // float4 of A and B is wholly inside or wholly outside the matrix and the copies need one
    // predicate each, no branches.
    template <bool VEC>
    static __device__ __forceinline__ void mainloop(int M, int N, int K, const float* __restrict__ A,
                                                    const float* __restrict__ B, int row0, int col0, int tBegin,
                                                    int tiles, float (&acc)[TM][TN]) {
        extern __shared__ __align__(16) float smem[];
        float* As = smem;                     // STAGES x [BK][LDA], A transposed
        float* Bs = smem + STAGES * A_STAGE;  // STAGES x [BK][BN]

        // This thread's pieces of a K-tile, fixed for the whole loop: A float4 v covers row
        // aRow + v * A_ROW_STEP of the block tile, columns aK..aK+3 of the K-tile; B float4 v
        // covers row bK + v * B_ROW_STEP, columns bN..bN+3. Consecutive threads take consecutive
        // 16-byte words of a row: coalesced. Sources and K indices move by a constant a tile.
        const int aRow = threadIdx.x / (BK / 4), aK = (threadIdx.x % (BK / 4)) * 4;
        const int bK = threadIdx.x / (BN / 4), bN = (threadIdx.x % (BN / 4)) * 4;
        const float* aNext = A + (long long)(row0 + aRow) * K + (long long)tBegin * BK + aK;
        const float* bNext = B + ((long long)tBegin * BK + bK) * N + col0 + bN;
        const long long aRowStride = (long long)A_ROW_STEP * K, bRowStride = (long long)B_ROW_STEP * N;
        int kA = tBegin * BK, kB = tBegin * BK;  // first K index of the next A / B tile to bring
        unsigned aRowsIn = 0;  // bit v: A row aRow + v * A_ROW_STEP is inside the matrix
#pragma unroll
        for (int v = 0; v < A_VECS; ++v) aRowsIn |= (row0 + aRow + v * A_ROW_STEP < M) ? 1u << v : 0u;
        const bool bColIn = col0 + bN < N;

        // A tile past the last (live == false) still runs, every copy predicated off, so the
        // loop has no branch around it; its zeros land in a stage nobody reads.
        // A's next K-tile into registers, 16 bytes a load (stored transposed by store_a).
        auto load_a = [&](float4 (&ra)[A_VECS], bool live) {
            if constexpr (VEC) {
                const bool kIn = live && kA + aK < K;  // K % 4 == 0: a float4 is all in or all out
#pragma unroll
                for (int v = 0; v < A_VECS; ++v) ra[v] = ldg4_or_zero(aNext + v * aRowStride, kIn && (aRowsIn >> v & 1));
            } else {
                // Any alignment and shape: element by element, zeros outside the matrix.
#pragma unroll
                for (int v = 0; v < A_VECS; ++v) {
                    const float* p = aNext + v * aRowStride;
                    const bool rowIn = live && (aRowsIn >> v & 1);
                    ra[v].x = (rowIn && kA + aK + 0 < K) ? p[0] : 0.0f;
                    ra[v].y = (rowIn && kA + aK + 1 < K) ? p[1] : 0.0f;
                    ra[v].z = (rowIn && kA + aK + 2 < K) ? p[2] : 0.0f;
                    ra[v].w = (rowIn && kA + aK + 3 < K) ? p[3] : 0.0f;
                }
            }
            aNext += BK;
            kA += BK;
        };
        // ... stored transposed: as[k][m]. With LDA = 4 (mod 8) the two K-halves a warp writes
        // land 16 banks apart, so a warp's 32 stores hit 32 banks.
        auto store_a = [&](float* as, const float4 (&ra)[A_VECS]) {
#pragma unroll
            for (int v = 0; v < A_VECS; ++v) {
                float* d = as + aK * LDA + aRow + v * A_ROW_STEP;
                d[0 * LDA] = ra[v].x;
                d[1 * LDA] = ra[v].y;
                d[2 * LDA] = ra[v].z;
                d[3 * LDA] = ra[v].w;
            }
        };
        // B's next K-tile straight into its stage with cp.async, zero-filled past K and N.
        auto copy_b = [&](float* bs, bool live) {
            float* d = bs + bK * BN + bN;
#pragma unroll
            for (int v = 0; v < B_VECS; ++v) {
                const bool rowIn = live && kB + bK + v * B_ROW_STEP < K;
                const float* p = bNext + v * bRowStride;
                if constexpr (VEC) {
                    const bool ok = rowIn && bColIn;
                    cp_async16(d + v * B_ROW_STEP * BN, ok ? p : B, ok ? 16 : 0);
                } else {
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        const bool ok = rowIn && col0 + bN + j < N;
                        cp_async4(d + v * B_ROW_STEP * BN + j, ok ? p + j : B, ok);
                    }
                }
            }
            bNext += (long long)BK * N;
            kB += BK;
        };

        const int aOff = a_off(), bOff = b_off();
        auto load_frag = [&](const float* as, const float* bs, int k, float (&fa)[TM], float (&fb)[TN]) {
#pragma unroll
            for (int c = 0; c < MCH; ++c) {
                const float4 v = load_float4(as + k * LDA + aOff + c * LM * 4);
                fa[4 * c + 0] = v.x; fa[4 * c + 1] = v.y; fa[4 * c + 2] = v.z; fa[4 * c + 3] = v.w;
            }
#pragma unroll
            for (int c = 0; c < NCH; ++c) {
                const float4 v = load_float4(bs + k * BN + bOff + c * LN * 4);
                fb[4 * c + 0] = v.x; fb[4 * c + 1] = v.y; fb[4 * c + 2] = v.z; fb[4 * c + 3] = v.w;
            }
        };

#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
        float fa[2][TM], fb[2][TN];
        float4 ra[A_VECS];

        // Prologue: tiles 0 .. STAGES-2 into their stages (A synchronously through registers),
        // then tile STAGES-1's A into registers.
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            copy_b(Bs + s * B_STAGE, s < tiles);
            load_a(ra, s < tiles);
            store_a(As + s * A_STAGE, ra);
            cp_async_commit();  // one group per stage, even when empty, so the counting stays uniform
        }
        load_a(ra, STAGES - 1 < tiles);
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        load_frag(As, Bs, 0, fa[0], fb[0]);

        // Tile t+STAGES-1 goes into the stage tile t-1 used (everyone left it at the last barrier):
        // its B copies start at the top of iteration t; its A was loaded into registers right
        // after the barrier that ended tile t-1 and is stored at the last step of tile t, a
        // whole tile of FFMAs later. (A load placed in the same iteration as its store would be
        // sunk by ptxas towards the store, and then wait on global latency.)
        int rs = 0, ws = STAGES - 1;  // the stage read now, the stage refilled now
        for (int t = 0; t < tiles; ++t) {
            copy_b(Bs + ws * B_STAGE, t + STAGES - 1 < tiles);
            cp_async_commit();
            const float* as = As + rs * A_STAGE;
            const float* bs = Bs + rs * B_STAGE;
#pragma unroll
            for (int k = 0; k < BK; ++k) {
                if (k < BK - 1) {
                    load_frag(as, bs, k + 1, fa[(k + 1) & 1], fb[(k + 1) & 1]);
                } else {
                    // Last step: land tile t+STAGES-1's A, wait for tile t+1's B copies, and let
                    // one barrier both publish tile t+1 and free tile t's stage; then start the
                    // next A loads and read tile t+1's first fragments while this step's FFMAs run.
                    store_a(As + ws * A_STAGE, ra);
                    cp_async_wait<STAGES - 2>();
                    __syncthreads();
                    load_a(ra, t + STAGES < tiles);
                    rs = (rs + 1 == STAGES) ? 0 : rs + 1;
                    ws = (ws + 1 == STAGES) ? 0 : ws + 1;
                    load_frag(As + rs * A_STAGE, Bs + rs * B_STAGE, 0, fa[0], fb[0]);
                }
                outer_product<TM, TN, ORDER>(acc, fa[k & 1], fb[k & 1]);
            }
        }
        cp_async_wait<0>();  // no copy may still target shared memory when the block moves on
    }

    // C tile at (row0, col0) = a * acc + b * C, one float4 per (row, column chunk): each row of a
    // thread's chunk is one 128-bit store, and a warp's store covers whole 32-byte sectors.
    static __device__ __forceinline__ void store_tile(float* __restrict__ out, int M, int N, int row0, int col0,
                                                      const float (&acc)[TM][TN], float a, float b) {
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int c = 0; c < NCH; ++c) {
                const float* v = &acc[i][4 * c];
                store_chunk(out, M, N, row0, col0, i, c, make_float4(v[0], v[1], v[2], v[3]), a, b);
            }
    }
    // Row i, column chunk c of this thread's part of the tile.
    static __device__ __forceinline__ void store_chunk(float* __restrict__ out, int M, int N, int row0, int col0,
                                                       int i, int c, float4 v, float a, float b) {
        const bool vecC = (N % 4 == 0) && aligned16(out);
        store4(out, M, N, row0 + a_off() + (i / 4) * LM * 4 + i % 4, col0 + b_off() + c * LN * 4, v, a, b, vecC);
    }

    // One output tile a block (rung 13's swizzled order), or K-slices of it (split-K).
    template <bool VEC>
    static __device__ __forceinline__ void run(int M, int N, int K, float alpha, const float* __restrict__ A,
                                               const float* __restrict__ B, float beta, float* __restrict__ C,
                                               float* __restrict__ W) {
        int row0, col0, tBegin, tiles;
        swizzled_tile<BM, BN, GROUP>(M, N, row0, col0);
        k_slice<BK>(K, tBegin, tiles);
        float acc[TM][TN];
        mainloop<VEC>(M, N, K, A, B, row0, col0, tBegin, tiles, acc);
        // With split-K the unscaled partial sums go to this slice's workspace plane and the
        // reduction kernel applies alpha and beta once.
        const bool split = gridDim.z > 1;
        store_tile(split ? W + (long long)blockIdx.z * M * N : C, M, N, row0, col0, acc, split ? 1.0f : alpha,
                   split ? 0.0f : beta);
    }

    // Stream-K (stream_k.cuh): a one-wave grid walks its share of all tiles' K-iterations.
    // The block's schedule (which tile, which K-tiles) lives in shared memory, written by thread 0
    // and read back after each main loop: kept in registers it would stay live across the main
    // loop, which already holds ~230, and spill.
    template <bool VEC, bool HYBRID>
    static __device__ __forceinline__ void run_stream_k(int M, int N, int K, float alpha,
                                                        const float* __restrict__ A, const float* __restrict__ B,
                                                        float beta, float* __restrict__ C, float* __restrict__ W) {
        struct Schedule {
            StreamK sk;
            long long it, end;  // the next iteration of this block's range, and its end
            int s, k0, k1;      // the segment now: stream-K tile s, its K-tiles [k0, k1)
            int row0, col0;     // and where that tile sits in C
        };
        __shared__ Schedule sh;
        if (threadIdx.x == 0) {
            sh.sk = StreamK(((M + BM - 1) / BM) * ((N + BN - 1) / BN), (K + BK - 1) / BK, gridDim.x, HYBRID);
            sh.it = sh.sk.start(blockIdx.x);
            sh.end = sh.sk.start(blockIdx.x + 1);
        }
        __syncthreads();
        float acc[TM][TN];

        if constexpr (HYBRID) {
            // Whole tiles first, in swizzled order, so the wave shares A and B rows in L2.
            for (int t = blockIdx.x; t < sh.sk.dp_tiles; t += gridDim.x) {
                if (threadIdx.x == 0) {
                    sh.s = t;
                    swizzled_tile_at<BM, BN, GROUP>(M, N, t, sh.row0, sh.col0);
                }
                __syncthreads();
                mainloop<VEC>(M, N, K, A, B, sh.row0, sh.col0, 0, sh.sk.iters, acc);
                store_tile(C, M, N, sh.row0, sh.col0, acc, alpha, beta);
                t = sh.s;  // (from shared memory as well, rather than live across the main loop)
                __syncthreads();  // every read of this tile's schedule and stages is done before
                                  // thread 0 writes the next one
            }
        }
        while (sh.it < sh.end) {
            if (threadIdx.x == 0) {
                const int iters = sh.sk.iters;
                sh.s = (int)(sh.it / iters);
                sh.k0 = (int)(sh.it % iters);
                sh.k1 = (int)min((long long)iters, sh.k0 + (sh.end - sh.it));
                swizzled_tile_at<BM, BN, GROUP>(M, N, sh.sk.dp_tiles + sh.s, sh.row0, sh.col0);
            }
            __syncthreads();
            mainloop<VEC>(M, N, K, A, B, sh.row0, sh.col0, sh.k0, sh.k1 - sh.k0, acc);
            if (sh.k0 == 0 && sh.k1 == sh.sk.iters) {
                store_tile(C, M, N, sh.row0, sh.col0, acc, alpha, beta);
            } else {
                // A thread's partial lies in its own floats of the slot, (element, thread) order:
                // a warp's store covers 128 contiguous bytes. (4-byte stores: a 128-bit store of
                // acc would pin the accumulators to aligned register quads, and the main loop's
                // register allocation would then take bank conflicts.)
                float* slots = W + StreamK::flag_floats(sh.sk.tiles);
                float* mine = slots + sh.sk.slot(blockIdx.x, sh.s) * (BM * BN);
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) __stcg(&mine[(i * TN + j) * NT + threadIdx.x], acc[i][j]);
                const long long first = (long long)sh.s * sh.sk.iters;
                const int b0 = sh.sk.owner(first), b1 = sh.sk.owner(first + sh.sk.iters - 1);
                if (arrive_last(reinterpret_cast<int*>(W) + sh.s, b1 - b0 + 1)) {
                    // Last in: the sum in block order from the slots (its own included), four
                    // rows at a time. (A whole slot's loads in flight beside the accumulators
                    // would raise the kernel's register allocation, main loop included, to 255.)
                    constexpr int RG = TM < 4 ? TM : 4;
#pragma unroll
                    for (int i0 = 0; i0 < TM; i0 += RG) {
                        float sum[RG][TN];
#pragma unroll
                        for (int r = 0; r < RG; ++r)
#pragma unroll
                            for (int j = 0; j < TN; ++j) sum[r][j] = 0.0f;
                        for (int b = b0; b <= b1; ++b) {
                            const float* part = slots + sh.sk.slot(b, sh.s) * (BM * BN);
#pragma unroll
                            for (int r = 0; r < RG; ++r)
#pragma unroll
                                for (int j = 0; j < TN; ++j) sum[r][j] += __ldcg(&part[((i0 + r) * TN + j) * NT + threadIdx.x]);
                        }
#pragma unroll
                        for (int r = 0; r < RG; ++r)
#pragma unroll
                            for (int c = 0; c < NCH; ++c)
                                store_chunk(C, M, N, sh.row0, sh.col0, i0 + r, c,
                                            make_float4(sum[r][4 * c], sum[r][4 * c + 1], sum[r][4 * c + 2],
                                                        sum[r][4 * c + 3]), alpha, beta);
                    }
                }
            }
            __syncthreads();  // everyone has read this segment's schedule and fragments
            if (threadIdx.x == 0) sh.it += sh.k1 - sh.k0;
            __syncthreads();
        }
    }
};

// STREAMK: 0 one tile a block (split-K over gridDim.z); 1 stream-K over every tile; 2 hybrid,
// whole waves data-parallel and the last wave and a half dealt out in K (stream_k.cuh).
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int NT, int STAGES, int PADA, int GROUP,
          int MINB, int ORDER, int STREAMK>
__global__ void __launch_bounds__(NT, MINB)
sgemm_bigtile(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
              float beta, float* __restrict__ C, float* __restrict__ W) {
    using Tile = BigTile<BM, BN, BK, WM, WN, TM, TN, NT, STAGES, PADA, GROUP, ORDER>;
    // One uniform branch for the whole block picks the straight-line loop or the general one.
    const bool vec = (K % 4 == 0) && (N % 4 == 0) && aligned16(A) && aligned16(B);
    if constexpr (STREAMK == 0) {
        if (vec) {
            Tile::template run<true>(M, N, K, alpha, A, B, beta, C, W);
        } else {
            Tile::template run<false>(M, N, K, alpha, A, B, beta, C, W);
        }
    } else {
        if (vec) {
            Tile::template run_stream_k<true, STREAMK == 2>(M, N, K, alpha, A, B, beta, C, W);
        } else {
            Tile::template run_stream_k<false, STREAMK == 2>(M, N, K, alpha, A, B, beta, C, W);
        }
    }
}

}  // namespace gemmlab
