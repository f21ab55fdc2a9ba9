"""gemmlab.reduce_sum: the fp32 sum of a CUDA array with a gemmlab reduce kernel (or a baseline)."""
from __future__ import annotations

from typing import Any, Mapping

from ..errors import BadArgumentError

DEFAULT_REDUCE = "single_pass"  # one launch, deterministic, fastest measured up to 2^24 (docs/reduce.md)

_runners: dict[tuple, Any] = {}


def _runner(impl_name: str, params: Mapping[str, int] | None, stream_ptr: int):
    """One runner per (implementation, parameters, stream): its partial buffers and the
    single-pass counter are then never shared by two streams."""
    from .. import registry
    from .runner import ReduceRunner

    key = (impl_name, tuple(sorted((params or {}).items())), int(stream_ptr))
    if key not in _runners:
        impl = registry.get(impl_name, "reduce")
        if impl.op != "reduce":
            raise BadArgumentError(f"{impl_name} is a {impl.op} implementation, not reduce")
        if getattr(impl, "ceiling", False):
            raise BadArgumentError(f"{impl_name} is the copy ceiling, not a sum")
        _runners[key] = ReduceRunner(impl, params)
    return _runners[key]


def reduce_sum(x: Any, impl: str = DEFAULT_REDUCE, params: Mapping[str, int] | None = None):
    """sum(x) over every element of a float32 CUDA array, accumulated in fp32.

    x is a CuPy array, a torch tensor or any DLPack / __cuda_array_interface__ producer, of
    any shape (non-contiguous arrays are copied to a contiguous one first). Returns a 0-d
    array of the same family as x (a 0-d torch tensor for torch input, else a 0-d CuPy
    array), computed on the stream x's producer works on. Rungs 1-8 take as many passes as
    they need; `single_pass` (the default) and `tile_queue` one launch. The accuracy bound and
    the NaN/inf rules are those of gemmlab.reduce.verify: |result - exact| <= (ceil(sqrt(n)) +
    64) * 2^-24 * sum(|x|); NaN and inf propagate as in NumPy. An empty array sums to 0.
    `single_pass` is bitwise reproducible; `tile_queue` (2-3% faster at 2^28) hands tiles to
    blocks dynamically, so its rounding (not its bound) may differ from launch to launch.
    """
    import cupy as cp

    from ..api import _as_cupy, _is_torch
    from ..cuda.device import cupy_stream, device, wrap_stream

    device()
    a, stream_ptr = _as_cupy(x, "x")
    if a.dtype != cp.float32:
        raise BadArgumentError(f"x has dtype {a.dtype}; reduce_sum needs float32")
    if a.device.id != cp.cuda.Device().id:
        raise BadArgumentError(f"x is on GPU {a.device.id}, not the current GPU {cp.cuda.Device().id}")
    runner = _runner(impl, params, stream_ptr)
    with cupy_stream(stream_ptr):
        if a.size == 0:
            out = cp.zeros((), dtype=cp.float32)
        else:
            flat = cp.ascontiguousarray(a).reshape(-1)
            if runner.compiled is not None:
                out = cp.empty((), dtype=cp.float32)
                runner.enqueue(flat, wrap_stream(stream_ptr), out=out)
            else:
                out = runner.enqueue(flat, wrap_stream(stream_ptr))
    if _is_torch(x):
        import torch

        return out if isinstance(out, torch.Tensor) else torch.from_dlpack(out)
    if not isinstance(out, cp.ndarray):  # a torch baseline on CuPy input
        out = cp.from_dlpack(out)
    return out
