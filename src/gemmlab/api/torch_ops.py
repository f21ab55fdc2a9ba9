"""torch custom ops: torch.ops.gemmlab.sgemm, hgemm, bgemm and reduce_sum, registered on import
(gemmlab.register_torch_ops()).

Each is functional (returns a new tensor; C, when given, is read, never written), so torch.compile
can reorder and capture it, and each has a fake implementation that gives the output's shape and
dtype without running, so torch.compile(fullgraph=True) traces through it with no graph break.
The real implementation is the plain call on the current torch stream, so a CUDA graph
(torch.cuda.graph, or torch.compile's "reduce-overhead" mode) records its launches.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..errors import BadArgumentError
from . import calls, sum_calls
from .operands import shape_text


@torch.library.custom_op("gemmlab::sgemm", mutates_args=())
def sgemm(A: torch.Tensor, B: torch.Tensor, C: Optional[torch.Tensor] = None, alpha: float = 1.0,
          beta: float = 0.0) -> torch.Tensor:
    """alpha * A @ B + beta * C in fp32 (C not read when beta == 0)."""
    return _gemm("sgemm", A, B, C, alpha, beta)


@torch.library.custom_op("gemmlab::hgemm", mutates_args=())
def hgemm(A: torch.Tensor, B: torch.Tensor, C: Optional[torch.Tensor] = None, alpha: float = 1.0,
          beta: float = 0.0, out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """alpha * A @ B + beta * C: fp16/bf16 A and B (fp32 read as tf32), fp32 accumulation; the
    result fp32, or out_dtype (the inputs' 16-bit type; C, when given, must then be of it)."""
    return _gemm("hgemm", A, B, C, alpha, beta, out_dtype)


@torch.library.custom_op("gemmlab::bgemm", mutates_args=())
def bgemm(A: torch.Tensor, B: torch.Tensor, C: Optional[torch.Tensor] = None, alpha: float = 1.0,
          beta: float = 0.0) -> torch.Tensor:
    """alpha * A[i] @ B[i] + beta * C[i] over a batch, fp32."""
    return _gemm("bgemm", A, B, C, alpha, beta)


@torch.library.custom_op("gemmlab::reduce_sum", mutates_args=())
def reduce_sum(x: torch.Tensor) -> torch.Tensor:
    """The fp32 sum of every element of x, as a 0-d tensor."""
    return sum_calls.reduce_sum(x, None, None)


def _gemm(op: str, A, B, C, alpha, beta, out_dtype=None):
    """The plain call, functionally: C itself is never written. beta != 0 works on a row-major
    copy of C (the fake's layout, whatever C's); beta == 0 reads no C, whose type is then the
    result's; beta != 0 without C is refused by the call, as gemmlab.sgemm refuses it."""
    caller = f"torch.ops.gemmlab.{op}"
    out = None
    if C is not None:
        if beta != 0.0:
            out = C.clone(memory_format=torch.contiguous_format)
        else:
            expected = (*A.shape[:-1], B.shape[-1])
            if tuple(C.shape) != expected:
                raise BadArgumentError(f"{caller}: C is {shape_text(C.shape)}, expected {shape_text(expected)}")
            out_dtype = out_dtype if out_dtype is not None else C.dtype
    return calls.gemm(op, caller, A, B, out, alpha, beta, None, None, out_dtype)


def _fake_gemm(A, B, C=None, alpha=1.0, beta=0.0, out_dtype=None):
    if C is None and beta != 0.0:  # as the real op: refused while tracing, not when the graph runs
        raise BadArgumentError("beta != 0 needs C")
    shape = (*A.shape[:-1], B.shape[-1])
    dtype = out_dtype or (C.dtype if C is not None else torch.float32)
    return A.new_empty(shape, dtype=dtype)


sgemm.register_fake(_fake_gemm)
hgemm.register_fake(_fake_gemm)
bgemm.register_fake(_fake_gemm)


@reduce_sum.register_fake
def _fake_sum(x):
    return x.new_empty((), dtype=torch.float32)
