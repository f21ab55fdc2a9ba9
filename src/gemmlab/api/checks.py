"""The operand checks every entry point shares: A, B and C read from the caller's arrays and
checked (dtype, rank, shape, device), the GEMM op an array implies, and C's type (fp32, or for
16-bit hgemm inputs that type, named by out_dtype or by C itself). Each refusal is one
BadArgumentError line."""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

from ..errors import BadArgumentError
from ..problem import MAX_DIM, MAX_DIM_TEXT  # the problems' own bound: 32-bit M, N, K and batch
from .core import _state
from .operands import DTYPE_TEXT as DTYPE_NAMES
from .interface import ITEMSIZE, may_share
from .operands import Operand, element_strides, new_output, read, shape_text, transposed

GEMM_DTYPES = {"sgemm": ("fp32",), "hgemm": ("fp16", "bf16", "fp32"), "bgemm": ("fp32",)}


def real(value, name: str, caller: str) -> float:
    """alpha or beta as a float: a Python or NumPy real, or a 0-d host array of one. None, a
    complex number, a string (which float() would read) or a GPU array is refused in one line."""
    try:
        if type(value) is float or type(value) is int:  # the common case, without the ABC checks (~0.4 us)
            return float(value)
        if _on_gpu(value):  # float() would copy it to the host and wait for the GPU, at every call
            raise BadArgumentError(f"{caller}: {name} is a GPU array; reading it would make the call wait for the "
                                   f"GPU: pass a Python float (float({name}) waits once, where you choose)")
        if not isinstance(value, (str, bytes)) and not (isinstance(value, numbers.Complex)
                                                        and not isinstance(value, numbers.Real)):
            try:
                number = float(value)
            except (TypeError, ValueError, RuntimeError):  # RuntimeError: torch's many-element tensor
                pass
            else:  # a finite value past a double (a long double, a Decimal) reads as inf without a word
                if math.isinf(number) and not _same(value, number):
                    raise OverflowError
                return number
    except OverflowError:  # an int past a double's range: float() would raise this, not a ValueError
        raise BadArgumentError(f"{caller}: {name} is past the range of a float (a double)") from None
    raise BadArgumentError(f"{caller}: {name} must be a real number, not {type(value).__name__}")


# DLPack's device types whose memory the host cannot read without a copy: CUDA, ROCm, CUDA managed
_DLPACK_GPU = {2, 10, 13}


def _on_gpu(value) -> bool:
    """Whether a scalar lives in GPU memory: a torch CUDA tensor, a __cuda_array_interface__
    producer (CuPy, Numba) or a DLPack producer on a GPU. Asked of the value, not of its type:
    torch.Tensor (and JAX's arrays) declare __cuda_array_interface__ on the class for every
    device, and a CPU tensor's raises AttributeError when read."""
    if getattr(value, "is_cuda", False) is True or hasattr(value, "__cuda_array_interface__"):
        return True
    device = getattr(value, "__dlpack_device__", None)
    if device is None or isinstance(value, numbers.Number):  # NumPy's scalars and arrays say CPU
        return False
    try:
        return device()[0] in _DLPACK_GPU
    except Exception:  # a producer that cannot say is read as float() reads it
        return False


def _same(value, number: float) -> bool:
    """Whether `value` is `number` in its own type (an infinity given as one); a type that cannot
    say is taken at its word."""
    try:
        return bool(value == number)
    except Exception:
        return True


def reals(alpha, beta, caller: str) -> tuple[float, float]:
    """(alpha, beta) as floats, each by real()."""
    return real(alpha, "alpha", caller), real(beta, "beta", caller)


def check_choice(impl, params, caller: str) -> None:
    """`impl` an implementation's name and `params` a mapping of parameter names to values, or
    None: anything else refused in one line here, before a cache is keyed on them."""
    if impl is not None and not isinstance(impl, str):
        raise BadArgumentError(f"{caller}: impl must be an implementation's name (a str), not {impl!r}")
    if params is not None:
        if not isinstance(params, Mapping):
            raise BadArgumentError(f"{caller}: params must be a mapping of parameter names to values, not {params!r}")
        for name, value in params.items():  # the caches key on them: an unhashable value must not get that far
            if not isinstance(name, str) or not isinstance(value, numbers.Integral) or isinstance(value, bool):
                raise BadArgumentError(f"{caller}: params must map parameter names to integers, "
                                       f"not {name!r}: {value!r}")
        if params and impl is None:  # whose? the dispatch's pick changes with the shape and the GPU
            raise BadArgumentError(f"{caller}: params {dict(params)} need impl=, the implementation they belong to "
                                   "(gemmlab.explain names the one a call without them runs)")


def gemm_op_of(A, caller: str) -> str:
    """The GEMM op for A's rank and dtype: 3-D bgemm, 16-bit hgemm, else sgemm."""
    first = read(A, "A", caller)
    return "bgemm" if len(first.shape) == 3 else ("hgemm" if first.dtype in ("fp16", "bf16") else "sgemm")


def check(op: Operand, what: str, dtypes: tuple[str, ...], ndim: int | None, caller: str, device: int) -> None:
    """Refuse a dtype outside `dtypes`, another rank than `ndim`, an array on another GPU."""
    check_kind(op.dtype, op.shape, what, dtypes, ndim, caller)
    if op.device != device:
        raise BadArgumentError(f"{what} is on GPU {op.device}, gemmlab runs on GPU {device}")


def check_kind(dtype: str, shape: tuple, what: str, dtypes: tuple[str, ...], ndim: int | None, caller: str) -> None:
    """check() on an array's type and shape alone (also what the torch ops' fakes have to check)."""
    if dtype not in dtypes:
        raise BadArgumentError(f"{what} has dtype {DTYPE_NAMES.get(dtype, dtype)}; {caller} needs "
                               + " or ".join(DTYPE_NAMES[d] for d in dtypes))
    if ndim is not None and len(shape) != ndim:
        raise BadArgumentError(f"{what} must be {ndim}-D, got {len(shape)}-D")


def gemm_operands(op_name: str, caller: str, A, B):
    """A and B read and checked; (a, b, dims, dtype) with dims (M, N, K[, batch])."""
    a, b = read(A, "A", caller), read(B, "B", caller)
    dtypes = GEMM_DTYPES[op_name]
    ndim = 3 if op_name == "bgemm" else 2
    device = _state["device"]
    check(a, "A", dtypes, ndim, caller, device)
    check(b, "B", dtypes, ndim, caller, device)
    dims, dtype = gemm_dims(op_name, caller, a.dtype, a.shape, b.dtype, b.shape)
    return a, b, dims, dtype


def gemm_dims(op_name: str, caller: str, a_dtype: str, sa: tuple, b_dtype: str, sb: tuple) -> tuple[tuple, str]:
    """(dims (M, N, K[, batch]), the problem's dtype) from A's and B's checked types and shapes, or
    one line: two dtypes, batch or inner dimensions that differ, dimensions past the kernels'."""
    if a_dtype != b_dtype:
        raise BadArgumentError(f"A is {a_dtype} but B is {b_dtype}: both must have one dtype")
    if sb[:-2] != sa[:-2]:
        raise BadArgumentError(f"A is {shape_text(sa)} but B is {shape_text(sb)}: batch sizes differ")
    if sb[-2] != sa[-1]:
        raise BadArgumentError(f"A is {shape_text(sa)} but B is {shape_text(sb)}: inner dimensions differ")
    dims = (sa[-2], sb[-1], sa[-1]) + ((sa[0],) if len(sa) == 3 else ())
    if max(dims) > MAX_DIM:
        raise BadArgumentError(f"A is {shape_text(sa)} and B is {shape_text(sb)}: {caller} takes dimensions up "
                               f"to {MAX_DIM_TEXT}")
    return dims, ("tf32" if a_dtype == "fp32" else a_dtype) if op_name == "hgemm" else "fp32"


# The names out_dtype takes (torch and NumPy dtypes are read through their names).
OUT_NAMES = {"fp32": "fp32", "float32": "fp32", "fp16": "fp16", "float16": "fp16", "half": "fp16",
             "bf16": "bf16", "bfloat16": "bf16",
             **{code: "fp32" for code in ("f4", "<f4", "=f4", "f")},  # NumPy's type codes, as np.dtype() reads them
             **{code: "fp16" for code in ("f2", "<f2", "=f2", "e")}}


_out_names: dict = {}  # out_dtype object -> its name, so a call's lookup is one dict hit


def out_name(out_dtype) -> str | None:
    """out_dtype as "fp32", "fp16" or "bf16" (None stays None): a name, a torch dtype, a NumPy
    dtype or a scalar type such as numpy.float16 / cupy.float16."""
    if out_dtype is None:
        return None
    try:
        return _out_names[out_dtype]
    except (KeyError, TypeError):  # TypeError: an unhashable value, refused below
        pass
    text = out_dtype.__name__ if isinstance(out_dtype, type) else str(out_dtype).removeprefix("torch.")
    if text not in OUT_NAMES:
        raise BadArgumentError(f"out_dtype must be float32, float16 or bfloat16, not {out_dtype!r}")
    _out_names[out_dtype] = OUT_NAMES[text]
    return OUT_NAMES[text]


def c_dtypes(op_name: str, dtype: str) -> tuple[str, ...]:
    """The types C may have: fp32, and for 16-bit hgemm inputs that type too (torch.mm's output)."""
    return ("fp32", dtype) if op_name == "hgemm" and dtype in ("fp16", "bf16") else ("fp32",)


def c_type(op_name: str, dtype: str, out: str | None, caller: str) -> str:
    """C's type as named (out_name's; fp32 when None), refused in one line where the op does not
    write it for these inputs."""
    allowed = c_dtypes(op_name, dtype)
    if out is not None and out not in allowed:
        raise BadArgumentError(f"a {DTYPE_NAMES.get(out, out)} C with {dtype} inputs: {caller} writes C in "
                               + " or ".join(DTYPE_NAMES[d] for d in allowed))
    return out or "fp32"


def layout_of(op_name: str, a: Operand, b: Operand) -> tuple[bool, bool]:
    """(A transposed, B transposed): the views an sgemm/hgemm reads in place (operands.transposed)."""
    return (transposed(a), transposed(b)) if op_name in ("sgemm", "hgemm") else (False, False)


def output_operand(C, a: Operand, shape: tuple, beta: float, caller: str, op_name: str = "sgemm",
                   dtype: str = "fp32", out: str | None = None) -> Operand:
    """C read and checked, or a new output: of type `out` (out_name's), else C's own, else fp32.
    A 16-bit C is taken by hgemm with inputs of that type only."""
    c_dtype = c_type(op_name, dtype, out, caller)
    if C is None:
        if beta != 0.0:
            raise BadArgumentError("beta != 0 needs C")
        return new_output(a, shape, dtype=c_dtype)
    c = read(C, "C", caller)
    check(c, "C", c_dtypes(op_name, dtype), len(shape), caller, _state["device"])
    check_given_c(c.dtype, c.shape, shape, out)
    writable(c, "C", caller)
    return c


def c_shape(op_name: str, dims: tuple) -> tuple:
    """C's shape for dims (M, N, K[, batch]): M x N, or batch x M x N for bgemm."""
    return (dims[3], dims[0], dims[1]) if op_name == "bgemm" else (dims[0], dims[1])


def check_given_c(c_dtype: str, c_shape: tuple, shape: tuple, out: str | None) -> None:
    """A given C of another type than out_dtype names, or of another shape than the problem's: one line."""
    if out is not None and c_dtype != out:
        raise BadArgumentError(f"C is {DTYPE_NAMES.get(c_dtype, c_dtype)} but out_dtype is {DTYPE_NAMES[out]}")
    if c_shape != shape:
        raise BadArgumentError(f"C is {shape_text(c_shape)}, expected {shape_text(shape)}")


def writable(c: Operand, what: str, caller: str) -> None:
    """Refuse an output gemmlab cannot write: read-only (its producer says so), or strided so that
    two of its elements may share memory (a broadcast view: the blocks writing them would race)."""
    if c.readonly:
        raise BadArgumentError(f"{caller}: {what} is read-only (its __cuda_array_interface__ says so), and "
                               f"{what} is written")
    if not c.contiguous and may_share(c.shape, strides := element_strides(c)):
        raise BadArgumentError(f"{caller}: {what} has strides {strides} (elements), which may let two of its "
                               f"elements share memory (a broadcast or overlapping view); {what} is written: "
                               "pass an array whose elements are apart")


def overlap(x: Operand, y: Operand) -> bool:
    """Whether two operands that are read or written in place (dense, or the transposed view of a
    dense matrix: one contiguous extent each) share any byte. A C that overlaps A or B would be
    written while blocks still read it."""
    return x.ptr < y.ptr + y.size() * ITEMSIZE[y.dtype] and y.ptr < x.ptr + x.size() * ITEMSIZE[x.dtype]


def sum_operand(x, caller: str) -> Operand:
    op = read(x, "x", caller)
    check(op, "x", ("fp32",), None, caller, _state["device"])
    return op
