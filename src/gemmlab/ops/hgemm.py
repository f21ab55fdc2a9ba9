"""The hgemm op: C = alpha * A @ B + beta * C on tensor cores, A and B fp16 or bf16 (or fp32 read
as tf32), fp32 accumulation, fp32 C.

Arrays: A and B are CuPy arrays (float16 for fp16, uint16 bits for bf16, float32 for tf32), C is
float32. The kernel's input types (KernelSpec.dtypes), its shape rule (problem_check) and the
16-byte alignment of every pointer are checked before a launch, each refused as one
BadArgumentError line. The TMA rungs (tag "tma") launch through ops/hgemm_tma.py. Bounds and
input rounding: ops/hgemm_check.py. Baseline: cuBLAS through torch.mm (ops/hgemm_libraries.py).
"""
from __future__ import annotations

from typing import Any, Mapping

from .. import registry
from ..cuda.prepared import PreparedImpl
from ..errors import BadArgumentError
from ..kernels.hgemm import specs as _kernels
from ..problem import GemmProblem
from . import hgemm_libraries as _libraries  # noqa: F401  (registers cuBLAS)
from .base import device_inputs
from .gemm_family import GemmOp, run_and_compare
from .hgemm_check import ALIGNED_SHAPES, DTYPES, SWEEP_SHAPES, compare, make_inputs

DEFAULT_HGEMM = "mma_sync"  # rung 2: the fastest before Hopper (sm_80 and up)
FALLBACK_HGEMM = "wmma"  # takes any shape: impl=None uses it where rung 2 refuses the shape
HOPPER_HGEMM = "persistent"  # rung 5 on sm_90: any shape, the fastest measured (docs/tensor-cores.md)
TF32_HGEMM = "tf32_wgmma"  # fp32 inputs: rung 6 (sm_90 only)


def hgemm_bytes(p: GemmProblem) -> int:
    """A and B read once (2 bytes an element, 4 for tf32), C written once in fp32 (and read when
    beta != 0)."""
    item = 4 if p.dtype == "tf32" else 2
    return item * (p.M * p.K + p.K * p.N) + 4 * p.M * p.N * (2 if p.beta != 0.0 else 1)


class HgemmRunner(PreparedImpl):
    """An hgemm kernel compiled for the current device and one input dtype (or a baseline)."""

    def __init__(self, impl: Any, params: Mapping[str, int] | None = None, dtype: str = "fp16",
                 arch: str | None = None):
        params = {**(params or {}), **OP.fixed_params(impl, dtype)}
        super().__init__(impl, params, arch)
        self.dtype = dtype

    def check(self, problem: GemmProblem, A, B, C) -> None:
        """Refuse, as one line, what the kernel cannot take."""
        if problem.dtype != self.dtype:
            raise BadArgumentError(f"{self.name} was prepared for {self.dtype}, the problem is {problem.dtype}")
        reason = OP.refusal(self.impl, problem)
        if reason:
            raise BadArgumentError(reason)
        if self.compiled is not None:
            for what, x in (("A", A), ("B", B), ("C", C)):
                if x.data.ptr % 16:
                    raise BadArgumentError(f"{self.name} needs 16-byte aligned arrays; {what} is not")

    def enqueue(self, problem: GemmProblem, A, B, C, stream) -> None:
        """C = alpha*A@B + beta*C on `stream` (a cuda.core Stream)."""
        self.check(problem, A, B, C)
        if self.compiled is not None and "tma" in self.impl.tags:
            from .hgemm_tma import launch_tma

            launch_tma(self, problem, A, B, C, stream)
        elif self.compiled is not None:
            from ..cuda.launch import launch_gemm

            geometry = self.impl.launch(problem, self.params)
            launch_gemm(self.compiled, geometry, stream, problem.M, problem.N, problem.K, problem.alpha,
                        A.data.ptr, B.data.ptr, problem.beta, C.data.ptr)
        else:
            self.impl.enqueue(problem, A, B, C, int(stream.handle))


def refusal(impl: Any, problem: GemmProblem) -> str:
    """Why `impl` cannot run `problem` ("" when it can)."""
    return OP.refusal(impl, problem)


def choose_impl(impl: str | None, problem: GemmProblem, arch: str | None = None) -> str:
    """impl as named; None: rung 5 (16-bit) or 6 (tf32) on Hopper, else rung 2, or rung 1 where
    rung 2 refuses the shape."""
    if impl is not None:
        return impl
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


def _zeros_c(problem: GemmProblem, A, B):
    import cupy as cp

    return A, B, cp.zeros((problem.M, problem.N), dtype=cp.float32)


class HgemmOp(GemmOp):
    sweep_shapes = SWEEP_SHAPES + ALIGNED_SHAPES
    make_inputs = staticmethod(lambda problem, seed, c_random=False: make_inputs(problem, seed))
    check = staticmethod(lambda C, A, B, C0, p: compare(C, A, B, C0, p.alpha, p.beta, p.dtype))

    def fixed_params(self, impl, dtype: str) -> dict[str, int]:
        # DTYPE is the dtype's template flag, not a tuned parameter: set where a kernel has one
        if getattr(impl, "kind", None) == "kernel" and any(p.name == "DTYPE" for p in impl.params):
            return {"DTYPE": _kernels.dtype_flag(dtype)}
        return {}

    def prepare(self, impl, params, dtype):
        return HgemmRunner(impl, params, dtype)

    def default_impl(self, problem) -> str:
        return choose_impl(None, problem)

    def bytes_moved(self, point) -> int:
        return hgemm_bytes(point.problem)

    def timing_inputs(self, problem, seed):
        return device_inputs(lambda: _zeros_c(problem, *make_inputs(problem, seed)[:2]))

    def verify(self, runner, problem, stream, seed, host_data=False, special=True):
        if not host_data:
            return super().verify(runner, problem, stream, seed)
        import cupy as cp  # made by NumPy and copied: no CuPy kernel runs (sanitizer runs)
        import numpy as np

        inputs = device_inputs(lambda: tuple(cp.asarray(x) for x in make_inputs(problem, seed, xp=np)))
        return run_and_compare(runner, problem, inputs, stream, lambda C, A, B, C0: self.check(C, A, B, C0, problem))

    def header(self, dtype: str) -> tuple[str, ...]:
        if dtype == "tf32":
            return ("hgemm: fp32 inputs multiplied as tf32 (lower precision than SGEMM), fp32 accumulation, "
                    "fp32 output",)
        return (f"hgemm: {dtype} inputs, fp32 accumulation, fp32 output",)

    def batch_prefix(self, dtype: str) -> str:
        return f"bench_hgemm_{dtype}"


OP = HgemmOp("hgemm", "C = alpha*A@B + beta*C on tensor cores: fp16/bf16 (or tf32) inputs, fp32 accumulate and C",
             DTYPES)
