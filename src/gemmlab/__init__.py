"""gemmlab: write, verify, time, tune and explain GPU GEMM and reduction kernels.

    import gemmlab
    C = gemmlab.sgemm(A, B)                  # CuPy arrays or torch tensors, float32
    s = gemmlab.reduce_sum(x)                # the fp32 sum of a 1-D CUDA array
    D = gemmlab.hgemm(A16, B16)              # fp16/bf16 inputs on tensor cores, fp32 C
    gemmlab.list_kernels()                   # the ladder
"""
from __future__ import annotations

from .api import sgemm
from .errors import (BadArgumentError, CompileError, ConstraintError, GemmlabError, LaunchError, NoGPUError,
                     OutOfMemoryError, UnknownKernelError, VerificationError)
from .hgemm.api import hgemm
from .problem import GemmProblem
from .reduce.api import reduce_sum

__version__ = "0.1.0"


def list_kernels(op: str | None = "sgemm") -> list[str]:
    """Names of every registered kernel and baseline, in ladder order."""
    from .registry import all_impls

    return [impl.name for impl in all_impls(op)]


__all__ = ["sgemm", "hgemm", "reduce_sum", "list_kernels", "GemmProblem", "GemmlabError", "BadArgumentError", "UnknownKernelError",
           "ConstraintError", "NoGPUError", "CompileError", "OutOfMemoryError", "LaunchError", "VerificationError"]
