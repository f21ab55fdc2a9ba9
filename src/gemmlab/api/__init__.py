"""The Python entry points: plain calls (gemmlab.sgemm, hgemm, bgemm, reduce_sum), plans
(gemmlab.Matmul, gemmlab.Sum), gemmlab.explain, gemmlab.use_tuning and the torch custom ops.

A plain call reads its arrays' pointers, shapes and stream directly (api/operands.py), finds
this thread's executor for the shape (api/core.py) - the implementation the dispatch table
measured fastest on this GPU unless one is named (api/dispatch.py) - and launches it through a
prepared launcher. Errors are one BadArgumentError (a ValueError) line.
"""
from __future__ import annotations

from typing import Any, Mapping

from ..errors import GemmlabError
from . import calls, core, sum_calls, tuning
from .explaining import explain
from .plans import Matmul, Sum

DEFAULT_REDUCE = "single_pass"  # the fallback where no table speaks: one launch, deterministic


def sgemm(A: Any, B: Any, C: Any = None, alpha: float = 1.0, beta: float = 0.0, impl: str | None = None,
          params: Mapping[str, int] | None = None):
    """C = alpha * A @ B + beta * C in fp32 (no TF32).

    A (MxK), B (KxN) and C (MxN) are float32 CUDA arrays: torch tensors, CuPy arrays or any
    __cuda_array_interface__ / DLPack producer. With C given it is updated in place and returned;
    otherwise a new C of A's family is returned (beta must then be 0). With beta == 0 C is not
    read. Strided or misaligned operands are copied to dense ones first. Empty dimensions follow
    torch: M or N = 0 gives an empty C; K = 0 gives beta * C (zeros when beta == 0).
    impl=None runs what gemmlab.explain(A, B) names: the implementation measured fastest on this
    GPU near this shape (a gemmlab kernel, or cuBLAS where it was faster); `params` override a
    kernel's parameters (else the tuning database named by use_tuning/GEMMLAB_DB, else the table's).
    """
    return calls.gemm("sgemm", "gemmlab.sgemm", A, B, C, alpha, beta, impl, params)


def hgemm(A: Any, B: Any, C: Any = None, alpha: float = 1.0, beta: float = 0.0, impl: str | None = None,
          params: Mapping[str, int] | None = None, *, out_dtype: Any = None):
    """C = alpha * A @ B + beta * C on tensor cores: A and B fp16 or bf16 (both the same), products
    accumulated in fp32, C fp32 - or C in the inputs' own type (torch.mm's output for 16-bit
    inputs) when C is given in that type or out_dtype names it ("bf16", "float16", torch.bfloat16,
    ...): the fp32 result alpha*A@B + beta*C rounded once, to nearest even, as cuBLAS does (CuPy
    has no bfloat16, so a bf16 C is torch's). fp32 A and B run as tf32 - LOWER precision than
    sgemm (products off by up to ~2^-9 relative; gemmlab.ops.hgemm_check) - with an fp32 C.
    Otherwise as sgemm: C updated in place or a new C returned, beta == 0 never reads C, torch's
    rules for empty dimensions, impl=None the measured-fastest implementation that writes C's
    type (gemmlab.explain; of the gemmlab kernels `persistent` writes a 16-bit C), naming a rung
    for a problem it refuses raises BadArgumentError. B as a transposed view (x @ W.T, torch's or
    CuPy's): cuBLAS reads it in place, and so do impl="persistent" and impl="tf32_wgmma" where TMA
    can describe W's rows (K % 8 == 0, K % 4 for fp32, and N % 4 == 0, N % 8 for a 16-bit C); A as
    a transposed view: cuBLAS, and impl="persistent" and impl="tf32_wgmma" where TMA can describe
    its rows (M % 8 == 0, M % 4 for fp32) and B's and C's as above; other named kernels get a
    row-major copy.
    """
    return calls.gemm("hgemm", "gemmlab.hgemm", A, B, C, alpha, beta, impl, params, out_dtype)


def bgemm(A: Any, B: Any, C: Any = None, alpha: float = 1.0, beta: float = 0.0, impl: str | None = None,
          params: Mapping[str, int] | None = None):
    """C[i] = alpha * A[i] @ B[i] + beta * C[i] for every i of a batch, in fp32 (torch.bmm's
    layout: A batch x M x K, B batch x K x N, C batch x M x N); otherwise as sgemm."""
    return calls.gemm("bgemm", "gemmlab.bgemm", A, B, C, alpha, beta, impl, params)


def reduce_sum(x: Any, impl: str | None = None, params: Mapping[str, int] | None = None):
    """sum(x) over every element of a float32 CUDA array, accumulated in fp32, as a 0-d array of
    x's family (a 0-d torch tensor for torch input, else CuPy), computed on the stream x's
    framework has current. Any shape; strided arrays are copied to a dense one first; an empty
    array sums to 0. The bound and NaN/inf rules are gemmlab.ops.reduce_check's:
    |result - exact| <= (ceil(sqrt(n)) + 64) * 2^-24 * sum(|x|); NaN and inf propagate as in NumPy.
    impl=None: the implementation measured fastest on this GPU near this size (gemmlab.explain(x));
    `single_pass` is bitwise reproducible, `tile_queue` hands tiles out dynamically (its rounding,
    not its bound, may differ between launches).
    """
    return sum_calls.reduce_sum(x, impl, params)


def use_tuning(path: Any) -> None:
    """Use the results database at `path` (written by `gemmlab tune`) for kernel parameters from now
    on; None stops using one. A path that is not a gemmlab results database raises ValueError.
    Every thread's executors are dropped, so a shape already called decides again with it."""
    tuning.use_tuning(path)
    core.forget_executors()


def register_torch_ops() -> None:
    """Register gemmlab::sgemm, gemmlab::hgemm, gemmlab::bgemm and gemmlab::reduce_sum as torch custom
    ops (torch.ops.gemmlab.*), with fake implementations so torch.compile traces through them."""
    try:
        import torch
    except ImportError:
        raise GemmlabError("gemmlab.register_torch_ops needs torch: pip install torch") from None
    if not hasattr(torch.library, "register_fake"):  # custom_op and register_fake came in torch 2.4
        raise GemmlabError(f"gemmlab.register_torch_ops needs torch 2.4 or newer, not {torch.__version__}")
    from . import torch_ops  # noqa: F401  (registers on import)


__all__ = ["sgemm", "hgemm", "bgemm", "reduce_sum", "Matmul", "Sum", "explain", "use_tuning",
           "register_torch_ops", "DEFAULT_REDUCE"]
