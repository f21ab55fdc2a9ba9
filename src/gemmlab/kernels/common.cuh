// Device helpers shared by the rungs. NVRTC has no standard headers here, so this
// file uses only built-in types.
#pragma once

namespace gemmlab {

// C = alpha * acc + beta * C. With beta == 0, C is never read (BLAS semantics): the
// harness poisons C with NaN and beta == 0 must not let that NaN through.
__device__ __forceinline__ void epilogue(float* C, long long idx, float acc, float alpha, float beta) {
    C[idx] = (beta == 0.0f) ? alpha * acc : alpha * acc + beta * C[idx];
}

// True when p can be read or written as a float4 (16-byte aligned).
__device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

__device__ __forceinline__ float4 load_float4(const float* p) {
    return *reinterpret_cast<const float4*>(p);
}

__device__ __forceinline__ void store_float4(float* p, float4 v) {
    *reinterpret_cast<float4*>(p) = v;
}

}  // namespace gemmlab
