"""The body of gemmlab.reduce_sum: hot paths for a plain dense fp32 torch tensor or CuPy array,
read straight off the array as the GEMM calls' are (api/calls.py), and the general path for
every other input."""
from __future__ import annotations

import sys

from .checks import check_choice, sum_operand
from .core import _state, executor, setup
from .frameworks import cupy_refs, new_torch_output, setup_cupy, setup_torch, torch_outputs, torch_refs
from .operands import densify, new_output, result


def torch_sum(x, impl, params):
    """The hot path of reduce_sum for a plain, dense fp32 torch tensor (NotImplemented otherwise)."""
    t = torch_refs.get("tensor")
    if t is None or type(x) is not t or x.dtype is not torch_refs["f32"] or not x.is_contiguous():
        return NotImplemented
    n = x.numel()
    ptr = x.data_ptr()
    device = _state["device"]
    if not n or ptr & 15 or x.get_device() != device:
        return NotImplemented
    stream = torch_refs["stream"](device)
    ex = executor("reduce", "fp32", (n,), impl, params, stream)
    if not ex.fast:
        return NotImplemented
    template = torch_outputs.get("sum")  # a 0-d fp32 tensor: empty_like of it, as for the GEMM outputs
    out = torch_refs["empty_like"](template) if template is not None else new_torch_output("sum", (), x.dtype, x)
    ex.run(ptr, out.data_ptr(), stream)
    return out


def cupy_sum(x, impl, params):
    """The hot path of reduce_sum for a plain, dense fp32 CuPy array (NotImplemented otherwise)."""
    nd = cupy_refs["ndarray"]
    if nd is None or type(x) is not nd or x.dtype != cupy_refs["f32"] or not x._c_contiguous:
        return NotImplemented
    n = x.size
    ptr = x.data.ptr
    device = _state["device"]
    if not n or ptr & 15 or x.data.device_id != device:
        return NotImplemented
    stream = cupy_refs["stream"]().ptr
    ex = executor("reduce", "fp32", (n,), impl, params, stream)
    if not ex.fast:
        return NotImplemented
    out = nd((), cupy_refs["f32"])
    ex.run(ptr, out.data.ptr, stream)
    return out


def reduce_sum(x, impl, params):
    setup()
    if impl is not None or params is not None:
        check_choice(impl, params, "gemmlab.reduce_sum")
    if "tensor" not in torch_refs and "torch" in sys.modules:
        setup_torch()
    done = torch_sum(x, impl, params)
    if done is NotImplemented:
        if not cupy_refs:
            setup_cupy()
        done = cupy_sum(x, impl, params)
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
