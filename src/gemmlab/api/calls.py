"""The bodies of the plain calls (gemmlab.sgemm, hgemm, bgemm, reduce_sum): hot paths for plain
dense torch tensors and CuPy arrays that read everything straight off the arrays, and the
general path for every other input (other producers, subclasses, strided or misaligned arrays,
empty dimensions, anything a hot path does not take).

Why two hot paths and not one reader: a plain call at 512^3 runs a 7 us kernel, so every
microsecond of host time shows in a loop of calls. Reading a CuPy array through an Operand
(api/operands.py) cost 3-4 us more than reading its attributes here (session 20, H200)."""
from __future__ import annotations

import sys

from .checks import gemm_operands, layout_of, out_name, output_operand, sum_operand
from .core import _state, executor, setup
from .operands import copy_into, densify, new_output, result, scale, torch_stream_reader

_torch: dict = {}  # torch.Tensor, the dtypes each op takes from torch, raw-stream accessor (set once)
# Templates of the hot paths' new outputs: (M, N, torch dtype) -> a 1 x 1 tensor expanded to M x N,
# "sum" -> a 0-d fp32 tensor (reduce_sum). torch.empty_like of a template is a new dense tensor on
# the template's device (gemmlab's) and that device's current stream, 1.2-1.5 us less than
# A.new_empty((M, N), dtype=) with the free counted (session 22, H200: 3.4-3.8 us against 4.9-5.3,
# on a slow host). A template's one element lives in CuPy's memory pool, not in torch's: made
# while torch allocates from a private pool (torch.cuda.graph, torch.compile's CUDA graphs and
# their warm-up runs), torch's would belong to that pool and be freed or reused under us.
# (A template on the meta device, empty_like(..., device=) to make the output, costs 14 us.)
# Bounded: a program with more output shapes than this rebuilds templates, tens of us each.
_torch_outputs: dict = {}
TORCH_OUTPUTS_KEPT = 256
_cupy: dict = {}  # cupy.ndarray (None where it lacks the flags read here), dtypes, stream reader


def _torch_setup() -> None:
    import torch

    _torch.update(tensor=torch.Tensor, f32=torch.float32, stream=torch_stream_reader(), empty_like=torch.empty_like,
                  dtypes={"sgemm": {torch.float32: "fp32"},
                          "hgemm": {torch.float32: "tf32", torch.float16: "fp16", torch.bfloat16: "bf16"}})


def _cupy_setup() -> None:
    import cupy
    import numpy as np

    f32, f16 = np.dtype(np.float32), np.dtype(np.float16)
    # _c_contiguous / _f_contiguous: the flags CuPy keeps on every array (x.flags builds an object)
    nd = cupy.ndarray if hasattr(cupy.ndarray, "_c_contiguous") and hasattr(cupy.ndarray, "_f_contiguous") else None
    _cupy.update(ndarray=nd, f32=f32, stream=cupy.cuda.get_current_stream,
                 dtypes={"sgemm": {f32: "fp32"}, "hgemm": {f32: "tf32", f16: "fp16"}})


def _transposed(x) -> bool | None:
    """False for a contiguous 2-D tensor; True for a transposed view (the transpose of a
    contiguous matrix: x @ W.T, torch.nn.functional.linear's layout), which cuBLAS reads in
    place; None for any other strides, which the general path copies."""
    if x.is_contiguous():
        return False
    return True if x.stride() == (1, x.shape[0]) else None


def _cupy_transposed(x) -> bool | None:
    """As _transposed, for a 2-D CuPy array: C order False, F order (W.T) True, else None."""
    if x._c_contiguous:
        return False
    return True if x._f_contiguous else None


def _new_c_type(dtype: str, out: str | None, beta: float, fp32, same):
    """(C's type object, its name) for a new C: fp32 unless `out` names the inputs' own 16-bit
    type (`same`); (None, None) where the hot path does not make it - beta != 0 without a C, or
    another type - and the general path refuses it in one line or makes it."""
    if beta != 0.0:
        return None, None
    if out is None or out == "fp32":
        return fp32, "fp32"
    if out == dtype:
        return same, out
    return None, None


def _torch_new(key, shape: tuple, dtype, like):
    """A new `shape` tensor of `dtype` on `like`'s device where `key` has no template yet (the hot
    paths look the template up themselves): the template (see _torch_outputs) is made and kept, and
    the tensor made from it; while the current stream is being captured none is made, and the
    tensor comes from new_empty (the template then comes with a later call). A 1 x 1 tensor
    expanded: empty_like keeps the strides of a dense tensor, so a 1 x 1 output gets (1, 1), and
    gives an expanded (overlapping) one contiguous ones, as new_empty would. Its memory is CuPy's,
    taken in over DLPack."""
    import cupy
    import torch

    if torch.cuda.is_current_stream_capturing():
        return like.new_empty(shape, dtype=dtype)
    with cupy.cuda.Device(like.get_device()):
        raw = cupy.empty((1, dtype.itemsize), dtype=cupy.uint8)
    one = torch.from_dlpack(raw).view(dtype)  # (1, 1), in no pool of torch's
    if len(_torch_outputs) >= TORCH_OUTPUTS_KEPT:
        _torch_outputs.clear()
    template = _torch_outputs[key] = one.expand(*shape) if shape else one.reshape(())
    return torch.empty_like(template)


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
    if dtype is None or B.dtype is not A.dtype:
        return NotImplemented
    try:  # two dimensions each (unpacking checks the rank for less than A.dim() and B.dim() cost)
        M, K = A.shape
        K2, N = B.shape
    except ValueError:
        return NotImplemented
    if K != K2 or not (M and N and K):
        return NotImplemented
    # contiguous, the common case, without a Python call (about 0.1 us each)
    ta = False if A.is_contiguous() else _transposed(A)
    tb = False if B.is_contiguous() else _transposed(B)
    if ta is None or tb is None:
        return NotImplemented
    a, b = A.data_ptr(), B.data_ptr()
    device = _state["device"]
    if (a | b) & 15 or A.get_device() != device or B.get_device() != device:
        return NotImplemented
    alpha, beta = float(alpha), float(beta)
    if C is None:
        c_type, out = _new_c_type(dtype, out, beta, _torch["f32"], A.dtype)
        if c_type is None:
            return NotImplemented
    else:
        if C.dtype is _torch["f32"]:
            c_out = "fp32"
        elif C.dtype is A.dtype:  # not fp32, so 16-bit hgemm inputs: a C of their type
            c_out = dtype
        else:
            return NotImplemented
        if (out is not None and out != c_out) or C.shape != (M, N) or not C.is_contiguous() \
                or C.data_ptr() & 15 or C.get_device() != device:
            return NotImplemented
        out = c_out
    stream = _torch["stream"](device)
    ex = executor(op_name, dtype, (M, N, K), impl, params, stream, (ta, tb), out)
    if not ex.fast:
        return NotImplemented
    if C is None:
        template = _torch_outputs.get((M, N, c_type))
        if template is not None:
            result = _torch["empty_like"](template)
        else:
            result = _torch_new((M, N, c_type), (M, N), c_type, A)
    else:
        result = C
    ex.run(a, b, result.data_ptr(), alpha, beta, stream)
    return result


def cupy_gemm(op_name: str, A, B, C, alpha, beta, impl, params, out: str | None = None):
    """The hot path for plain CuPy arrays, as torch_gemm: C order or F order (a transposed view),
    16-byte aligned, on gemmlab's GPU, CuPy's current stream; NotImplemented for anything else."""
    nd = _cupy["ndarray"]
    if nd is None or type(A) is not nd or type(B) is not nd or (C is not None and type(C) is not nd):
        return NotImplemented
    dtypes = _cupy["dtypes"][op_name]
    dtype = dtypes.get(A.dtype)
    if dtype is None or dtypes.get(B.dtype) != dtype or A.ndim != 2 or B.ndim != 2:
        return NotImplemented
    M, K = A.shape
    K2, N = B.shape
    if K != K2 or not (M and N and K):
        return NotImplemented
    ta, tb = _cupy_transposed(A), _cupy_transposed(B)
    if ta is None or tb is None:
        return NotImplemented
    a, b = A.data.ptr, B.data.ptr
    device = _state["device"]
    if (a | b) & 15 or A.data.device_id != device or B.data.device_id != device:
        return NotImplemented
    alpha, beta = float(alpha), float(beta)
    if C is None:
        c_type, out = _new_c_type(dtype, out, beta, _cupy["f32"], A.dtype)
        if c_type is None:
            return NotImplemented
    else:
        c_out = "fp32" if C.dtype == _cupy["f32"] else (dtype if C.dtype == A.dtype and dtype == "fp16" else None)
        if c_out is None or (out is not None and out != c_out) or C.shape != (M, N) or not C._c_contiguous \
                or C.data.ptr & 15 or C.data.device_id != device:
            return NotImplemented
        out = c_out
    stream = _cupy["stream"]().ptr
    ex = executor(op_name, dtype, (M, N, K), impl, params, stream, (ta, tb), out)
    if not ex.fast:
        return NotImplemented
    result = C if C is not None else nd((M, N), c_type)  # cupy.empty: CuPy's pool, current device
    ex.run(a, b, result.data.ptr, alpha, beta, stream)
    return result


def gemm(op_name: str, caller: str, A, B, C, alpha, beta, impl, params, out_dtype=None):
    """C = alpha*A@B + beta*C through this thread's executor; a strided C through a dense copy.
    `out_dtype` (hgemm): C's type for a new C (fp32 by default, or the 16-bit input type)."""
    setup()
    out_type = out_name(out_dtype)
    if op_name != "bgemm":
        done = torch_gemm(op_name, A, B, C, alpha, beta, impl, params, out_type)
        if done is NotImplemented:
            if not _cupy:
                _cupy_setup()
            done = cupy_gemm(op_name, A, B, C, alpha, beta, impl, params, out_type)
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
    template = _torch_outputs.get("sum")  # a 0-d fp32 tensor: empty_like of it, as for the GEMM outputs
    out = _torch["empty_like"](template) if template is not None else _torch_new("sum", (), x.dtype, x)
    ex.run(ptr, out.data_ptr(), stream)
    return out


def cupy_sum(x, impl, params):
    """The hot path of reduce_sum for a plain, dense fp32 CuPy array (NotImplemented otherwise)."""
    nd = _cupy["ndarray"]
    if nd is None or type(x) is not nd or x.dtype != _cupy["f32"] or not x._c_contiguous:
        return NotImplemented
    n = x.size
    ptr = x.data.ptr
    device = _state["device"]
    if not n or ptr & 15 or x.data.device_id != device:
        return NotImplemented
    stream = _cupy["stream"]().ptr
    ex = executor("reduce", "fp32", (n,), impl, params, stream)
    if not ex.fast:
        return NotImplemented
    out = nd((), _cupy["f32"])
    ex.run(ptr, out.data.ptr, stream)
    return out


def reduce_sum(x, impl, params):
    setup()
    if "tensor" not in _torch and "torch" in sys.modules:
        _torch_setup()
    done = torch_sum(x, impl, params)
    if done is NotImplemented:
        if not _cupy:
            _cupy_setup()
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
