"""torch custom ops: torch.ops.gemmlab.sgemm, hgemm, bgemm and reduce_sum, registered on import
(gemmlab.register_torch_ops()).

Each is functional (returns a new tensor; C, when given, is read, never written), so torch.compile
can reorder and capture it, and each has a fake implementation that gives the output's shape and
dtype without running, so torch.compile(fullgraph=True) traces through it with no graph break.
The real implementation is the plain call on the current torch stream, so a CUDA graph
(torch.cuda.graph, or torch.compile's "reduce-overhead" mode) records its launches. Their
gradients are the ops again (api/torch_grads.py).
"""
from __future__ import annotations

from typing import Optional

import torch

from ..errors import BadArgumentError
from . import calls, checks, sum_calls, torch_grads


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


_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}
_TORCH = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def _name(x) -> str:
    """x's dtype as gemmlab names it (a type it does not take by torch's own name)."""
    return _NAMES.get(x.dtype) or str(x.dtype).removeprefix("torch.")


def _check_devices(named: tuple, caller: str) -> None:
    """Every tensor on the first one's CUDA device (the eager call's reading refuses the same)."""
    first = named[0][0].device
    for x, what in named:
        if x.device.type != "cuda" or x.device != first:
            wants = "CUDA tensors on one GPU" if len(named) > 1 else "a CUDA tensor"
            raise BadArgumentError(f"{what} is on {x.device}; {caller} needs {wants}")


def _operands(op: str, A, B, C, beta: float, out_dtype) -> tuple[tuple, torch.dtype]:
    """The result's shape and dtype, after every refusal of the call that the tensors' metadata
    decides (devices, ranks, dtypes, dimensions, C's shape and type, out_dtype): the calls' own
    checks (api/checks.py), on the metadata. The fake runs it while torch.compile traces: a
    compiled graph must not take what the call refuses, nor, the ops being pure, drop a refused
    call whose result goes unused. Symbolic sizes compared here become the graph's guards."""
    caller = f"torch.ops.gemmlab.{op}"
    _check_devices(((A, "A"), (B, "B")) + (((C, "C"),) if C is not None else ()), caller)
    ndim = 3 if op == "bgemm" else 2
    sa, sb = tuple(A.shape), tuple(B.shape)
    checks.check_kind(_name(A), sa, "A", checks.GEMM_DTYPES[op], ndim, caller)
    checks.check_kind(_name(B), sb, "B", checks.GEMM_DTYPES[op], ndim, caller)
    dims, dtype = checks.gemm_dims(op, caller, _name(A), sa, _name(B), sb)
    shape, named = checks.c_shape(op, dims), checks.out_name(out_dtype)
    out = checks.c_type(op, dtype, named, caller)
    if C is None:
        if beta != 0.0:  # as the real op: refused while tracing, not when the graph runs
            raise BadArgumentError("beta != 0 needs C")
    else:
        out, c_shape = _name(C), tuple(C.shape)
        checks.check_kind(out, c_shape, "C", checks.c_dtypes(op, dtype), len(shape), caller)
        checks.check_given_c(out, c_shape, shape, named)
    return shape, _TORCH[out]


def _gemm(op: str, A, B, C, alpha, beta, out_dtype=None):
    """The plain call, functionally: C itself is never written. beta != 0 works on a row-major
    copy of C (the fake's layout, whatever C's); beta == 0 reads no C, whose type is then the
    result's. What the metadata decides is refused first, as the fake refuses it."""
    _operands(op, A, B, C, beta, out_dtype)
    out = None
    if C is not None:
        if beta != 0.0:
            out = C.clone(memory_format=torch.contiguous_format)
        elif out_dtype is None:
            out_dtype = C.dtype
    return calls.gemm(op, f"torch.ops.gemmlab.{op}", A, B, out, alpha, beta, None, None, out_dtype)


def _fake_of(op: str):
    def fake(A, B, C=None, alpha=1.0, beta=0.0, out_dtype=None):
        shape, dtype = _operands(op, A, B, C, beta, out_dtype)
        return A.new_empty(shape, dtype=dtype)
    return fake


sgemm.register_fake(_fake_of("sgemm"))
hgemm.register_fake(_fake_of("hgemm"))
bgemm.register_fake(_fake_of("bgemm"))


@reduce_sum.register_fake
def _fake_sum(x):
    _check_devices(((x, "x"),), "torch.ops.gemmlab.reduce_sum")
    checks.check_kind(_name(x), tuple(x.shape), "x", ("fp32",), None, "torch.ops.gemmlab.reduce_sum")
    return x.new_empty((), dtype=torch.float32)


torch_grads.register(sgemm, hgemm, bgemm, reduce_sum)
