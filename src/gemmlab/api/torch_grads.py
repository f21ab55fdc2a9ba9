"""Autograd formulas for the torch custom ops (api/torch_ops.py registers them with the ops).

The gradients are computed by the same custom ops, so torch.compile traces a backward as it
traces a forward (no graph break), a CUDA graph records its launches, and a gradient has a
gradient in turn (double backward). The transposes are views: a plain call reads the transpose of
a contiguous matrix in place (cuBLAS's transpose flags), so no operand is copied for them.

    out = alpha * A @ B + beta * C      dA = alpha * g @ B^T    dB = alpha * A^T @ g
                                        dC = beta * g (none when beta == 0: C is not read)
    out = sum(x)                        dx = g, broadcast to x's shape

hgemm takes two inputs of one type. With bf16 inputs the incoming gradient g is rounded to bf16
before its products (as it already is when the result is bf16; bf16 has fp32's range), and dA
and dB come back in bf16, as torch.mm's do for bf16 inputs. fp16 has not that range: an fp32 g
beyond 65504 would become inf and a tiny one a subnormal, so with fp16 inputs and an fp32 result
the products are tf32 ones of g and the other operand widened to fp32 (a copy of it), rounded to
fp16 once at the end. fp32 inputs (read as tf32) keep g in fp32. bgemm's calls copy the
transposed batches, and a strided or broadcast g (y.sum()'s) is copied by the call too.
"""
from __future__ import annotations

import torch


def _setup_gemm(ctx, inputs, output) -> None:
    A, B, C, alpha, beta = inputs[:5]
    # keep only what the asked-for gradients read (dA reads B, dB reads A): a frozen weight does
    # not keep its input alive
    ctx.save_for_backward(A if ctx.needs_input_grad[1] else None, B if ctx.needs_input_grad[0] else None)
    ctx.alpha, ctx.beta = float(alpha), float(beta)
    ctx.c_dtype = None if C is None else C.dtype


def _c_grad(ctx, g):
    """dC: beta * g; zeros when beta == 0 (C is not read; as torch.addmm's at beta = 0, so
    autograd.grad over C and an optimiser's step see a gradient); None where none is asked for."""
    if ctx.c_dtype is None or not ctx.needs_input_grad[2]:
        return None
    if ctx.beta == 0.0:
        return torch.zeros_like(g, dtype=ctx.c_dtype)
    return (g * ctx.beta).to(ctx.c_dtype)


def _fp32_backward(op: str):
    """sgemm's and bgemm's formula: fp32 in and out, g as it comes; .mT transposes the last two
    dimensions (a matrix's, or each batch's)."""
    def backward(ctx, g):
        A, B = ctx.saved_tensors
        call = getattr(torch.ops.gemmlab, op)
        dA = call(g, B.mT, None, ctx.alpha, 0.0) if ctx.needs_input_grad[0] else None
        dB = call(A.mT, g, None, ctx.alpha, 0.0) if ctx.needs_input_grad[1] else None
        return dA, dB, _c_grad(ctx, g), None, None
    return backward


_sgemm_backward, _bgemm_backward = _fp32_backward("sgemm"), _fp32_backward("bgemm")


def _hgemm_backward(ctx, g):
    A, B = ctx.saved_tensors
    kept = A if A is not None else B  # None when only C asked for a gradient
    if kept is None:
        return None, None, _c_grad(ctx, g), None, None, None
    hgemm, alpha, dtype = torch.ops.gemmlab.hgemm, ctx.alpha, kept.dtype
    dA = dB = None
    if dtype == torch.float16 and g.dtype == torch.float32:  # fp16's range would clip g: tf32 products
        if ctx.needs_input_grad[0]:
            dA = hgemm(g, B.float().T, None, alpha, 0.0).to(dtype)
        if ctx.needs_input_grad[1]:
            dB = hgemm(A.float().T, g, None, alpha, 0.0).to(dtype)
    else:
        wide = dtype == torch.float32  # tf32: fp32 in, fp32 out
        gi, out = (g, None) if wide else (g.to(dtype), dtype)
        dA = hgemm(gi, B.T, None, alpha, 0.0, out) if ctx.needs_input_grad[0] else None
        dB = hgemm(A.T, gi, None, alpha, 0.0, out) if ctx.needs_input_grad[1] else None
    return dA, dB, _c_grad(ctx, g), None, None, None


def _setup_sum(ctx, inputs, output) -> None:
    ctx.shape = inputs[0].shape


def _sum_backward(ctx, g):
    return g.expand(ctx.shape)


def register(sgemm, hgemm, bgemm, reduce_sum) -> None:
    """Attach the formulas to the four custom ops (torch >= 2.4's register_autograd)."""
    sgemm.register_autograd(_sgemm_backward, setup_context=_setup_gemm)
    hgemm.register_autograd(_hgemm_backward, setup_context=_setup_gemm)
    bgemm.register_autograd(_bgemm_backward, setup_context=_setup_gemm)
    reduce_sum.register_autograd(_sum_backward, setup_context=_setup_sum)
