"""One interface over the hgemm kernels and baselines: compile once per input dtype, enqueue.

A and B are CuPy arrays (float16 for fp16, uint16 bits for bf16, float32 for tf32), C is
float32. The kernel's input types (KernelSpec.dtypes), its shape rule (problem_check) and the
16-byte alignment of every pointer are checked before a launch, each refused as one
BadArgumentError line. The TMA rungs (tag "tma") launch through gemmlab.hgemm.tma.
"""
from __future__ import annotations

from typing import Any, Mapping

from ..errors import BadArgumentError
from ..kernels.hgemm.specs import dtype_flag
from ..problem import GemmProblem
from ..runner import PreparedImpl


def refusal(impl: Any, problem: GemmProblem) -> str:
    """Why `impl` cannot run `problem` ("" when it can)."""
    dtypes = getattr(impl, "dtypes", ()) or ()
    if dtypes and problem.dtype not in dtypes:
        return f"{impl.name} takes {' or '.join(dtypes)} inputs, not {problem.dtype}"
    check = getattr(impl, "problem_check", None)
    reason = check(problem) if check is not None else ""
    return f"{impl.name} {reason}" if reason else ""


class HgemmRunner(PreparedImpl):
    """An hgemm kernel compiled for the current device and one input dtype (or a baseline)."""

    def __init__(self, impl: Any, params: Mapping[str, int] | None = None, dtype: str = "fp16",
                 arch: str | None = None):
        # DTYPE is the dtype's template flag, not a tuned parameter: set it where a kernel has one
        if impl.kind == "kernel" and any(p.name == "DTYPE" for p in impl.params):
            params = {**(params or {}), "DTYPE": dtype_flag(dtype)}
        super().__init__(impl, params, arch)
        self.dtype = dtype

    def check(self, problem: GemmProblem, A, B, C) -> None:
        """Refuse, as one line, what the kernel cannot take."""
        if problem.dtype != self.dtype:
            raise BadArgumentError(f"{self.name} was prepared for {self.dtype}, the problem is {problem.dtype}")
        reason = refusal(self.impl, problem)
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
            from .tma import launch_tma

            launch_tma(self, problem, A, B, C, stream)
        elif self.compiled is not None:
            from ..cuda.launch import launch_gemm

            geometry = self.impl.launch(problem, self.params)
            launch_gemm(self.compiled, geometry, stream, problem.M, problem.N, problem.K, problem.alpha,
                        A.data.ptr, B.data.ptr, problem.beta, C.data.ptr)
        else:
            self.impl.enqueue(problem, A, B, C, int(stream.handle))
