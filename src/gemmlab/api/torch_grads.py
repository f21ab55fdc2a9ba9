"""Autograd formulas for the torch custom ops (api/torch_ops.py registers them with the ops).

The gradients are computed by the same custom ops, so torch.compile traces a backward as it
traces a forward (no graph break), a CUDA graph records its launches, and a gradient has a
gradient in turn (double backward). The transposes are views: a plain call reads the transpose of
a contiguous matrix in place (cuBLAS's transpose flags), so no operand is copied for them.

    out = alpha * A @ B + beta * C      dA = alpha * g @ B^T    dB = alpha * A^T @ g
                                        dC = beta * g (none when beta == 0: C is not read)
    out = sum(x)                        dx = g, broadcast to x's shape

hgemm takes two inputs of one type, so with 16-bit A and B the incoming gradient g is rounded to
that type before its products (as it already is when the result is 16-bit), and dA and dB come
back in it, as torch.mm's do for 16-bit inputs; with fp32 inputs (read as tf32) g stays fp32.
bgemm transposes each batch's matrix (its calls copy those strided views).
"""
from __future__ import annotations

import torch


def _setup_gemm(ctx, inputs, output) -> None:
    A, B, C, alpha, beta = inputs[:5]
    ctx.save_for_backward(A, B)
    ctx.alpha, ctx.beta = float(alpha), float(beta)
    ctx.c_dtype = None if C is None else C.dtype


def _c_grad(ctx, g):
    """dC, or None where C is absent or not read (beta == 0) or needs none."""
    if ctx.c_dtype is None or ctx.beta == 0.0 or not ctx.needs_input_grad[2]:
        return None
    return (g * ctx.beta).to(ctx.c_dtype)


def _sgemm_backward(ctx, g):
    A, B = ctx.saved_tensors
    sgemm = torch.ops.gemmlab.sgemm
    dA = sgemm(g, B.T, None, ctx.alpha, 0.0) if ctx.needs_input_grad[0] else None
    dB = sgemm(A.T, g, None, ctx.alpha, 0.0) if ctx.needs_input_grad[1] else None
    return dA, dB, _c_grad(ctx, g), None, None


def _hgemm_backward(ctx, g):
    A, B = ctx.saved_tensors
    hgemm = torch.ops.gemmlab.hgemm
    wide = A.dtype == torch.float32  # tf32: fp32 in, fp32 out
    gi = g if wide else g.to(A.dtype)
    out = None if wide else A.dtype
    dA = hgemm(gi, B.T, None, ctx.alpha, 0.0, out) if ctx.needs_input_grad[0] else None
    dB = hgemm(A.T, gi, None, ctx.alpha, 0.0, out) if ctx.needs_input_grad[1] else None
    return dA, dB, _c_grad(ctx, g), None, None, None


def _bgemm_backward(ctx, g):
    A, B = ctx.saved_tensors
    bgemm = torch.ops.gemmlab.bgemm
    dA = bgemm(g, B.transpose(1, 2), None, ctx.alpha, 0.0) if ctx.needs_input_grad[0] else None
    dB = bgemm(A.transpose(1, 2), g, None, ctx.alpha, 0.0) if ctx.needs_input_grad[1] else None
    return dA, dB, _c_grad(ctx, g), None, None


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
