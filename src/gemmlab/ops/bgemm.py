"""The bgemm op: strided batched SGEMM, C[i] = alpha * A[i] @ B[i] + beta * C[i] for i < batch, fp32.

Added through the recipe of docs/architecture.md: a problem type (problem.BatchedGemmProblem),
this module (shapes, data, runner, checks, baselines) and its kernels (kernels/bgemm/).
Kernels take (M, N, K, alpha, A, strideA, B, strideB, beta, C, strideC, batch) with strides in
elements (kernels/bgemm/specs.py). Baselines: cuBLAS cublasSgemmStridedBatched (called directly,
cuda/cublas.py, as the API's library path calls it) and torch.bmm / torch.baddbmm. Bounds: sgemm's fp32 bounds for every matrix of the
batch (ops/sgemm.py), and a batch passes only if every matrix does.
"""
from __future__ import annotations

import numpy as np

from ..cuda.prepared import PreparedImpl
from ..errors import BadArgumentError
from ..kernels.bgemm import specs as _kernels  # noqa: F401  (registers the ladder)
from ..problem import BatchedGemmProblem, comma_items, parse_shape
from ..baseline import Baseline
from ..registry import register
from .base import ShapeArgs
from .gemm_family import GemmOp, Verdict, gemm_shapes
from .sgemm import compare as compare_one
from .torch_interop import torch_reason, torch_stream, torch_views

DEFAULT_SIZES = "256x128,64x256,16x512,4x1024,2x2048"  # batch x size (cubes), from many small to few large
# The odd-shape sweep: batches of 1 and more, M = 1, N = 1, K = 1, primes, non-multiples of tiles.
SWEEP_SHAPES: tuple[tuple[int, int, int, int], ...] = (
    (1, 1, 1, 1), (3, 1, 129, 67), (2, 97, 1, 33), (4, 64, 64, 1), (5, 127, 127, 127), (3, 129, 257, 65),
    (2, 31, 517, 203), (2, 333, 191, 1031), (70, 16, 24, 40),
)


def strides(problem: BatchedGemmProblem) -> tuple[int, int, int]:
    """Packed batches: each matrix follows the previous one."""
    return problem.M * problem.K, problem.K * problem.N, problem.M * problem.N


def make_inputs(problem: BatchedGemmProblem, seed: int, c_random: bool = False):
    """Fresh uniform [-1, 1) batches on the GPU; C0 random when beta != 0 (or asked), else NaN."""
    import cupy as cp

    b, M, N, K = problem.batch, problem.M, problem.N, problem.K
    rng = cp.random.default_rng(seed)
    A = rng.uniform(-1.0, 1.0, (b, M, K), dtype=cp.float32)
    B = rng.uniform(-1.0, 1.0, (b, K, N), dtype=cp.float32)
    if problem.beta != 0.0 or c_random:
        C0 = rng.uniform(-1.0, 1.0, (b, M, N), dtype=cp.float32)
    else:
        C0 = cp.full((b, M, N), cp.nan, dtype=cp.float32)
    return A, B, C0


def compare(C, A, B, C0, alpha: float, beta: float) -> Verdict:
    """Every matrix of the batch against its fp64 reference; the first failure, else the worst."""
    worst = None
    for i in range(A.shape[0]):
        v = compare_one(C[i], A[i], B[i], C0[i], alpha, beta)
        if not v.passed:
            return Verdict(False, v.rel_err, v.tol, v.worst_elem_ratio, v.nan_count, f"batch {i}: {v.reason}")
        if worst is None or v.rel_err > worst.rel_err:
            worst = v
    return worst


class BatchedRunner(PreparedImpl):
    def enqueue(self, problem: BatchedGemmProblem, A, B, C, stream) -> None:
        if self.compiled is None:
            self.impl.enqueue(problem, A, B, C, int(stream.handle))
            return
        from ..cuda.launch import launch_kernel

        sa, sb, sc = strides(problem)
        launch_kernel(self.compiled, self.impl.launch(problem, self.params), stream, np.int32(problem.M),
                      np.int32(problem.N), np.int32(problem.K), np.float32(problem.alpha), A.data.ptr, np.int64(sa),
                      B.data.ptr, np.int64(sb), np.float32(problem.beta), C.data.ptr, np.int64(sc),
                      np.int32(problem.batch))


def parse_batched(text: str, batch: int | None) -> tuple[int, int, int, int]:
    """'8x512' (batch x cube), 'BxMxNxK', or with --batch: 'N' / 'MxNxK' -> (batch, M, N, K)."""
    parts = text.lower().split("x")
    if batch is not None:
        if len(parts) in (2, 4):  # a batch in the size as well: which count was meant?
            raise BadArgumentError(f"size {text!r} gives a batch count, and so does --batch {batch}: give one "
                                   "(with --batch, sizes are N or MxNxK)")
        return (batch, *parse_shape(text))
    try:
        if len(parts) == 2:
            b, n = parse_shape(parts[0])[0], parse_shape(parts[1])[0]
            return b, n, n, n
        if len(parts) == 4:
            b, rest = parse_shape(parts[0])[0], parse_shape("x".join(parts[1:]))
            return (b, *rest)
    except BadArgumentError as exc:  # the size as given (0x512) named, beside the part that failed ('0')
        raise BadArgumentError(f"size {text!r}: {exc}") from None
    raise BadArgumentError(f"size {text!r}: bgemm sizes are BATCHxN or BATCHxMxNxK (or give --batch)")


class BgemmOp(GemmOp):
    runner_class = BatchedRunner
    make_inputs = staticmethod(make_inputs)
    check = staticmethod(lambda C, A, B, C0, p: compare(C, A, B, C0, p.alpha, p.beta))

    def make_problem(self, M, N, K, alpha, beta, dtype, args: ShapeArgs, batch: int = 1):
        return BatchedGemmProblem(M, N, K, alpha, beta, batch=batch)

    def problems(self, args: ShapeArgs) -> list:
        self.check_dtype(args.dtype)
        if args.one_gemm:
            (m, n, k), = gemm_shapes(args, None)
            return [BatchedGemmProblem(m, n, k, args.alpha, args.beta, batch=args.batch or 1)]
        if args.sizes:
            # 8x512,8x512: once, as GEMM sizes are
            shapes = list(dict.fromkeys(parse_batched(s, args.batch) for s in comma_items(args.sizes, "--sizes")))
        else:  # the default sizes (BATCHxN), each with --batch's count when it is given
            defaults = (parse_batched(s, None) for s in DEFAULT_SIZES.split(","))
            shapes = [(args.batch or b, m, n, k) for b, m, n, k in defaults]
        if not shapes:
            raise BadArgumentError("--sizes is empty")
        return [BatchedGemmProblem(m, n, k, args.alpha, args.beta, batch=b) for b, m, n, k in shapes]

    def sweep(self, args: ShapeArgs) -> list:
        if args.one_gemm:
            one = self.problems(args)[0]
            return [BatchedGemmProblem(one.M, one.N, one.K, a, b, batch=one.batch)
                    for a, b in ((1.0, 0.0), (args.alpha, args.beta))]
        return [BatchedGemmProblem(m, n, k, a, b_, batch=args.batch or b)  # --batch: every shape that many times
                for (b, m, n, k) in SWEEP_SHAPES for (a, b_) in self.sweep_scalars]

    def row_fields(self, point) -> dict:
        return {**super().row_fields(point), "extra": {"batch": point.problem.batch}}

    def family(self, impl_name: str) -> str:
        return "ladder"


# --- baselines --------------------------------------------------------------------------------

def _cublas_reason() -> str:
    import os

    if os.environ.get("NVIDIA_TF32_OVERRIDE", "") not in ("", "0"):
        return "NVIDIA_TF32_OVERRIDE is set: cuBLAS SGEMM would use TF32"
    return ""


def _cublas_enqueue(problem, A, B, C, handle: int) -> None:
    from ..cuda import cublas

    cublas.sgemm_strided_batched(problem.batch, problem.M, problem.N, problem.K, problem.alpha, A.data.ptr,
                                 B.data.ptr, problem.beta, C.data.ptr, handle)


def _torch_enqueue(problem, A, B, C, handle: int) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.cuda.stream(torch_stream(handle)):
        a, b, c = torch_views(A, B, C)
        if problem.alpha == 1.0 and problem.beta == 0.0:
            torch.bmm(a, b, out=c)
        else:  # baddbmm ignores C when beta == 0, so the NaN poison cannot leak in
            torch.baddbmm(c, a, b, beta=problem.beta, alpha=problem.alpha, out=c)


register(
    Baseline("cublas", "bgemm", "cuBLAS SgemmStridedBatched", "the vendor library's strided batched "
             "SGEMM, FP32 compute, TF32 off", _cublas_reason, _cublas_enqueue),
    Baseline("torch", "bgemm", "torch.bmm / torch.baddbmm", "PyTorch's batched matmul (cuBLAS), TF32 off",
             torch_reason, _torch_enqueue),
)

OP = BgemmOp("bgemm", "C[i] = alpha*A[i]@B[i] + beta*C[i] in fp32 over strided batches")
