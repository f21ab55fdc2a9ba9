"""What the pointer-level executors share (api/executors.py, api/tma_executors.py): the FastGemm
interface and prepared(), a compiled kernel bound to one launch configuration."""
from __future__ import annotations

from ..cuda.launch import STATIC_SMEM_LIMIT, allow_dynamic_smem
from ..cuda.launcher import PreparedLaunch
from .operands import Operand


class FastGemm:
    """What the pointer-level GEMM executors share: `run(a, b, c, alpha, beta, stream)` takes raw
    device pointers; `run_operands` (the generic entry every executor has) unwraps Operands."""

    fast = True

    def run_operands(self, a: Operand, b: Operand, c: Operand, alpha: float, beta: float, stream: int) -> None:
        self.run(a.ptr, b.ptr, c.ptr, alpha, beta, stream)


def zeroed_workspace(count: int, dtype: str = "float32"):
    """A zeroed workspace that an executor owns (split-K and stream-K flags, a reduction's
    counters: they must start at zero, and the kernels leave them so). Its clearing is finished before this returns, so a first launch on any stream - a torch side
    stream does not wait for CuPy's - finds it zero; under a CuPy stream capture the clearing is
    captured on the same stream instead, ahead of the kernel."""
    import cupy as cp

    buf = cp.zeros(count, dtype=dtype)
    stream = cp.cuda.get_current_stream()
    if not stream.is_capturing():
        stream.synchronize()
    return buf


def prepared(ck, geometry, signature) -> PreparedLaunch:
    """A PreparedLaunch of compiled kernel `ck` with `geometry` (dynamic shared memory allowed)."""
    if geometry.shmem > STATIC_SMEM_LIMIT:
        allow_dynamic_smem(ck, geometry.shmem)
    return PreparedLaunch(int(ck.kernel().handle), ck.spec.name, geometry.grid, geometry.block, geometry.shmem,
                          signature, geometry.cluster)
