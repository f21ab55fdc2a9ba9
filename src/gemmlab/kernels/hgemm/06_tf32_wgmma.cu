// Tensor-core rung 6 - fp32 inputs on the tensor cores as tf32 (wgmma m64nNk8.tf32), with rung
// 5's persistent, clustered, warp-specialised pipeline.
// Idea: the tensor cores take fp32 operands as tf32 - 8 exponent bits, 10 mantissa bits: the
//   low 13 bits of each input are ignored - at up to 8x the FP32 FFMA rate. wgmma has no
//   transpose for 32-bit types, so both operands must be K-major in shared memory: A (MxK,
//   row-major) already is, and B arrives transposed (NxK): given so (layout nt, read in place)
//   or transposed by the harness from a KxN B (layout nn, in the timed work). A K tile is 32 elements: the same 128-byte swizzled rows as rung 5.
// Precision: LOWER than SGEMM. Each product carries a relative error up to ~2^-9 (both inputs
//   truncated to 10 bits), so results differ from FP32 at the 1e-3 level; compare it with cuBLAS
//   in TF32 mode, never with the FP32 ladder (docs/tensor-cores.md, docs/notes/3xtf32.md).
// Output: fp32 C (alpha * A@B + beta * C; C not read when beta == 0). Split-K (SPLITK) as rung 5.
// Needs: sm_90a; any M, N, K (K % 4 and N % 4 keep rows 16-byte multiples, else padded copies).
// Should move: fp32 GEMM from ~51 TFLOP/s (cuBLAS FP32) toward the TF32 tensor-core rate.
#include "persistent.cuh"

namespace gemmlab {

template <int BN, int STAGES, int CM, int CN, int GROUP_M>
__global__ void __launch_bounds__(384, 1)
hgemm_tf32_wgmma(const __grid_constant__ hop::TmaMap tmA, const __grid_constant__ hop::TmaMap tmBt,
                 const __grid_constant__ hop::TmaMap tmC, int M, int N, int K, float alpha, float beta,
                 const float* __restrict__ C, int ldc, float* __restrict__ W, int whole, int splits) {
    hop::persistent_gemm<2, 1, 0, BN, STAGES, CM, CN, GROUP_M>(tmA, tmBt, tmC, M, N, K, alpha, beta, C, ldc, W, whole, splits);
}

}  // namespace gemmlab
