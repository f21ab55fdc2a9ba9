"""Library baselines, registered like kernels and timed by the same timer in the same run.

- cublas: cuBLAS SGEMM through CuPy (cupy.cublas.gemm), FP32 compute, TF32 off.
- torch:  torch.Tensor.addmm_ with TF32 off, when PyTorch is installed.
Both run on the timer's stream, so the events bracket exactly their work.
"""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Callable

from .registry import register


@dataclass(frozen=True)
class Baseline:
    name: str
    op: str
    title: str
    idea: str
    _available: Callable[[], str]  # "" when usable, else why not
    _enqueue: Callable  # (problem, A, B, C, stream_handle) -> None

    kind = "baseline"
    rung = None
    params = ()
    seed = ""
    same_as = None

    @property
    def defaults(self) -> dict:
        return {}

    def unavailable_reason(self) -> str:
        return self._available()

    def enqueue(self, problem, A, B, C, stream_handle: int) -> None:
        self._enqueue(problem, A, B, C, stream_handle)


def _cupy_reason() -> str:
    if os.environ.get("NVIDIA_TF32_OVERRIDE", "") not in ("", "0"):
        return "NVIDIA_TF32_OVERRIDE is set: cuBLAS SGEMM would use TF32"
    return ""


def _cublas_enqueue(problem, A, B, C, handle: int) -> None:
    from cupy import cublas

    from .cuda.device import cupy_stream

    with cupy_stream(handle):
        # Row-major C = A @ B; cupy.cublas.gemm maps it onto column-major SGEMM itself.
        cublas.gemm("N", "N", A, B, out=C, alpha=problem.alpha, beta=problem.beta)


def _torch_reason() -> str:
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed"
    return ""


_torch_streams: dict[int, object] = {}


def torch_stream(handle: int):
    """A torch stream object over a raw stream handle (cached: one per handle)."""
    import torch

    stream = _torch_streams.get(handle)
    if stream is None:
        stream = _torch_streams[handle] = torch.cuda.ExternalStream(handle)
    return stream


_torch_views_cache: dict[tuple, tuple] = {}


def torch_views(*arrays):
    """torch views of CuPy arrays, made once per set of buffers (DLPack costs host time)."""
    import torch

    key = tuple((x.data.ptr, x.shape) for x in arrays)
    views = _torch_views_cache.get(key)
    if views is None:
        if len(_torch_views_cache) >= 2:  # each entry keeps its arrays alive
            _torch_views_cache.clear()
        views = _torch_views_cache[key] = tuple(torch.from_dlpack(x) for x in arrays)
    return views


def _torch_enqueue(problem, A, B, C, handle: int) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.cuda.stream(torch_stream(handle)):
        a, b, c = torch_views(A, B, C)
        # addmm ignores C when beta == 0, so the NaN poison cannot leak in.
        c.addmm_(a, b, beta=problem.beta, alpha=problem.alpha)


CUBLAS = Baseline("cublas", "sgemm", "cuBLAS SGEMM (CuPy)", "the vendor library, FP32 compute, TF32 off",
                  _cupy_reason, _cublas_enqueue)
TORCH = Baseline("torch", "sgemm", "torch.addmm (cuBLAS)", "PyTorch's matmul, TF32 off",
                 _torch_reason, _torch_enqueue)



def _triton_reason() -> str:
    from .baselines_triton import unavailable_reason

    return unavailable_reason()


def _triton_enqueue(problem, A, B, C, handle: int) -> None:
    from .baselines_triton import enqueue

    enqueue(problem, A, B, C, handle)


TRITON = Baseline("triton", "sgemm", "Triton matmul (fp32, ieee)", "tl.dot with input_precision='ieee', autotuned",
                  _triton_reason, _triton_enqueue)

register(CUBLAS, TORCH, TRITON)
