"""Operands read straight from the caller's arrays: pointer, shape, dtype, device, whether they are
contiguous, and the stream the producer works on, with no DLPack round trip per call.

torch tensors: data_ptr(), shape, is_contiguous(), dtype and the current stream of their device
(read from PyTorch's raw-stream accessor). CuPy arrays: data.ptr, shape, flags and CuPy's current
stream. Anything else with __cuda_array_interface__ (v3): its dict, and its own stream when it
names one (the protocol says work may then be enqueued on it). A DLPack-only producer goes
through cupy.from_dlpack (slower, still no copy). How to read a type is decided once per type.

Refusals are one BadArgumentError (a ValueError) line.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

from ..errors import BadArgumentError
from . import interface

DTYPE_TEXT = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64"}
ALIGN = 16  # bytes: every kernel's vector loads and TMA want 16-byte aligned bases


class Operand:
    """One array as gemmlab reads it; `family` is torch, cupy or cai (any other producer)."""

    __slots__ = ("obj", "ptr", "shape", "dtype", "device", "stream", "family", "contiguous", "readonly", "named")

    def __init__(self, obj, ptr, shape, dtype, device, stream, family, contiguous, readonly=False, named=False):
        self.obj, self.ptr, self.shape = obj, ptr, tuple(shape)
        self.dtype, self.device, self.stream, self.family, self.contiguous = dtype, device, stream, family, contiguous
        self.readonly = readonly  # a producer's read-only flag (__cuda_array_interface__): never a C
        self.named = named  # `stream` is one a producer named (api/streams.py orders the call with it)

    @property
    def dense(self) -> bool:
        """Row-major contiguous and 16-byte aligned: what a kernel takes without a copy."""
        return self.contiguous and self.ptr % ALIGN == 0

    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


# -- per-family readers -------------------------------------------------------------------------

_torch_names: dict = {}
_torch_stream: Callable[[int], int] | None = None


def _torch_setup():
    global _torch_stream
    import torch

    _torch_names.update({torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
                         torch.float64: "fp64"})
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # PyTorch's own accessor, ~0.1 us
    _torch_stream = raw if raw is not None else (lambda d: torch.cuda.current_stream(d).cuda_stream)


def torch_stream_reader() -> Callable[[int], int]:
    """device index -> the raw handle of torch's current stream on it (the one reader everywhere)."""
    if _torch_stream is None:
        _torch_setup()
    return _torch_stream


def current_stream_reader(op: Operand) -> Callable[[], int]:
    """A function returning the stream a call on `op` runs on, read each time it is called (plans
    read it at every execute, so a CUDA graph capture sees its capture stream): the operand
    framework's current stream, or the stream a __cuda_array_interface__ producer named."""
    if op.family == "torch":
        read_stream, dev = torch_stream_reader(), op.device
        return lambda: read_stream(dev)
    if op.named:
        fixed = op.stream
        return lambda: fixed
    return lambda: _cupy.cuda.get_current_stream().ptr  # CuPy's, and an unnamed dict's (as read_cai takes it)


def _read_torch(x, what: str, caller: str) -> Operand:
    if not x.is_cuda:
        raise BadArgumentError(f"{what} is a CPU (host) tensor; {caller} needs CUDA tensors")
    if _torch_stream is None:
        _torch_setup()
    dev = x.get_device()
    dtype = _torch_names.get(x.dtype) or str(x.dtype).replace("torch.", "")
    return Operand(x, x.data_ptr(), x.shape, dtype, dev, _torch_stream(dev), "torch", x.is_contiguous())


_cupy = None
_cupy_names: dict = {}


def _cupy_setup():
    global _cupy
    import cupy
    import numpy as np

    _cupy_names.update({np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16", np.dtype(np.float64): "fp64"})
    _cupy = cupy


def _read_cupy(x, what: str, caller: str) -> Operand:
    if _cupy is None:
        _cupy_setup()
    return Operand(x, x.data.ptr, x.shape, _cupy_names.get(x.dtype) or x.dtype.name, x.data.device_id,
                   _cupy.cuda.get_current_stream().ptr, "cupy", x.flags.c_contiguous)


def _read_cai(x, what: str, caller: str) -> Operand:
    """A __cuda_array_interface__ producer (v3), its dict checked (interface.parse): its own
    stream when it names one, else CuPy's current."""
    if _cupy is None:
        _cupy_setup()
    try:
        cai = x.__cuda_array_interface__
    except AttributeError as exc:  # e.g. a host-resident array of a type that can export one
        raise BadArgumentError(f"{what} is not a CUDA array ({exc})") from None
    f = interface.parse(cai, what)
    stream = f.stream if f.stream is not None else _cupy.cuda.get_current_stream().ptr
    device = _cupy.cuda.runtime.pointerGetAttributes(f.ptr).device if f.ptr else _cupy.cuda.Device().id
    return Operand(x, f.ptr, f.shape, f.dtype, device, stream, "cai", interface.c_order(f.shape, f.strides),
                   f.readonly, f.stream is not None)


def _read_dlpack(x, what: str, caller: str) -> Operand:
    if _cupy is None:
        _cupy_setup()
    try:
        a = _cupy.from_dlpack(x)
    except Exception as exc:
        raise BadArgumentError(f"{what} is not a CUDA array ({exc})") from None
    op = _read_cupy(a, what, caller)
    op.family = "cai"  # the result comes back as CuPy
    return op


def _refuse_numpy(x, what: str, caller: str) -> Operand:
    raise BadArgumentError(f"{what} is a NumPy (host) array; {caller} needs a CUDA array")


def _refuse(x, what: str, caller: str) -> Operand:
    if "__cuda_array_interface__" in getattr(x, "__dict__", ()):  # set on the instance, not its type
        return _read_cai(x, what, caller)
    raise BadArgumentError(f"{what} must be a CUDA array (CuPy, torch, or a DLPack/__cuda_array_interface__ "
                           f"producer), got {type(x).__name__}")


_readers: dict[type, Callable[[Any, str, str], Operand]] = {}


def _reader_for(t: type) -> Callable[[Any, str, str], Operand]:
    module = t.__module__.split(".")[0]
    if module == "cupy" or (module != "torch" and "cupy" in sys.modules and issubclass(t, sys.modules["cupy"].ndarray)):
        return _read_cupy
    if module == "torch" or ("torch" in sys.modules and issubclass(t, sys.modules["torch"].Tensor)):
        return _read_torch
    if module == "numpy":
        return _refuse_numpy
    if hasattr(t, "__cuda_array_interface__"):
        return _read_cai
    if hasattr(t, "__dlpack__"):
        return _read_dlpack
    return _refuse


def read(x: Any, what: str, caller: str) -> Operand:
    """x as an Operand (refused in one line when it is not a usable CUDA array)."""
    reader = _readers.get(type(x))
    if reader is None:
        reader = _readers[type(x)] = _reader_for(type(x))
    return reader(x, what, caller)


def transposed(op: Operand) -> bool:
    """Whether a 2-D operand is the transpose of a contiguous, 16-byte aligned matrix (torch's
    W.T, CuPy's W.T or an F-order array): what cuBLAS, and for B the TMA rungs that take layout
    nt, read in place at op.ptr (the NxK matrix W itself)."""
    if op.contiguous or len(op.shape) != 2 or op.ptr % ALIGN:
        return False
    x = op.obj
    if op.family == "torch":
        return x.stride() == (1, x.shape[0])
    if op.family == "cupy":
        return bool(x.flags.f_contiguous)
    return False


def element_strides(op: Operand) -> tuple[int, ...]:
    """The operand's strides in elements, read from its array (only the rare paths ask)."""
    x = op.obj
    if op.family == "torch":
        return tuple(x.stride())
    if _cupy is not None and isinstance(x, _cupy.ndarray):  # also a DLPack producer's, read as CuPy
        return tuple(s // x.itemsize for s in x.strides)
    f = interface.parse(x.__cuda_array_interface__, "")
    return f.strides if f.strides is not None else interface.dense_strides(f.shape)


def shape_text(shape) -> str:
    return "x".join(map(str, shape)) or "0-d"


# -- copies and outputs (on the operand's stream) ------------------------------------------------

def cupy_view(op: Operand):
    """A CuPy array over the operand's memory (no copy), for the rare paths that need one."""
    if _cupy is None:
        _cupy_setup()
    if op.family == "cupy":
        return op.obj
    if op.family == "torch":
        return _cupy.from_dlpack(op.obj.detach() if op.dtype != "bf16" else _bits(op.obj))
    if isinstance(op.obj, _cupy.ndarray):  # a DLPack producer's, read as CuPy
        return op.obj
    return interface.cupy_view(op.obj, op.device, _cupy)  # not cupy.asarray: it would wait on the host


def _bits(t):
    import torch

    return t.detach().view(torch.uint16 if hasattr(torch, "uint16") else torch.int16)


def densify(op: Operand, stream: int | None = None) -> Operand:
    """A contiguous, aligned copy of a strided or misaligned operand, made on `stream` (the call's;
    default the operand's own; a torch operand's on torch's current stream, which is the call's)."""
    if op.family == "torch":
        t = op.obj.contiguous()
        if t.data_ptr() % ALIGN or t.data_ptr() == op.ptr:
            t = t.clone(memory_format=_contiguous_format())
        return Operand(t, t.data_ptr(), t.shape, op.dtype, op.device, op.stream, "torch", True)
    from ..cuda.device import cupy_stream

    on = op.stream if stream is None else stream
    with cupy_stream(on):
        a = _cupy.array(cupy_view(op), order="C", copy=True)
    out = _read_cupy(a, "", "")
    out.stream, out.family = on, op.family
    return out


def _contiguous_format():
    import torch

    return torch.contiguous_format


_TORCH_DTYPES: dict = {}  # "fp32"/"fp16"/"bf16" -> the torch dtype: _torch_names inverted, on first use


def _torch_dtype(name: str):
    if not _TORCH_DTYPES:
        if not _torch_names:
            _torch_setup()
        _TORCH_DTYPES.update({v: k for k, v in _torch_names.items()})
    return _TORCH_DTYPES[name]


def new_output(like: Operand, shape: tuple, zeros: bool = False, dtype: str = "fp32",
               stream: int | None = None) -> Operand:
    """A new array (fp32 unless `dtype` says fp16 or bf16) of `like`'s family (torch for torch,
    else CuPy) on `stream` (default like's). CuPy has no bfloat16: a bf16 output is a torch one only."""
    if like.family == "torch":
        t_dtype = _torch_dtype(dtype)
        t = like.obj.new_zeros(shape, dtype=t_dtype) if zeros else like.obj.new_empty(shape, dtype=t_dtype)
        return Operand(t, t.data_ptr(), shape, dtype, like.device, like.stream, "torch", True)
    if dtype == "bf16":
        raise BadArgumentError("CuPy has no bfloat16 array: a bf16 C needs torch tensors")
    make = _cupy.zeros if zeros else _cupy.empty
    c_dtype = _cupy.float32 if dtype == "fp32" else _cupy.float16
    on = like.stream if stream is None else stream
    if like.family == "cupy" and on == like.stream:  # like.stream is CuPy's current stream already
        a = make(shape, dtype=c_dtype)
    else:
        from ..cuda.device import cupy_stream

        with cupy_stream(on):
            a = make(shape, dtype=c_dtype)
    return Operand(a, a.data.ptr, shape, dtype, like.device, on, like.family, True)


def copy_into(dst: Operand, src: Operand, stream: int | None = None) -> None:
    """dst[...] = src on `stream` (default dst's): a strided C written back from its dense working copy."""
    if dst.family == "torch" and src.family == "torch":
        dst.obj.copy_(src.obj)
        return
    from ..cuda.device import cupy_stream

    with cupy_stream(dst.stream if stream is None else stream):
        view = cupy_view(dst)
        view[...] = cupy_view(src)


def scale(op: Operand, beta: float) -> None:
    """op *= beta in place, with beta == 0 writing zeros (NaN in op does not survive): torch's
    rule for C when K == 0."""
    if op.family == "torch":
        if beta == 0.0:
            op.obj.zero_()
        else:
            op.obj.mul_(beta)
        return
    from ..cuda.device import cupy_stream

    with cupy_stream(op.stream):
        view = cupy_view(op)
        if beta == 0.0:
            view.fill(0)
        else:
            view *= beta


def result(op: Operand):
    """What the caller gets back: the array itself for torch and CuPy, CuPy for other producers."""
    if op.family == "cai" and _cupy is not None and not isinstance(op.obj, _cupy.ndarray):
        return cupy_view(op)
    return op.obj
