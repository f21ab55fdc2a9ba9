// Reduce rung 4 - add during load (seed 004 "Add During Load").
// Idea: each thread adds its ELEMS elements (THREADS apart, so every load is coalesced) in a
//   register while loading, then stores one value to shared memory: a block covers
//   THREADS*ELEMS elements with one tree of log2(THREADS) steps instead of ELEMS trees.
// Should move: shared-memory traffic and barriers per element fall by ELEMS (2 by default, the
//   seed's L = 2); the first tree step no longer idles half the block; the ELEMS independent
//   loads of a thread are in flight together, so achieved DRAM bandwidth rises.
// Block-partials semantics: block b reduces [b*THREADS*ELEMS, (b+1)*THREADS*ELEMS), writes out[b].
namespace gemmlab {

template <int THREADS, int ELEMS>
__global__ void __launch_bounds__(THREADS)
reduce_add_during_load(const float* __restrict__ x, long long n, float* __restrict__ out) {
    static_assert(THREADS >= 32 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                  "THREADS must be a power of two in 32..1024");
    static_assert(ELEMS >= 1 && ELEMS <= 64, "ELEMS must be in 1..64");
    __shared__ float s[THREADS];
    const unsigned int tid = threadIdx.x;
    const long long begin = (long long)blockIdx.x * blockDim.x * ELEMS;
    float sum = 0.0f;
    for (int e = 0; e < ELEMS; ++e) {
        const long long g = begin + (long long)e * blockDim.x + tid;
        if (g < n) sum += x[g];
    }
    s[tid] = sum;
    __syncthreads();
    for (unsigned int i = blockDim.x / 2; i > 0; i /= 2) {
        if (tid < i) {
            s[tid] += s[tid + i];
        }
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = s[0];
}

}  // namespace gemmlab
