// Rung 11 - double buffering: two shared buffers per operand, half the block loads the
//   next K-tile into one while the other half computes on the other (seed 001 kernel 11).
// Idea: As and Bs exist twice; tile t lives in buffer t % 2. Even tiles are loaded by the
//   lower half of the block, odd tiles by the upper half, while the other half computes
//   (every thread still computes every tile), so global-load latency overlaps FFMAs inside
//   the block, with 3 barriers per 2 tiles instead of 4. Rung 9's layout otherwise.
// Should move: stall_barrier and stall_long_scoreboard fall (ncu); shared memory doubles
//   (32.5 KiB at the defaults); in phases P1/P3 below only half the warps compute, which
//   costs FFMA issue unless another block shares the SM (2 fit at the defaults), so rung 9
//   vs rung 11 throughput is the measurement (the seed saw no gain).
// Schedule: per pair of tiles (t, t+1), three phases, each closed by __syncthreads():
//       phase | lower half (tid < NT/2)   | upper half
//         P1  | compute t       (buf 0)   | load t+1 -> buf 1
//         P2  | compute t+1     (buf 1)   | compute t   (buf 0)
//         P3  | load t+2 -> buf 0         | compute t+1 (buf 1)
//   after a prologue "lower half loads tile 0 -> buf 0; barrier B0". A tile that does not
//   exist (t+1 or t+2 >= number of tiles T) is skipped. Each half loads a whole tile (twice
//   rung 9's float4s per thread, in rounds of 4 so they fit the register budget).
// Why it never races (barrier B(p, s) closes phase s of pair p; a tile lives in buffer
//   tile % 2):
//   * buf 0 holds tile 2p from its write (lower half, P3 of pair p-1, or the prologue) to
//     its last read (upper half, P2 of pair p). Written before B(p-1, 3) (or B0) and read
//     only in P1 and P2 of pair p, after that barrier: fully written before any read. Next
//     overwritten in P3 of pair p, after B(p, 2), which follows both reads: fully read
//     before it is overwritten.
//   * buf 1 holds tile 2p+1: written by the upper half in P1 of pair p, before B(p, 1);
//     read in P2 (lower) and P3 (upper), after B(p, 1). Next overwritten in P1 of pair p+1,
//     after B(p, 3), which follows both reads.
//   * Every barrier is reached by every thread: the barriers sit outside the role branches
//     in one loop whose trip counts depend only on K (the seed calls __syncthreads inside
//     its if/else halves, which CUDA C++ leaves undefined), and the halves are whole warps
//     (NUM_THREADS % 64 == 0), so no warp diverges over the split.
//   * Each thread computes tiles t then t+1 in both halves: the sums run in K order, as in
//     rung 9.
//   The seed builds kernel 11 on kernel 10's warptiling; building it on rung 9 makes rung
//   9 vs rung 11 isolate the double buffering. One compute and one load call site in the
//   phase loop keep the code size of rung 9.
#include "common.cuh"

namespace gemmlab {
namespace db11 {

// Row `row` (of `rows`), columns col..col+3 (of `cols`) of a row-major matrix with leading
// dimension `cols`: one float4 when in bounds and `vec` (rows 16-byte aligned), else scalar
// loads with zeros outside the matrix.
__device__ __forceinline__ float4 load4_guarded(const float* __restrict__ P, int row, int rows, int col, int cols,
                                                bool vec) {
    const long long base = (long long)row * cols;
    if (vec && row < rows && col + 3 < cols) return load_float4(P + base + col);
    const bool ok = row < rows;
    float4 v;
    v.x = (ok && col + 0 < cols) ? P[base + col + 0] : 0.0f;
    v.y = (ok && col + 1 < cols) ? P[base + col + 1] : 0.0f;
    v.z = (ok && col + 2 < cols) ? P[base + col + 2] : 0.0f;
    v.w = (ok && col + 3 < cols) ? P[base + col + 3] : 0.0f;
    return v;
}

// Rounds for RA + RB float4s: the largest power of two dividing both that leaves >= 4 per round.
__host__ __device__ constexpr int parts(int ra, int rb) {
    int p = 1;
    while (ra % (2 * p) == 0 && rb % (2 * p) == 0 && (ra + rb) / (2 * p) >= 4) p *= 2;
    return p;
}

// Load the K-tile starting at k0 into one buffer (As transposed with padded rows, Bs
// linearised: rung 9's layouts) with NL threads, li = 0..NL-1. Out-of-range elements are 0.
template <int BM, int BN, int BK, int TN, int NL, int BMP, int TC, int WN>
__device__ __forceinline__ void load_tile(int M, int N, int K, const float* __restrict__ A,
                                          const float* __restrict__ B, bool vecA, bool vecB, int blockRow,
                                          int blockCol, int k0, int li, float* As, float* Bs) {
    constexpr int KQ = BK / 4;
    constexpr int KL = (KQ % 2 == 0) ? 2 : 1;
    constexpr int RA = (BM * KQ) / NL, RB = (BK * BN / 4) / NL;  // float4s per loader
    // The loader's float4s go in PARTS rounds of (RA + RB) / PARTS (at most 4 when
    // possible): a round's loads are all in flight before its shared stores, and only one
    // round's data is held in registers next to the accumulators.
    constexpr int PARTS = parts(RA, RB);
    // Block-uniform: is every float4 of this tile in bounds and 16-byte aligned?
    const bool fullA = vecA && blockRow + BM <= M && k0 + BK <= K;
    const bool fullB = vecB && blockCol + BN <= N && k0 + BK <= K;
#pragma unroll 1
    for (int part = 0; part < PARTS; ++part) {
        float4 va[RA / PARTS], vb[RB / PARTS];
#pragma unroll
        for (int j = 0; j < RA / PARTS; ++j) {  // KL float4s of a row, then the next row (rung 9)
            const int i = li + (part + j * PARTS) * NL;
            const int m = (i / KL) % BM, k = ((i / (KL * BM)) * KL + i % KL) * 4;
            va[j] = fullA ? load_float4(A + (long long)(blockRow + m) * K + k0 + k)
                          : load4_guarded(A, blockRow + m, M, k0 + k, K, vecA);
        }
#pragma unroll
        for (int j = 0; j < RB / PARTS; ++j) {  // row by row
            const int i = li + (part + j * PARTS) * NL;
            const int k = i / (BN / 4), c = (i % (BN / 4)) * 4;
            vb[j] = fullB ? load_float4(B + (long long)(k0 + k) * N + blockCol + c)
                          : load4_guarded(B, k0 + k, K, blockCol + c, N, vecB);
        }
#pragma unroll
        for (int j = 0; j < RA / PARTS; ++j) {
            const int i = li + (part + j * PARTS) * NL;
            const int m = (i / KL) % BM, k = ((i / (KL * BM)) * KL + i % KL) * 4;
            As[(k + 0) * BMP + m] = va[j].x;
            As[(k + 1) * BMP + m] = va[j].y;
            As[(k + 2) * BMP + m] = va[j].z;
            As[(k + 3) * BMP + m] = va[j].w;
        }
#pragma unroll
        for (int j = 0; j < RB / PARTS; ++j) {
            const int i = li + (part + j * PARTS) * NL;
            const int k = i / (BN / 4), c = (i % (BN / 4)) * 4;
            const int w = c % WN;  // rung 9's linearised position, indexed in float4s (STS.128)
            reinterpret_cast<float4*>(Bs)[k * (BN / 4) + (c - w) / 4 + ((w % TN) / 4) * TC + w / TN] = vb[j];
        }
    }
}

}  // namespace db11

template <int BM, int BN, int BK, int TM, int TN, int NUM_THREADS>
__global__ void __launch_bounds__(NUM_THREADS)
sgemm_double_buffering(int M, int N, int K, float alpha, const float* __restrict__ A,
                       const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int NT = NUM_THREADS;
    constexpr int NL = NT / 2;   // loaders per tile: one half of the block
    constexpr int TC = 16;       // thread columns of the grid
    constexpr int TR = NT / TC;  // thread rows of the grid
    constexpr int WM = TR * TM;  // rows of C one pass of the thread grid covers
    constexpr int WN = TC * TN;  // columns of C one pass covers
    constexpr int MI = BM / WM;  // sub-tiles per thread, down
    constexpr int NI = BN / WN;  // and across
    constexpr int BMP = BM + 4;  // padded As row (rung 8)
    constexpr int ASZ = BK * BMP, BSZ = BK * BN;  // floats of one buffer
    // seed 001 kernel 11 constraints (NUM_THREADS/2 loaders)
    static_assert((NL * 4) % BK == 0, "NUM_THREADS/2*4 must be a multiple of BK (seed 001)");
    static_assert((NL * 4) % BN == 0, "NUM_THREADS/2*4 must be a multiple of BN (seed 001)");
    static_assert((BM * BK) % (4 * NL) == 0, "BM*BK must be a multiple of 4*NUM_THREADS/2 (float4 A loads)");
    static_assert((BN * BK) % (4 * NL) == 0, "BN*BK must be a multiple of 4*NUM_THREADS/2 (float4 B loads)");
    static_assert(NT % 64 == 0, "each half of the block must be whole warps");
    static_assert(BM % WM == 0, "BM must be a multiple of TM*NUM_THREADS/16 (16*TM at 256 threads)");
    static_assert(BN % WN == 0, "BN must be a multiple of 16*TN");
    static_assert(BM * BN <= 128 * NT, "at most 128 accumulators per thread (256 cannot stay in registers)");
    static_assert(BK % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "BK, TM and TN must be multiples of 4");
    __shared__ __align__(16) float As[2 * ASZ];  // buffer b at As + b*ASZ: As[k * BMP + m]
    __shared__ __align__(16) float Bs[2 * BSZ];  // buffer b at Bs + b*BSZ, linearised rows

    const int tid = threadIdx.x;
    const int tc = tid % TC;
    const int tr = tid / TC;
    const bool lower = tid < NL;
    const int li = lower ? tid : tid - NL;  // index among this half's loaders
    const int blockRow = blockIdx.y * BM;
    const int blockCol = blockIdx.x * BN;
    const bool vecA = (K % 4 == 0) && aligned16(A);
    const bool vecB = (N % 4 == 0) && aligned16(B);
    const bool vecC = (N % 4 == 0) && aligned16(C);
    const int T = (K + BK - 1) / BK;  // K-tiles; tile t covers k in [t*BK, t*BK + BK)

    float acc[MI * TM][NI * TN] = {{0.0f}};
    float regM[MI * TM];
    float regN[NI * TN];

    if (lower && T > 0)
        db11::load_tile<BM, BN, BK, TN, NL, BMP, TC, WN>(M, N, K, A, B, vecA, vecB, blockRow, blockCol, 0, li,
                                                         As, Bs);
    __syncthreads();  // B0
    for (int t = 0; t < T; t += 2) {
#pragma unroll 1
        for (int ph = 0; ph < 3; ++ph) {
            // what this thread does in phase ph of pair (t, t+1): see the table above
            const int ctile = lower ? (ph == 0 ? t : (ph == 1 ? t + 1 : -1)) : (ph == 0 ? -1 : (ph == 1 ? t : t + 1));
            const int ltile = lower ? (ph == 2 ? t + 2 : -1) : (ph == 0 ? t + 1 : -1);
            if (ltile >= 0 && ltile < T) {
                const int b = ltile & 1;
                db11::load_tile<BM, BN, BK, TN, NL, BMP, TC, WN>(M, N, K, A, B, vecA, vecB, blockRow, blockCol,
                                                                 ltile * BK, li, As + b * ASZ, Bs + b * BSZ);
            }
            if (ctile >= 0 && ctile < T) {
                const float* Ab = As + (ctile & 1) * ASZ;
                const float* Bb = Bs + (ctile & 1) * BSZ;
#pragma unroll
                for (int k = 0; k < BK; ++k) {
#pragma unroll
                    for (int wm = 0; wm < MI; ++wm)
#pragma unroll
                        for (int q = 0; q < TM; q += 4) {
                            const float4 a = load_float4(&Ab[k * BMP + wm * WM + tr * TM + q]);
                            regM[wm * TM + q] = a.x; regM[wm * TM + q + 1] = a.y;
                            regM[wm * TM + q + 2] = a.z; regM[wm * TM + q + 3] = a.w;
                        }
#pragma unroll
                    for (int wn = 0; wn < NI; ++wn)
#pragma unroll
                        for (int h = 0; h < TN; h += 4) {
                            const float4 bv = load_float4(&Bb[k * BN + wn * WN + h * TC + tc * 4]);
                            regN[wn * TN + h] = bv.x; regN[wn * TN + h + 1] = bv.y;
                            regN[wn * TN + h + 2] = bv.z; regN[wn * TN + h + 3] = bv.w;
                        }
#pragma unroll
                    for (int m = 0; m < MI * TM; ++m)
#pragma unroll
                        for (int n = 0; n < NI * TN; ++n) acc[m][n] += regM[m] * regN[n];
                }
            }
            __syncthreads();  // B(pair, ph + 1): reached by every thread
        }
    }
#pragma unroll
    for (int m = 0; m < MI * TM; ++m) {
        const int gr = blockRow + (m / TM) * WM + tr * TM + m % TM;
        if (gr >= M) continue;
#pragma unroll
        for (int n = 0; n < NI * TN; n += 4) {
            const int gc = blockCol + (n / TN) * WN + tc * TN + n % TN;
            const long long idx = (long long)gr * N + gc;
            if (vecC && gc + 3 < N) {
                float4 out;
                if (beta == 0.0f) {  // C is not read when beta == 0
                    out = make_float4(alpha * acc[m][n], alpha * acc[m][n + 1], alpha * acc[m][n + 2],
                                      alpha * acc[m][n + 3]);
                } else {
                    const float4 c = load_float4(C + idx);
                    out = make_float4(alpha * acc[m][n] + beta * c.x, alpha * acc[m][n + 1] + beta * c.y,
                                      alpha * acc[m][n + 2] + beta * c.z, alpha * acc[m][n + 3] + beta * c.w);
                }
                store_float4(C + idx, out);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (gc + j < N) epilogue(C, idx + j, acc[m][n + j], alpha, beta);
                }
            }
        }
    }
}

}  // namespace gemmlab
