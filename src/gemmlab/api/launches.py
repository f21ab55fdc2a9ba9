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


def prepared(ck, geometry, signature) -> PreparedLaunch:
    """A PreparedLaunch of compiled kernel `ck` with `geometry` (dynamic shared memory allowed)."""
    if geometry.shmem > STATIC_SMEM_LIMIT:
        allow_dynamic_smem(ck, geometry.shmem)
    return PreparedLaunch(int(ck.kernel().handle), ck.spec.name, geometry.grid, geometry.block, geometry.shmem,
                          signature, geometry.cluster)
