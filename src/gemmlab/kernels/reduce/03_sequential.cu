// Reduce rung 3 - no bank conflict: sequential addressing (seed 004 "No Bank Conflict").
// Idea: halve the stride instead of doubling it: at step i thread t (t < i) adds s[t + i] to
//   s[t]. A warp reads 32 consecutive words, one per bank, at every step.
// Should move: shared-memory bank conflicts (l1tex__data_bank_conflicts_pipe_lsu_mem_shared)
//   fall to zero, so each tree step is one shared-memory wavefront per warp instead of up to
//   16; time per element falls again. Half the threads still idle from the first step on:
//   rung 4 puts them to work during the load.
// Block-partials semantics and ELEMS as in rung 1.
namespace gemmlab {

template <int THREADS, int ELEMS>
__global__ void __launch_bounds__(THREADS)
reduce_sequential(const float* __restrict__ x, long long n, float* __restrict__ out) {
    static_assert(THREADS >= 32 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                  "THREADS must be a power of two in 32..1024");
    static_assert(ELEMS >= 1 && ELEMS <= 64, "ELEMS must be in 1..64");
    __shared__ float s[THREADS];
    const unsigned int tid = threadIdx.x;
    const long long begin = (long long)blockIdx.x * (THREADS * ELEMS);
    float total = 0.0f;
    for (int e = 0; e < ELEMS; ++e) {
        const long long g = begin + (long long)e * THREADS + tid;
        s[tid] = g < n ? x[g] : 0.0f;
        __syncthreads();
        for (unsigned int i = blockDim.x / 2; i > 0; i /= 2) {
            if (tid < i) {
                s[tid] += s[tid + i];
            }
            __syncthreads();
        }
        if (tid == 0) total += s[0];
    }
    if (tid == 0) out[blockIdx.x] = total;
}

}  // namespace gemmlab
