"""Specs of the batched SGEMM ladder (strided batches, fp32).

Every kernel has the signature
    (int M, int N, int K, float alpha, const float* A, long long strideA, const float* B,
     long long strideB, float beta, float* C, long long strideC, int batch)
with each A[i] (MxK), B[i] (KxN), C[i] (MxN) row-major and contiguous, matrix i of an operand
starting i * stride elements after its base (0: every batch reads the same matrix).
Rung 1 is SGEMM rung 12's kernel with the batch on the grid's z axis, so it takes rung 12's
parameters, constraints and shared-memory rule (reused from kernels/sgemm/specs.py).
"""
from __future__ import annotations

from dataclasses import replace

from ...registry import Launch, cdiv, register
from ..sgemm.specs import ASYNC_PIPELINE, _pipeline_smem

# The argument order of every bgemm kernel (strides in elements, 64-bit; see the docstring).
BGEMM_SIGNATURE = ("(int M, int N, int K, float alpha, const float* A, long long strideA, const float* B, "
                   "long long strideB, float beta, float* C, long long strideC, int batch)")

MAX_GRID_Z = 65535  # gridDim.z's limit; the kernel loops over the batches past it


def _batched_grid(p, v) -> Launch:
    return Launch(grid=(cdiv(p.N, v["BN"]), cdiv(p.M, v["BM"]), min(p.batch, MAX_GRID_Z)), block=(v["NT"], 1, 1),
                  shmem=_pipeline_smem(v))


BATCHED_PIPELINE = replace(
    ASYNC_PIPELINE, name="batched_pipeline", op="bgemm", rung=1, title="Batch on the grid's z axis",
    idea="one launch for the whole batch: blockIdx.z picks the matrix; rung 12's cp.async warptile loop per tile",
    source="bgemm/01_batched_pipeline.cu", entry="gemmlab::bgemm_batched_pipeline", seed="", same_as=None,
    geometry=_batched_grid)

register(BATCHED_PIPELINE)
