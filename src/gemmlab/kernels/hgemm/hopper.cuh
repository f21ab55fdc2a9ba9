// Hopper primitives of the tensor-core rungs 3-6, written as PTX: mbarriers, TMA (bulk tensor
// copies, with cluster multicast), wgmma fences and shared-memory matrix descriptors, named and
// cluster barriers, setmaxnreg. Everything here needs sm_90 (wgmma and setmaxnreg: sm_90a).
#pragma once

#include "hgemm_common.cuh"

namespace gemmlab {
namespace hop {

// The 128 opaque bytes of a CUtensorMap, made on the host (cuTensorMapEncodeTiled through
// cuda.core) and passed by value as a __grid_constant__ parameter, so its address is the
// parameter's own and TMA reads it from there.
struct alignas(64) TmaMap {
    unsigned long long raw[16];
};

__device__ __forceinline__ unsigned long long map_addr(const TmaMap& m) {
    return reinterpret_cast<unsigned long long>(&m);
}

// Bring a tensor map into the TMA unit's descriptor cache before its first copy, which would
// otherwise wait for it to come from parameter memory (CUTLASS's kernels do the same).
__device__ __forceinline__ void prefetch_map(const TmaMap& m) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(map_addr(m)) : "memory");
}

// -- mbarriers --------------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(hg::smem_u32(bar)), "r"(count));
}

// Make barrier initialisation visible to the async proxy and to the other CTAs of the cluster.
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also announces `bytes` the copy engine will deliver in this phase.
__device__ __forceinline__ void mbar_expect_tx(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(hg::smem_u32(bar)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(hg::smem_u32(bar)) : "memory");
}

// One arrival on the barrier at the same shared-memory offset in CTA `cta` of the cluster
// (this CTA included): how consumers free a stage that a peer's multicast also writes.
// Default (CTA-scope) release semantics on purpose: the consumers' reads of the stage were
// wgmma's, already complete, so nothing needs ordering at cluster scope - and
// `.release.cluster` costs a cluster-wide memory barrier per arrival (ncu: "stalled waiting on
// a memory barrier" 43% of cycles, tensor pipe 45% busy, half the speed of CM = 1).
__device__ __forceinline__ void mbar_arrive_cluster(unsigned long long* bar, unsigned cta) {
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
        "}\n" ::"r"(hg::smem_u32(bar)),
        "r"(cta)
        : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(unsigned long long* bar, unsigned parity) {
    unsigned done;
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(hg::smem_u32(bar)), "r"(parity)
        : "memory");
    return done != 0;
}

// Wait until the phase with this parity has completed (try_wait suspends for a while itself).
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}

// -- TMA ----------------------------------------------------------------------------------------

// A box of the 2-D tensor at (c0 = inner/contiguous coordinate, c1 = outer) into shared memory;
// its bytes complete a transaction on `bar`. Out-of-range elements arrive as zeros.
__device__ __forceinline__ void tma_load_2d(void* dst, const TmaMap& map, unsigned long long* bar, int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
            hg::smem_u32(dst)),
        "l"(map_addr(map)), "r"(hg::smem_u32(bar)), "r"(c0), "r"(c1)
        : "memory");
}

// The same box written to the same shared-memory offset of every CTA in `mask`, each of which
// sees the bytes complete on its own barrier at `bar`'s offset.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const TmaMap& map, unsigned long long* bar, int c0,
                                                      int c1, unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(hg::smem_u32(dst)),
        "l"(map_addr(map)), "r"(hg::smem_u32(bar)), "r"(c0), "r"(c1), "h"(mask)
        : "memory");
}

// Shared memory -> the 2-D tensor at (c0, c1); elements outside the tensor are not written.
__device__ __forceinline__ void tma_store_2d(const TmaMap& map, const void* src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map_addr(map)),
                 "r"(hg::smem_u32(src)), "r"(c0), "r"(c1)
                 : "memory");
}

__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// At most N committed stores may still be reading their shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

// Every committed store has completed (written to global memory).
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// Ordinary shared-memory stores -> visible to the copy engine (before a TMA store reads them).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// -- wgmma ----------------------------------------------------------------------------------------

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Tell the compiler the accumulators are live across the asynchronous wgmma (read and written
// by it) so it neither reorders their uses across the fence/wait nor reuses their registers.
template <int R>
__device__ __forceinline__ void fence_operands(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// The same for a register-sourced A fragment: live, unmoved, until its wgmmas are done.
template <int R>
__device__ __forceinline__ void fence_operands(unsigned (&a)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// A shared-memory matrix descriptor for the 128-byte swizzle (rows of 128 bytes, 8-row atoms of
// 1024 bytes, the layout TMA writes with CU_TENSOR_MAP_SWIZZLE_128B). lbo/sbo in bytes:
//   K-major operand: sbo = 1024 (8 rows to the next 8 rows); lbo unused (16).
//   MN-major operand: lbo = bytes between 64-element (128-byte) MN blocks, sbo = 1024 (8 K rows).
__device__ __forceinline__ unsigned long long make_desc(const void* smem, unsigned lbo, unsigned sbo) {
    const unsigned long long addr = hg::smem_u32(smem);
    return ((addr & 0x3FFFFull) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) |
           ((unsigned long long)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

// -- registers, barriers, clusters ------------------------------------------------------------------

template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}

// A barrier among `count` threads (a warpgroup) that leaves the rest of the block running.
__device__ __forceinline__ void named_barrier(int id, int count) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// Arrive on named barrier `id` without waiting: the other `count` - 128 threads wait there
// (bar.sync) for this warpgroup's signal.
__device__ __forceinline__ void named_barrier_arrive(int id, int count) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

__device__ __forceinline__ unsigned cluster_id_x() {
    unsigned r;
    asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
    return r;
}

__device__ __forceinline__ unsigned cluster_count_x() {
    unsigned r;
    asm volatile("mov.u32 %0, %%nclusterid.x;\n" : "=r"(r));
    return r;
}

// Every thread of every CTA in the cluster, after the barriers' initialisation: a relaxed arrival,
// because fence_barrier_init already made the mbarrier.init visible cluster-wide and nothing else
// needs ordering. The default (.release) arrival compiles to MEMBAR.ALL.GPU, which waits for the
// thread's memory operations GPU-wide: in a 1x2 cluster at 1024x1024x64 (bf16, H100) that stall
// was 10% of the warps' samples and the kernel took 1.1 us longer than without a cluster.
__device__ __forceinline__ void cluster_sync_after_init() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
}

// -- epilogue from wgmma accumulators -------------------------------------------------------------

// Two fp32 results -> two 16-bit C elements of KIND (0 fp16, 1 bf16) in one word, `lo` at the
// lower address: one rounding to nearest even, as cuBLAS rounds a 16-bit C (cvt.rn; overflow
// goes to inf, NaN stays NaN). cvt puts its first source in the upper half.
template <int KIND>
__device__ __forceinline__ unsigned pack_rn(float lo, float hi) {
    unsigned d;
    if constexpr (KIND == 1)
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

// One 16-bit C element of KIND -> fp32 (exact: every fp16 and bf16 value is an fp32 value).
template <int KIND>
__device__ __forceinline__ float load16(const hg::bits16* p) {
    const hg::bits16 bits = *p;
    if constexpr (KIND == 1) return __uint_as_float(static_cast<unsigned>(bits) << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(bits));
    return f;
}

// Element (row, col) of thread `t` (0..127 in its warpgroup) for accumulator index i of an m64nN
// wgmma: warp t/32 owns rows 16*(t/32)..+15; i walks 8-column groups, 4 values per group.
__device__ __forceinline__ int acc_row(int t, int i) { return 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2); }
__device__ __forceinline__ int acc_col(int t, int i) { return 8 * (i / 4) + 2 * (t % 4) + (i % 2); }

// C[row0 + r][col0 + c] = alpha * acc + beta * C (C not read when beta == 0), rows/cols past
// M/N skipped: the direct epilogue of rungs 3 and 4.
template <int R>
__device__ __forceinline__ void store_acc(const float (&acc)[R], float* __restrict__ C, int M, int N, int row0,
                                          int col0, int t, float alpha, float beta) {
#pragma unroll
    for (int i = 0; i < R; i += 2) {
        const int r = row0 + acc_row(t, i), c = col0 + acc_col(t, i);
        if (r >= M) continue;
        float* p = C + (long long)r * N + c;
        if (c + 1 < N && (N % 2) == 0) {  // 8-byte aligned pair
            float2 v = make_float2(alpha * acc[i], alpha * acc[i + 1]);
            if (beta != 0.0f) {
                const float2 old = *reinterpret_cast<const float2*>(p);
                v.x += beta * old.x;
                v.y += beta * old.y;
            }
            *reinterpret_cast<float2*>(p) = v;
        } else {
            if (c < N) p[0] = hg::epilogue(acc[i], alpha, beta, p);
            if (c + 1 < N) p[1] = hg::epilogue(acc[i + 1], alpha, beta, p + 1);
        }
    }
}

}  // namespace hop
}  // namespace gemmlab
