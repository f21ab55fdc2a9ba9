"""One interface over kernels and baselines: prepare once, then enqueue a GEMM on a stream."""
from __future__ import annotations

from typing import Any, Mapping

from .cuda.compile import CompiledKernel, Resources, compile_kernel
from .errors import NoGPUError
from .problem import GemmProblem


class GemmRunner:
    """A kernel compiled for the current device (or a baseline), ready to enqueue."""

    def __init__(self, impl: Any, params: Mapping[str, int] | None = None, arch: str | None = None):
        self.impl = impl
        self.compiled: CompiledKernel | None = None
        if impl.kind == "kernel":
            if arch is None:
                from .cuda.device import info

                arch = info().arch
            self.compiled = compile_kernel(impl, params, arch=arch)
            self.params = dict(self.compiled.params)
        else:
            reason = impl.unavailable_reason()
            if reason:
                raise NoGPUError(f"{impl.name} is unavailable: {reason}")
            self.params = {}

    @property
    def name(self) -> str:
        return self.impl.name

    @property
    def resources(self) -> Resources | None:
        return self.compiled.resources if self.compiled else None

    def enqueue(self, problem: GemmProblem, A, B, C, stream) -> None:
        """C = alpha*A@B + beta*C on `stream` (a cuda.core Stream); A, B, C are CuPy arrays."""
        if self.compiled is not None:
            from .cuda.launch import launch_gemm

            launch_gemm(self.compiled, self.impl.launch(problem, self.params), stream, problem.M, problem.N,
                        problem.K, problem.alpha, A.data.ptr, B.data.ptr, problem.beta, C.data.ptr)
        else:
            self.impl.enqueue(problem, A, B, C, int(stream.handle))
