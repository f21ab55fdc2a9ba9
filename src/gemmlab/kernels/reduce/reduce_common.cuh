// Device helpers of the reduction rungs 7-9 (the pieces rungs 1-6 spell out inline).
// NVRTC has no standard headers here: built-in types only.
#pragma once

namespace gemmlab {
namespace reduce {

// Sum over the 32 lanes of a warp; the result is valid in lane 0 (all lanes must call).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
        v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    return v;
}

// Sum over the THREADS threads of a block; the result is valid in thread 0. Every thread
// must call it. Uses one barrier and THREADS/32 floats of shared memory; a caller that calls
// it twice needs a barrier between the two calls (the second call's writes of `sums` must not
// overtake warp 0's reads of the first).
template <int THREADS>
__device__ __forceinline__ float block_sum(float v) {
    static_assert(THREADS % 32 == 0 && THREADS >= 32 && THREADS <= 1024, "whole warps, at most 1024 threads");
    constexpr int WARPS = THREADS / 32;
    v = warp_sum(v);
    if constexpr (WARPS > 1) {
        __shared__ float sums[WARPS];
        const unsigned int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        if (lane == 0) sums[warp] = v;
        __syncthreads();
        v = 0.0f;
        if (warp == 0) {
            v = lane < WARPS ? sums[lane] : 0.0f;
#pragma unroll
            for (int offset = WARPS / 2; offset > 0; offset /= 2) {  // only log2(WARPS) steps
                v += __shfl_down_sync(0xffffffffu, v, offset);
            }
        }
    }
    return v;
}

// 16-byte load through the read-only path, kept out of L1 (each byte is read exactly once).
__device__ __forceinline__ float4 load_stream(const float4* p) {
    float4 v;
    asm("ld.global.nc.L1::no_allocate.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}

// x[0:n] as a head of 0-3 floats up to the first 16-byte boundary, a body of n4 float4s and a
// tail of 0-3 floats: any float-aligned pointer and any n >= 0 work with 16-byte loads.
struct Split {
    long long head, n4, tail;
};

__device__ __forceinline__ Split split16(const float* x, long long n) {
    const unsigned long long addr = reinterpret_cast<unsigned long long>(x);
    long long head = (long long)(((16ull - (addr & 15ull)) & 15ull) >> 2);  // 0..3 floats
    if (head > n) head = n;
    return Split{head, (n - head) >> 2, (n - head) & 3};
}

// The head and tail elements, read by the first threads of block 0 (at most 3 + 3 loads).
__device__ __forceinline__ float edge_sum(const float* __restrict__ x, const Split& s, long long g) {
    float v = 0.0f;
    if (g < s.head) v = x[g];
    if (g < s.tail) v += x[s.head + 4 * s.n4 + g];
    return v;
}

__device__ __forceinline__ void add4(float4& acc, const float4& r) {
    acc.x += r.x;
    acc.y += r.y;
    acc.z += r.z;
    acc.w += r.w;
}

// This thread's share of sum(x[0:n]) for a grid-stride walk with 16-byte loads.
// Thread g of the grid reads float4s g, g + S, g + 2S, ... (S = grid threads), UNROLL of
// them per trip, all issued before the first add, so UNROLL * 16 bytes per thread are in
// flight. The loads of a warp are 512 contiguous bytes: fully coalesced.
template <int THREADS, int UNROLL>
__device__ __forceinline__ float grid_stride_sum(const float* __restrict__ x, long long n) {
    const long long g = (long long)blockIdx.x * THREADS + threadIdx.x;
    const long long stride = (long long)gridDim.x * THREADS;
    const Split sp = split16(x, n);
    const long long n4 = sp.n4;
    const float s = edge_sum(x, sp, g);
    const float4* __restrict__ v = reinterpret_cast<const float4*>(x + sp.head);
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (long long i = g; i < n4; i += UNROLL * stride) {
        float4 r[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long j = i + u * stride;
            r[u] = j < n4 ? load_stream(v + j) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) add4(acc, r[u]);
    }
    return s + ((acc.x + acc.y) + (acc.z + acc.w));
}

// -- single pass: last block done -------------------------------------------------------------

// A ticket from a self-resetting counter: atom.inc wraps to 0 after `last`. acq_rel at GPU
// scope: releases this thread's earlier stores (its partial), acquires every store released
// by the blocks that drew earlier tickets.
__device__ __forceinline__ unsigned int ticket(unsigned int* counter, unsigned int last) {
    unsigned int old;
    asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;"
                 : "=r"(old) : "l"(counter), "r"(last) : "memory");
    return old;
}

__device__ __forceinline__ float load_relaxed(const float* p) {
    float v;
    asm volatile("ld.relaxed.gpu.global.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ float4 load_relaxed4(const float* p) {
    float4 v;
    asm volatile("ld.relaxed.gpu.global.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p) : "memory");
    return v;
}

// This thread's share of p[0:count], read at GPU scope (coherent at L2, never a stale L1
// line): float4s four at a time, all issued before the adds, then the scalar rest.
template <int THREADS>
__device__ __forceinline__ float partials_sum(const float* p, unsigned int count) {
    float t = 0.0f;
    unsigned int done = 0;
    if ((reinterpret_cast<unsigned long long>(p) & 15ull) == 0) {
        const unsigned int c4 = count / 4;
        for (unsigned int i = threadIdx.x; i < c4; i += 4 * THREADS) {
            float4 r[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const unsigned int j = i + k * THREADS;
                r[k] = j < c4 ? load_relaxed4(p + 4 * j) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (int k = 0; k < 4; ++k) t += (r[k].x + r[k].y) + (r[k].z + r[k].w);
        }
        done = 4 * c4;
    }
    for (unsigned int i = done + threadIdx.x; i < count; i += THREADS) t += load_relaxed(p + i);
    return t;
}

// Every block publishes its sum; the block that draws the last ticket sums the gridDim.x
// partials in a fixed order (deterministic) and writes *out; a lone block writes *out at
// once. Returns true in every thread of the block that wrote *out. `sum` is valid in thread 0
// (block_sum's result); every thread of the block must call this.
template <int THREADS>
__device__ __forceinline__ bool last_block_done(float sum, float* __restrict__ out, float* __restrict__ partials,
                                                unsigned int* __restrict__ counter) {
    __shared__ unsigned int is_last;
    if (gridDim.x == 1) {
        if (threadIdx.x == 0) *out = sum;
        return true;
    }
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = sum;
        is_last = ticket(counter, gridDim.x - 1) == gridDim.x - 1;
    }
    __syncthreads();  // also separates the caller's block_sum from the one below
    if (!is_last) return false;
    const float total = block_sum<THREADS>(partials_sum<THREADS>(partials, gridDim.x));
    if (threadIdx.x == 0) *out = total;
    return true;
}

}  // namespace reduce
}  // namespace gemmlab
