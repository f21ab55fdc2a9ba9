"""Specs of the SGEMM ladder (seed 001, rungs 1-6): parameters, constraints, geometry.

Every kernel has the signature
    (int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C)
with row-major contiguous A (MxK), B (KxN), C (MxN). Constraints mirror the kernels'
static_asserts so a bad configuration is refused before NVRTC runs.
"""
from __future__ import annotations

from ...problem import GemmProblem
from ...registry import Constraint, KernelSpec, Launch, Param, cdiv, is_pow2, register

P2 = (8, 16, 32, 64, 128, 256)


def _naive_geometry(p: GemmProblem, v) -> Launch:
    return Launch(grid=(cdiv(p.M, v["BLOCK"]), cdiv(p.N, v["BLOCK"]), 1), block=(v["BLOCK"], v["BLOCK"], 1))


NAIVE = KernelSpec(
    name="naive", op="sgemm", rung=1, title="Naive",
    idea="one thread per output; threadIdx.x walks rows, so no access is coalesced",
    source="sgemm/01_naive.cu", entry="gemmlab::sgemm_naive", seed="001 kernel 1",
    params=(Param("BLOCK", 32, (8, 16, 32), "threads per block side"),),
    constraints=(Constraint("BLOCK must be a power of two", lambda v: is_pow2(v["BLOCK"])),),
    threads=lambda v: v["BLOCK"] ** 2,
    geometry=_naive_geometry,
)



def _square_geometry(p: GemmProblem, v) -> Launch:
    """A 1-D block of BLOCK^2 threads per BLOCK x BLOCK tile; x over columns of C."""
    return Launch(grid=(cdiv(p.N, v["BLOCK"]), cdiv(p.M, v["BLOCK"]), 1), block=(v["BLOCK"] ** 2, 1, 1))


COALESCING = KernelSpec(
    name="coalescing", op="sgemm", rung=2, title="Global memory coalescing",
    idea="consecutive threads take consecutive columns: B loads and C stores coalesce",
    source="sgemm/02_coalescing.cu", entry="gemmlab::sgemm_coalescing", seed="001 kernel 2",
    params=(Param("BLOCK", 32, (8, 16, 32), "tile side; the block has BLOCK^2 threads"),),
    constraints=(Constraint("BLOCK must be a power of two", lambda v: is_pow2(v["BLOCK"])),),
    threads=lambda v: v["BLOCK"] ** 2,
    geometry=_square_geometry,
)

SMEM_BLOCKING = KernelSpec(
    name="smem_blocking", op="sgemm", rung=3, title="Shared-memory cache blocking",
    idea="stage BLOCKxBLOCK tiles of A and B in shared memory; each global element is read once per block",
    source="sgemm/03_smem_blocking.cu", entry="gemmlab::sgemm_smem_blocking", seed="001 kernel 3",
    params=(Param("BLOCK", 32, (8, 16, 32), "tile side; the block has BLOCK^2 threads"),),
    constraints=(Constraint("BLOCK must be a power of two", lambda v: is_pow2(v["BLOCK"])),),
    threads=lambda v: v["BLOCK"] ** 2,
    smem_bytes=lambda v: 2 * 4 * v["BLOCK"] ** 2,
    geometry=_square_geometry,
)

register(NAIVE, COALESCING, SMEM_BLOCKING)

from . import variants  # noqa: E402,F401  (seed 002/004 variants register themselves)
