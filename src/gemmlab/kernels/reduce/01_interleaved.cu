// Reduce rung 1 - baseline: interleaved addressing with a divergent branch (seed 004 "Baseline").
// Idea: each thread copies one element to shared memory; at step i the threads whose index is
//   a multiple of 2i add the element i slots to their right. Correct, and deliberately poor:
//   `tid % (2*i)` is an integer division per thread per step, and the active threads are
//   scattered over every warp, so from step 1 on all warps stay busy for a shrinking job.
// Should move: nothing yet - this is the floor. Expect a few hundred GB/s at most at large N:
//   the time goes to shared-memory steps (log2 THREADS barriers per THREADS elements) and to
//   the modulo, not to DRAM (issue-bound: warp execution efficiency falls by half each step).
// Block-partials semantics: block b reduces elements [b*THREADS*ELEMS, (b+1)*THREADS*ELEMS)
//   (zeros past n) and writes out[b]. With ELEMS > 1 the block reduces its ELEMS tiles of
//   THREADS elements one after another, each by this rung's tree (no adding during the load:
//   that is rung 4's idea).
namespace gemmlab {

template <int THREADS, int ELEMS>
__global__ void __launch_bounds__(THREADS)
reduce_interleaved(const float* __restrict__ x, long long n, float* __restrict__ out) {
    static_assert(THREADS >= 32 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                  "THREADS must be a power of two in 32..1024");
    static_assert(ELEMS >= 1 && ELEMS <= 64, "ELEMS must be in 1..64");
    __shared__ float s[THREADS];
    const unsigned int tid = threadIdx.x;
    const long long begin = (long long)blockIdx.x * (THREADS * ELEMS);
    float total = 0.0f;  // thread 0's running sum over the block's tiles
    for (int e = 0; e < ELEMS; ++e) {
        const long long g = begin + (long long)e * THREADS + tid;
        s[tid] = g < n ? x[g] : 0.0f;
        __syncthreads();
        for (unsigned int i = 1; i < blockDim.x; i *= 2) {
            if (tid % (2 * i) == 0) {
                s[tid] += s[tid + i];
            }
            __syncthreads();
        }
        // Only thread 0 reads s[0], and only thread 0 writes it in the next tile's load:
        // the last barrier of the tree already ordered every other access.
        if (tid == 0) total += s[0];
    }
    if (tid == 0) out[blockIdx.x] = total;
}

}  // namespace gemmlab
