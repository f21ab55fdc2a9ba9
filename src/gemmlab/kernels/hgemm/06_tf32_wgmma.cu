// Tensor-core rung 6 - fp32 inputs on the tensor cores as tf32 (wgmma m64nNk8.tf32), with rung
// 5's persistent, clustered, warp-specialised pipeline.
// Idea: the tensor cores take fp32 operands as tf32 - 8 exponent bits, 10 mantissa bits: the
//   low 13 bits of each input are ignored - at up to 8x the FP32 FFMA rate. wgmma has no
//   transpose for 32-bit types: a shared-memory operand must be K-major. A (MxK, row-major) is;
//   a B given transposed (NxK, layout nt: B_KMAJOR = 1) is too, and both are read as rung 5 reads
//   them. A row-major KxN B (layout nn: B_KMAJOR = 0) is not, so the kernel computes the
//   transposed product C^T = B^T A^T: B's N-major tile goes to wgmma as its A operand through
//   registers, which the consumers fill from shared memory in any order they like, and A's
//   K-major tile is the shared-memory operand. Tiles are then BN rows x 128 columns and C is
//   staged transposed back (persistent.cuh, "RS"). The harness used to transpose B into a copy
//   instead, in the timed work: 126 us of ~460 at 4096^3.
//   An A given transposed (KxM: layouts tn, tt; A_MNMAJOR = 1) is not K-major either. It goes
//   through registers in the plain product, read from M-major boxes as B is above, and B must
//   then be K-major in shared memory: given as NxK (tt) it is; given as KxN (tn) the consumers
//   transpose each stage's B tile into a K-major buffer while the last stage's wgmmas run ("RSA",
//   "TRANSB"). Every layout is read in place; none is copied.
//   A K tile is 32 elements: the same 128-byte swizzled rows as rung 5.
// Precision: LOWER than SGEMM. Each product carries a relative error up to ~2^-9 (both inputs
//   truncated to 10 bits), so results differ from FP32 at the 1e-3 level; compare it with cuBLAS
//   in TF32 mode, never with the FP32 ladder (docs/tensor-cores.md, docs/notes/3xtf32.md).
// Output: fp32 C (alpha * A@B + beta * C; C not read when beta == 0). Split-K (SPLITK) as rung 5.
// Needs: sm_90a; any M, N, K (K % 4 and N % 4 keep rows 16-byte multiples, else padded copies).
// Should move: fp32 GEMM from ~51 TFLOP/s (cuBLAS FP32) toward the TF32 tensor-core rate; with
//   B read in place, to cuBLAS TF32's own speed in layout nn as in nt; tn pays the in-CTA
//   transpose, not a copy of B.
#include "persistent.cuh"

namespace gemmlab {

template <int B_KMAJOR, int A_MNMAJOR, int BN, int STAGES, int CM, int CN, int GROUP_M>
__global__ void __launch_bounds__(384, 1)
hgemm_tf32_wgmma(const __grid_constant__ hop::TmaMap tmA, const __grid_constant__ hop::TmaMap tmB,
                 const __grid_constant__ hop::TmaMap tmC, int M, int N, int K, float alpha, float beta,
                 const float* __restrict__ C, int ldc, float* __restrict__ W, int whole, int splits) {
    hop::persistent_gemm<2, B_KMAJOR, 0, BN, STAGES, CM, CN, GROUP_M, A_MNMAJOR>(tmA, tmB, tmC, M, N, K, alpha, beta, C, ldc, W, whole, splits);
}

}  // namespace gemmlab
