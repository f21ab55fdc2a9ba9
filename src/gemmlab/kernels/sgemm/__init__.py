"""FP32 SGEMM kernels: the seed-001 ladder and the seed-002/004 variants."""
