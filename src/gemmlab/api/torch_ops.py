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
from . import calls, checks, sum_calls
from .operands import DTYPE_TEXT, shape_text


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


def _operands(op: str, A, B, C, beta: float, out_dtype) -> tuple[tuple, torch.dtype]:
    """The result's shape and dtype, after every refusal of the call that the tensors' metadata
    decides (devices, ranks, dtypes, dimensions, C's shape and type, out_dtype), in the call's
    words. The fake runs it while torch.compile traces: a compiled graph must not take what the
    call refuses, nor, the ops being pure, drop a refused call whose result goes unused."""
    caller = f"torch.ops.gemmlab.{op}"
    ndim = 3 if op == "bgemm" else 2
    dtypes = checks.GEMM_DTYPES[op]
    for x, what in ((A, "A"), (B, "B")) + (((C, "C"),) if C is not None else ()):
        if x.device.type != "cuda" or x.device != A.device:
            raise BadArgumentError(f"{what} is on {x.device}; {caller} needs CUDA tensors on one GPU")
    for x, what in ((A, "A"), (B, "B")):
        _dtype_of(x, what, dtypes, caller)
        if x.dim() != ndim:
            raise BadArgumentError(f"{what} must be {ndim}-D, got {x.dim()}-D")
    if A.dtype != B.dtype:
        raise BadArgumentError(f"A is {_NAMES[A.dtype]} but B is {_NAMES[B.dtype]}: both must have one dtype")
    sa, sb = tuple(A.shape), tuple(B.shape)
    _require(sb[:-2] == sa[:-2], lambda: f"A is {shape_text(sa)} but B is {shape_text(sb)}: batch sizes differ")
    _require(sb[-2] == sa[-1], lambda: f"A is {shape_text(sa)} but B is {shape_text(sb)}: inner dimensions differ")
    dtype = ("tf32" if _NAMES[A.dtype] == "fp32" else _NAMES[A.dtype]) if op == "hgemm" else "fp32"
    shape = (*sa[:-1], sb[-1])
    named = checks.out_name(out_dtype)
    if C is None:
        if beta != 0.0:  # as the real op: refused while tracing, not when the graph runs
            raise BadArgumentError("beta != 0 needs C")
        out = checks.c_type(op, dtype, named, caller)
    else:
        c_name = _dtype_of(C, "C", checks.c_dtypes(op, dtype), caller)
        if named is not None and c_name != named:
            raise BadArgumentError(f"C is {DTYPE_TEXT[c_name]} but out_dtype is {DTYPE_TEXT[named]}")
        _require(tuple(C.shape) == shape, lambda: f"C is {shape_text(C.shape)}, expected {shape_text(shape)}")
        out = c_name
    return shape, {v: k for k, v in _NAMES.items()}[out]


def _dtype_of(x, what: str, dtypes: tuple[str, ...], caller: str) -> str:
    """x's dtype as gemmlab names it, refused in the call's words where it is not one of `dtypes`."""
    name = _NAMES.get(x.dtype, str(x.dtype).removeprefix("torch."))
    if name not in dtypes:
        raise BadArgumentError(f"{what} has dtype {DTYPE_TEXT.get(name, name)}; {caller} needs "
                               + " or ".join(DTYPE_TEXT[d] for d in dtypes))
    return name


def _require(holds, message) -> None:
    """A plain bool that fails: one line. A symbolic one (dynamic shapes while torch.compile
    traces) becomes torch's check, asserted when the graph runs."""
    if isinstance(holds, bool):
        if not holds:
            raise BadArgumentError(message())
    else:
        torch._check(holds, message)


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
    if x.device.type != "cuda":
        raise BadArgumentError(f"x is on {x.device}; torch.ops.gemmlab.reduce_sum needs a CUDA tensor")
    _dtype_of(x, "x", ("fp32",), "torch.ops.gemmlab.reduce_sum")
    return x.new_empty((), dtype=torch.float32)
