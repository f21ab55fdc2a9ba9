// The body of tensor-core rungs 5 (fp16/bf16) and 6 (tf32): a persistent, warp-specialised,
// clustered wgmma GEMM with TMA loads (B multicast along the cluster's M side, A along its N
// side) and TMA stores of C.
#pragma once

#include "hopper.cuh"
#include "wgmma_ops.cuh"

namespace gemmlab {
namespace hop {

// Cluster tile `tile` -> (row, column) of cluster tiles, in groups of `group` tile rows: the
// CTAs running at one time share few rows of A and few columns of B, so both stay in L2.
__device__ __forceinline__ void tile_coords(int tile, int tiles_m, int tiles_n, int group, int& tm, int& tn) {
    group = min(group, tiles_m);  // the same order, and per_group stays within the tile count (no 32-bit overflow)
    const int per_group = group * tiles_n;
    const int first = (tile / per_group) * group;
    const int rows = min(group, tiles_m - first);
    const int r = tile % per_group;
    tm = first + r % rows;
    tn = r / rows;
}

// -- split-K: the K tiles of sliced output tiles dealt out in `splits` slices -----------------------
// Which tiles are sliced: all of them (uniform split-K, for problems with fewer tiles than SMs),
// or only those of a partial last wave (the tail split, next_unit). A sliced unit multiplies K
// tiles [k0, k1) of its tile; units of one slice run at one time on neighbouring tiles, as the
// grouped order intends. Each consumer warpgroup writes the 64 x BN partial of each of its 64-row blocks to a
// workspace slot of its own, in accumulator order (thread t's float4 j at j * 128 + t: 512
// contiguous bytes per warp), and counts itself in on its flag; the last to arrive sums every slot in slice order -
// so the result does not depend on who arrived last: deterministic, as cuBLAS is - and runs the
// epilogue. Nobody waits on another unit, so no schedule can deadlock. The last arriver puts the
// flag back to zero, so the next launch of the same shape needs no clearing (a shape with more
// flags would find partials where they lie: the host clears those first, ops/hgemm_tma.py).
// Workspace W (floats): splitk_flag_floats(sliced tiles * CM * CN) ints, then per sliced CTA tile,
// slice and 64-row block a 64 x BN slot (two flags per CTA tile: one per consumer, the second
// unused by a lone consumer).
__host__ __device__ __forceinline__ int splitk_flag_floats(int cta_tiles) { return (2 * cta_tiles + 31) / 32 * 32; }

// The walk over work units. The first `whole` cluster tiles are whole units (slice < 0); the
// other `tail` tiles are dealt out in `splits` K slices each, slice-major (v = slice * tail +
// tile, v counted past the whole units). So uniform split-K is whole = 0, whole tiles are
// whole = tiles, and a split of the last, partial wave only (the full waves whole, its few
// tiles in slices that fill the SMs the wave would leave idle: "tail split") lies between.
// (tile, slice) are advanced by `clusters` tiles a step, carried into the tail and into the next
// slice(s) with no division (one register fewer live across the K loop); in the tail, `tile`
// counts from the first tail tile. False once past the last unit.
__device__ __forceinline__ bool next_unit(int& tile, int& slice, int whole, int tail, int splits) {
    if (slice < 0) {
        if (tile < whole) return true;
        tile -= whole;
        slice = 0;
    }
    if (tail <= 0) return false;
    while (tile >= tail) {
        tile -= tail;
        ++slice;
    }
    return slice < splits;
}

// Slice `slice` of `splits` over `ktiles` K tiles: [k0, k1), never empty while splits <= ktiles
// (the host clamps splits so).
__device__ __forceinline__ void slice_range(int slice, int splits, int ktiles, int& k0, int& k1) {
    k0 = slice * ktiles / splits;  // 32-bit: splits <= 16 and ktiles = K / 64 (K / 32 for tf32) keep it in range
    k1 = (slice + 1) * ktiles / splits;
}

// Count this consumer warpgroup in on its half-tile flag, after each of its threads has written
// its share of the partial; true in every thread of the warpgroup that arrived last.
__device__ __forceinline__ bool arrive_last_half(int* flag, int splits, int half, int t, volatile int* last_of) {
    __threadfence();  // this thread's partial is visible GPU-wide before the warpgroup counts itself in
    named_barrier(1 + half, 128);
    if (t == 0) {
        const int before = atomicAdd(flag, 1);
        const int last = before == splits - 1;
        if (last) *flag = 0;
        last_of[half] = last;
    }
    named_barrier(1 + half, 128);
    const bool last = last_of[half] != 0;
    if (last) __threadfence();  // and the other units' partials are read after their counts
    return last;
}

// This thread's accumulators -> its share of a 64 x BN slot (accumulator order, coalesced).
template <int R>
__device__ __forceinline__ void store_partial(const float (&acc)[R], float* __restrict__ slot, int t) {
    float4* dst = reinterpret_cast<float4*>(slot);
#pragma unroll
    for (int j = 0; j < R / 4; ++j) dst[j * 128 + t] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
}

// acc = the sum of the half-tile's `splits` slots, slot 0 first (`stride` floats apart), read
// through L2 (.cg: another SM wrote them; this SM's L1 may hold an older launch's lines). Slot 0
// loads straight into the accumulators; each later slot comes in groups of G float4s kept in
// flight together (G * 4 registers beside the accumulators: the kernel is built for 168, and
// G = 8 still compiles without a spill at BN = 256). The sum is latency-bound: with G = 2 the
// tail split's last arriver read its 128 KB partials at ~50 GB/s (H100, 3072^3: 3 slices and 5
// ran alike, 87% of cuBLAS), so more loads are kept in flight.
template <int R>
__device__ __forceinline__ void sum_partials(float (&acc)[R], const float* __restrict__ slot0, long long stride,
                                             int splits, int t) {
    constexpr int G = R / 4 < 8 ? R / 4 : 8;
    static_assert((R / 4) % G == 0, "whole groups of float4s");
    const float4* p = reinterpret_cast<const float4*>(slot0) + t;
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
        const float4 v = __ldcg(p + j * 128);
        acc[4 * j] = v.x;
        acc[4 * j + 1] = v.y;
        acc[4 * j + 2] = v.z;
        acc[4 * j + 3] = v.w;
    }
#pragma unroll 1
    for (int s = 1; s < splits; ++s) {
        p += stride / 4;
#pragma unroll
        for (int g = 0; g < R / 4; g += G) {
            float4 w[G];
#pragma unroll
            for (int q = 0; q < G; ++q) w[q] = __ldcg(p + (g + q) * 128);
#pragma unroll
            for (int q = 0; q < G; ++q) {
                const int i = 4 * (g + q);
                acc[i] += w[q].x;
                acc[i + 1] += w[q].y;
                acc[i + 2] += w[q].z;
                acc[i + 3] += w[q].w;
            }
        }
    }
}

// KIND: 0 fp16, 1 bf16, 2 tf32. B_KMAJOR: how tmB describes B and how wgmma reads it -
//   0: B row-major KxN. Its TMA boxes are BK K rows x one 128-byte row of N columns (64 16-bit, 32
//      fp32), so B sits N-major in shared memory. 16-bit: wgmma reads it with the transpose bit.
//      tf32 has no transpose bit, so the kernel computes the transposed product, C^T = B^T A^T
//      ("RS"): each consumer reads its 64 columns of B's tile into registers - where any layout can
//      be read - as wgmma's A operand, and A's K-major tile is wgmma's B operand. The CTA's tile
//      is then BN rows (wgmma's N) x 128 columns (two consumers of 64), and each consumer holds
//      64 columns x BN rows of C. No transposing copy of B, unlike a K-major-only tf32 GEMM.
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
//      tf32 ("RSA"): no transpose bit, but wgmma's A operand may come from registers. A's boxes
//      are BK K rows x 32 M columns (one 128-byte row), two per consumer, and each consumer loads
//      its fragments from them as RS loads B's (the fragment rows a fixed order of its 64 rows, which
//      the epilogue undoes). B must then be K-major in shared memory: given as NxK (tt)
//      it is; given as KxN (tn: "TRANSB") it lands N-major, and the consumers transpose each
//      stage's B tile in place, while the last stage's wgmmas run. That is shared-memory traffic
//      (2 x BN x 128 bytes a stage) where a K-major tf32 GEMM has none; it replaces a timed
//      transpose of a whole operand.
// CM x CN: the cluster, CM CTAs along M by CN along N (rank = rm + CM * rn), which computes a
//   (CM * TM) x (CN * TN) cluster tile (TM x TN: 128 x BN, or BN x 128 for RS). CTAs of one CTA row
//   (same rm) need the same A rows: with CN = 2 each loads one half of them (64 rows; BN / 2 for
//   RS) and multicasts it to its row, halving A's L2 reads
//   (cuBLAS's 128x64 tiles at 1024^3 run in 1x2 clusters so). CTAs of one CTA column (same rn)
//   share B the same way: each loads the 64-column chunks c of a KxN B with c % CM == rm
//   (unevenly for BN = 64 or 192), or BN / CM rows of an NxK one. A stage is filled by the CTA's whole
//   row and column, so each consumer warp releases a stage to every CTA of the cluster.
// BM, CONSUMERS: the tile's rows, 128 or 64 (non-RS), and the consumer warpgroups that compute them.
//   Two split a 128-row tile into 64-row halves; one (CONSUMERS = 1) issues every 64-row block
//   itself, block after block each K step into its own accumulator set: two for BM = 128 (cuBLAS's
//   arrangement at 1024^3: half the warps waiting on each stage, B's descriptors reused), one for
//   BM = 64 (64-row tiles: twice the tiles of a small problem, each K step one wgmma of the full BN,
//   which reads fewer shared-memory bytes per multiply than two of BN / 2). The block is 128 *
//   (1 + CONSUMERS) threads. tf32's transposed product keeps two consumers of 64 columns.
// PINGPONG (rung 5, CONSUMERS = 2): each consumer warpgroup computes whole tiles of its own, BM x BN
//   (every 64-row block, as a lone consumer does), the CTA's work units dealt out alternately, so
//   one warpgroup's epilogue runs while the other's wgmmas keep the tensor cores busy (CUTLASS's
//   "ping-pong" schedule; the cooperative one, both warpgroups on one tile, stalls the tensor
//   cores for every epilogue). The stage ring is shared in unit order: the producer does not
//   change. A warpgroup waits for its unit's first stage only once the other has waited for its
//   unit's last one (named barriers 4 and 5): a stage's full barrier is then at most one phase
//   behind the one awaited, as a parity wait needs.
// whole, splits (runtime; the host sets both, specs.persistent_schedule): the first `whole` cluster
//   tiles run whole, the others in `splits` K slices each (1..ktiles: the host clamps it), split-K
//   above; W the zeroed workspace the sliced tiles need (null when no tile is sliced).
template <int KIND, int B_KMAJOR, int OUT16, int BN, int STAGES, int CM, int CN, int GROUP_M, int A_MNMAJOR = 0,
          int BM = 128, int CONSUMERS = 2, int PINGPONG = 0>
__device__ __forceinline__ void persistent_gemm(const TmaMap& tmA, const TmaMap& tmB, const TmaMap& tmC, int M, int N,
                                                int K, float alpha, float beta, const void* __restrict__ Cin,
                                                int ldc, float* __restrict__ W, int whole, int splits) {
    constexpr bool TF32 = KIND == 2;
    constexpr bool KMAJOR = B_KMAJOR != 0;
    constexpr bool A_MN = A_MNMAJOR != 0;
    constexpr bool RS = TF32 && !KMAJOR && !A_MN;  // tf32, A MxK and B KxN: the transposed product, B through registers
    constexpr bool RSA = TF32 && A_MN;             // tf32 with a KxM A (tn, tt): A through registers
    constexpr bool TRANSB = RSA && !KMAJOR;        // ... and a KxN B (tn): B transposed in shared memory
    constexpr int EB = TF32 ? 4 : 2;            // bytes per input element
    constexpr int BK = 128 / EB;                // a K tile is one 128-byte swizzled row
    constexpr int KSTEP = 32 / EB;              // wgmma K: 16 (16-bit) or 8 (tf32), 32 bytes
    constexpr int TM = RS ? BN : BM, TN = RS ? BM : BN;  // the CTA's tile of C: TM rows x TN columns
    constexpr bool PP = PINGPONG != 0;          // ping-pong: a tile per consumer warpgroup, alternately
    // 64-row blocks of the tile (one wgmma M each; RS: 64-column blocks), and how many of them
    // each consumer warpgroup computes: one (two consumers split a 128-row tile) or all (a lone
    // consumer, or ping-pong)
    constexpr int RB = BM / 64, MB = PP ? RB : RB / CONSUMERS;
    constexpr int CHUNK_COLS = 128 / EB;        // N-major B, M-major A: chunks of one 128-byte row of columns
    constexpr int B_CHUNK = BK * 128, B_CHUNKS = TN / CHUNK_COLS;  // ... by BK rows each
    constexpr int A_CHUNKS = TM / CHUNK_COLS;   // an M-major A's chunks (16-bit: one per 64-row block)
    constexpr int A_BYTES = TM * 128, B_BYTES = TN * 128, STAGE_BYTES = A_BYTES + B_BYTES;
    constexpr int A_HALF = 64 * 128;            // one consumer's A: 64 rows x one K tile, or BK rows x 64 columns
    constexpr int A_PART = TM / CN;             // A rows one CTA loads (CN = 2: the rest come from its row peer)
    constexpr int B_PART = BN / CM;             // B rows one CTA loads (K-major B; an N-major B goes by chunks)
    // A staged C chunk is 64 rows x 128 bytes (the TMA store's swizzled box): 32 fp32 or 64 16-bit columns
    constexpr int CB = OUT16 ? 2 : 4, C_COLS = 128 / CB, C_BUF = 64 * 128;
    constexpr int CONSUMER_WARPS = 4 * CONSUMERS;
    constexpr int READER_WARPS = PP ? 4 : CONSUMER_WARPS;  // consumer warps that read (and release) a stage
    static_assert(BM == 64 || BM == 128 || BM == 256, "BM is 64, 128 or 256 rows (1, 2 or 4 wgmma M blocks)");
    static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
    static_assert(PP || RB % CONSUMERS == 0, "every consumer computes whole 64-row blocks");
    static_assert(!PP || (CONSUMERS == 2 && !TF32), "ping-pong: two consumer warpgroups, 16-bit inputs");
    static_assert(MB * BN / 2 <= 128, "at most 128 fp32 accumulators a consumer thread");
    static_assert(!(RS || RSA) || (BM == 128 && CONSUMERS == 2), "tf32 through registers: two consumers of 64");
    static_assert(!A_MN || A_CHUNKS % CN == 0, "an M-major A shared along N: whole chunks per CTA");
    static_assert(BN == 64 || BN == 128 || BN == 192 || BN == 256, "BN is 64, 128, 192 or 256 (one wgmma per K step)");
    static_assert(CM == 1 || CM == 2, "clusters of 1 or 2 CTAs along M");
    static_assert(CN == 1 || CN == 2, "clusters of 1 or 2 CTAs along N (CN = 2: each loads one half of A's rows)");
    constexpr int CS = CM * CN;  // CTAs per cluster
    static_assert(B_KMAJOR == 0 || B_KMAJOR == 1, "B_KMAJOR is 0 (B is KxN) or 1 (B given as NxK)");
    static_assert(A_MNMAJOR == 0 || A_MNMAJOR == 1, "A_MNMAJOR is 0 (A is MxK) or 1 (A given as KxM)");
    static_assert(A_CHUNKS * B_CHUNK == A_BYTES, "M-major chunks fill a K-major A's space");
    static_assert(A_PART % 8 == 0, "an A share is whole 8-row swizzle atoms");
    static_assert(!KMAJOR || B_PART % 8 == 0, "a K-major B share is whole 8-row swizzle atoms");
    static_assert(STAGES >= 2, "a pipeline needs at least two stages");
    static_assert(OUT16 == 0 || (OUT16 == 1 && !TF32), "C is fp32, or 16-bit for 16-bit inputs");

    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    // split-K: whether each consumer warpgroup arrived last on its half-tile (16 bytes: the specs count them)
    __shared__ __align__(16) int last_of[4];
    unsigned char* smem = smem_raw + ((1024 - (hg::smem_u32(smem_raw) & 1023)) & 1023);
    unsigned char* cbuf = smem + STAGES * STAGE_BYTES;  // 2 consumers x 2 buffers of C_BUF

    const int tid = threadIdx.x, wg = tid / 128, t = tid % 128;
    const int rank = CS > 1 ? (int)cluster_rank() : 0;
    const int rm = rank % CM, rn = rank / CM;  // this CTA's row and column in the cluster
    const int cluster = CS > 1 ? (int)cluster_id_x() : (int)blockIdx.x;
    const int clusters = CS > 1 ? (int)cluster_count_x() : (int)gridDim.x;
    const int tiles_m = (M + TM * CM - 1) / (TM * CM), tiles_n = (N + TN * CN - 1) / (TN * CN);
    const int tiles = tiles_m * tiles_n, ktiles = (K + BK - 1) / BK;
    // Where work unit (tile, slice) lies, read alike by the producer and the consumers: this CTA's
    // first row m0 and column n0 in its cluster tile, and the unit's K tiles [k0, k1).
    auto locate = [&](int tile, int slice, int& m0, int& n0, int& k0, int& k1) {
        int tm, tn;
        tile_coords(slice < 0 ? tile : whole + tile, tiles_m, tiles_n, GROUP_M, tm, tn);
        k0 = 0;
        k1 = ktiles;
        if (slice >= 0) slice_range(slice, splits, ktiles, k0, k1);
        m0 = (tm * CM + rm) * TM;
        n0 = (tn * CN + rn) * TN;
    };

    if (tid == 0) {
        // the descriptors load while the barriers are set up, not when the first copy needs them
        prefetch_map(tmA);
        prefetch_map(tmB);
        prefetch_map(tmC);
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], READER_WARPS * CS);  // every reading consumer warp of every CTA of the cluster
        }
        fence_barrier_init();
    }
    // barriers initialised in every CTA before any peer multicasts into them or arrives on them
    if constexpr (CS > 1)
        cluster_sync_after_init();
    else
        __syncthreads();

    if (wg == 0) {  // producer: one thread issues every copy
        // RSA: the producer needs fewer than 24, and at BN = 256 the consumers (128 accumulators, two
        // fragment sets) spilled a word at 232
        setmaxnreg_dec<RSA ? 24 : 40>();
        if (t == 0) {
            // multicast masks: A to the CTAs of this CTA's row (same rm), B to those of its column
            unsigned short mask_a = 0;
#pragma unroll
            for (int j = 0; j < CN; ++j) mask_a |= (unsigned short)(1u << (rm + CM * j));
            const unsigned short mask_b = (unsigned short)(((1u << CM) - 1) << (CM * rn));
            int it = 0;
            // work units walked as (tile, slice) with no division: next_unit
            for (int tile = cluster, slice = -1; next_unit(tile, slice, whole, tiles - whole, splits);
                 tile += clusters) {
                int m0, n0, k0, k1;
                locate(tile, slice, m0, n0, k0, k1);
                for (int k = k0; k < k1; ++k, ++it) {
                    const int s = it % STAGES;
                    if (it >= STAGES) mbar_wait(&empty[s], (it / STAGES - 1) & 1);
                    unsigned char* as = smem + s * STAGE_BYTES;
                    unsigned char* bs = as + A_BYTES;
                    mbar_expect_tx(&full[s], STAGE_BYTES);  // all of A and B: ours and the peers'
                    if constexpr (A_MN) {  // BK x CHUNK_COLS boxes of the KxM array; with CN = 2, chunk c
                                           // from the CTA of rank c % CN in our row, to the whole row
#pragma unroll
                        for (int j = 0; j < A_CHUNKS / CN; ++j) {
                            const int c = CN > 1 ? rn + CN * j : j;
                            if constexpr (CN > 1)
                                tma_load_2d_multicast(as + c * B_CHUNK, tmA, &full[s], m0 + CHUNK_COLS * c, k * BK,
                                                      mask_a);
                            else
                                tma_load_2d(as + c * B_CHUNK, tmA, &full[s], m0 + CHUNK_COLS * c, k * BK);
                        }
                    } else if constexpr (CN > 1) {  // our half of A's rows, to the CTAs of our row (an A_PART-row box)
                        tma_load_2d_multicast(as + rn * A_PART * 128, tmA, &full[s], k * BK, m0 + A_PART * rn, mask_a);
                    } else {
                        tma_load_2d(as, tmA, &full[s], k * BK, m0);
                    }
                    if constexpr (KMAJOR) {  // B_PART N rows x one K tile: our share of B's rows
                        if constexpr (CM > 1)
                            tma_load_2d_multicast(bs + rm * B_PART * 128, tmB, &full[s], k * BK, n0 + rm * B_PART,
                                                  mask_b);
                        else
                            tma_load_2d(bs, tmB, &full[s], k * BK, n0);
                    } else {  // CHUNK_COLS-column chunks along N, BK rows of K each: chunk c comes from the
                              // CTA of rank c % CM in the cluster column (unevenly for 16-bit BN = 64, 192)
#pragma unroll
                        for (int chunk = 0; chunk < B_CHUNKS; ++chunk) {
                            if (chunk % CM != rm) continue;
                            if constexpr (CM > 1)
                                tma_load_2d_multicast(bs + chunk * B_CHUNK, tmB, &full[s], n0 + CHUNK_COLS * chunk,
                                                      k * BK, mask_b);
                            else
                                tma_load_2d(bs + chunk * B_CHUNK, tmB, &full[s], n0 + CHUNK_COLS * chunk, k * BK);
                        }
                    }
                }
            }
            // No CTA may leave while a peer can still arrive on its barriers: wait for the release
            // of each stage's last fill, which every consumer warp of the cluster signals here.
            // After it no peer touches this CTA's shared memory (its multicasts into us were
            // all awaited by our consumers). CUTLASS's producer tail; it replaces a closing cluster
            // barrier, whose release arrival cost a GPU-wide memory barrier in every thread.
            if constexpr (CS > 1)
                for (int j = it > STAGES ? it - STAGES : 0; j < it; ++j) mbar_wait(&empty[j % STAGES], (j / STAGES) & 1);
        }
    } else {  // consumers: warpgroup 1 rows 0..63 of the CTA's tile, warpgroup 2 rows 64..127 (RS: columns);
              // a lone consumer (CONSUMERS = 1) every 64-row block of it, acc[mb] for block mb
        setmaxnreg_inc<RSA ? 240 : 232>();
        const int half = wg - 1;
        unsigned char* my_cbuf = cbuf + half * 2 * C_BUF;
        auto release = [&](int s) {  // this warp no longer reads stage s, in any CTA it came to
            if (t % 32 == 0) {
#pragma unroll
                for (int c = 0; c < CS; ++c) {
                    if constexpr (CS > 1)
                        mbar_arrive_cluster(&empty[s], c);
                    else
                        mbar_arrive(&empty[s]);
                }
            }
        };
        float acc[MB][BN / 2];
        auto fence_acc = [&] {
#pragma unroll
            for (int mb = 0; mb < MB; ++mb) fence_operands(acc[mb]);
        };
        int it = 0;
        // RS: wgmma's A fragment (rows g + 16w and g + 8 + 16w, K columns c and c + 4 of each 8-wide K
        // step; g = lane / 4, c = lane % 4, w the warp) is read from B's N-major chunks. Fragment row
        // g + 16w is column fcol = 16 (g / 4) + 4w + g % 4 of this warpgroup's first 32-column chunk,
        // row g + 8 + 16w the same column of its second. Any order of the columns multiplies alike;
        // this one puts a warp's 32 loads in 32 different banks. (8w + g, the first order tried, gave
        // lanes g and g + 4 the same 16-byte unit in rows c and c ^ 1: every load twice, ncu counted
        // one conflict per load.) frag_lo / frag_hi: the byte offsets of K rows c and c + 4 of that
        // column in a chunk (a 128-byte swizzled row per K; rows c and c + 4 keep their swizzle phase
        // in every K step, which is 8 rows).
        // RSA reads A's M-major chunks the same way: fragment row g + 16w is row fcol of the first
        // 32-row chunk, g + 8 + 16w the same row of the second; the epilogue writes them there.
        // (Zero, unused, for the other modes: their code is as it was without RS.)
        const int g4 = (t % 32) / 4;
        const int fcol = (RS || RSA) ? 16 * (g4 / 4) + 4 * (t / 32) + g4 % 4 : 0, fk = (RS || RSA) ? t % 4 : 0;
        const unsigned frag_lo = fk * 128 + ((((fcol >> 2) ^ fk)) << 4) + (fcol & 3) * 4;
        const unsigned frag_hi = (fk + 4) * 128 + ((((fcol >> 2) ^ (fk + 4))) << 4) + (fcol & 3) * 4;
        // C chunks stored so far: the staging buffer alternates with every chunk across tiles, so
        // a tile with an odd number of chunks (a 16-bit C at BN = 64 or 192) never refills the
        // buffer whose store may still be reading it (bulk_wait_read<1> below)
        unsigned chunk_no = 0;
        // this consumer's first 64-row block of the tile: its half, or (ping-pong) the whole tile's
        const int blk0 = PP ? 0 : half * MB;
        // unit_no: the CTA's work units so far; under ping-pong this warpgroup takes those with
        // unit_no % 2 == half
        for (int tile = cluster, slice = -1, unit_no = 0; next_unit(tile, slice, whole, tiles - whole, splits);
             tile += clusters, ++unit_no) {
            int m0, n0, k0, k1;
            locate(tile, slice, m0, n0, k0, k1);
            if constexpr (RS)
                n0 += 64 * half;  // this consumer's 64 columns
            else
                m0 += 64 * blk0;  // this consumer's first 64-row block
            const int nk = k1 - k0;  // the consumers count K tiles; only the producer needs where they are
            if constexpr (PP) {
                if (unit_no % 2 != half) {  // the other warpgroup's unit: its stages come next in the ring
                    it += nk;
                    continue;
                }
                if (unit_no > 0) named_barrier(4 + half, 256);  // the other has waited for its last stage
            }
            if constexpr (RS || RSA) {
                constexpr int KSTEPS = BK / KSTEP;
                // Two fragment sets, one per stage in turn: one stage's wgmmas may still be reading theirs
                // (wgmma_wait<1>) while the next stage's are loaded into the other
                unsigned frag_x[KSTEPS][4] = {}, frag_y[KSTEPS][4] = {};
                // TRANSB: the consumer warps transpose a stage's N-major B tile (BK rows of k x TN columns
                // of n, in 32-column chunks) in place into TN rows of n x one 128-byte K row, swizzled as
                // TMA would have written an NxK B. A thread moves 4 x 4 blocks (k 4a.., n 4b..) with four
                // 16-byte loads and four 16-byte stores each: it loads all of its blocks, both consumers
                // meet (every block read), then it stores them. The 8 lanes of a quarter warp (one
                // shared-memory phase of 16-byte accesses) take b % 8 = q, a = (q + d) % 8: the 16-byte
                // units they load, q ^ (4a + r) % 8, and store, a ^ (4b + j) % 8, are 8 different ones
                // each time, so neither side has a bank conflict (ncu: 4 wavefronts each).
                auto transpose_b = [&](unsigned char* bs) {
                    const int lane = t % 32, q = lane % 8, p = lane / 8, cw = 4 * half + t / 32;
                    constexpr int GROUPS = TN / 32;  // 8-block groups of b
                    // blocks c = 4 * step + p: 2 * TN of them, 32 a step, step cw + CONSUMER_WARPS * u
                    constexpr int STEPS = TN / 16, PER = (STEPS + CONSUMER_WARPS - 1) / CONSUMER_WARPS;
                    float4 v[PER][4];
#pragma unroll
                    for (int u = 0; u < PER; ++u) {
                        const int step = cw + CONSUMER_WARPS * u;
                        if (step >= STEPS) break;
                        const int c = 4 * step + p, b = q + 8 * (c % GROUPS), a = (q + c / GROUPS) % 8;
                        const unsigned char* cs = bs + (b / 8) * B_CHUNK;
#pragma unroll
                        for (int r = 0; r < 4; ++r) {
                            const int kr = 4 * a + r;
                            v[u][r] = *reinterpret_cast<const float4*>(cs + kr * 128 + ((q ^ (kr & 7)) << 4));
                        }
                    }
                    named_barrier(3, 256);
#pragma unroll
                    for (int u = 0; u < PER; ++u) {
                        const int step = cw + CONSUMER_WARPS * u;
                        if (step >= STEPS) break;
                        const int c = 4 * step + p, b = q + 8 * (c % GROUPS), a = (q + c / GROUPS) % 8;
#pragma unroll
                        for (int j = 0; j < 4; ++j) {
                            const int n = 4 * b + j;
                            const float* w0 = &v[u][0].x;
                            const float* w1 = &v[u][1].x;
                            const float* w2 = &v[u][2].x;
                            const float* w3 = &v[u][3].x;
                            *reinterpret_cast<float4*>(bs + n * 128 + ((a ^ (n & 7)) << 4)) =
                                make_float4(w0[j], w1[j], w2[j], w3[j]);
                        }
                    }
                };
                // One stage: the register operand's fragments into `fr`, then a wgmma per K step; `prev`
                // (the last stage's set) is kept live until its wgmmas are known done, so the compiler
                // reuses none of its registers
                auto rs_stage = [&](int k, unsigned (&fr)[KSTEPS][4], unsigned (&prev)[KSTEPS][4]) {
                    const int s = it % STAGES;
                    mbar_wait(&full[s], (it / STAGES) & 1);
                    if constexpr (TRANSB) {  // B made K-major, by both consumers while the last stage's wgmmas
                                             // run; seen by this stage's (the async proxy) after the fence
                        transpose_b(smem + s * STAGE_BYTES + A_BYTES);
                        fence_proxy_async();
                        named_barrier(3, 256);
                    }
                    const unsigned char* st = smem + s * STAGE_BYTES;
                    // RS: our two 32-column chunks of B, and A's TM rows K-major as wgmma's B; RSA: our two
                    // 32-row chunks of A, and B's TN rows K-major (as TMA landed them, or transposed)
                    const unsigned char* bs = RS ? st + A_BYTES + 2 * half * B_CHUNK : st + 2 * half * B_CHUNK;
                    const unsigned char* as = RS ? st : st + A_BYTES;
#pragma unroll
                    for (int kk = 0; kk < KSTEPS; ++kk) {
                        const unsigned char* kb = bs + kk * KSTEP * 128;
                        fr[kk][0] = *reinterpret_cast<const unsigned*>(kb + frag_lo);
                        fr[kk][1] = *reinterpret_cast<const unsigned*>(kb + B_CHUNK + frag_lo);
                        fr[kk][2] = *reinterpret_cast<const unsigned*>(kb + frag_hi);
                        fr[kk][3] = *reinterpret_cast<const unsigned*>(kb + B_CHUNK + frag_hi);
                    }
                    fence_operands(acc[0]);
                    wgmma_fence();
#pragma unroll
                    for (int kk = 0; kk < KSTEPS; ++kk)
                        wgmma_rs_tf32<BN>(acc[0], fr[kk], make_desc(as + kk * 32, 16, 1024), (k > 0 || kk > 0) ? 1 : 0);
                    wgmma_commit();
                    wgmma_wait<1>();
                    fence_operands(acc[0]);
#pragma unroll
                    for (int kk = 0; kk < KSTEPS; ++kk) fence_operands(prev[kk]);
                    if (k > 0) release((it - 1) % STAGES);
                    ++it;
                };
                int k = 0;
                for (; k + 2 <= nk; k += 2) {
                    rs_stage(k, frag_x, frag_y);
                    rs_stage(k + 1, frag_y, frag_x);
                }
                if (k < nk) rs_stage(k, frag_x, frag_y);
            } else {
                for (int k = 0; k < nk; ++k, ++it) {
                    const int s = it % STAGES;
                    mbar_wait(&full[s], (it / STAGES) & 1);
                    const unsigned char* bs = smem + s * STAGE_BYTES + A_BYTES;
                    fence_acc();
                    wgmma_fence();
                    // block by block (a lone consumer's second block reuses B's descriptors), one
                    // commit group for the stage
#pragma unroll
                    for (int mb = 0; mb < MB; ++mb) {
                        const unsigned char* as = smem + s * STAGE_BYTES + (blk0 + mb) * A_HALF;
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
                            wgmma<BN, KIND, KMAJOR ? 0 : 1, A_MN ? 1 : 0>(acc[mb], da, db, (k > 0 || kk > 0) ? 1 : 0);
                        }
                    }
                    wgmma_commit();
                    wgmma_wait<1>();
                    fence_acc();
                    if (k > 0) release((it - 1) % STAGES);
                }
            }
            if constexpr (PP) {  // every stage of this unit awaited: the other warpgroup may wait for the next unit's
                int t2 = tile + clusters, s2 = slice;
                if (next_unit(t2, s2, whole, tiles - whole, splits)) named_barrier_arrive(4 + (1 - half), 256);
            }
            wgmma_wait<0>();
            fence_acc();
            release((it - 1) % STAGES);

            if (slice >= 0 && splits > 1) {  // a slice: park its partial; the last slice to finish sums them
                // flags and slots are numbered over the sliced tiles only (`tile` counts from the first)
                const long long cta_tile = (long long)tile * CS + rank;
                const long long slot_floats = 64 * BN, slice_stride = RB * slot_floats;
                float* slots = W + splitk_flag_floats((tiles - whole) * CS) +
                               (cta_tile * splits * RB + blk0) * slot_floats;  // our first block's
#pragma unroll
                for (int mb = 0; mb < MB; ++mb) store_partial(acc[mb], slots + mb * slot_floats + slice * slice_stride, t);
                // one flag per consumer of the tile (a lone or ping-pong consumer: the first)
                if (!arrive_last_half(reinterpret_cast<int*>(W) + 2 * cta_tile + (PP ? 0 : half), splits, half, t,
                                      last_of))
                    continue;
#pragma unroll
                for (int mb = 0; mb < MB; ++mb) sum_partials(acc[mb], slots + mb * slot_floats, slice_stride, splits, t);
            }

            // Epilogue: C_COLS-column chunks through two swizzled staging buffers, each stored by
            // TMA (which clips rows >= M and columns >= N) while the next one is filled;
            // block by block for a lone consumer (MB = 2), the buffers alternating throughout.
#pragma unroll
            for (int mb = 0; mb < MB; ++mb) {
                const int mr = m0 + 64 * mb;   // the block's first row (RS: MB = 1)
                const float(&ac)[BN / 2] = acc[mb];
#pragma unroll
                for (int j = 0; j < BN / C_COLS; ++j) {
                    unsigned char* buf = my_cbuf + (chunk_no++ % 2) * C_BUF;
                    if (t == 0) bulk_wait_read<1>();  // the store that last read `buf` is done with it
                    named_barrier(1 + half, 128);
                    if constexpr (RS) {
                        // chunk j: rows 64 * (j / 2).. of the tile by the 32 columns (j % 2) of our 64; the
                        // accumulator pair (i, i + 1) is rows r and r + 1 of column fcol (see frag_lo)
                        const int jr = j / 2, jc = j % 2;
#pragma unroll
                        for (int u = 0; u < 8; ++u) {
                            const int i = 32 * jr + 4 * u + 2 * jc;
                            const int r = acc_col(t, i) - 64 * jr, c = fcol;
                            float v0 = alpha * ac[i], v1 = alpha * ac[i + 1];
                            if (beta != 0.0f) {  // C read only here: beta == 0 never touches it
                                const int gr = mr + 64 * jr + r, gc = n0 + 32 * jc + c;
                                const float* c32 = static_cast<const float*>(Cin) + (long long)gr * ldc + gc;
                                if (gr < M && gc < N) v0 += beta * c32[0];
                                if (gr + 1 < M && gc < N) v1 += beta * c32[ldc];
                            }
                            const int unit = ((c >> 2) ^ (r & 7)) << 4, unit1 = ((c >> 2) ^ ((r + 1) & 7)) << 4;
                            *reinterpret_cast<float*>(buf + r * 128 + unit + (c & 3) * 4) = v0;
                            *reinterpret_cast<float*>(buf + (r + 1) * 128 + unit1 + (c & 3) * 4) = v1;
                        }
                    } else {
#pragma unroll
                        for (int q = 0; q < C_COLS / 4; ++q) {
                            // A 16-bit chunk holds 64 columns, twice an fp32 one: unfenced, the compiler
                            // issues all 32 of a thread's beta loads of C at once and, with 128
                            // accumulators live, spills (ptxas at BN = 256). Ordering the two halves
                            // keeps 16 loads in flight, as for fp32, and no spill.
                            if (OUT16 && q == C_COLS / 8) asm volatile("" ::: "memory");
                            const int i = j * (C_COLS / 2) + 2 * q;  // accumulator pair in column chunk j
                            // RSA: wgmma's row g + 16w (+ 8) is the consumer's row fcol (+ 32), see frag_lo
                            const int r = RSA ? fcol + 32 * ((i / 2) % 2) : acc_row(t, i);
                            const int c = acc_col(t, i) - j * C_COLS;
                            float v0 = alpha * ac[i], v1 = alpha * ac[i + 1];
                            if (beta != 0.0f) {  // C read only here: beta == 0 never touches it
                                const int gr = mr + r, gc = n0 + j * C_COLS + c;
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
                    }
                    fence_proxy_async();
                    named_barrier(1 + half, 128);
                    if (t == 0) {
                        // RS: chunk j is rows 64 * (j / 2) of the tile by columns 32 * (j % 2) of our 64
                        if constexpr (RS)
                            tma_store_2d(tmC, buf, n0 + 32 * (j % 2), mr + 64 * (j / 2));
                        else
                            tma_store_2d(tmC, buf, n0 + j * C_COLS, mr);
                        bulk_commit();
                    }
                }
            }
        }
        if (t == 0) bulk_wait_all();
    }
}

}  // namespace hop
}  // namespace gemmlab
