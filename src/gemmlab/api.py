"""The Python API: gemmlab.sgemm on CuPy arrays, torch tensors or any CUDA array producer."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .errors import BadArgumentError
from .problem import GemmProblem

DEFAULT_SGEMM = "vectorize"  # the fastest verified rung so far

_runners: dict[tuple, Any] = {}


def _runner(impl_name: str, params: Mapping[str, int] | None):
    from . import registry
    from .runner import GemmRunner

    key = (impl_name, tuple(sorted((params or {}).items())))
    if key not in _runners:
        impl = registry.get(impl_name)
        if impl.op != "sgemm":
            raise BadArgumentError(f"{impl_name} is a {impl.op} implementation, not sgemm")
        _runners[key] = GemmRunner(impl, params)
    return _runners[key]


_tuned_cache: dict[tuple, dict] = {}


def _tuned(impl_name: str, problem: GemmProblem) -> dict:
    """Parameters tuned for this GPU at the nearest tuned shape ({} when none).

    Read from $GEMMLAB_DB, else ./gemmlab-results/results.db when it exists.
    """
    import os
    from pathlib import Path

    from .store import DEFAULT_DB

    path = Path(os.environ.get("GEMMLAB_DB", DEFAULT_DB))
    key = (impl_name, problem.shape, str(path))
    if key not in _tuned_cache:
        found = {}
        if path.exists():
            from . import registry
            from .cuda.device import info
            from .store import ResultStore
            from .tune.history import best_params

            spec = registry.get(impl_name)
            if spec.kind == "kernel":
                hit = best_params(ResultStore(path), info().name, impl_name, problem)
                if hit is not None and not spec.failed_constraints({**spec.defaults, **hit[0]}):
                    found = hit[0]
        _tuned_cache[key] = found
    return _tuned_cache[key]


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _as_cupy(x: Any, what: str):
    """A CuPy view of x (no copy) and the stream its producer works on."""
    import cupy as cp

    if isinstance(x, cp.ndarray):
        return x, cp.cuda.get_current_stream().ptr
    if isinstance(x, np.ndarray):
        raise BadArgumentError(f"{what} is a NumPy (host) array; gemmlab.sgemm needs a CUDA array")
    if _is_torch(x):
        import torch

        if not x.is_cuda:
            raise BadArgumentError(f"{what} is a CPU tensor; gemmlab.sgemm needs CUDA tensors")
        if x.dtype != torch.float32:
            raise BadArgumentError(f"{what} has dtype {x.dtype}; sgemm needs float32")
        return cp.from_dlpack(x.detach()), torch.cuda.current_stream(x.device).cuda_stream
    if hasattr(x, "__cuda_array_interface__"):
        cp.cuda.Device().synchronize()  # we cannot know the producer's stream: wait for it
        return cp.asarray(x), cp.cuda.get_current_stream().ptr
    if hasattr(x, "__dlpack__"):
        try:
            return cp.from_dlpack(x), cp.cuda.get_current_stream().ptr
        except Exception as exc:
            raise BadArgumentError(f"{what} is not a CUDA array ({exc})") from None
    raise BadArgumentError(f"{what} must be a CUDA array (CuPy, torch, or a DLPack/__cuda_array_interface__ "
                           f"producer), got {type(x).__name__}")


def _check(x, what: str):
    import cupy as cp

    if x.dtype != cp.float32:
        raise BadArgumentError(f"{what} has dtype {x.dtype}; sgemm needs float32")
    if x.ndim != 2:
        raise BadArgumentError(f"{what} must be 2-D, got {x.ndim}-D")
    if x.device.id != cp.cuda.Device().id:
        raise BadArgumentError(f"{what} is on GPU {x.device.id}, not the current GPU {cp.cuda.Device().id}")


def sgemm(A: Any, B: Any, C: Any = None, alpha: float = 1.0, beta: float = 0.0, impl: str = DEFAULT_SGEMM,
          params: Mapping[str, int] | None = None, tuned: bool = True):
    """C = alpha * A @ B + beta * C in fp32 with a gemmlab kernel (or a baseline).

    A (MxK), B (KxN) and C (MxN) are float32 CUDA arrays. With C given it is updated in
    place and returned; otherwise a new C is returned, of the same array type as A.
    Non-contiguous inputs are copied to contiguous ones first; with beta == 0 C is not read.
    Without `params`, a kernel runs with the parameters `gemmlab tune` found best on this GPU
    at the nearest tuned shape (tuned=False: the spec's defaults).
    """
    from .cuda.device import cupy_stream, device, wrap_stream

    device()
    a, stream_ptr = _as_cupy(A, "A")
    b, _ = _as_cupy(B, "B")
    _check(a, "A")
    _check(b, "B")
    M, K = a.shape
    if b.shape[0] != K:
        raise BadArgumentError(f"A is {M}x{K} but B is {b.shape[0]}x{b.shape[1]}: inner dimensions differ")
    N = b.shape[1]
    if min(M, N, K) == 0:
        raise BadArgumentError(f"empty problem {M}x{N}x{K}")
    import cupy as cp

    if C is None:
        if beta != 0.0:
            raise BadArgumentError("beta != 0 needs C")
        c = out = cp.empty((M, N), dtype=cp.float32)
    else:
        out = _as_cupy(C, "C")[0]
        _check(out, "C")
        if out.shape != (M, N):
            raise BadArgumentError(f"C is {out.shape[0]}x{out.shape[1]}, expected {M}x{N}")
        c = out if out.flags.c_contiguous else cp.ascontiguousarray(out)
    problem = GemmProblem(int(M), int(N), int(K), float(alpha), float(beta))
    with cupy_stream(stream_ptr):
        a = cp.ascontiguousarray(a)
        b = cp.ascontiguousarray(b)
        if params is None and tuned:
            params = _tuned(impl, problem)
        _runner(impl, params).enqueue(problem, a, b, c, wrap_stream(stream_ptr))
        if c is not out:
            out[...] = c
    if C is not None:
        return C
    if _is_torch(A):
        import torch

        return torch.from_dlpack(out)
    return out
