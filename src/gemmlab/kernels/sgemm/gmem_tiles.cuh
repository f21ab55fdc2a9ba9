// Global -> shared tile loaders shared by the upper rungs (10, 12): float4 where the row
// is 16-byte aligned and the four elements are in bounds, a predicated scalar path
// otherwise, zeros outside the matrix so the compute loop needs no predicates.
#pragma once
#include "common.cuh"

namespace gemmlab {

// Four consecutive elements of row `r` (length `len`, `rows` rows), starting at column c.
__device__ __forceinline__ float4 load4_or_zero(const float* __restrict__ base, int rows, int len, int r, int c,
                                                bool vec_ok) {
    if (r < rows && vec_ok && c + 3 < len) {
        return load_float4(base + (long long)r * len + c);
    }
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r < rows) {
        const float* p = base + (long long)r * len;
        if (c + 0 < len) v.x = p[c + 0];
        if (c + 1 < len) v.y = p[c + 1];
        if (c + 2 < len) v.z = p[c + 2];
        if (c + 3 < len) v.w = p[c + 3];
    }
    return v;
}

// Output tile number pid in swizzled order (rungs 13, 14): consecutive numbers take GROUP
// row-tiles of one column band, so tiles sharing A rows and B columns run together.
template <int BM, int BN, int GROUP>
__device__ __forceinline__ void swizzled_tile_at(int M, int N, int pid, int& row0, int& col0) {
    const int tilesM = (M + BM - 1) / BM, tilesN = (N + BN - 1) / BN;
    // a group of more rows than there are is all of them (the same order): it keeps perGroup
    // within the tile count, where GROUP * tilesN could pass 2^31 for a large GROUP or N
    const int group = min(GROUP, tilesM);
    const int perGroup = group * tilesN;
    const int firstM = (pid / perGroup) * group;
    const int groupRows = min(tilesM - firstM, group);
    row0 = (firstM + (pid % perGroup) % groupRows) * BM;
    col0 = ((pid % perGroup) / groupRows) * BN;
}

// The block's output tile on a 1-D grid of tiles, in that order.
template <int BM, int BN, int GROUP>
__device__ __forceinline__ void swizzled_tile(int M, int N, int& row0, int& col0) {
    swizzled_tile_at<BM, BN, GROUP>(M, N, blockIdx.x, row0, col0);
}

// Split-K (rungs 13, 14): slice blockIdx.z of gridDim.z takes K-tiles [tBegin, tBegin + tiles).
template <int BK>
__device__ __forceinline__ void k_slice(int K, int& tBegin, int& tiles) {
    const int allTiles = (K + BK - 1) / BK;
    const int perSlice = (allTiles + gridDim.z - 1) / gridDim.z;
    tBegin = min(allTiles, (int)blockIdx.z * perSlice);
    tiles = min(allTiles, tBegin + perSlice) - tBegin;
}

// A tile (BM rows x BK columns starting at row0, k0) stored transposed: As[k * LDA + m].
template <int BM, int BK, int NT, int LDA>
__device__ __forceinline__ void load_a_transposed(float* As, const float* __restrict__ A, int M, int K, int row0,
                                                  int k0, bool vec_ok) {
    static_assert((BM * BK / 4) % NT == 0, "the threads must split the A tile evenly in float4s");
#pragma unroll
    for (int r = 0; r < (BM * BK / 4) / NT; ++r) {
        const int i = threadIdx.x + r * NT;
        const int m = i / (BK / 4), k = (i % (BK / 4)) * 4;
        const float4 v = load4_or_zero(A, M, K, row0 + m, k0 + k, vec_ok);
        As[(k + 0) * LDA + m] = v.x;
        As[(k + 1) * LDA + m] = v.y;
        As[(k + 2) * LDA + m] = v.z;
        As[(k + 3) * LDA + m] = v.w;
    }
}

// B tile (BK rows x BN columns starting at k0, col0) stored as is: Bs[k * LDB + n].
template <int BN, int BK, int NT, int LDB>
__device__ __forceinline__ void load_b(float* Bs, const float* __restrict__ B, int K, int N, int k0, int col0,
                                       bool vec_ok) {
    static_assert((BN * BK / 4) % NT == 0, "the threads must split the B tile evenly in float4s");
#pragma unroll
    for (int r = 0; r < (BN * BK / 4) / NT; ++r) {
        const int i = threadIdx.x + r * NT;
        const int k = i / (BN / 4), n = (i % (BN / 4)) * 4;
        store_float4(&Bs[k * LDB + n], load4_or_zero(B, K, N, k0 + k, col0 + n, vec_ok));
    }
}

// C[r, c..c+3] = alpha * acc + beta * C (C not read when beta == 0), vectorised when allowed.
__device__ __forceinline__ void store4(float* __restrict__ C, int M, int N, int r, int c, float4 acc, float alpha,
                                       float beta, bool vec_ok) {
    if (r >= M) return;
    float* p = C + (long long)r * N + c;
    if (vec_ok && c + 3 < N) {
        float4 out = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
        if (beta != 0.0f) {
            const float4 old = load_float4(p);
            out.x += beta * old.x; out.y += beta * old.y; out.z += beta * old.z; out.w += beta * old.w;
        }
        store_float4(p, out);
        return;
    }
    const float v[4] = {acc.x, acc.y, acc.z, acc.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        if (c + j < N) epilogue(C, (long long)r * N + c + j, v[j], alpha, beta);
    }
}

}  // namespace gemmlab
