// Rung 8 - shared-memory bank conflicts removed by padding the shared arrays.
// Idea: pad each shared array where its accesses conflict, by PAD floats (a multiple of 4,
//   so every float4 stays 16-byte aligned): As rows become BM + PAD long (the transposed
//   stores of A stop colliding), and Bs gets PAD floats after every 32 columns (the float4
//   fragment reads of B stop colliding). Everything else is rung 6 unchanged.
// Should move: shared store AND shared load bank conflicts (ncu l1tex__data_bank_
//   conflicts_pipe_lsu_mem_shared_op_st / _op_ld) drop to ~0 at the defaults; shared
//   memory grows by BK*PAD*(1 + BN/32) floats (640 B at the defaults); the SASS keeps
//   LDS.128 and STS.128; throughput at least rung 6's.
// Where and why: As (transposed, [BK][BM]): a warp stores the 4 values of its A float4s
//   with 4 scalar STS, 16 rows m x 2 k-groups (k = 0 and k = 4 with BK = 8) per
//   instruction. Row stride BM = 128 floats is a multiple of 32 banks, so rows k and k+4
//   start on the same bank and the two k-groups collide: a 2-way conflict on every
//   transposed store. Rows of BM + PAD floats shift row k by k*PAD banks; with PAD = 4 row
//   k+4 is 16 banks away and the 16 + 16 stores of an instruction hit 32 distinct banks
//   (with BK >= 16 four or more k-groups share an instruction and a 2-way conflict remains:
//   rung 9 changes the A load order instead).
//   Bs ([BK][BN]): every lane of a warp reads the same row k, thread column tc reading a
//   float4 at column tc*TN + 4h; with TN = 8 the 16 thread columns sit 32 bytes apart,
//   using only half the banks, each twice over: a 2-way conflict on every B fragment
//   load. Padding at the end of a row cannot help there (all lanes are in the same row),
//   so Bs gets PAD floats after every 32 columns (every 128-byte bank line): column c of
//   row k lives at Bs[k*BNP + c + (c/32)*PAD], BNP = BN + (BN/32)*PAD. Each group of 4
//   thread columns then starts PAD banks further on, and with PAD = 4 the 16 float4s of a
//   warp cover every bank exactly twice (the minimum, 2 wavefronts).
// Why PAD % 4 == 0: LDS.128/STS.128 need 16-byte aligned shared addresses. A row of
//   BM + PAD floats starts at k*(BM+PAD)*4 bytes, 16-byte aligned for every k only when
//   PAD % 4 == 0; likewise the skewed float4s of Bs. The seed's kernel 8 pads Bs rows by
//   5: row k starts at k*532 bytes, 16-byte aligned only when k % 4 == 0, so a float4
//   can no longer be stored or loaded as one 16-byte access and every vector access has
//   to be split into 4 scalar ones - which is why it stores Bs with scalar STS and why it
//   lost to rung 6; a row pad also leaves the within-row read conflict where it was.
//   PAD = 4 is the conflict-free choice for both arrays (PAD = 8 shifts row k+4 by a whole
//   32 banks and brings the As conflict back, and skews Bs by too much; any PAD % 8 == 4
//   works).
#include "common.cuh"

namespace gemmlab {

template <int BM, int BN, int BK, int TM, int TN, int PAD>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_bank_padding(int M, int N, int K, float alpha, const float* __restrict__ A,
                   const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int NT = (BM / TM) * (BN / TN);
    constexpr int BMP = BM + PAD;              // padded row of As
    constexpr int BNP = BN + (BN / 32) * PAD;  // padded row of Bs (PAD after every 32 columns)
    static_assert(BM % TM == 0 && BN % TN == 0, "thread tiles must divide the block tile");
    static_assert(BK % 4 == 0 && BN % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "float4 granularity");
    static_assert(PAD > 0 && PAD % 4 == 0, "PAD must keep the 16-byte alignment of the float4 shared accesses");
    static_assert((BM * BK / 4) % NT == 0, "the threads must split the A tile evenly in float4s");
    static_assert((BK * BN / 4) % NT == 0, "the threads must split the B tile evenly in float4s");
    __shared__ __align__(16) float As[BK * BMP];  // transposed: As[k * BMP + m]
    __shared__ __align__(16) float Bs[BK * BNP];  // Bs[k * BNP + c + (c / 32) * PAD]

    const int tid = threadIdx.x;
    const int row0 = (tid / (BN / TN)) * TM;
    const int col0 = (tid % (BN / TN)) * TN;
    const int blockRow = blockIdx.y * BM;
    const int blockCol = blockIdx.x * BN;
    // float4 global access needs every row start 16-byte aligned.
    const bool vecA = (K % 4 == 0) && aligned16(A);
    const bool vecB = (N % 4 == 0) && aligned16(B);
    const bool vecC = (N % 4 == 0) && aligned16(C);

    float acc[TM][TN] = {{0.0f}};
    float regM[TM];
    float regN[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int r = 0; r < (BM * BK / 4) / NT; ++r) {
            const int i = tid + r * NT;  // which float4 of the BM x BK tile
            const int m = i / (BK / 4), k = (i % (BK / 4)) * 4;
            const int gr = blockRow + m, gk = k0 + k;
            float4 v;
            if (vecA && gr < M && gk + 3 < K) {
                v = load_float4(A + (long long)gr * K + gk);
            } else {
                const bool row_ok = gr < M;
                const long long base = (long long)gr * K;
                v.x = (row_ok && gk + 0 < K) ? A[base + gk + 0] : 0.0f;
                v.y = (row_ok && gk + 1 < K) ? A[base + gk + 1] : 0.0f;
                v.z = (row_ok && gk + 2 < K) ? A[base + gk + 2] : 0.0f;
                v.w = (row_ok && gk + 3 < K) ? A[base + gk + 3] : 0.0f;
            }
            As[(k + 0) * BMP + m] = v.x;
            As[(k + 1) * BMP + m] = v.y;
            As[(k + 2) * BMP + m] = v.z;
            As[(k + 3) * BMP + m] = v.w;
        }
#pragma unroll
        for (int r = 0; r < (BK * BN / 4) / NT; ++r) {
            const int i = tid + r * NT;
            const int k = i / (BN / 4), c = (i % (BN / 4)) * 4;
            const int gk = k0 + k, gc = blockCol + c;
            float4 v;
            if (vecB && gk < K && gc + 3 < N) {
                v = load_float4(B + (long long)gk * N + gc);
            } else {
                const bool row_ok = gk < K;
                const long long base = (long long)gk * N;
                v.x = (row_ok && gc + 0 < N) ? B[base + gc + 0] : 0.0f;
                v.y = (row_ok && gc + 1 < N) ? B[base + gc + 1] : 0.0f;
                v.z = (row_ok && gc + 2 < N) ? B[base + gc + 2] : 0.0f;
                v.w = (row_ok && gc + 3 < N) ? B[base + gc + 3] : 0.0f;
            }
            // c % 4 == 0, so c..c+3 never straddle a 32-column line: one aligned float4
            store_float4(&Bs[k * BNP + c + (c / 32) * PAD], v);
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int m = 0; m < TM; m += 4) {
                const float4 a = load_float4(&As[k * BMP + row0 + m]);
                regM[m] = a.x; regM[m + 1] = a.y; regM[m + 2] = a.z; regM[m + 3] = a.w;
            }
#pragma unroll
            for (int n = 0; n < TN; n += 4) {
                const int c = col0 + n;
                const float4 b = load_float4(&Bs[k * BNP + c + (c / 32) * PAD]);
                regN[n] = b.x; regN[n + 1] = b.y; regN[n + 2] = b.z; regN[n + 3] = b.w;
            }
#pragma unroll
            for (int m = 0; m < TM; ++m)
#pragma unroll
                for (int n = 0; n < TN; ++n) acc[m][n] += regM[m] * regN[n];
        }
        __syncthreads();
    }
#pragma unroll
    for (int m = 0; m < TM; ++m) {
        const int gr = blockRow + row0 + m;
        if (gr >= M) break;
#pragma unroll
        for (int n = 0; n < TN; n += 4) {
            const int gc = blockCol + col0 + n;
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
