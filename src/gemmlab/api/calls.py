"""The bodies of the plain GEMM calls (gemmlab.sgemm, hgemm, bgemm; reduce_sum's is api/sum_calls.py):
hot paths for plain dense torch tensors and CuPy arrays that read everything straight off the
arrays, and the general path for every other input (other producers, subclasses, strided or
misaligned arrays, empty dimensions, anything a hot path does not take).

Why two hot paths and not one reader: a plain call at 512^3 runs a 7 us kernel, so every
microsecond of host time shows in a loop of calls. Reading a CuPy array through an Operand
(api/operands.py) cost 3-4 us more than reading its attributes here (session 20, H200)."""
from __future__ import annotations

import sys

from . import streams
from .checks import MAX_DIM, c_shape, check_choice, gemm_operands, layout_of, out_name, output_operand, overlap, reals
from .core import _state, _thread, executor, forgotten, keep, setup
from .frameworks import cupy_refs, new_torch_output, setup_cupy, setup_torch, torch_outputs, torch_refs
from .operands import copy_into, densify, new_output, result, scale


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


def torch_gemm(op_name: str, A, B, C, alpha, beta, impl, params, out: str | None = None):
    """The hot path for plain torch tensors: everything read straight off the tensors, no Operand
    objects, one lookup in this thread's cache of calls, one launch. Returns NotImplemented for
    anything unusual (other devices, strided or misaligned tensors, empty or wrong shapes, a C
    type the inputs do not give, a runner-path implementation), which the general path then
    handles - or refuses with its one-line errors. `out`: out_name's C type, None for C's own
    (fp32 without C). A call's first time through (and any with `params`) goes through
    _torch_first, which decides, checks the types and keeps what the next call needs."""
    t = torch_refs.get("tensor")
    if t is None:
        if "torch" not in sys.modules:
            return NotImplemented
        setup_torch()
        t = torch_refs["tensor"]
    if type(A) is not t or type(B) is not t:
        return NotImplemented
    dt = A.dtype
    if B.dtype is not dt:
        return NotImplemented
    try:  # two dimensions each (unpacking checks the rank for less than A.dim() and B.dim() cost)
        M, K = A.shape
        K2, N = B.shape
    except ValueError:
        return NotImplemented
    if K != K2 or not (M and N and K) or (M | N | K) > MAX_DIM:
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
    if type(alpha) is not float or type(beta) is not float:  # ints, NumPy reals; others refused in one line
        alpha, beta = reals(alpha, beta, f"gemmlab.{op_name}")
    if C is None:
        if beta != 0.0:  # refused in one line by the general path
            return NotImplemented
        key = (op_name, dt, M, N, K, ta, tb, out, impl)
    else:
        if type(C) is not t or C.shape != (M, N) or not C.is_contiguous() or C.get_device() != device:
            return NotImplemented
        key = (op_name, dt, M, N, K, ta, tb, out, impl, C.dtype)
    stream = torch_refs["stream"](device)
    entry = None if params else _thread.hot_calls.get(key)
    if entry is None or (entry[0].owns_workspace and entry[0].stream != stream):
        return _torch_first(op_name, key, A, C, alpha, beta, params, stream, a, b)
    ex, template, spans = entry
    if template is None:
        result, c = C, C.data_ptr()
        sa, sb, sc = spans  # bytes of A, B and C: a C overlapping A or B goes to the general path's copy
        if c < a + sa and a < c + sc or c < b + sb and b < c + sc:
            return NotImplemented
    else:
        result = torch_refs["empty_like"](template)
        c = result.data_ptr()
    if c & 15:
        return NotImplemented
    ex.run(a, b, c, alpha, beta, stream)
    return result


def _spans(M: int, N: int, K: int, item: int, c_item: int) -> tuple[int, int, int]:
    """The bytes A, B and C cover (each one contiguous extent on the hot paths)."""
    return M * K * item, K * N * item, M * N * c_item


def _apart(a: int, b: int, c: int, spans: tuple[int, int, int]) -> bool:
    """Whether C's bytes miss A's and B's: a C that overlaps either would be written while blocks
    still read it, so such a call runs on a copy of C (the general path)."""
    sa, sb, sc = spans
    return not (c < a + sa and a < c + sc or c < b + sb and b < c + sc)


def _decided(op_name: str, key: tuple, refs: dict, C, beta: float, params, stream: int):
    """(executor, a new C's type or None) for a call the hot paths' cache cannot serve, or None where
    the hot path passes it on: the inputs' type decided from `refs` (torch's or CuPy's), C's type
    checked (fp32, or the 16-bit inputs' own), the executor looked up (one per stream where it owns
    a workspace)."""
    _, dt, M, N, K, ta, tb, out, impl = key[:9]
    dtype = refs["dtypes"][op_name].get(dt)
    if dtype is None:
        return None
    c_type = None
    if C is None:
        c_type, out = _new_c_type(dtype, out, beta, refs["f32"], dt)
        if c_type is None:
            return None
    else:  # an fp32 C, or one of the inputs' own type where that is not fp32 (16-bit hgemm inputs)
        c_out = "fp32" if C.dtype == refs["f32"] else (dtype if C.dtype == dt else None)
        if c_out is None or (out is not None and out != c_out):
            return None
        out = c_out
    ex = executor(op_name, dtype, (M, N, K), impl, params, stream, (ta, tb), out)
    return (ex, c_type) if ex.fast else None


def _torch_first(op_name: str, key: tuple, A, C, alpha, beta, params, stream: int, a: int, b: int):
    """torch_gemm for a call its cache cannot serve: decided (_decided), the output template made,
    and (without `params`) all of it kept under `key` for the next call."""
    before = forgotten[0]
    decided = _decided(op_name, key, torch_refs, C, beta, params, stream)
    if decided is None:
        return NotImplemented
    ex, c_type = decided
    template = spans = None
    if C is None:
        M, N = key[2], key[3]
        template = torch_outputs.get((M, N, c_type))
        if template is None:
            result = new_torch_output((M, N, c_type), (M, N), c_type, A)
            template = torch_outputs.get((M, N, c_type))  # None while capturing: nothing kept
        else:
            result = torch_refs["empty_like"](template)
    else:
        result = C
        spans = _spans(key[2], key[3], key[4], A.element_size(), C.element_size())
        if not _apart(a, b, C.data_ptr(), spans):
            return NotImplemented
    c = result.data_ptr()
    if c & 15:
        return NotImplemented
    if not params and (C is not None or template is not None):
        keep(_thread.hot_calls, key, (ex, template, spans), before)
    ex.run(a, b, c, alpha, beta, stream)
    return result


def cupy_gemm(op_name: str, A, B, C, alpha, beta, impl, params, out: str | None = None):
    """The hot path for plain CuPy arrays, as torch_gemm: C order or F order (a transposed view),
    16-byte aligned, on gemmlab's GPU, CuPy's current stream; NotImplemented for anything else."""
    nd = cupy_refs["ndarray"]
    if nd is None or type(A) is not nd or type(B) is not nd or A.ndim != 2 or B.ndim != 2:
        return NotImplemented
    dt = A.dtype
    if B.dtype != dt:
        return NotImplemented
    M, K = A.shape
    K2, N = B.shape
    if K != K2 or not (M and N and K) or (M | N | K) > MAX_DIM:
        return NotImplemented
    ta, tb = _cupy_transposed(A), _cupy_transposed(B)
    if ta is None or tb is None:
        return NotImplemented
    a, b = A.data.ptr, B.data.ptr
    device = _state["device"]
    if (a | b) & 15 or A.data.device_id != device or B.data.device_id != device:
        return NotImplemented
    if type(alpha) is not float or type(beta) is not float:
        alpha, beta = reals(alpha, beta, f"gemmlab.{op_name}")
    if C is None:
        if beta != 0.0:
            return NotImplemented
        key = (op_name, dt, M, N, K, ta, tb, out, impl)
    else:
        if type(C) is not nd or C.shape != (M, N) or not C._c_contiguous or C.data.ptr & 15 \
                or C.data.device_id != device:
            return NotImplemented
        key = (op_name, dt, M, N, K, ta, tb, out, impl, C.dtype)
    stream = cupy_refs["stream"]().ptr
    entry = None if params else _thread.hot_calls.get(key)
    if entry is None or (entry[0].owns_workspace and entry[0].stream != stream):
        return _cupy_first(op_name, key, C, alpha, beta, params, stream, a, b)
    ex, c_type, spans = entry
    if c_type is None:
        result, c = C, C.data.ptr
        sa, sb, sc = spans  # as torch_gemm's
        if c < a + sa and a < c + sc or c < b + sb and b < c + sc:
            return NotImplemented
    else:
        result = nd((M, N), c_type)  # cupy.empty: CuPy's pool, current device
        c = result.data.ptr
    ex.run(a, b, c, alpha, beta, stream)
    return result


def _cupy_first(op_name: str, key: tuple, C, alpha, beta, params, stream: int, a: int, b: int):
    """cupy_gemm for a call its cache cannot serve, as _torch_first."""
    before = forgotten[0]
    decided = _decided(op_name, key, cupy_refs, C, beta, params, stream)
    if decided is None:
        return NotImplemented
    ex, c_type = decided
    spans = None
    if C is not None:
        spans = _spans(key[2], key[3], key[4], key[1].itemsize, C.dtype.itemsize)
        if not _apart(a, b, C.data.ptr, spans):
            return NotImplemented
    if not params:
        keep(_thread.hot_calls, key, (ex, c_type, spans), before)
    result = C if C is not None else cupy_refs["ndarray"]((key[2], key[3]), c_type)
    ex.run(a, b, result.data.ptr, alpha, beta, stream)
    return result


def gemm(op_name: str, caller: str, A, B, C, alpha, beta, impl, params, out_dtype=None):
    """C = alpha*A@B + beta*C through this thread's executor; a strided C through a dense copy.
    `out_dtype` (hgemm): C's type for a new C (fp32 by default, or the 16-bit input type)."""
    setup()
    if impl is not None or params is not None:
        check_choice(impl, params, caller)
    out_type = None if out_dtype is None else out_name(out_dtype)
    if op_name != "bgemm":
        done = torch_gemm(op_name, A, B, C, alpha, beta, impl, params, out_type)
        if done is NotImplemented:
            if not cupy_refs:
                setup_cupy()
            done = cupy_gemm(op_name, A, B, C, alpha, beta, impl, params, out_type)
        if done is not NotImplemented:
            return done
    a, b, dims, dtype = gemm_operands(op_name, caller, A, B)
    alpha, beta = reals(alpha, beta, caller)
    M, N, K = dims[0], dims[1], dims[2]
    shape = c_shape(op_name, dims)
    out = output_operand(C, a, shape, beta, caller, op_name, dtype, out_type)
    if M == 0 or N == 0 or (op_name == "bgemm" and dims[3] == 0):
        return C if C is not None else result(out)
    if K == 0:  # torch's rule: beta * C, zeros when beta == 0 (C not read)
        scale(out, beta)
        return C if C is not None else result(out)
    stream = a.stream
    named = [op.stream for op in (b, out) if op.named]  # streams B's and C's producers named
    ordered = streams.join(stream, named)  # their pending work (B written, C's old values) first
    # transposed views (CuPy's W.T, F-order arrays) are read in place where the executor can
    layout = layout_of(op_name, a, b)
    ex = executor(op_name, dtype, dims, impl, params, stream, layout, out.dtype)
    if not ex.fast and any(layout):  # it cannot: row-major copies, and the row-major executor
        layout = (False, False)
        ex = executor(op_name, dtype, dims, impl, params, stream, layout, out.dtype)
    if not (a.dense or layout[0]):
        a = densify(a)
    if not (b.dense or layout[1]):  # copies on the call's stream: ordered with the kernel, freed there
        b = densify(b, stream)
    # C is written in place where it is dense and shares no byte with what the kernel reads; else
    # the call works on a dense copy (C's values where beta != 0) and copies the result back
    if out.dense and not overlap(out, a) and not overlap(out, b):
        c = out
    else:
        c = densify(out, stream) if beta != 0.0 else new_output(out, shape, dtype=out.dtype, stream=stream)
    ex.run_operands(a, b, c, alpha, beta, stream)
    if c is not out:
        copy_into(out, c, stream)
    streams.release(stream, ordered)  # B's and C's producers' next work waits for the call
    return C if C is not None else result(out)
