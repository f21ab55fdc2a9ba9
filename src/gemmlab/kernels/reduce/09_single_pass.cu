// Reduce rung 9 - single pass: one launch from the array to the scalar (last block done).
// Idea: rung 8's body, then each block publishes its partial and takes a ticket from a global
//   counter with one acquire-release atomic; the block that draws the last ticket knows every
//   other partial is visible to it, sums the gridDim.x partials in a fixed order
//   (deterministic, like a second pass) and writes the scalar. The counter resets itself:
//   atom.inc wraps to 0 when it passes gridDim.x-1, so it is 0 again for the next launch, with
//   no memset. A one-block grid writes the scalar directly.
// Should move: the second launch of rung 8 disappears - a few microseconds that dominate at
//   N = 2^16..2^20, where this rung should beat cupy.sum (CUB: two launches); at N = 2^28 it
//   should equal rung 8 (one atomic and ~1000 partials are noise next to 1 GiB).
// Memory model: a block's thread 0 stores its partial, then atom.acq_rel.gpu (release: the
//   store is visible at GPU scope before the ticket). The last block's thread 0 acquires with
//   the same atomic, a barrier passes that on to its block, and its threads read the partials
//   with ld.relaxed.gpu (coherent at L2, never a stale L1 line). reduce_common.cuh:
//   last_block_done.
// Workspace: partials[gridDim.x] floats and counters[0], an unsigned that must be 0 before the
//   first launch (the runner allocates it zeroed). Launches sharing a workspace must not overlap.
#include "reduce_common.cuh"

namespace gemmlab {

template <int THREADS, int UNROLL, int BLOCKS_PER_SM>
__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM)
reduce_single_pass(const float* __restrict__ x, long long n, float* __restrict__ out,
                   float* __restrict__ partials, unsigned int* __restrict__ counters) {
    static_assert(THREADS >= 32 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                  "THREADS must be a power of two in 32..1024 (whole warps)");
    static_assert(UNROLL >= 1 && UNROLL <= 16, "UNROLL must be in 1..16");
    static_assert(BLOCKS_PER_SM >= 1 && THREADS * BLOCKS_PER_SM <= 2048,
                  "BLOCKS_PER_SM blocks of THREADS must fit one SM (2048 threads on sm_80/sm_90)");
    const float sum = reduce::block_sum<THREADS>(reduce::grid_stride_sum<THREADS, UNROLL>(x, n));
    reduce::last_block_done<THREADS>(sum, out, partials, counters);
}

}  // namespace gemmlab
