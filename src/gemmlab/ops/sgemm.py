"""The sgemm op: C = alpha * A @ B + beta * C in fp32, row-major contiguous A (MxK), B (KxN), C (MxN).

Kernels: gemmlab/kernels/sgemm/ (rungs 1-13 and the seeds' variants), signature
    (int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C[, float* W])
with a trailing split-K workspace W where the spec names a reduction kernel. Baselines: cuBLAS
(CuPy), torch.addmm and Triton (ops/sgemm_libraries.py).

Bounds (gemm_family's two tests), with u = 2^-24 the fp32 unit roundoff:
- normwise tol = max(1e-5, 2 * u * sqrt(K)): rounding errors of a K-term fp32 dot product with
  random signs grow like u * sqrt(K) (a random walk; about 4e-6 at K = 8192 in practice), so
  1e-5 holds with margin, and the bound widens past K ~ 7000 (where 2 u sqrt(K) reaches 1e-5);
- elementwise factor (K + 2) * u: the worst case of any summation order with FMA.
"""
from __future__ import annotations

from typing import Any, Mapping

import math

import numpy as np

from ..cuda.prepared import PreparedImpl
from ..kernels.sgemm import specs as _kernels  # noqa: F401  (registers the ladder)
from ..problem import GemmProblem
from . import sgemm_libraries as _libraries  # noqa: F401  (registers cuBLAS, torch, Triton)
from .gemm_family import SWEEP_SCALARS, SWEEP_SHAPES, GemmOp, Verdict, compare_gemm

U32 = 2.0 ** -24  # fp32 unit roundoff


def normwise_tolerance(K: int) -> float:
    return max(1e-5, 2.0 * U32 * math.sqrt(K))


def make_inputs(problem: GemmProblem, seed: int, c_random: bool = False):
    """Fresh uniform [-1, 1) fp32 inputs on the GPU; C0 random when beta != 0 (or asked), else NaN."""
    import cupy as cp

    rng = cp.random.default_rng(seed)
    A = rng.uniform(-1.0, 1.0, (problem.M, problem.K), dtype=cp.float32)
    B = rng.uniform(-1.0, 1.0, (problem.K, problem.N), dtype=cp.float32)
    if problem.beta != 0.0 or c_random:
        C0 = rng.uniform(-1.0, 1.0, (problem.M, problem.N), dtype=cp.float32)
    else:
        C0 = cp.full((problem.M, problem.N), cp.nan, dtype=cp.float32)
    return A, B, C0


def compare(C, A, B, C0, alpha: float, beta: float) -> Verdict:
    """Check C (fp32, device or host) against the fp64 reference computed from A, B, C0."""
    K = A.shape[1]
    return compare_gemm(C, A, B, C0, alpha, beta, to_f64=lambda x, xp: xp.asarray(x, dtype=xp.float64),
                        elementwise_factor=(K + 2) * U32, tol=normwise_tolerance(K))


def sweep_problems(shapes=SWEEP_SHAPES, scalars=SWEEP_SCALARS) -> list[GemmProblem]:
    return [GemmProblem(M, N, K, alpha, beta) for (M, N, K) in shapes for (alpha, beta) in scalars]


def splitk_reduce_launch(M: int, N: int):
    """The split-K reduction's geometry: 256 threads a block, enough blocks to cover C but no
    more than 8 per SM (grid-stride beyond that). Shared by the bench runner and the API."""
    from ..cuda.device import info
    from ..registry import Launch, cdiv

    return Launch((min(cdiv(M * N, 256), info().sm_count * 8), 1, 1), (256, 1, 1))


class GemmRunner(PreparedImpl):
    """An sgemm kernel compiled for the current device (or a baseline), ready to enqueue."""

    def __init__(self, impl: Any, params: Mapping[str, int] | None = None, arch: str | None = None):
        super().__init__(impl, params, arch)
        self.reduce = None
        self._workspace = None  # grown on demand; one per runner, so one stream at a time
        self._workspace_shape = None  # the shape of the last launch that used it
        if self.compiled is not None and impl.splitk_reduce is not None:
            from ..cuda.compile import compile_kernel

            self.reduce = compile_kernel(impl.splitk_reduce, arch=self.arch)

    def _workspace_ptr(self, problem: GemmProblem, floats: int, stream) -> int:
        """A workspace of at least `floats` whose stream-K flags are zero. Zeroed when allocated (a
        larger need gets a new zeroed buffer); split-K's planes are written before they are read
        and stream-K's kernel leaves its flags zero again, so the same shape never needs clearing.
        Cleared once more, in stream order, only when a stream-K launch of another shape reuses
        the buffer: the flags come first, one a tile, so a shape with more tiles finds some of
        them where the last shape kept partial tiles."""
        import cupy as cp

        if self._workspace is None or self._workspace.size < floats:
            self._workspace = cp.zeros(floats, dtype=cp.float32)
            cp.cuda.get_current_stream().synchronize()
        elif self._workspace_shape != problem.shape and self.impl.workspace is not None \
                and self.impl.workspace(problem, self.params) is not None:  # stream-K, not split-K planes
            cp.cuda.runtime.memsetAsync(self._workspace.data.ptr, 0, floats * 4, int(stream.handle))
        self._workspace_shape = problem.shape
        return self._workspace.data.ptr

    def _tensor_maps(self, problem: GemmProblem, A, B):
        """A kernel's tensor maps over A and B and its `maps` flag (1). Where tensor maps cannot
        describe them (rows not 16-byte multiples), stand-ins over a small buffer of our own,
        which the kernel does not read, and flag 0: it copies element by element."""
        from ..kernels.sgemm.specs import tma_ffma_boxes, tma_ffma_maps_fit
        from .hgemm_tma import tensor_map

        if tma_ffma_maps_fit(problem.M, problem.N, problem.K, A.data.ptr, B.data.ptr):
            (ra, ca, sa), (rb, cb, sb) = (tma_ffma_boxes(self.params)[k] for k in ("A", "B"))
            return (tensor_map(A, (ra, ca), sa), tensor_map(B, (rb, cb), sb)), 1
        if getattr(self, "_stand_in", None) is None:
            import cupy as cp

            self._stand_in = cp.zeros((1, 4), dtype=cp.float32)
        stand_in = tensor_map(self._stand_in, (1, 4), 0)
        return (stand_in, stand_in), 0

    def _enqueue_reduce(self, problem: GemmProblem, slices: int, c_ptr: int, stream) -> None:
        from ..cuda.launch import launch_kernel

        launch_kernel(self.reduce, splitk_reduce_launch(problem.M, problem.N), stream, np.int32(problem.M),
                      np.int32(problem.N), np.int32(slices), np.float32(problem.alpha), self._workspace.data.ptr,
                      np.float32(problem.beta), c_ptr)

    def enqueue(self, problem: GemmProblem, A, B, C, stream) -> None:
        """C = alpha*A@B + beta*C on `stream` (a cuda.core Stream); A, B, C are CuPy arrays."""
        if self.compiled is None:
            self.impl.enqueue(problem, A, B, C, int(stream.handle))
            return
        from ..cuda.launch import launch_gemm, launch_kernel

        geometry = self.impl.launch(problem, self.params)
        extra: tuple[int, ...] = ()
        slices = geometry.grid[2]
        if self.impl.takes_workspace:
            floats = self.impl.workspace_floats(problem, self.params)
            extra = (self._workspace_ptr(problem, floats, stream) if floats else 0,)
        if "tma_maps" in self.impl.tags:  # rung 15: tensor maps first, their flag last
            maps, flag = self._tensor_maps(problem, A, B)
            launch_kernel(self.compiled, geometry, stream, *maps, np.int32(problem.M), np.int32(problem.N),
                          np.int32(problem.K), np.float32(problem.alpha), A.data.ptr, B.data.ptr,
                          np.float32(problem.beta), C.data.ptr, *extra, np.int32(flag))
        else:
            launch_gemm(self.compiled, geometry, stream, problem.M, problem.N, problem.K, problem.alpha,
                        A.data.ptr, B.data.ptr, problem.beta, C.data.ptr, *extra)
        if self.reduce is not None and slices > 1:
            self._enqueue_reduce(problem, slices, C.data.ptr, stream)


class SgemmOp(GemmOp):
    runner_class = GemmRunner
    make_inputs = staticmethod(make_inputs)
    check = staticmethod(lambda C, A, B, C0, p: compare(C, A, B, C0, p.alpha, p.beta))

    def batch_prefix(self, dtype: str) -> str:
        return "bench_fp32"


OP = SgemmOp("sgemm", "C = alpha*A@B + beta*C in fp32 (CUDA cores; TF32 off)")
