// Timing helper, not a rung: keep the stream busy for a few microseconds so that the host
// can enqueue "flush, start event, kernel, end event" before the GPU reaches them. Without
// it, host launch overhead (tens of microseconds for a Python call into cuBLAS) can land
// between the start event and the kernel and be counted as kernel time.
namespace gemmlab {

__global__ void hold(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

}  // namespace gemmlab
