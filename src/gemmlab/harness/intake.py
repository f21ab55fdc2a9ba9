"""Array intake for every entry point: a CuPy view (no copy) of a CUDA array from CuPy, torch,
or any DLPack / __cuda_array_interface__ producer, its dtype as gemmlab names it, and the stream
its producer works on. What cannot be used is refused with one BadArgumentError line."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BadArgumentError

# numpy/cupy dtype -> gemmlab's name ("bf16" arrives as torch.bfloat16 only: CuPy has no bf16)
_NAMES = {np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16", np.dtype(np.float64): "fp64"}


def _name(dtype) -> str:
    return _NAMES.get(dtype) or str(dtype)  # str() only for the rare refused dtype: it costs host time


def is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


@dataclass
class Intake:
    array: Any  # a CuPy ndarray viewing the same memory (bf16: uint16 bits)
    dtype: str  # fp32 | fp16 | bf16 | another numpy name
    stream: int  # the producer's stream handle


def take(x: Any, what: str, caller: str) -> Intake:
    """x as a CuPy view with its dtype name and its producer's stream."""
    import cupy as cp

    if isinstance(x, cp.ndarray):
        return Intake(x, _name(x.dtype), cp.cuda.get_current_stream().ptr)
    if isinstance(x, np.ndarray):
        raise BadArgumentError(f"{what} is a NumPy (host) array; {caller} needs a CUDA array")
    if is_torch(x):
        import torch

        if not x.is_cuda:
            raise BadArgumentError(f"{what} is a CPU (host) tensor; {caller} needs CUDA tensors")
        t = x.detach()
        stream = torch.cuda.current_stream(x.device).cuda_stream
        if x.dtype == torch.bfloat16:  # CuPy has no bf16: view the bits
            t = t.view(torch.uint16) if hasattr(torch, "uint16") else t.view(torch.int16)
            a = cp.from_dlpack(t)
            return Intake(a if a.dtype == cp.uint16 else a.view(cp.uint16), "bf16", stream)
        a = cp.from_dlpack(t)
        return Intake(a, _name(a.dtype), stream)
    if hasattr(x, "__cuda_array_interface__"):
        cp.cuda.Device().synchronize()  # we cannot know the producer's stream: wait for it
        a = cp.asarray(x)
        return Intake(a, _name(a.dtype), cp.cuda.get_current_stream().ptr)
    if hasattr(x, "__dlpack__"):
        try:
            a = cp.from_dlpack(x)
        except Exception as exc:
            raise BadArgumentError(f"{what} is not a CUDA array ({exc})") from None
        return Intake(a, _name(a.dtype), cp.cuda.get_current_stream().ptr)
    raise BadArgumentError(f"{what} must be a CUDA array (CuPy, torch, or a DLPack/__cuda_array_interface__ "
                           f"producer), got {type(x).__name__}")


def check(a: Intake, what: str, dtypes: tuple[str, ...], ndim: int | None, caller: str) -> None:
    """Refuse a dtype outside `dtypes`, another rank than `ndim`, an array on another GPU."""
    import cupy as cp

    if a.dtype not in dtypes:
        names = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
        raise BadArgumentError(f"{what} has dtype {names.get(a.dtype, a.dtype)}; {caller} needs "
                               + " or ".join(names[d] for d in dtypes))
    if ndim is not None and a.array.ndim != ndim:
        raise BadArgumentError(f"{what} must be {ndim}-D, got {a.array.ndim}-D")
    if a.array.device.id != cp.cuda.Device().id:
        raise BadArgumentError(f"{what} is on GPU {a.array.device.id}, not the current GPU {cp.cuda.Device().id}")


def same_family(result, like: Any):
    """A CuPy result as the array family of `like` (a torch tensor for torch input)."""
    if is_torch(like):
        import torch

        return result if isinstance(result, torch.Tensor) else torch.from_dlpack(result)
    if not hasattr(result, "__cuda_array_interface__") or is_torch(result):
        import cupy as cp

        return cp.from_dlpack(result)
    return result
