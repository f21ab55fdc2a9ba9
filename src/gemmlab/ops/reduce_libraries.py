"""Reduce baselines, registered like kernels and timed by the same timer in the same run.

- cub:   cupy.sum, which CuPy routes to cub::DeviceReduce::Sum (its default accelerator).
- torch: torch.sum, when PyTorch is installed.
- copy:  a device-to-device copy of the same n floats (cuMemcpyDtoDAsync): not a sum but the
         bandwidth ceiling of the run; its GB/s count bytes read plus bytes written (8n).
All enqueue on the timer's stream, so the events bracket exactly their work.
"""
from __future__ import annotations

from ..baseline import Baseline
from ..registry import register
from .torch_interop import torch_reason, torch_stream, torch_views


def _cub_reason() -> str:
    try:
        from cupy._core import _accelerator
    except ImportError:  # pragma: no cover - CuPy is a dependency
        return "CuPy is not importable"
    if _accelerator.ACCELERATOR_CUB not in _accelerator.get_routine_accelerators():
        return "CuPy's CUB routine accelerator is off (CUPY_ACCELERATORS does not name cub)"
    return ""


def _cub_enqueue(x, handle: int, scratch=None):
    import cupy as cp

    from ..cuda.device import cupy_stream

    with cupy_stream(handle):
        return cp.sum(x)


def _torch_enqueue(x, handle: int, scratch=None):
    import torch

    with torch.cuda.stream(torch_stream(handle)):
        (t,) = torch_views(x)
        return torch.sum(t)


def _copy_enqueue(x, handle: int, scratch):
    from cuda.bindings import driver

    (err,) = driver.cuMemcpyDtoDAsync(scratch.data.ptr, x.data.ptr, x.nbytes, handle)
    if err != driver.CUresult.CUDA_SUCCESS:
        from ..errors import LaunchError

        raise LaunchError(f"copy: cuMemcpyDtoDAsync failed ({err.name})")
    return scratch[: x.size]


CUB = Baseline("cub", "reduce", "cupy.sum (CUB DeviceReduce)", "the vendor library's device-wide sum, two launches",
               _cub_reason, _cub_enqueue)
TORCH = Baseline("torch", "reduce", "torch.sum", "PyTorch's reduction kernel", torch_reason, _torch_enqueue)
COPY = Baseline("copy", "reduce", "device-to-device copy (ceiling)",
                "cuMemcpyDtoDAsync of the same n floats: the run's bandwidth ceiling (read + write)",
                lambda: "", _copy_enqueue, bytes_per_element=8, ceiling=True)

register(CUB, TORCH, COPY)
