"""gemmlab: write, verify, time, tune and explain GPU GEMM and reduction kernels.

    import gemmlab
    C = gemmlab.sgemm(A, B)                  # CuPy arrays or torch tensors, float32
    D = gemmlab.hgemm(A16, B16)              # fp16/bf16 inputs on tensor cores, fp32 C
    E = gemmlab.bgemm(A3, B3)                # strided batches of fp32 GEMMs (torch.bmm's layout)
    s = gemmlab.reduce_sum(x)                # the fp32 sum of a CUDA array
    p = gemmlab.Matmul(A, B); p.execute()    # a plan: prepared once, a few microseconds per execute
    gemmlab.explain(A, B)                    # which implementation runs, and the measurement why
    gemmlab.list_kernels("hgemm")            # a ladder
"""
from __future__ import annotations

from .api import Matmul, Sum, bgemm, explain, hgemm, reduce_sum, register_torch_ops, sgemm, use_tuning
from .errors import (BadArgumentError, CompileError, ConstraintError, GemmlabError, LaunchError, NoGPUError,
                     OutOfMemoryError, UnknownKernelError, VerificationError)
from .problem import BatchedGemmProblem, GemmProblem, ReduceProblem

__version__ = "0.1.0"


def list_kernels(op: str | None = "sgemm") -> list[str]:
    """Names of `op`'s kernels and baselines, in ladder order; op=None: every op's, each name once
    (cublas serves several). An op that does not exist is a BadArgumentError, not an empty list."""
    from .ops import names
    from .registry import all_impls

    if op is not None and op not in names():
        raise BadArgumentError(f"op {op!r}: choose one of {', '.join(names())}, or None for every op")
    return list(dict.fromkeys(impl.name for impl in all_impls(op)))


__all__ = ["sgemm", "hgemm", "bgemm", "reduce_sum", "Matmul", "Sum", "explain", "use_tuning", "register_torch_ops",
           "list_kernels", "GemmProblem", "BatchedGemmProblem",
           "ReduceProblem", "GemmlabError", "BadArgumentError", "UnknownKernelError", "ConstraintError", "NoGPUError",
           "CompileError", "OutOfMemoryError", "LaunchError", "VerificationError"]
