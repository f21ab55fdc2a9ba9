"""The tensor-core GEMM op (hgemm): fp16/bf16 inputs, fp32 accumulation and output, on the
shared machinery (registry, NVRTC compile, launch, check_each, Timer, ResultStore, tables)."""
