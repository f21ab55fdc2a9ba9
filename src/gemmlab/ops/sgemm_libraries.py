"""sgemm's library baselines, registered like kernels and timed by the same timer in the same run.

- cublas: cuBLAS SGEMM called directly (cuda/cublas.py: this thread's handle, default math, so
  FP32 compute, TF32 off) - the same call the API's library path makes, so bench times what a
  program gets.
- torch:  torch.Tensor.addmm_ with TF32 off, when PyTorch is installed.
Both run on the timer's stream, so the events bracket exactly their work.
"""
from __future__ import annotations

import os

from ..baseline import Baseline
from ..registry import register
from .torch_interop import torch_reason, torch_stream, torch_views


def _cupy_reason() -> str:
    if os.environ.get("NVIDIA_TF32_OVERRIDE", "") not in ("", "0"):
        return "NVIDIA_TF32_OVERRIDE is set: cuBLAS SGEMM would use TF32"
    return ""


def _cublas_enqueue(problem, A, B, C, handle: int) -> None:
    from ..cuda import cublas

    cublas.sgemm(problem.M, problem.N, problem.K, problem.alpha, A.data.ptr, B.data.ptr, problem.beta, C.data.ptr,
                 handle)


def _torch_enqueue(problem, A, B, C, handle: int) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.cuda.stream(torch_stream(handle)):
        a, b, c = torch_views(A, B, C)
        # addmm ignores C when beta == 0, so the NaN poison cannot leak in.
        c.addmm_(a, b, beta=problem.beta, alpha=problem.alpha)


CUBLAS = Baseline("cublas", "sgemm", "cuBLAS SGEMM", "the vendor library, FP32 compute, TF32 off",
                  _cupy_reason, _cublas_enqueue)
TORCH = Baseline("torch", "sgemm", "torch.addmm (cuBLAS)", "PyTorch's matmul, TF32 off",
                 torch_reason, _torch_enqueue)



def _triton_reason() -> str:
    from .sgemm_triton import unavailable_reason

    return unavailable_reason()


def _triton_enqueue(problem, A, B, C, handle: int) -> None:
    from .sgemm_triton import enqueue

    enqueue(problem, A, B, C, handle)


TRITON = Baseline("triton", "sgemm", "Triton matmul (fp32, ieee)", "tl.dot with input_precision='ieee', autotuned",
                  _triton_reason, _triton_enqueue)

register(CUBLAS, TORCH, TRITON)
