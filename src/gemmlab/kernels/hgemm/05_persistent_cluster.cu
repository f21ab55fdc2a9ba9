// Tensor-core rung 5 - persistent kernel with an L2-friendly tile scheduler, 2-CTA clusters
// that share B through TMA multicast, and C written by TMA stores.
// Idea: rung 4 launched one block per tile, so every block paid its prologue (barrier set-up,
//   pipeline fill) and its epilogue stalled the tensor cores. Here one block per SM (or per
//   cluster slot) loops over tiles in grouped order (GROUP_M tile rows at a time, so A and B
//   stay in L2); its producer runs ahead into the next tile while the consumers write the last
//   one. Two CTAs of a cluster compute vertically adjacent tiles that need the same B tile: each
//   loads half of it and multicasts it to both, halving B's L2 traffic. C leaves through shared
//   memory in swizzled 64x32 chunks stored by TMA, which clips at M and N.
// Output: fp32 C (alpha * A@B + beta * C; C not read when beta == 0).
// Needs: sm_90a. Any M, N, K: TMA zero-fills loads past the edges and clips stores; rows must
//   be 16-byte multiples (K % 8, N % 8 for A, B; N % 4 for C), and where they are not the
//   harness pads A, B and C into aligned copies (counted in the time) - see hgemm/runner.py.
// Should move: past rung 4 on large shapes (no per-tile prologue, epilogue hidden under the
//   next tile's loads, less L2 traffic), toward cuBLAS, which does the same.
#include "persistent.cuh"

namespace gemmlab {

template <int BF16, int BN, int STAGES, int CM, int GROUP_M>
__global__ void __launch_bounds__(384, 1)
hgemm_persistent(const __grid_constant__ hop::TmaMap tmA, const __grid_constant__ hop::TmaMap tmB,
                 const __grid_constant__ hop::TmaMap tmC, int M, int N, int K, float alpha, float beta,
                 const float* __restrict__ C, int ldc) {
    static_assert(BF16 == 0 || BF16 == 1, "16-bit inputs: 0 fp16, 1 bf16");
    hop::persistent_gemm<BF16, BN, STAGES, CM, GROUP_M>(tmA, tmB, tmC, M, N, K, alpha, beta, C, ldc);
}

}  // namespace gemmlab
