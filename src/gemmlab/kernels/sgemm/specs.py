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



def _tile_geometry(threads):
    """Grid x over column tiles (BN), y over row tiles (BM); a 1-D block."""
    def geometry(p: GemmProblem, v) -> Launch:
        return Launch(grid=(cdiv(p.N, v["BN"]), cdiv(p.M, v["BM"]), 1), block=(threads(v), 1, 1))
    return geometry


def _threads_1d(v) -> int:
    return v["BM"] * v["BN"] // v["TM"]


def _threads_2d(v) -> int:
    return (v["BM"] // v["TM"]) * (v["BN"] // v["TN"])


def _tile_smem(v) -> int:
    return 4 * v["BK"] * (v["BM"] + v["BN"])


def _splits_tiles(threads, vector: int = 1) -> tuple[Constraint, ...]:
    return (
        Constraint(f"threads must split the A tile (BM*BK/{vector}) evenly",
                   lambda v: (v["BM"] * v["BK"] // vector) % threads(v) == 0),
        Constraint(f"threads must split the B tile (BK*BN/{vector}) evenly",
                   lambda v: (v["BK"] * v["BN"] // vector) % threads(v) == 0),
    )


BLOCKTILING_1D = KernelSpec(
    name="blocktiling_1d", op="sgemm", rung=4, title="1D blocktiling",
    idea="each thread computes TM outputs of a column; one shared B load feeds TM FMAs",
    source="sgemm/04_blocktiling_1d.cu", entry="gemmlab::sgemm_blocktiling_1d", seed="001 kernel 4",
    params=(Param("BM", 64, (32, 64, 128)), Param("BN", 64, (32, 64, 128)),
            Param("BK", 8, (4, 8, 16, 32)), Param("TM", 8, (4, 8, 16))),
    constraints=(Constraint("TM must divide BM", lambda v: v["BM"] % v["TM"] == 0),
                 *_splits_tiles(_threads_1d)),
    threads=_threads_1d, smem_bytes=_tile_smem, geometry=_tile_geometry(_threads_1d),
)

BLOCKTILING_2D = KernelSpec(
    name="blocktiling_2d", op="sgemm", rung=5, title="2D blocktiling",
    idea="each thread computes a TMxTN outer product from registers: TM+TN shared loads per TM*TN FMAs",
    source="sgemm/05_blocktiling_2d.cu", entry="gemmlab::sgemm_blocktiling_2d", seed="001 kernel 5",
    params=(Param("BM", 128, (64, 128, 256)), Param("BN", 128, (64, 128, 256)),
            Param("BK", 8, (8, 16, 32)), Param("TM", 8, (4, 8, 16)), Param("TN", 8, (4, 8, 16))),
    constraints=(Constraint("TM must divide BM", lambda v: v["BM"] % v["TM"] == 0),
                 Constraint("TN must divide BN", lambda v: v["BN"] % v["TN"] == 0),
                 *_splits_tiles(_threads_2d)),
    threads=_threads_2d, smem_bytes=_tile_smem, geometry=_tile_geometry(_threads_2d),
)

VECTORIZE = KernelSpec(
    name="vectorize", op="sgemm", rung=6, title="Vectorised float4 access, A transposed in smem",
    idea="16-byte global loads and stores; A stored transposed so both fragments load as LDS.128",
    source="sgemm/06_vectorize.cu", entry="gemmlab::sgemm_vectorize", seed="001 kernel 6",
    params=(Param("BM", 128, (64, 128, 256)), Param("BN", 128, (64, 128, 256)),
            Param("BK", 8, (8, 16, 32)), Param("TM", 8, (4, 8, 16)), Param("TN", 8, (4, 8, 16))),
    constraints=(Constraint("TM must divide BM", lambda v: v["BM"] % v["TM"] == 0),
                 Constraint("TN must divide BN", lambda v: v["BN"] % v["TN"] == 0),
                 Constraint("BK, BN, TM and TN must be multiples of 4 (float4)",
                            lambda v: all(v[p] % 4 == 0 for p in ("BK", "BN", "TM", "TN"))),
                 *_splits_tiles(_threads_2d, vector=4)),
    threads=_threads_2d, smem_bytes=_tile_smem, geometry=_tile_geometry(_threads_2d),
)

register(NAIVE, COALESCING, SMEM_BLOCKING, BLOCKTILING_1D, BLOCKTILING_2D, VECTORIZE)

from . import variants  # noqa: E402,F401  (seed 002/004 variants register themselves)
from . import specs_upper  # noqa: E402,F401  (rungs 7-9 and 11: bank conflicts, autotuned, double buffering)
from . import specs_top  # noqa: E402,F401  (rungs 10, 12, 13: warptiling, cp.async pipelines, Hopper)
