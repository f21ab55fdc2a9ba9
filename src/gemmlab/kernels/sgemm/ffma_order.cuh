// The FFMA core shared by rungs 14 and 15: a thread's outer product in a chosen order.
#pragma once

namespace gemmlab {

// acc += fa (x) fb in one of four FFMA orders. The order decides which operand ptxas can serve
// from the operand reuse cache in consecutive FFMAs and how the register banks are read, so it
// is a tuning parameter: 0 rows (fa[i] reused along a row), 1 columns (fb[j] reused down a
// column), 2 rows snaking (each row turns back, so the turn reuses fb too), 3 columns snaking.
template <int TM, int TN, int ORDER>
__device__ __forceinline__ void outer_product(float (&acc)[TM][TN], const float (&fa)[TM], const float (&fb)[TN]) {
    if constexpr (ORDER == 0 || ORDER == 2) {
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int jj = 0; jj < TN; ++jj) {
                const int j = (ORDER == 2 && (i & 1)) ? TN - 1 - jj : jj;
                acc[i][j] += fa[i] * fb[j];
            }
    } else {
#pragma unroll
        for (int j = 0; j < TN; ++j)
#pragma unroll
            for (int ii = 0; ii < TM; ++ii) {
                const int i = (ORDER == 3 && (j & 1)) ? TM - 1 - ii : ii;
                acc[i][j] += fa[i] * fb[j];
            }
    }
}

}  // namespace gemmlab
