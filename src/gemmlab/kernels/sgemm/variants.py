"""Seed 002 and seed 004 SGEMM kernels, outside the rung ladder (rung=None).

Seed 002: "tiled", "tiled_rb1x4", "tiled_rb2x4" - one template, s2_tiled_rb.cu.
Seed 004 (SGEMM section): Baseline (rung 2's kernel), Shared_memory and Using Float4
(points of s2_tiled_rb.cu), Increase Work Per Thread (s4_strided.cu), Register Outer
Product (s4_outer4x4.cu), A Shared Memory Transpose (s4_smem_transpose.cu).

Every grid has x over column tiles (cdiv(N, BN)) and y over row tiles (cdiv(M, BM)).
Constraints mirror the kernels' static_asserts; the thread count (<= 1024) and the static
shared memory (<= 48 KiB) are checked through `threads` and `smem_bytes`.
"""
from __future__ import annotations

from ...problem import GemmProblem
from ...registry import Constraint, KernelSpec, Launch, Param, cdiv, register
from .specs import COALESCING


def _positive(*names: str) -> Constraint:
    return Constraint(f"{', '.join(names)} must be >= 1", lambda v: all(v[n] >= 1 for n in names))


def _tile_launch(p: GemmProblem, bm: int, bn: int, block: tuple[int, int, int]) -> Launch:
    return Launch(grid=(cdiv(p.N, bn), cdiv(p.M, bm), 1), block=block)


# ---- seed 002: tiled + register blocking (RM x RN contiguous outputs per thread) ----

TILED = KernelSpec(
    name="tiled", op="sgemm", title="Shared-memory tiling (seed 002)",
    idea="TSxTS threads stage A and B tiles in shared memory; each thread computes RMxRN contiguous outputs",
    source="sgemm/s2_tiled_rb.cu", entry="gemmlab::sgemm_tiled_rb", seed="002 tiled",
    params=(
        Param("TS", 16, (8, 16, 32), "threads per block side; blockDim = (TS, TS)"),
        Param("BK", 16, (4, 8, 16, 32), "K-tile staged in shared memory per step"),
        Param("RM", 1, (1, 2, 4), "rows of C per thread (contiguous); BM = TS*RM"),
        Param("RN", 1, (1, 2, 4, 8), "columns of C per thread (contiguous); BN = TS*RN"),
        Param("VEC", 1, (1, 4), "global load width: 1 scalar, 4 float4 where aligned (A only when BK % 4 == 0)"),
    ),
    constraints=(
        _positive("TS", "BK", "RM", "RN"),
        Constraint("VEC (global load width) must be 1 or 4", lambda v: v["VEC"] in (1, 4)),
        Constraint("VEC=4 needs TS*RN % 4 == 0 (float4 B-tile rows)",
                   lambda v: v["VEC"] == 1 or (v["TS"] * v["RN"]) % 4 == 0),
    ),
    threads=lambda v: v["TS"] ** 2,
    smem_bytes=lambda v: 4 * v["BK"] * v["TS"] * (v["RM"] + v["RN"]),
    block_tile=lambda v: (v["TS"] * v["RM"], v["TS"] * v["RN"]),
    geometry=lambda p, v: _tile_launch(p, v["TS"] * v["RM"], v["TS"] * v["RN"], (v["TS"], v["TS"], 1)),
)

TILED_RB1X4 = TILED.variant(
    "tiled_rb1x4", "Register blocking 1x4 (seed 002)",
    "each thread computes 1x4 contiguous outputs: one A read from shared memory feeds 4 FMAs",
    seed="002 tiled_rb1x4", RN=4)

TILED_RB2X4 = TILED.variant(
    "tiled_rb2x4", "Register blocking 2x4 (seed 002)",
    "each thread computes 2x4 contiguous outputs: 8 FMAs per 6 shared loads, fewer barriers per FMA",
    seed="002 tiled_rb2x4", RM=2, RN=4)

# ---- seed 004 SGEMM section ----

S4_BASELINE = COALESCING.variant(
    "s4_baseline", "Global memory only (seed 004 Baseline)",
    "one thread per output, x over columns, every operand read straight from global memory",
    seed="004 Baseline", BLOCK=16)

S4_SHARED_MEMORY = TILED.variant(
    "s4_shared_memory", "Shared memory, K-tile != block side (seed 004 Shared_memory)",
    "16x16 threads, one output each, K staged in tiles of BK=32 loaded by strided loops",
    seed="004 Shared_memory", TS=16, BK=32)

S4_FLOAT4 = TILED.variant(
    "s4_float4", "Float4 global loads (seed 004 Using Float4)",
    "1x4 outputs per thread with the tiles fetched from global memory as float4 where aligned",
    seed="004 Using Float4", TS=16, BK=32, RM=1, RN=4, VEC=4)

S4_WORK_PER_THREAD = KernelSpec(
    name="s4_work_per_thread", op="sgemm", title="Strided work per thread (seed 004 Increase Work Per Thread)",
    idea="DxD threads own an SxS-times larger tile; each computes SxS outputs strided by D",
    source="sgemm/s4_strided.cu", entry="gemmlab::sgemm_strided", seed="004 Increase Work Per Thread",
    params=(
        Param("D", 16, (8, 16, 32), "threads per block side; blockDim = (D, D)"),
        Param("BK", 16, (8, 16, 32), "K-tile staged in shared memory per step"),
        Param("S", 4, (1, 2, 4), "outputs per thread along each side; tile L = S*D"),
    ),
    constraints=(_positive("D", "BK", "S"),),
    threads=lambda v: v["D"] ** 2,
    smem_bytes=lambda v: 4 * 2 * v["S"] * v["D"] * v["BK"],
    block_tile=lambda v: (v["S"] * v["D"], v["S"] * v["D"]),
    geometry=lambda p, v: _tile_launch(p, v["S"] * v["D"], v["S"] * v["D"], (v["D"], v["D"], 1)),
)

S4_OUTER_PRODUCT = KernelSpec(
    name="s4_outer_product", op="sgemm", title="4x4 register outer product (seed 004 Register Outer Product)",
    idea="each thread keeps a 4x4 block; per k, a_reg[4] x b_reg[4] (float4 from shared) outer product",
    source="sgemm/s4_outer4x4.cu", entry="gemmlab::sgemm_outer4x4", seed="004 Register Outer Product",
    params=(
        Param("DM", 16, (8, 16, 32), "thread rows; blockDim.y = DM, BM = 4*DM"),
        Param("DN", 16, (8, 16, 32), "thread columns; blockDim.x = DN, BN = 4*DN"),
        Param("BK", 16, (4, 8, 16, 32), "K-tile staged in shared memory per step"),
    ),
    constraints=(
        _positive("DM", "DN", "BK"),
        Constraint("BK % 4 == 0 (A tile rows load as float4)", lambda v: v["BK"] % 4 == 0),
    ),
    threads=lambda v: v["DM"] * v["DN"],
    smem_bytes=lambda v: 4 * 4 * v["BK"] * (v["DM"] + v["DN"]),
    block_tile=lambda v: (4 * v["DM"], 4 * v["DN"]),
    geometry=lambda p, v: _tile_launch(p, 4 * v["DM"], 4 * v["DN"], (v["DN"], v["DM"], 1)),
)

S4_SMEM_TRANSPOSE = KernelSpec(
    name="s4_smem_transpose", op="sgemm", title="Transposed A in shared memory (seed 004 A Shared Memory Transpose)",
    idea="A stored as As[BK][BM] so both A and B fragments are read from shared memory as float4",
    source="sgemm/s4_smem_transpose.cu", entry="gemmlab::sgemm_smem_transpose",
    seed="004 A Shared Memory Transpose",
    params=(
        Param("DM", 16, (8, 16, 32), "thread rows; blockDim.y = DM, BM = TM*DM"),
        Param("DN", 16, (8, 16, 32), "thread columns; blockDim.x = DN, BN = TN*DN"),
        Param("BK", 8, (4, 8, 16, 32), "K-tile staged in shared memory per step"),
        Param("TM", 8, (4, 8), "rows of C per thread, in float4 fragments 4*DM apart"),
        Param("TN", 8, (4, 8), "columns of C per thread, in float4 fragments 4*DN apart"),
    ),
    constraints=(
        _positive("DM", "DN", "BK", "TM", "TN"),
        Constraint("TM % 4 == 0 and TN % 4 == 0 (float4 fragments)",
                   lambda v: v["TM"] % 4 == 0 and v["TN"] % 4 == 0),
        Constraint("BK % 4 == 0 (A tile rows load as float4)", lambda v: v["BK"] % 4 == 0),
    ),
    threads=lambda v: v["DM"] * v["DN"],
    smem_bytes=lambda v: 4 * v["BK"] * (v["TM"] * v["DM"] + v["TN"] * v["DN"]),
    block_tile=lambda v: (v["TM"] * v["DM"], v["TN"] * v["DN"]),
    geometry=lambda p, v: _tile_launch(p, v["TM"] * v["DM"], v["TN"] * v["DN"], (v["DN"], v["DM"], 1)),
)

# Registration order is display order: each seed's own sequence of steps.
register(TILED, TILED_RB1X4, TILED_RB2X4, S4_BASELINE, S4_SHARED_MEMORY, S4_WORK_PER_THREAD,
         S4_FLOAT4, S4_OUTER_PRODUCT, S4_SMEM_TRANSPOSE)
