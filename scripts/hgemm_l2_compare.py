"""Nsight Compute target: rung 5 at 4096^3 bf16 on the balanced 64 clusters, then on all 66 slots
(BALANCE = 0), then torch.mm with an fp32 C (cuBLAS), four launches each. What docs/tensor-cores.md's
session-22 comparison of L2 traffic and tensor-pipe use rests on:

    PYTHONPATH=src ncu --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,\\
lts__t_bytes.sum.per_second,lts__t_sectors_op_read.sum,\\
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \\
        --csv --page raw -k regex:"hgemm_persistent|sm90|gemm" --launch-skip 2 --launch-count 12 \\
        python3 scripts/hgemm_l2_compare.py

(ncu locks the clocks at base: compare the rows with each other, not with `gemmlab bench`.)
"""
from __future__ import annotations


def main() -> None:
    import cupy as cp
    import torch

    from gemmlab import registry
    from gemmlab.cuda.device import device, sync_or_raise
    from gemmlab.ops import hgemm_check as hv
    from gemmlab.ops.base import device_inputs
    from gemmlab.ops.hgemm import HgemmRunner
    from gemmlab.problem import GemmProblem

    problem = GemmProblem(4096, 4096, 4096, 1.0, 0.0, "bf16")
    A, B, _ = device_inputs(hv.make_inputs, problem, 3)
    C = cp.zeros((4096, 4096), cp.float32)
    stream = device().create_stream()
    for params in ({"BALANCE": 1}, {"BALANCE": 0}):
        runner = HgemmRunner(registry.get("persistent", "hgemm"), params, dtype="bf16")
        for _ in range(4):
            runner.enqueue(problem, A, B, C, stream)
        sync_or_raise(stream)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    for _ in range(4):
        torch.mm(a, b, out_dtype=torch.float32)
    torch.cuda.synchronize()


if __name__ == "__main__":
    import sys

    from gemmlab.errors import run_script

    sys.exit(run_script(main))
