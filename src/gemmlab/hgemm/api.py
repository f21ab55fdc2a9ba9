"""gemmlab.hgemm: C = alpha * A @ B + beta * C with fp16/bf16 A and B (or fp32 A and B multiplied
as tf32), fp32 accumulation, fp32 C."""
from __future__ import annotations

from typing import Any, Mapping

from ..errors import BadArgumentError
from ..problem import GemmProblem

DEFAULT_HGEMM = "mma_sync"  # rung 2: the fastest before Hopper (sm_80 and up)
FALLBACK_HGEMM = "wmma"  # takes any shape: impl=None uses it where rung 2 refuses the shape
HOPPER_HGEMM = "persistent"  # rung 5 on sm_90: any shape, the fastest measured (docs/tensor-cores.md)
TF32_HGEMM = "tf32_wgmma"  # fp32 inputs: rung 6 (sm_90 only)

_runners: dict[tuple, Any] = {}


def _runner(impl_name: str, params: Mapping[str, int] | None, dtype: str):
    from .. import registry
    from .runner import HgemmRunner

    key = (impl_name, tuple(sorted((params or {}).items())), dtype)
    if key not in _runners:
        impl = registry.get(impl_name, "hgemm")
        if impl.op != "hgemm":
            raise BadArgumentError(f"{impl_name} is a {impl.op} implementation, not hgemm")
        _runners[key] = HgemmRunner(impl, params, dtype)
    return _runners[key]


def _as_input(x: Any, what: str):
    """A CuPy view of a 16-bit CUDA array, its dtype name and its producer's stream."""
    import cupy as cp

    from ..api import _is_torch

    if _is_torch(x):
        import torch

        if not x.is_cuda:
            raise BadArgumentError(f"{what} is a CPU tensor; gemmlab.hgemm needs CUDA tensors")
        names = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "tf32"}
        if x.dtype not in names:
            raise BadArgumentError(f"{what} has dtype {x.dtype}; hgemm needs float16, bfloat16 or float32 (tf32)")
        t = x.detach()
        if x.dtype == torch.bfloat16:
            t = t.view(torch.uint16) if hasattr(torch, "uint16") else t.view(torch.int16)
        a = cp.from_dlpack(t)
        if x.dtype == torch.bfloat16 and a.dtype != cp.uint16:  # int16 bits where torch lacks uint16
            a = a.view(cp.uint16)
        return a, names[x.dtype], torch.cuda.current_stream(x.device).cuda_stream
    if isinstance(x, cp.ndarray):
        names = {cp.dtype(cp.float16): "fp16", cp.dtype(cp.float32): "tf32"}
        if x.dtype not in names:
            raise BadArgumentError(f"{what} has dtype {x.dtype}; hgemm takes float16 or float32 (tf32) CuPy "
                                   "arrays (bf16: pass torch bfloat16 tensors)")
        return x, names[x.dtype], cp.cuda.get_current_stream().ptr
    raise BadArgumentError(f"{what} must be a CUDA float16/bfloat16 array (torch tensor or CuPy float16), "
                           f"got {type(x).__name__}")


def choose_impl(impl: str | None, problem: GemmProblem, arch: str | None = None) -> str:
    """impl as named; None: rung 5 (16-bit) or 6 (tf32) on Hopper, else rung 2, or rung 1 where
    rung 2 refuses the shape."""
    if impl is not None:
        return impl
    from .. import registry
    from .runner import refusal

    if arch is None:
        from ..cuda.device import info

        arch = info().arch
    hopper = arch == "sm_90"
    if problem.dtype == "tf32":
        if not hopper:
            raise BadArgumentError(f"fp32 inputs run as tf32 on sm_90 (Hopper) only; this GPU is {arch}")
        return TF32_HGEMM
    if hopper:
        return HOPPER_HGEMM

    return FALLBACK_HGEMM if refusal(registry.get(DEFAULT_HGEMM, "hgemm"), problem) else DEFAULT_HGEMM


def hgemm(A: Any, B: Any, C: Any = None, alpha: float = 1.0, beta: float = 0.0, impl: str | None = None,
          params: Mapping[str, int] | None = None):
    """C = alpha * A @ B + beta * C: A (MxK) and B (KxN) fp16 or bf16 (both the same), products
    accumulated in fp32, C (MxN) fp32.

    A and B are torch float16/bfloat16 CUDA tensors or CuPy float16 arrays; C, when given, is a
    float32 CUDA array of the same family, updated in place and returned; otherwise a new fp32 C
    is returned (beta must then be 0). With beta == 0, C is not read. Non-contiguous inputs are
    copied first. fp32 A and B (torch float32, CuPy float32) run on the tensor cores as tf32 -
    LOWER precision than SGEMM (products off by up to ~2^-9 relative; gemmlab.hgemm.verify).
    impl=None (the default): on Hopper `persistent` (rung 5, any shape) or `tf32_wgmma`; elsewhere
    `mma_sync` where K % 8 == 0 and N % 8 == 0 and `wmma` (any shape) for the rest; naming a
    rung for a shape it refuses raises BadArgumentError. Accuracy: that of gemmlab.hgemm.verify
    (fp32 accumulation of exact products for fp16/bf16).
    """
    import cupy as cp

    from ..api import _as_cupy
    from ..cuda.device import cupy_stream, device, wrap_stream

    device()
    a, dtype, stream_ptr = _as_input(A, "A")
    b, dtype_b, _ = _as_input(B, "B")
    if dtype != dtype_b:
        raise BadArgumentError(f"A is {dtype} but B is {dtype_b}: both must have one dtype")
    for what, x in (("A", a), ("B", b)):
        if x.ndim != 2:
            raise BadArgumentError(f"{what} must be 2-D, got {x.ndim}-D")
    M, K = a.shape
    if b.shape[0] != K:
        raise BadArgumentError(f"A is {M}x{K} but B is {b.shape[0]}x{b.shape[1]}: inner dimensions differ")
    N = b.shape[1]
    if min(M, N, K) == 0:
        raise BadArgumentError(f"empty problem {M}x{N}x{K}")
    if C is None:
        if beta != 0.0:
            raise BadArgumentError("beta != 0 needs C")
        out = cp.empty((M, N), dtype=cp.float32)
    else:
        out = _as_cupy(C, "C")[0]
        if out.dtype != cp.float32:
            raise BadArgumentError(f"C has dtype {out.dtype}; hgemm writes float32")
        if out.shape != (M, N):
            raise BadArgumentError(f"C is {out.shape[0]}x{out.shape[1]}, expected {M}x{N}")
    problem = GemmProblem(int(M), int(N), int(K), float(alpha), float(beta), dtype)
    impl = choose_impl(impl, problem)
    with cupy_stream(stream_ptr):
        a = cp.ascontiguousarray(a)
        b = cp.ascontiguousarray(b)
        c = out if out.flags.c_contiguous else cp.ascontiguousarray(out)
        # the kernels need 16-byte aligned bases: a view that starts mid-allocation is copied
        a = a.copy() if a.data.ptr % 16 else a
        b = b.copy() if b.data.ptr % 16 else b
        c = c.copy() if c.data.ptr % 16 else c
        _runner(impl, params, dtype).enqueue(problem, a, b, c, wrap_stream(stream_ptr))
        if c is not out:
            out[...] = c
    if C is not None:
        return C
    if type(A).__module__.startswith("torch"):
        import torch

        return torch.from_dlpack(out)
    return out
