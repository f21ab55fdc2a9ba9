// Reduce rung 6 - warp shuffle (seed 004 "Shuffle").
// Idea: a warp sums its 32 registers with five __shfl_down_sync steps - no shared memory, no
//   barrier; lane 0 of each warp leaves its warp's sum in shared memory, one barrier, and warp
//   0 sums those the same way. The shared-memory tree of rungs 1-5 disappears.
// Should move: shared-memory instructions per block fall from ~2*THREADS to THREADS/32 + 32,
//   barriers to one; the block's reduction is now a few dozen instructions, so the kernel is
//   bound by its global loads - two in flight per thread (ELEMS = 2), which is what rung 7 raises.
// Measured (H200, docs/reduce.md): only 1.05x over rung 5 at 2^28 - after rung 5 the tree was no
//   longer the cost; loads in flight were.
// Block-partials semantics as in rung 4 (ELEMS elements per thread, added during the load).
namespace gemmlab {

template <int THREADS, int ELEMS>
__global__ void __launch_bounds__(THREADS)
reduce_shuffle(const float* __restrict__ x, long long n, float* __restrict__ out) {
    static_assert(THREADS >= 32 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                  "THREADS must be a power of two in 32..1024 (whole warps)");
    static_assert(ELEMS >= 1 && ELEMS <= 64, "ELEMS must be in 1..64");
    __shared__ float warp_sums[32];
    const unsigned int tid = threadIdx.x;
    const unsigned int warp = tid / 32, lane = tid % 32;
    const long long begin = (long long)blockIdx.x * blockDim.x * ELEMS;
    float sum = 0.0f;
    for (int e = 0; e < ELEMS; ++e) {
        const long long g = begin + (long long)e * blockDim.x + tid;
        if (g < n) sum += x[g];
    }
    sum += __shfl_down_sync(0xffffffffu, sum, 16);
    sum += __shfl_down_sync(0xffffffffu, sum, 8);
    sum += __shfl_down_sync(0xffffffffu, sum, 4);
    sum += __shfl_down_sync(0xffffffffu, sum, 2);
    sum += __shfl_down_sync(0xffffffffu, sum, 1);
    if (lane == 0) warp_sums[warp] = sum;
    __syncthreads();
    if (warp == 0) {
        sum = lane < blockDim.x / 32 ? warp_sums[lane] : 0.0f;
        sum += __shfl_down_sync(0xffffffffu, sum, 16);
        sum += __shfl_down_sync(0xffffffffu, sum, 8);
        sum += __shfl_down_sync(0xffffffffu, sum, 4);
        sum += __shfl_down_sync(0xffffffffu, sum, 2);
        sum += __shfl_down_sync(0xffffffffu, sum, 1);
        if (lane == 0) out[blockIdx.x] = sum;
    }
}

}  // namespace gemmlab
