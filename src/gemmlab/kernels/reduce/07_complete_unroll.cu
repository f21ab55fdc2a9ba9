// Reduce rung 7 - completely unrolled with templates (Harris's step 6, on top of rung 6).
// Idea: everything rung 6 reads at run time is a compile-time constant here: the block size
//   (THREADS), the warp count and the loads per thread (ELEMS). The ELEMS loads become ELEMS
//   independent instructions issued back to back into a register array (no loop, no
//   dependence on a running sum), a block whose section lies wholly inside the array takes a
//   path without a single bounds check, the register pairwise tree and the second shuffle
//   level (only log2(THREADS/32) steps) are straight-line code, and a one-warp block needs no
//   shared memory and no barrier at all.
// Should move: instructions per element fall (no loop counters, no blockDim arithmetic, no
//   per-load predicate); loads in flight per thread rise from ~1 to ELEMS (8 by default), so
//   achieved DRAM bandwidth at large N rises toward the copy ceiling; long-scoreboard stalls
//   per load fall.
// Block-partials semantics: block b reduces [b*THREADS*ELEMS, (b+1)*THREADS*ELEMS), writes out[b].
#include "reduce_common.cuh"

namespace gemmlab {

template <int THREADS, int ELEMS>
__global__ void __launch_bounds__(THREADS)
reduce_complete_unroll(const float* __restrict__ x, long long n, float* __restrict__ out) {
    static_assert(THREADS >= 32 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                  "THREADS must be a power of two in 32..1024 (whole warps)");
    static_assert(ELEMS >= 1 && ELEMS <= 64, "ELEMS must be in 1..64");
    constexpr long long SECTION = (long long)THREADS * ELEMS;
    const long long begin = (long long)blockIdx.x * SECTION;
    const float* __restrict__ p = x + begin + threadIdx.x;
    float v[ELEMS];
    if (begin + SECTION <= n) {  // every block but possibly the last: no bounds checks
#pragma unroll
        for (int e = 0; e < ELEMS; ++e) v[e] = p[e * THREADS];
    } else {
        const long long left = n - begin - threadIdx.x;  // elements at p[0 ..left)
#pragma unroll
        for (int e = 0; e < ELEMS; ++e) v[e] = e * THREADS < left ? p[e * THREADS] : 0.0f;
    }
#pragma unroll
    for (int w = 1; w < ELEMS; w *= 2) {  // pairwise over registers: depth log2(ELEMS)
#pragma unroll
        for (int e = 0; e + w < ELEMS; e += 2 * w) v[e] += v[e + w];
    }
    const float sum = reduce::block_sum<THREADS>(v[0]);
    if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

}  // namespace gemmlab
