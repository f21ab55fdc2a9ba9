// cp.async (sm_80+) wrappers: global -> shared copies that bypass registers and complete
// asynchronously, tracked in commit groups. The src-size form zero-fills the bytes it
// does not copy, which is how out-of-range elements become zeros without a branch that
// would split the copy into a synchronous path.
#pragma once

namespace gemmlab {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Copy `valid` (0 or 4) bytes from src to dst and zero the rest of the 4-byte slot.
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(valid ? 4 : 0));
}

// Copy `bytes` (0..16) from a 16-byte aligned src into a 16-byte slot, zero-filling the rest.
__device__ __forceinline__ void cp_async16(float* dst, const float* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Wait until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace gemmlab
