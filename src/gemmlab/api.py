"""The Python entry points of every op: gemmlab.sgemm, hgemm, bgemm and reduce_sum on CuPy arrays,
torch tensors or any DLPack / CUDA-array-interface producer.

Each call takes its arrays through harness.intake (no copy; the producer's stream), builds the
op's problem, picks the implementation, and enqueues a runner prepared once per (op, kernel,
parameters, dtype) and kept in one cache. Errors are one BadArgumentError (a ValueError) line.
"""
from __future__ import annotations

import threading
from typing import Any, Mapping

from . import ops
from .errors import BadArgumentError
from .harness.intake import check, same_family, take
from .problem import BatchedGemmProblem, GemmProblem
from .store import DEFAULT_DB

DEFAULT_SGEMM = "vectorize"  # the fastest verified rung so far
DEFAULT_BGEMM = "batched_pipeline"
DEFAULT_REDUCE = "single_pass"  # one launch, deterministic, fastest measured up to 2^24 (docs/reduce.md)

_runners: dict[tuple, Any] = {}
_runners_lock = threading.Lock()


def _runner(op_name: str, impl_name: str, params: Mapping[str, int] | None, dtype: str, stream: int | None = None):
    """The prepared runner of (op, implementation, parameters, dtype[, stream]), made once."""
    key = (op_name, impl_name, tuple(sorted((params or {}).items())), dtype, stream)
    runner = _runners.get(key)
    if runner is None:
        from . import registry

        op = ops.get(op_name)
        impl = registry.get(impl_name, op_name)
        if impl.op != op_name:
            raise BadArgumentError(f"{impl_name} is a {impl.op} implementation, not {op_name}")
        if getattr(impl, "ceiling", False):
            raise BadArgumentError(f"{impl_name} is the copy ceiling, not a {op_name}")
        with _runners_lock:
            runner = _runners.get(key)
            if runner is None:
                runner = _runners[key] = op.prepare(impl, params, dtype)
    return runner


_tuned_cache: dict[tuple, dict] = {}
_DEFAULT_DB = str(DEFAULT_DB)  # as text: the lookup key is built on every call


def _tuned(impl_name: str, problem: GemmProblem) -> dict:
    """Parameters tuned for this GPU at the nearest tuned shape ({} when none).

    Read from $GEMMLAB_DB, else ./gemmlab-results/results.db when it exists.
    """
    import os

    db = os.environ.get("GEMMLAB_DB") or _DEFAULT_DB  # no Path per call: this runs on every sgemm
    key = (impl_name, problem.shape, db)
    if key not in _tuned_cache:
        from pathlib import Path

        found = None
        path = Path(db)
        if path.exists():
            from . import registry
            from .cuda.device import info
            from .harness.tuned import usable_best
            from .store import ResultStore

            spec = registry.get(impl_name, problem.op)
            if spec.kind == "kernel":
                found = usable_best(ResultStore(path), info().name, spec, problem)
        _tuned_cache[key] = found or {}
    return _tuned_cache[key]


def _output(C: Any, shape: tuple, dtype: str, beta: float, caller: str):
    """C taken and checked (a contiguous working copy where C is not), or a new one when beta == 0."""
    import cupy as cp

    if C is None:
        if beta != 0.0:
            raise BadArgumentError("beta != 0 needs C")
        out = cp.empty(shape, dtype=cp.float32)
        return out, out
    c = take(C, "C", caller)
    check(c, "C", (dtype,), len(shape), caller)
    if c.array.shape != shape:
        raise BadArgumentError(f"C is {'x'.join(map(str, c.array.shape))}, expected {'x'.join(map(str, shape))}")
    out = c.array
    # a strided or misaligned C is computed in a fresh (aligned, contiguous) copy, then written back
    work = out if out.flags.c_contiguous and out.data.ptr % 16 == 0 else cp.array(out, order="C", copy=True)
    return out, work


def _contiguous(*arrays):
    """C-contiguous, 16-byte aligned versions (a view that starts mid-allocation is copied)."""
    import cupy as cp

    out = []
    for a in arrays:
        a = cp.ascontiguousarray(a)
        out.append(a.copy() if a.data.ptr % 16 else a)
    return out


def _gemm(op_name: str, caller: str, A, B, C, alpha, beta, dtypes, impl, params, batched: bool):
    """The shared body of sgemm, hgemm and bgemm: intake, shapes, problem, enqueue, result."""
    import cupy as cp

    from .cuda.device import cupy_stream, device, wrap_stream

    device()
    a, b = take(A, "A", caller), take(B, "B", caller)
    ndim = 3 if batched else 2
    check(a, "A", dtypes, ndim, caller)
    check(b, "B", dtypes, ndim, caller)
    if a.dtype != b.dtype:
        raise BadArgumentError(f"A is {a.dtype} but B is {b.dtype}: both must have one dtype")
    *batch, M, K = a.array.shape
    if b.array.shape[-2] != K or b.array.shape[:-2] != tuple(batch):
        raise BadArgumentError(f"A is {'x'.join(map(str, a.array.shape))} but B is "
                               f"{'x'.join(map(str, b.array.shape))}: inner dimensions differ")
    N = b.array.shape[-1]
    if min(M, N, K, *batch) == 0:
        raise BadArgumentError(f"empty problem {'x'.join(map(str, (*batch, M, N, K)))}")
    dtype = {"fp32": "tf32"}.get(a.dtype, a.dtype) if op_name == "hgemm" else "fp32"
    out, c = _output(C, (*batch, M, N), "fp32", beta, caller)
    if batched:
        problem = BatchedGemmProblem(int(M), int(N), int(K), float(alpha), float(beta), batch=int(batch[0]))
    else:
        problem = GemmProblem(int(M), int(N), int(K), float(alpha), float(beta), dtype)
    op = ops.get(op_name)
    if impl is None:
        impl = op.default_impl(problem)
    if params is None and op_name == "sgemm":
        params = _tuned(impl, problem)
    with cupy_stream(a.stream):
        x, y = _contiguous(a.array, b.array)
        op.enqueue(_runner(op_name, impl, params, dtype), problem, (x, y, c), wrap_stream(a.stream))
        if c is not out:
            out[...] = c
    if C is not None:
        return C
    return same_family(out, A)


def sgemm(A: Any, B: Any, C: Any = None, alpha: float = 1.0, beta: float = 0.0, impl: str = DEFAULT_SGEMM,
          params: Mapping[str, int] | None = None, tuned: bool = True):
    """C = alpha * A @ B + beta * C in fp32 with a gemmlab kernel (or a baseline).

    A (MxK), B (KxN) and C (MxN) are float32 CUDA arrays. With C given it is updated in
    place and returned; otherwise a new C is returned, of the same array type as A.
    Non-contiguous inputs are copied to contiguous ones first; with beta == 0 C is not read.
    Without `params`, a kernel runs with the parameters `gemmlab tune` found best on this GPU
    at the nearest tuned shape (tuned=False: the spec's defaults).
    """
    if not tuned and params is None:
        params = {}
    return _gemm("sgemm", "gemmlab.sgemm", A, B, C, alpha, beta, ("fp32",), impl, params, batched=False)


def hgemm(A: Any, B: Any, C: Any = None, alpha: float = 1.0, beta: float = 0.0, impl: str | None = None,
          params: Mapping[str, int] | None = None):
    """C = alpha * A @ B + beta * C: A (MxK) and B (KxN) fp16 or bf16 (both the same), products
    accumulated in fp32, C (MxN) fp32.

    A and B are torch float16/bfloat16 CUDA tensors or CuPy float16 arrays; C, when given, is a
    float32 CUDA array of the same family, updated in place and returned; otherwise a new fp32 C
    is returned (beta must then be 0). With beta == 0, C is not read. Non-contiguous inputs are
    copied first. fp32 A and B (torch float32, CuPy float32) run on the tensor cores as tf32 -
    LOWER precision than SGEMM (products off by up to ~2^-9 relative; gemmlab.ops.hgemm_check).
    impl=None (the default): on Hopper `persistent` (rung 5, any shape) or `tf32_wgmma`; elsewhere
    `mma_sync` where K % 8 == 0 and N % 8 == 0 and `wmma` (any shape) for the rest; naming a
    rung for a shape it refuses raises BadArgumentError. Accuracy: that of gemmlab.ops.hgemm_check
    (fp32 accumulation of exact products for fp16/bf16).
    """
    return _gemm("hgemm", "gemmlab.hgemm", A, B, C, alpha, beta, ("fp16", "bf16", "fp32"), impl, params,
                 batched=False)


def bgemm(A: Any, B: Any, C: Any = None, alpha: float = 1.0, beta: float = 0.0, impl: str = DEFAULT_BGEMM,
          params: Mapping[str, int] | None = None):
    """C[i] = alpha * A[i] @ B[i] + beta * C[i] for every i of a batch, in fp32.

    A (batch x M x K), B (batch x K x N), C (batch x M x N) are float32 CUDA arrays (torch.bmm's
    layout). With C given it is updated in place and returned, otherwise a new C is returned;
    with beta == 0 C is not read. Non-contiguous inputs are copied first.
    """
    return _gemm("bgemm", "gemmlab.bgemm", A, B, C, alpha, beta, ("fp32",), impl, params, batched=True)


def reduce_sum(x: Any, impl: str = DEFAULT_REDUCE, params: Mapping[str, int] | None = None):
    """sum(x) over every element of a float32 CUDA array, accumulated in fp32.

    x is a CuPy array, a torch tensor or any DLPack / __cuda_array_interface__ producer, of
    any shape (non-contiguous arrays are copied to a contiguous one first). Returns a 0-d
    array of the same family as x (a 0-d torch tensor for torch input, else a 0-d CuPy
    array), computed on the stream x's producer works on. Rungs 1-8 take as many passes as
    they need; `single_pass` (the default) and `tile_queue` one launch. The accuracy bound and
    the NaN/inf rules are those of gemmlab.ops.reduce_check: |result - exact| <= (ceil(sqrt(n)) +
    64) * 2^-24 * sum(|x|); NaN and inf propagate as in NumPy. An empty array sums to 0.
    `single_pass` is bitwise reproducible; `tile_queue` (2-3% faster at 2^28) hands tiles to
    blocks dynamically, so its rounding (not its bound) may differ from launch to launch.
    """
    import cupy as cp

    from .cuda.device import cupy_stream, device, wrap_stream

    device()
    a = take(x, "x", "reduce_sum")
    check(a, "x", ("fp32",), None, "reduce_sum")
    # one runner per stream: its partial buffers and the single-pass counter are never shared
    runner = _runner("reduce", impl, params, "fp32", a.stream)
    with cupy_stream(a.stream):
        if a.array.size == 0:
            out = cp.zeros((), dtype=cp.float32)
        else:
            flat = cp.ascontiguousarray(a.array).reshape(-1)
            if runner.compiled is not None:
                out = cp.empty((), dtype=cp.float32)
                runner.enqueue(flat, wrap_stream(a.stream), out=out)
            else:
                out = runner.enqueue(flat, wrap_stream(a.stream))
    return same_family(out, x)
