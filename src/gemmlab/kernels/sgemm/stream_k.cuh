// Stream-K work division (rung 14; Osama et al., "Stream-K", PPoPP 2023): the grid is one wave
// of G resident blocks and the K-loop iterations of all output tiles are dealt out to them in
// equal contiguous ranges, so a problem whose tile count is not a multiple of the wave (3072^3:
// 288 tiles of 128x256 on 132 SMs, 2.2 waves) keeps every SM busy to the end.
//
// A tile whose iterations fall to several blocks is finished without any block waiting: each
// contributor writes its partial tile to its own workspace slot and counts itself in on the
// tile's flag; the last to arrive sums every slot in block order (so the result does not depend
// on who arrived last: deterministic) and writes C with alpha and beta. It also puts the flag
// back to zero, so the next launch of the same shape needs no clearing (another shape's flags
// may lie where partials were written: the runners clear those first).
//
// Hybrid (dp_tiles > 0): the first dp_tiles tiles, whole waves of them, are plain data-parallel
// tiles (block b takes tiles b, b + G, ...); only the rest is dealt out in K. That keeps the
// fix-up traffic to about one wave of tiles whatever the problem size.
//
// Workspace (W, floats): flag_floats(T) ints first, then 2 slots of BM*BN floats per block: a
// block has at most two partial tiles, the one its range starts inside and the one it ends inside.
#pragma once

namespace gemmlab {

struct StreamK {
    int tiles;       // output tiles in all
    int iters;       // K-tiles per output tile
    int blocks;      // G, the grid
    int dp_tiles;    // leading tiles computed whole, data-parallel
    long long total; // K-tile iterations dealt out: (tiles - dp_tiles) * iters

    StreamK() = default;
    __device__ __forceinline__ StreamK(int tiles_, int iters_, int blocks_, bool hybrid)
        : tiles(tiles_), iters(iters_), blocks(blocks_) {
        // Hybrid: all whole waves but the last stay data-parallel; the last whole wave and the
        // ragged remainder are dealt out, so every block gets between one and two tiles of work.
        dp_tiles = hybrid ? max(0, tiles / blocks - 1) * blocks : 0;
        total = (long long)(tiles - dp_tiles) * iters;
    }
    // The first iteration of block b's range (its range ends where block b + 1's starts).
    __device__ __forceinline__ long long start(int b) const { return (long long)b * total / blocks; }
    // The block whose range holds iteration x: the largest b with start(b) <= x.
    __device__ __forceinline__ int owner(long long x) const { return (int)(((x + 1) * blocks - 1) / total); }
    // Block b's partial of stream-K tile s (0-based among the dealt-out tiles) goes to slot 0 when
    // the tile is the one its range starts in, else slot 1.
    __device__ __forceinline__ long long slot(int b, int s) const {
        return 2ll * b + (start(b) / iters == s ? 0 : 1);
    }
    static __host__ __device__ __forceinline__ int flag_floats(int tiles) { return (tiles + 31) / 32 * 32; }
};

// Count this block in on the flag of a tile with `contributors` partials (call after every
// thread has written its partial); true in every thread of the block that arrived last, which
// then owns the sum. The last arriver clears the flag for the next launch.
__device__ __forceinline__ bool arrive_last(int* flag, int contributors) {
    __shared__ int last;
    __threadfence();  // this thread's partial is visible GPU-wide before the block counts itself in
    __syncthreads();
    if (threadIdx.x == 0) {
        const int before = atomicAdd(flag, 1);
        last = before == contributors - 1;
        if (last) *flag = 0;
    }
    __syncthreads();
    if (last) __threadfence();  // and the other blocks' partials are seen after their counts
    return last;
}

}  // namespace gemmlab
