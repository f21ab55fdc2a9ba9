// Reduce rung 5 - unroll the last warp (seed 004 "Unroll Last Warp"), made correct for Volta+.
// Idea: once only 32 values are left, one warp finishes the last six steps without
//   __syncthreads: 2 block-wide barriers instead of log2(THREADS)+1, no loop control.
// Why not the seed's code as written: it relies on the 32 threads of a warp executing each
//   `s[t] += s[t + k]` in lockstep. Since Volta, independent thread scheduling lets the lanes
//   of a warp interleave arbitrarily, and the compiler may keep s[t] in a register: lane t can
//   read s[t+k] before lane t+k has written its sum of the previous step, or after lane t+k
//   has overwritten it in this step. Both are real read/write races (compute-sanitizer
//   racecheck reports them). Here each step reads into a register, then __syncwarp() (all
//   reads done), then writes, then __syncwarp() (all writes visible); `volatile` keeps every
//   access a real shared-memory access.
// Should move: barrier stalls (smsp__pcsamp_warps_issue_stalled_barrier) fall; executed
//   instructions per element fall; bandwidth rises modestly - the kernel is now closer to
//   being limited by its loads than by its tree.
// Block-partials semantics as in rung 4.
namespace gemmlab {

template <int THREADS, int ELEMS>
__global__ void __launch_bounds__(THREADS)
reduce_unroll_last_warp(const float* __restrict__ x, long long n, float* __restrict__ out) {
    static_assert(THREADS >= 64 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                  "THREADS must be a power of two in 64..1024 (the last warp reads s[t + 32])");
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
    for (unsigned int i = blockDim.x / 2; i > 32; i /= 2) {
        if (tid < i) {
            s[tid] += s[tid + i];
        }
        __syncthreads();
    }
    if (tid < 32) {  // warp 0, all 32 lanes: the full mask is right
        volatile float* v = s;
        float r = v[tid] + v[tid + 32];
#pragma unroll
        for (int k = 16; k > 0; k /= 2) {
            __syncwarp();   // every lane has read the previous step's values...
            v[tid] = r;
            __syncwarp();   // ...and written this one before anyone reads it
            r += v[tid + k];
        }
        if (tid == 0) out[blockIdx.x] = r;
    }
}

}  // namespace gemmlab
