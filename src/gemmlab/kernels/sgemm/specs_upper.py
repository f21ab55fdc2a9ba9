"""Specs of SGEMM rungs 7, 8, 9 and 11 (seed 001 kernels 7-9 and 11; seed 000's tuning grid).

Every kernel has rung 6's signature and row-major layout, is correct for every M, N, K >= 1
(zero-filled edge tiles, float4 only on 16-byte aligned in-bounds rows) and launches a 1-D
block per BM x BN tile of C, grid x over column tiles and y over row tiles. Constraints
mirror the kernels' static_asserts.
"""
from __future__ import annotations

from ...registry import Constraint, KernelSpec, Param, register
from .specs import VECTORIZE, _splits_tiles, _threads_2d, _tile_geometry


def _rung6_tile_constraints() -> tuple[Constraint, ...]:
    """Rung 6's static_asserts, which rungs 7 and 8 keep."""
    return (
        Constraint("TM must divide BM", lambda v: v["BM"] % v["TM"] == 0),
        Constraint("TN must divide BN", lambda v: v["BN"] % v["TN"] == 0),
        Constraint("BK, BN, TM and TN must be multiples of 4 (float4)",
                   lambda v: all(v[p] % 4 == 0 for p in ("BK", "BN", "TM", "TN"))),
        *_splits_tiles(_threads_2d, vector=4),
    )


BANK_LINEARIZE = KernelSpec(
    name="bank_linearize", op="sgemm", rung=7, title="Bank conflicts: linearised Bs",
    idea="Bs columns permuted so the thread columns' float4 chunks sit side by side: conflict-free LDS.128 of B",
    source="sgemm/07_bank_linearize.cu", entry="gemmlab::sgemm_bank_linearize", seed="001 kernel 7",
    params=VECTORIZE.params,
    constraints=_rung6_tile_constraints(),
    threads=_threads_2d, smem_bytes=lambda v: 4 * v["BK"] * (v["BM"] + v["BN"]),
    geometry=_tile_geometry(_threads_2d),
)


def _padding_smem(v) -> int:
    return 4 * v["BK"] * (v["BM"] + v["PAD"]) + 4 * v["BK"] * (v["BN"] + (v["BN"] // 32) * v["PAD"])


BANK_PADDING = KernelSpec(
    name="bank_padding", op="sgemm", rung=8, title="Bank conflicts: padded shared arrays",
    idea="As rows padded by PAD and PAD floats after every 32 columns of Bs (PAD % 4 == 0 keeps LDS.128)",
    source="sgemm/08_bank_padding.cu", entry="gemmlab::sgemm_bank_padding", seed="001 kernel 8",
    params=(*VECTORIZE.params,
            Param("PAD", 4, (4, 8, 12, 16), "floats of padding; a multiple of 4 (16-byte alignment), "
                                            "4 (or any PAD % 8 == 4) is conflict-free")),
    constraints=(*_rung6_tile_constraints(),
                 Constraint("PAD must be a multiple of 4 (16-byte aligned float4 shared accesses)",
                            lambda v: v["PAD"] % 4 == 0)),
    threads=_threads_2d, smem_bytes=_padding_smem,
    geometry=_tile_geometry(_threads_2d),
)

# ---- rungs 9 and 11: NUM_THREADS threads in a 16-column grid, several TM x TN sub-tiles each ----

# Seed 000's sweep (kernel9_tune.sh): the tuner searches exactly this grid.
_GRID_PARAMS = (
    Param("BM", 128, (64, 128, 256), "rows of C per block"),
    Param("BN", 128, (64, 128, 256), "columns of C per block"),
    Param("BK", 16, (8, 16, 32, 64), "K-tile staged in shared memory"),
    Param("TM", 8, (4, 8, 16, 32), "rows of one thread sub-tile"),
    Param("TN", 8, (4, 8, 16, 32), "columns of one thread sub-tile"),
    Param("NUM_THREADS", 256, (256,), "threads per block (16 columns x NUM_THREADS/16 rows)"),
)


def _threads(v) -> int:
    return v["NUM_THREADS"]


def _grid_constraints(loaders) -> tuple[Constraint, ...]:
    """The kernels' static_asserts; `loaders` is the number of threads that load one tile."""
    return (
        Constraint("loaders*4 must be a multiple of BK (seed 001)", lambda v: (loaders(v) * 4) % v["BK"] == 0),
        Constraint("loaders*4 must be a multiple of BN (seed 001)", lambda v: (loaders(v) * 4) % v["BN"] == 0),
        Constraint("BM*BK must be a multiple of 4*loaders (float4 A loads)",
                   lambda v: (v["BM"] * v["BK"]) % (4 * loaders(v)) == 0),
        Constraint("BN*BK must be a multiple of 4*loaders (float4 B loads)",
                   lambda v: (v["BN"] * v["BK"]) % (4 * loaders(v)) == 0),
        Constraint("NUM_THREADS must be a multiple of 16 (16-column thread grid)",
                   lambda v: v["NUM_THREADS"] % 16 == 0),
        Constraint("BM must be a multiple of TM*NUM_THREADS/16 (16*TM at 256 threads)",
                   lambda v: v["BM"] % (v["TM"] * (v["NUM_THREADS"] // 16)) == 0),
        Constraint("BN must be a multiple of 16*TN", lambda v: v["BN"] % (16 * v["TN"]) == 0),
        Constraint("BK, TM and TN must be multiples of 4 (float4)",
                   lambda v: all(v[p] % 4 == 0 for p in ("BK", "TM", "TN"))),
        Constraint("at most 128 accumulators per thread: BM*BN <= 128*NUM_THREADS "
                   "(256 spill ~20 KB of local memory per thread)",
                   lambda v: v["BM"] * v["BN"] <= 128 * v["NUM_THREADS"]),
    )


AUTOTUNED = KernelSpec(
    name="autotuned", op="sgemm", rung=9, title="Autotuned blocktiling",
    idea="BM, BN, BK, TM, TN, NUM_THREADS free (several sub-tiles per thread); float4, linearised Bs, padded As",
    source="sgemm/09_autotuned.cu", entry="gemmlab::sgemm_autotuned", seed="001 kernel 9, 000 sweep",
    params=_GRID_PARAMS,
    constraints=_grid_constraints(_threads),
    threads=_threads, smem_bytes=lambda v: 4 * v["BK"] * (v["BM"] + 4 + v["BN"]),
    geometry=_tile_geometry(_threads),
)

DOUBLE_BUFFERING = KernelSpec(
    name="double_buffering", op="sgemm", rung=11, title="Double buffering (half the block loads)",
    idea="two shared buffers per operand; one half of the block loads tile t+1 while the other computes tile t",
    source="sgemm/11_double_buffering.cu", entry="gemmlab::sgemm_double_buffering", seed="001 kernel 11",
    params=_GRID_PARAMS,
    constraints=(*_grid_constraints(lambda v: v["NUM_THREADS"] // 2),
                 Constraint("NUM_THREADS must be a multiple of 64 (each half whole warps)",
                            lambda v: v["NUM_THREADS"] % 64 == 0)),
    threads=_threads, smem_bytes=lambda v: 2 * 4 * v["BK"] * (v["BM"] + 4 + v["BN"]),
    geometry=_tile_geometry(_threads),
)

register(BANK_LINEARIZE, BANK_PADDING, AUTOTUNED, DOUBLE_BUFFERING)
