"""One interface over kernels and baselines: prepare once, then enqueue a GEMM on a stream."""
from __future__ import annotations

from typing import Any, Mapping

from .cuda.compile import CompiledKernel, Resources, compile_kernel
from .errors import NoGPUError
from .problem import GemmProblem


class PreparedImpl:
    """What every op's runner starts from: a kernel compiled for this device (`compiled`,
    its resolved `params`), or a baseline checked to be usable."""

    def __init__(self, impl: Any, params: Mapping[str, int] | None = None, arch: str | None = None):
        self.impl = impl
        self.compiled: CompiledKernel | None = None
        self.params: dict = {}
        if impl.kind == "kernel":
            self.arch = impl.arch_for(arch or _device_arch())
            self.compiled = compile_kernel(impl, params, arch=self.arch)
            self.params = dict(self.compiled.params)
        else:
            reason = impl.unavailable_reason()
            if reason:
                raise NoGPUError(f"{impl.name} is unavailable: {reason}")

    @property
    def name(self) -> str:
        return self.impl.name

    @property
    def resources(self) -> Resources | None:
        return self.compiled.resources if self.compiled else None


def _device_arch() -> str:
    from .cuda.device import info

    return info().arch


class GemmRunner(PreparedImpl):
    """A kernel compiled for the current device (or a baseline), ready to enqueue."""

    def __init__(self, impl: Any, params: Mapping[str, int] | None = None, arch: str | None = None):
        super().__init__(impl, params, arch)
        self.reduce: CompiledKernel | None = None
        self._workspace = None  # grown on demand; one per runner, so one stream at a time
        if self.compiled is not None and impl.splitk_reduce is not None:
            self.reduce = compile_kernel(impl.splitk_reduce, arch=self.arch)

    def _workspace_ptr(self, floats: int) -> int:
        import cupy as cp

        if self._workspace is None or self._workspace.size < floats:
            self._workspace = cp.empty(floats, dtype=cp.float32)
            cp.cuda.get_current_stream().synchronize()
        return self._workspace.data.ptr

    def _enqueue_reduce(self, problem: GemmProblem, slices: int, C, stream) -> None:
        import numpy as np

        from .cuda.device import info
        from .cuda.launch import launch_kernel
        from .registry import Launch, cdiv

        blocks = min(cdiv(problem.M * problem.N, 256), info().sm_count * 8)
        launch_kernel(self.reduce, Launch((blocks, 1, 1), (256, 1, 1)), stream, np.int32(problem.M),
                      np.int32(problem.N), np.int32(slices), np.float32(problem.alpha), self._workspace.data.ptr,
                      np.float32(problem.beta), C.data.ptr)

    def enqueue(self, problem: GemmProblem, A, B, C, stream) -> None:
        """C = alpha*A@B + beta*C on `stream` (a cuda.core Stream); A, B, C are CuPy arrays."""
        if self.compiled is not None:
            from .cuda.launch import launch_gemm

            geometry = self.impl.launch(problem, self.params)
            extra: tuple[int, ...] = ()
            slices = geometry.grid[2]
            if self.reduce is not None:
                extra = (self._workspace_ptr(slices * problem.M * problem.N) if slices > 1 else 0,)
            launch_gemm(self.compiled, geometry, stream, problem.M, problem.N, problem.K, problem.alpha,
                        A.data.ptr, B.data.ptr, problem.beta, C.data.ptr, *extra)
            if self.reduce is not None and slices > 1:
                self._enqueue_reduce(problem, slices, C, stream)
        else:
            self.impl.enqueue(problem, A, B, C, int(stream.handle))
