"""The bodies of the plain calls (gemmlab.sgemm, hgemm, bgemm, reduce_sum): a hot path for plain
dense torch tensors that reads everything straight off the tensors, and the general path for
every other input (CuPy, other producers, strided or misaligned arrays, empty dimensions)."""
from __future__ import annotations

import sys

from .checks import gemm_operands, layout_of, out_name, output_operand, sum_operand
from .core import _state, executor, setup
from .operands import copy_into, densify, new_output, result, scale, torch_stream_reader

_torch: dict = {}  # torch.Tensor, the dtypes each op takes from torch, raw-stream accessor (set once)


def _torch_setup() -> None:
    import torch

    _torch.update(tensor=torch.Tensor, f32=torch.float32, stream=torch_stream_reader(),
                  dtypes={"sgemm": {torch.float32: "fp32"},
                          "hgemm": {torch.float32: "tf32", torch.float16: "fp16", torch.bfloat16: "bf16"}})


def _transposed(x) -> bool | None:
    """False for a contiguous 2-D tensor; True for a transposed view (the transpose of a
    contiguous matrix: x @ W.T, torch.nn.functional.linear's layout), which cuBLAS reads in
    place; None for any other strides, which the general path copies."""
    if x.is_contiguous():
        return False
    return True if x.stride() == (1, x.shape[0]) else None


def torch_gemm(op_name: str, A, B, C, alpha, beta, impl, params, out: str | None = None):
    """The hot path for plain torch tensors: everything read straight off the tensors, no Operand
    objects, one executor lookup, one launch. Returns NotImplemented for anything unusual (other
    devices, strided or misaligned tensors, empty or wrong shapes, a C type the inputs do not
    give, a runner-path implementation), which the general path then handles - or refuses with
    its one-line errors. `out`: out_name's C type, None for C's own (fp32 without C)."""
    t = _torch.get("tensor")
    if t is None:
        if "torch" not in sys.modules:
            return NotImplemented
        _torch_setup()
        t = _torch["tensor"]
    if type(A) is not t or type(B) is not t or (C is not None and type(C) is not t):
        return NotImplemented
    dtype = _torch["dtypes"][op_name].get(A.dtype)
    if dtype is None or B.dtype is not A.dtype or A.dim() != 2 or B.dim() != 2:
        return NotImplemented
    M, K = A.shape
    K2, N = B.shape
    if K != K2 or not (M and N and K):
        return NotImplemented
    ta, tb = _transposed(A), _transposed(B)
    if ta is None or tb is None:
        return NotImplemented
    a, b = A.data_ptr(), B.data_ptr()
    device = _state["device"]
    if (a | b) & 15 or A.get_device() != device or B.get_device() != device:
        return NotImplemented
    alpha, beta = float(alpha), float(beta)
    if C is None:
        if beta != 0.0:
            return NotImplemented
        if out is None or out == "fp32":
            c_type, out = _torch["f32"], "fp32"
        elif out == dtype:  # a 16-bit C of the inputs' type (hgemm)
            c_type = A.dtype
        else:
            return NotImplemented
        result = A.new_empty((M, N), dtype=c_type)
    else:
        if C.dtype is _torch["f32"]:
            c_out = "fp32"
        elif C.dtype is A.dtype:  # not fp32, so 16-bit hgemm inputs: a C of their type
            c_out = dtype
        else:
            return NotImplemented
        if (out is not None and out != c_out) or C.dim() != 2 or C.shape[0] != M or C.shape[1] != N \
                or not C.is_contiguous() or C.data_ptr() & 15 or C.get_device() != device:
            return NotImplemented
        result, out = C, c_out
    stream = _torch["stream"](device)
    ex = executor(op_name, dtype, (M, N, K), impl, params, stream, (ta, tb), out)
    if not ex.fast:
        return NotImplemented
    ex.run(a, b, result.data_ptr(), alpha, beta, stream)
    return result


def gemm(op_name: str, caller: str, A, B, C, alpha, beta, impl, params, out_dtype=None):
    """C = alpha*A@B + beta*C through this thread's executor; a strided C through a dense copy.
    `out_dtype` (hgemm): C's type for a new C (fp32 by default, or the 16-bit input type)."""
    setup()
    out_type = out_name(out_dtype)
    if op_name != "bgemm":
        done = torch_gemm(op_name, A, B, C, alpha, beta, impl, params, out_type)
        if done is not NotImplemented:
            return done
    a, b, dims, dtype = gemm_operands(op_name, caller, A, B)
    alpha, beta = float(alpha), float(beta)
    M, N, K = dims[0], dims[1], dims[2]
    shape = (dims[3], M, N) if op_name == "bgemm" else (M, N)
    out = output_operand(C, a, shape, beta, caller, op_name, dtype, out_type)
    if M == 0 or N == 0 or (op_name == "bgemm" and dims[3] == 0):
        return C if C is not None else result(out)
    if K == 0:  # torch's rule: beta * C, zeros when beta == 0 (C not read)
        scale(out, beta)
        return C if C is not None else result(out)
    stream = a.stream
    c = out if out.dense else (densify(out) if beta != 0.0 else new_output(out, shape, dtype=out.dtype))
    # transposed views (CuPy's W.T, F-order arrays) are read in place where the executor can
    layout = layout_of(op_name, a, b)
    ex = executor(op_name, dtype, dims, impl, params, stream, layout, out.dtype)
    if not ex.fast and any(layout):  # it cannot: row-major copies, and the row-major executor
        layout = (False, False)
        ex = executor(op_name, dtype, dims, impl, params, stream, layout, out.dtype)
    if not (a.dense or layout[0]):
        a = densify(a)
    if not (b.dense or layout[1]):
        b = densify(b)
    ex.run_operands(a, b, c, alpha, beta, stream)
    if c is not out:
        copy_into(out, c)
    return C if C is not None else result(out)


def torch_sum(x, impl, params):
    """The hot path of reduce_sum for a plain, dense fp32 torch tensor (NotImplemented otherwise)."""
    t = _torch.get("tensor")
    if t is None or type(x) is not t or x.dtype is not _torch["f32"] or not x.is_contiguous():
        return NotImplemented
    n = x.numel()
    ptr = x.data_ptr()
    device = _state["device"]
    if not n or ptr & 15 or x.get_device() != device:
        return NotImplemented
    stream = _torch["stream"](device)
    ex = executor("reduce", "fp32", (n,), impl, params, stream)
    if not ex.fast:
        return NotImplemented
    out = x.new_empty(())
    ex.run(ptr, out.data_ptr(), stream)
    return out


def reduce_sum(x, impl, params):
    setup()
    if "tensor" not in _torch and "torch" in sys.modules:
        _torch_setup()
    done = torch_sum(x, impl, params)
    if done is not NotImplemented:
        return done
    op = sum_operand(x, "reduce_sum")
    n = op.size()
    if n == 0:
        return result(new_output(op, (), zeros=True))
    out = new_output(op, ())
    if not op.dense:
        op = densify(op)
    executor("reduce", "fp32", (n,), impl, params, op.stream).run_operands(op, out, op.stream)
    return result(out)
