// Reduce rung 2 - no divergent branch (seed 004 "No Divergence Branch").
// Idea: at step i thread t works on index 2*i*t, so the active threads are the first
//   THREADS/(2i) ones - whole warps are either all active or all idle, and the modulo is gone.
// Should move: executed instructions and warp divergence fall (idle warps retire at once),
//   so time per element falls; shared-memory bank conflicts appear instead (index 2*i*t puts
//   threads t and t+16/i in the same bank), which rung 3 removes.
// Measured (H200, docs/reduce.md): 0.92x of rung 1 at 2^24-2^28 - on Hopper the 2-16-way bank
//   conflicts cost more than the divergence and the modulo saved.
// Block-partials semantics and ELEMS as in rung 1.
namespace gemmlab {

template <int THREADS, int ELEMS>
__global__ void __launch_bounds__(THREADS)
reduce_no_divergence(const float* __restrict__ x, long long n, float* __restrict__ out) {
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
        for (unsigned int i = 1; i < blockDim.x; i *= 2) {
            if (tid < blockDim.x / (i * 2)) {
                const unsigned int index = tid * 2 * i;
                s[index] += s[index + i];
            }
            __syncthreads();
        }
        if (tid == 0) total += s[0];
    }
    if (tid == 0) out[blockIdx.x] = total;
}

}  // namespace gemmlab
