"""Tensor-core GEMM kernels (fp16/bf16 inputs, fp32 accumulation and output), issue 7."""
