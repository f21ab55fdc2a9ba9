// Tensor-core rung 5 - persistent kernel with an L2-friendly tile scheduler, 2-CTA clusters
// that share B through TMA multicast, and C written by TMA stores.
// Idea: rung 4 launched one block per tile, so every block paid its prologue (barrier set-up,
//   pipeline fill) and its epilogue stalled the tensor cores. Here one block per SM (or per
//   cluster slot) loops over tiles in grouped order (GROUP_M tile rows at a time, so A and B
//   stay in L2); its producer runs ahead into the next tile while the consumers write the last
//   one. Two CTAs of a cluster compute vertically adjacent tiles that need the same B tile: each
//   loads half of it and multicasts it to both, halving B's L2 traffic. C leaves through shared
//   memory in swizzled 64x32 chunks stored by TMA, which clips at M and N.
// Output: fp32 C, or (OUT16 = 1) C in the input type, fp16 or bf16, as torch.mm writes it:
//   alpha * A@B + beta * C in fp32, rounded once to nearest even; C not read when beta == 0.
// B layout (B_KMAJOR, set from the problem, not tuned): 0 reads a row-major KxN B N-major (the
//   wgmma transpose bit); 1 reads B given as its transpose, an NxK row-major array (x @ W.T,
//   torch.nn.functional.linear's weight), K-major like A - in place, no transposing copy.
// A layout (A_MNMAJOR, likewise set from the problem): 0 reads a row-major MxK A; 1 reads A given
//   as its transpose, a KxM row-major array (layouts tn, tt), M-major through the wgmma A
//   transpose bit - in place, as a KxN B is read N-major.
// Needs: sm_90a. Any M, N, K: TMA zero-fills loads past the edges and clips stores; rows must
//   be 16-byte multiples (K % 8 for A and a K-major B, M % 8 for a KxM A, N % 8 for a KxN B,
//   N % 4 for an fp32 C and N % 8 for a 16-bit one), and where
//   they are not the harness pads them into aligned copies (counted in the time) - see
//   ops/hgemm_tma.py.
// Split-K (SPLITK, a launch parameter): a problem with fewer output tiles than SMs (512x512x8192:
//   16 tiles of 128x128 for 132 SMs; 1024^3: 64) leaves most SMs idle however well each tile
//   runs. Dealing each tile's K loop out in slices gives every SM work; the slices' fp32 partials
//   meet in a workspace and the last slice of a tile to finish sums them in slice order (so the
//   result is deterministic) and writes C. Tiles are still whole for SPLITK = 1.
// Tail split (TAILK, a launch parameter): a problem of a few waves whose last wave is partial
//   (3072^3: 144 cluster tiles of 256x256 on 66 cluster slots, 2 waves and 12 tiles) runs its
//   full waves whole and deals only the last wave's tiles out in K slices, through the same
//   workspace, so the SMs the last wave would leave idle share its work.
// Clusters along N (CN = 2): two CTAs side by side need the same A rows; each loads one 64-row
//   half and multicasts it to both (cuBLAS's 1x2 clusters of 128x64 tiles at 1024^3). CM x CN
//   clusters of up to 2x2 share A along their rows and B along their columns.
// Tile widths (BN): 64, 128, 192 or 256 columns, one wgmma per K step. 192 fills waves that 256
//   leaves partial (3072^3: 384 tiles of 128x192 on 132 SMs, against 2.2 waves of 256x256 cluster
//   tiles); 64 doubles the tiles of problems with too few (1024^3).
// Ping-pong (PINGPONG = 1): the two consumer warpgroups take alternate tiles, BM x BN each, so one
//   writes its C while the other multiplies; the cooperative default shares one tile between them
//   and leaves the tensor cores idle for every epilogue.
// Should move: past rung 4 on large shapes (no per-tile prologue, epilogue hidden under the
//   next tile's loads, less L2 traffic), toward cuBLAS, which does the same.
#include "persistent.cuh"

namespace gemmlab {

// tmA describes A as MxK (A_MNMAJOR = 0) or as its KxM transpose (A_MNMAJOR = 1); tmB describes
// B as KxN (B_KMAJOR = 0) or as its NxK transpose (B_KMAJOR = 1); tmC and C are fp32 (OUT16 = 0)
// or of the input type (OUT16 = 1). splits > 1 deals each tile's K tiles out in that many slices
// (split-K, for problems with fewer tiles than SMs; persistent.cuh), summed in order through the
// zeroed workspace W (null when splits == 1).
template <int BF16, int B_KMAJOR, int OUT16, int A_MNMAJOR, int BN, int STAGES, int CM, int CN, int GROUP_M, int BM,
          int CONSUMERS, int PINGPONG>
__global__ void __launch_bounds__(384, 1)
hgemm_persistent(const __grid_constant__ hop::TmaMap tmA, const __grid_constant__ hop::TmaMap tmB,
                 const __grid_constant__ hop::TmaMap tmC, int M, int N, int K, float alpha, float beta,
                 const void* __restrict__ C, int ldc, float* __restrict__ W, int whole, int splits) {
    static_assert(BF16 == 0 || BF16 == 1, "16-bit inputs: 0 fp16, 1 bf16");
    hop::persistent_gemm<BF16, B_KMAJOR, OUT16, BN, STAGES, CM, CN, GROUP_M, A_MNMAJOR, BM, CONSUMERS, PINGPONG>(
        tmA, tmB, tmC, M, N, K, alpha, beta, C, ldc, W, whole, splits);
}

}  // namespace gemmlab
