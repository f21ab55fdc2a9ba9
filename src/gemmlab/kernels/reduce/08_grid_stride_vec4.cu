// Reduce rung 8 - many elements per thread: a grid-stride loop with 16-byte loads (Harris's
//   step 7, "multiple elements per thread", with float4 vectors).
// Idea: launch only as many blocks as the GPU holds at once (BLOCKS_PER_SM per SM, guaranteed
//   by __launch_bounds__) and let each thread walk the array with stride gridDim*THREADS,
//   reading float4s, UNROLL of them issued before the first add. A block now reduces
//   N / (SMs*BLOCKS_PER_SM) elements, not THREADS*ELEMS: its reduction tree and its one
//   partial are amortised over thousands of elements, the grid is one wave (no tail of
//   half-empty waves), and the second pass reduces only ~SMs*BLOCKS_PER_SM partials.
//   Any alignment and any n work: 0-3 head elements up to the first 16-byte boundary, the
//   float4 body, 0-3 tail elements (reduce_common.cuh: grid_stride_sum).
// Should move: load instructions per byte fall 4x (LDG.E.128 in SASS), bytes in flight per SM
//   reach THREADS*BLOCKS_PER_SM*UNROLL*16 (64 KB by default) - far over what the DRAM latency
//   needs - and DRAM bandwidth at N = 2^28 should reach ~97% of the device-to-device copy's,
//   CUB's level. The second launch costs a few microseconds, visible only at small N.
// Block-partials semantics: out[b] is block b's grid-stride share (not a contiguous section).
#include "reduce_common.cuh"

namespace gemmlab {

template <int THREADS, int UNROLL, int BLOCKS_PER_SM>
__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM)
reduce_grid_stride_vec4(const float* __restrict__ x, long long n, float* __restrict__ out) {
    static_assert(THREADS >= 32 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                  "THREADS must be a power of two in 32..1024 (whole warps)");
    static_assert(UNROLL >= 1 && UNROLL <= 16, "UNROLL must be in 1..16");
    static_assert(BLOCKS_PER_SM >= 1 && THREADS * BLOCKS_PER_SM <= 2048,
                  "BLOCKS_PER_SM blocks of THREADS must fit one SM (2048 threads on sm_80/sm_90)");
    const float s = reduce::grid_stride_sum<THREADS, UNROLL>(x, n);
    const float sum = reduce::block_sum<THREADS>(s);
    if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

}  // namespace gemmlab
