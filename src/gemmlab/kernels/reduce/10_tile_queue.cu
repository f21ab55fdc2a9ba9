// Reduce rung 10 - dynamic tiles from an atomic queue (single pass, beyond the seed).
// Idea: rung 9 splits the array statically: block b owns every gridDim.x-th float4, so the
//   kernel ends when the slowest SM has streamed its fixed share. Measured on an H200 (see
//   docs/reduce.md), rungs 8-9 stop at ~94% of CUB at N = 2^28 whatever their occupancy,
//   UNROLL or block size, while rung 7 - many short blocks, each on one contiguous section,
//   handed out by the hardware block scheduler - reaches CUB. Here the resident grid takes
//   contiguous tiles of THREADS*UNROLL float4s (32 KB by default) from a global counter:
//   block b starts on tile b, thread 0 draws the block's next tile with one atomicAdd once
//   the current tile's loads are in flight, and a fast SM simply draws more tiles. The finish
//   is rung 9's last block done, which also resets the tile counter for the next launch.
// Should move: the tail where some SMs idle while others finish their static share
//   disappears; contiguous 32 KB tiles also keep each block's requests in few DRAM pages.
//   Expect rung 9's small-N times (one launch) and >= CUB at N = 2^28 (~97% of the copy).
// Measured (H200, docs/reduce.md): rung 9's times up to 2^24; at 2^28 +2.4% over rung 9 but
//   96.9% of CUB. ncu shows the per-SM busy cycles even out (spread 7% -> 1%), yet the kernel
//   time barely moves: the early-idle SMs had left their DRAM bandwidth to the others.
// Race-free tile broadcast: next[it & 1] is written by thread 0 before the barrier of trip
//   `it` and read by all after it; it is written again only in trip it+2, after the barrier of
//   trip it+1, which every thread passes after its read.
// Workspace: partials[gridDim.x], counters[0] (tickets) and counters[1] (next tile), both 0
//   before the first launch; the last block leaves both at 0.
#include "reduce_common.cuh"

namespace gemmlab {

template <int THREADS, int UNROLL, int BLOCKS_PER_SM>
__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM)
reduce_tile_queue(const float* __restrict__ x, long long n, float* __restrict__ out,
                  float* __restrict__ partials, unsigned int* __restrict__ counters) {
    static_assert(THREADS >= 32 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                  "THREADS must be a power of two in 32..1024 (whole warps)");
    static_assert(UNROLL >= 1 && UNROLL <= 16, "UNROLL must be in 1..16");
    static_assert(BLOCKS_PER_SM >= 1 && THREADS * BLOCKS_PER_SM <= 2048,
                  "BLOCKS_PER_SM blocks of THREADS must fit one SM (2048 threads on sm_80/sm_90)");
    constexpr long long TILE = (long long)THREADS * UNROLL;  // float4s per tile
    __shared__ unsigned int next[2];
    const reduce::Split sp = reduce::split16(x, n);
    const long long n4 = sp.n4;
    const float s = reduce::edge_sum(x, sp, (long long)blockIdx.x * THREADS + threadIdx.x);
    const float4* __restrict__ v = reinterpret_cast<const float4*>(x + sp.head);
    const unsigned long long tiles = (unsigned long long)((n4 + TILE - 1) / TILE);
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    unsigned long long tile = blockIdx.x;
    for (unsigned int it = 0; tile < tiles; ++it) {
        const long long first = (long long)tile * TILE;
        const float4* __restrict__ p = v + first + threadIdx.x;
        float4 r[UNROLL];
        if (first + TILE <= n4) {  // every tile but the last: no bounds checks
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) r[u] = reduce::load_stream(p + u * THREADS);
        } else {
            const long long left = n4 - first - threadIdx.x;  // float4s at p[0 .. left)
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                r[u] = u * THREADS < left ? reduce::load_stream(p + u * THREADS)
                                          : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
        }
        // The next tile is drawn after this tile's loads are issued, so that the atomic's round
        // trip overlaps theirs instead of delaying warp 0's loads (and, at the barrier, the block's).
        if (threadIdx.x == 0) next[it & 1] = gridDim.x + atomicAdd(counters + 1, 1u);
        __syncthreads();  // next[it & 1] is written (the loads above stay in flight)
        tile = next[it & 1];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) reduce::add4(acc, r[u]);
    }
    const float sum = reduce::block_sum<THREADS>(s + ((acc.x + acc.y) + (acc.z + acc.w)));
    if (reduce::last_block_done<THREADS>(sum, out, partials, counters) && threadIdx.x == 0) {
        counters[1] = 0;  // every block has left its loop (all tickets are drawn): safe to reset
    }
}

}  // namespace gemmlab
