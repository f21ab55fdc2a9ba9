// The body of tensor-core rungs 5 (fp16/bf16) and 6 (tf32): a persistent, warp-specialised,
// clustered wgmma GEMM with TMA loads (B multicast across the cluster) and TMA stores of C.
#pragma once

#include "hopper.cuh"
#include "wgmma_ops.cuh"

namespace gemmlab {
namespace hop {

// Cluster tile `tile` -> (row, column) of cluster tiles, in groups of `group` tile rows: the
// CTAs running at one time share few rows of A and few columns of B, so both stay in L2.
__device__ __forceinline__ void tile_coords(int tile, int tiles_m, int tiles_n, int group, int& tm, int& tn) {
    const int per_group = group * tiles_n;
    const int first = (tile / per_group) * group;
    const int rows = min(group, tiles_m - first);
    const int r = tile % per_group;
    tm = first + r % rows;
    tn = r / rows;
}

// KIND: 0 fp16, 1 bf16, 2 tf32. B_KMAJOR: how tmB describes B and how wgmma reads it -
//   0: B row-major KxN. Its TMA boxes are 64 K rows x 64 N columns (128-byte rows along N), so
//      B sits N-major in shared memory and wgmma reads it with the transpose bit set (16-bit only).
//   1: B given transposed, an NxK row-major array (the layout of x @ W.T, F.linear's weight).
//      Its TMA boxes are BN/CM N rows x one K tile, the same 128-byte swizzled K rows as A, so B
//      is K-major in shared memory and wgmma reads it without the transpose bit. Needed for tf32
//      (wgmma has no transpose for 32-bit types); for fp16/bf16 it reads W in place, no copy.
// OUT16: the type of C (tmC's and Cin's) - 0: fp32; 1: the 16-bit input type (fp16 or bf16, as
//   torch.mm writes for 16-bit inputs). Accumulation and the alpha/beta epilogue stay fp32; each
//   result is rounded once, to nearest even, as cuBLAS does. ldc is C's row stride in elements.
// A_MNMAJOR: how tmA describes A and how wgmma reads it -
//   0: A row-major MxK: boxes of 128 M rows x one K tile, K-major in shared memory.
//   1: A given transposed, a KxM row-major array (layouts tn and tt: A.T views). Its boxes are
//      BK K rows x 64 M columns, one per consumer warpgroup (the two 64-row halves of the tile),
//      so A sits M-major in shared memory, as a KxN B sits N-major, and wgmma reads it with its
//      A transpose bit (16-bit only). Each half is BK * 128 bytes, the same 8 KB as the K-major
//      half, so the stage layout and the consumers' offsets do not change.
template <int KIND, int B_KMAJOR, int OUT16, int BN, int STAGES, int CM, int GROUP_M, int A_MNMAJOR = 0>
__device__ __forceinline__ void persistent_gemm(const TmaMap& tmA, const TmaMap& tmB, const TmaMap& tmC, int M, int N,
                                                int K, float alpha, float beta, const void* __restrict__ Cin,
                                                int ldc) {
    constexpr bool TF32 = KIND == 2;
    constexpr bool KMAJOR = B_KMAJOR != 0;
    constexpr bool A_MN = A_MNMAJOR != 0;
    constexpr int EB = TF32 ? 4 : 2;            // bytes per input element
    constexpr int BM = 128, BK = 128 / EB;      // a K tile is one 128-byte swizzled row
    constexpr int KSTEP = 32 / EB;              // wgmma K: 16 (16-bit) or 8 (tf32), 32 bytes
    constexpr int A_BYTES = BM * 128, B_BYTES = BN * 128, STAGE_BYTES = A_BYTES + B_BYTES;
    constexpr int B_CHUNK = BK * 128;           // N-major B: 64 columns x BK rows
    constexpr int A_HALF = 64 * 128;            // one consumer's A: 64 rows x one K tile, or BK rows x 64 columns
    constexpr int B_PART = BN / CM;             // B columns (N-major) or rows (K-major) one CTA loads
    // A staged C chunk is 64 rows x 128 bytes (the TMA store's swizzled box): 32 fp32 or 64 16-bit columns
    constexpr int CB = OUT16 ? 2 : 4, C_COLS = 128 / CB, C_BUF = 64 * 128;
    constexpr int CONSUMER_WARPS = 8;
    static_assert(BN == 128 || BN == 256, "BN is 128 or 256 (one wgmma per K step)");
    static_assert(CM == 1 || CM == 2, "clusters of 1 or 2 CTAs along M");
    static_assert(B_KMAJOR == 0 || B_KMAJOR == 1, "B_KMAJOR is 0 (B is KxN) or 1 (B given as NxK)");
    static_assert(A_MNMAJOR == 0 || A_MNMAJOR == 1, "A_MNMAJOR is 0 (A is MxK) or 1 (A given as KxM)");
    static_assert(!A_MN || !TF32, "tf32 A must be K-major: wgmma has no transpose for 32-bit types");
    static_assert(!A_MN || BK * 128 == A_HALF, "an M-major half (BK rows of 128 bytes) fills a K-major one's space");
    static_assert(KMAJOR || !TF32, "tf32 B must be K-major: wgmma has no transpose for 32-bit types");
    static_assert(KMAJOR || B_PART % 64 == 0, "each CTA multicasts whole 64-column chunks of an N-major B");
    static_assert(STAGES >= 2, "a pipeline needs at least two stages");
    static_assert(OUT16 == 0 || (OUT16 == 1 && !TF32), "C is fp32, or 16-bit for 16-bit inputs");

    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    unsigned char* smem = smem_raw + ((1024 - (hg::smem_u32(smem_raw) & 1023)) & 1023);
    unsigned char* cbuf = smem + STAGES * STAGE_BYTES;  // 2 consumers x 2 buffers of C_BUF

    const int tid = threadIdx.x, wg = tid / 128, t = tid % 128;
    const int rank = CM > 1 ? (int)cluster_rank() : 0;
    const int cluster = CM > 1 ? (int)cluster_id_x() : (int)blockIdx.x;
    const int clusters = CM > 1 ? (int)cluster_count_x() : (int)gridDim.x;
    const int tiles_m = (M + BM * CM - 1) / (BM * CM), tiles_n = (N + BN - 1) / BN;
    const int tiles = tiles_m * tiles_n, ktiles = (K + BK - 1) / BK;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], CONSUMER_WARPS * CM);  // every consumer warp of every CTA it feeds
        }
        fence_barrier_init();
    }
    cluster_sync();  // barriers initialised in every CTA before any peer multicasts into them

    if (wg == 0) {  // producer: one thread issues every copy
        setmaxnreg_dec<40>();
        if (t == 0) {
            int it = 0;
            for (int tile = cluster; tile < tiles; tile += clusters) {
                int tm, tn;
                tile_coords(tile, tiles_m, tiles_n, GROUP_M, tm, tn);
                const int m0 = (tm * CM + rank) * BM, n0 = tn * BN;
                for (int k = 0; k < ktiles; ++k, ++it) {
                    const int s = it % STAGES;
                    if (it >= STAGES) mbar_wait(&empty[s], (it / STAGES - 1) & 1);
                    unsigned char* as = smem + s * STAGE_BYTES;
                    unsigned char* bs = as + A_BYTES;
                    mbar_expect_tx(&full[s], STAGE_BYTES);  // A, and all of B: ours and the peer's
                    if constexpr (A_MN) {  // two BK x 64 boxes of the KxM array, one per consumer half
                        tma_load_2d(as, tmA, &full[s], m0, k * BK);
                        tma_load_2d(as + A_HALF, tmA, &full[s], m0 + 64, k * BK);
                    } else {
                        tma_load_2d(as, tmA, &full[s], k * BK, m0);
                    }
                    if constexpr (KMAJOR) {  // B_PART N rows x one K tile: our share of B's rows
                        if constexpr (CM > 1)
                            tma_load_2d_multicast(bs + rank * B_PART * 128, tmB, &full[s], k * BK, n0 + rank * B_PART,
                                                  (1 << CM) - 1);
                        else
                            tma_load_2d(bs, tmB, &full[s], k * BK, n0);
                    } else {  // 64 x 64 chunks along N, BK rows of K each
#pragma unroll
                        for (int c = 0; c < B_PART / 64; ++c) {
                            const int chunk = rank * (B_PART / 64) + c;
                            if constexpr (CM > 1)
                                tma_load_2d_multicast(bs + chunk * B_CHUNK, tmB, &full[s], n0 + 64 * chunk, k * BK,
                                                      (1 << CM) - 1);
                            else
                                tma_load_2d(bs + chunk * B_CHUNK, tmB, &full[s], n0 + 64 * chunk, k * BK);
                        }
                    }
                }
            }
        }
    } else {  // consumers: warpgroup 1 rows 0..63 of the CTA's tile, warpgroup 2 rows 64..127
        setmaxnreg_inc<232>();
        const int half = wg - 1;
        unsigned char* my_cbuf = cbuf + half * 2 * C_BUF;
        auto release = [&](int s) {  // this warp no longer reads stage s, in any CTA it came to
            if (t % 32 == 0) {
#pragma unroll
                for (int c = 0; c < CM; ++c) {
                    if constexpr (CM > 1)
                        mbar_arrive_cluster(&empty[s], c);
                    else
                        mbar_arrive(&empty[s]);
                }
            }
        };
        float acc[BN / 2];
        int it = 0;
        for (int tile = cluster; tile < tiles; tile += clusters) {
            int tm, tn;
            tile_coords(tile, tiles_m, tiles_n, GROUP_M, tm, tn);
            const int m0 = (tm * CM + rank) * BM + 64 * half, n0 = tn * BN;
            for (int k = 0; k < ktiles; ++k, ++it) {
                const int s = it % STAGES;
                mbar_wait(&full[s], (it / STAGES) & 1);
                const unsigned char* as = smem + s * STAGE_BYTES + half * A_HALF;
                const unsigned char* bs = smem + s * STAGE_BYTES + A_BYTES;
                fence_operands(acc);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BK / KSTEP; ++kk) {
                    // K-major A: the next 32 bytes of each of its 64 rows; M-major A: the next
                    // KSTEP rows of its 64-column box (one box spans the wgmma's M = 64)
                    const unsigned long long da = A_MN ? make_desc(as + kk * KSTEP * 128, A_HALF, 1024)
                                                       : make_desc(as + kk * 32, 16, 1024);
                    // K-major B: like A, the next 32 bytes of every 128-byte row; N-major B: the
                    // next KSTEP rows of each 64-column chunk (chunks B_CHUNK bytes apart)
                    const unsigned long long db = KMAJOR ? make_desc(bs + kk * 32, 16, 1024)
                                                         : make_desc(bs + kk * KSTEP * 128, B_CHUNK, 1024);
                    wgmma<BN, KIND, KMAJOR ? 0 : 1, A_MN ? 1 : 0>(acc, da, db, (k > 0 || kk > 0) ? 1 : 0);
                }
                wgmma_commit();
                wgmma_wait<1>();
                fence_operands(acc);
                if (k > 0) release((it - 1) % STAGES);
            }
            wgmma_wait<0>();
            fence_operands(acc);
            release((it - 1) % STAGES);

            // Epilogue: C_COLS-column chunks through two swizzled staging buffers, each stored by
            // TMA (which clips rows >= M and columns >= N) while the next one is filled.
#pragma unroll
            for (int j = 0; j < BN / C_COLS; ++j) {
                unsigned char* buf = my_cbuf + (j % 2) * C_BUF;
                if (t == 0) bulk_wait_read<1>();  // the store that last read `buf` is done with it
                named_barrier(1 + half, 128);
#pragma unroll
                for (int q = 0; q < C_COLS / 4; ++q) {
                    // A 16-bit chunk holds 64 columns, twice an fp32 one: unfenced, the compiler
                    // issues all 32 of a thread's beta loads of C at once and, with 128
                    // accumulators live, spills (ptxas at BN = 256). Ordering the two halves
                    // keeps 16 loads in flight, as for fp32, and no spill.
                    if (OUT16 && q == C_COLS / 8) asm volatile("" ::: "memory");
                    const int i = j * (C_COLS / 2) + 2 * q;  // accumulator pair in column chunk j
                    const int r = acc_row(t, i), c = acc_col(t, i) - j * C_COLS;
                    float v0 = alpha * acc[i], v1 = alpha * acc[i + 1];
                    if (beta != 0.0f) {  // C read only here: beta == 0 never touches it
                        const int gr = m0 + r, gc = n0 + j * C_COLS + c;
                        const long long at = (long long)gr * ldc + gc;
                        if constexpr (OUT16) {
                            const hg::bits16* c16 = static_cast<const hg::bits16*>(Cin);
                            if (gr < M && gc < N) v0 += beta * load16<KIND>(c16 + at);
                            if (gr < M && gc + 1 < N) v1 += beta * load16<KIND>(c16 + at + 1);
                        } else {
                            const float* c32 = static_cast<const float*>(Cin);
                            if (gr < M && gc < N) v0 += beta * c32[at];
                            if (gr < M && gc + 1 < N) v1 += beta * c32[at + 1];
                        }
                    }
                    // 128-byte swizzle: 16-byte unit u of row r sits at unit u ^ (r % 8); the pair
                    // (c, c + 1), c even, is one 8-byte (fp32) or 4-byte (16-bit) word of it
                    const int byte = c * CB;
                    unsigned char* dst = buf + r * 128 + (((byte >> 4) ^ (r & 7)) << 4) + (byte & 15);
                    if constexpr (OUT16)
                        *reinterpret_cast<unsigned*>(dst) = pack_rn<KIND>(v0, v1);
                    else
                        *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
                }
                fence_proxy_async();
                named_barrier(1 + half, 128);
                if (t == 0) {
                    tma_store_2d(tmC, buf, n0 + j * C_COLS, m0);
                    bulk_commit();
                }
            }
        }
        if (t == 0) bulk_wait_all();
    }
    cluster_sync();  // no CTA leaves while a peer may still arrive on its barriers
}

}  // namespace hop
}  // namespace gemmlab
