"""Specs of the SGEMM ladder and the seeds' variants, in one module: parameters, constraints,
launch geometry. (Over 300 lines on purpose: every sgemm rung's spec in one place, in ladder
order, is what a learner reads beside the numbered .cu files; the sections follow the rungs.)

Every kernel has the signature
    (int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C)
with row-major contiguous A (MxK), B (KxN), C (MxN) (rung 13 adds a split-K workspace pointer).
Constraints mirror the kernels' static_asserts so a bad configuration is refused before NVRTC
runs. Registration order is ladder order: rungs 1-6, the seeds' variants, rungs 7-9 and 11,
rungs 10, 12, 13, 14.
"""
from __future__ import annotations

from dataclasses import replace

from ...problem import GemmProblem
from ...registry import Constraint, KernelSpec, Launch, Param, cdiv, is_pow2, register


P2 = (8, 16, 32, 64, 128, 256)


def positive(*names: str) -> Constraint:
    """Tile sizes of at least 1. The other rules hold for 0 (0 % 4 == 0, 0 % t == 0), and a
    zero-sized shared array or loop step would reach NVRTC, or a launch, as the first complaint."""
    return Constraint(f"{', '.join(names)} must be >= 1", lambda v: all(v[n] >= 1 for n in names))


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
    constraints=(positive("BM", "BN", "BK", "TM"),
                 Constraint("TM must divide BM", lambda v: v["BM"] % v["TM"] == 0),
                 *_splits_tiles(_threads_1d)),
    threads=_threads_1d, smem_bytes=_tile_smem, geometry=_tile_geometry(_threads_1d),
)

BLOCKTILING_2D = KernelSpec(
    name="blocktiling_2d", op="sgemm", rung=5, title="2D blocktiling",
    idea="each thread computes a TMxTN outer product from registers: TM+TN shared loads per TM*TN FMAs",
    source="sgemm/05_blocktiling_2d.cu", entry="gemmlab::sgemm_blocktiling_2d", seed="001 kernel 5",
    params=(Param("BM", 128, (64, 128, 256)), Param("BN", 128, (64, 128, 256)),
            Param("BK", 8, (8, 16, 32)), Param("TM", 8, (4, 8, 16)), Param("TN", 8, (4, 8, 16))),
    constraints=(positive("BM", "BN", "BK", "TM", "TN"),
                 Constraint("TM must divide BM", lambda v: v["BM"] % v["TM"] == 0),
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
    constraints=(positive("BM", "BN", "BK", "TM", "TN"),
                 Constraint("TM must divide BM", lambda v: v["BM"] % v["TM"] == 0),
                 Constraint("TN must divide BN", lambda v: v["BN"] % v["TN"] == 0),
                 Constraint("BK, BN, TM and TN must be multiples of 4 (float4)",
                            lambda v: all(v[p] % 4 == 0 for p in ("BK", "BN", "TM", "TN"))),
                 *_splits_tiles(_threads_2d, vector=4)),
    threads=_threads_2d, smem_bytes=_tile_smem, geometry=_tile_geometry(_threads_2d),
)

register(NAIVE, COALESCING, SMEM_BLOCKING, BLOCKTILING_1D, BLOCKTILING_2D, VECTORIZE)

# ================================================================================================
# Seed 002 and seed 004 variants (outside the rung ladder)
# Seed 002 and seed 004 SGEMM kernels, outside the rung ladder (rung=None).
#
# Seed 002: "tiled", "tiled_rb1x4", "tiled_rb2x4" - one template, s2_tiled_rb.cu.
# Seed 004 (SGEMM section): Baseline (rung 2's kernel), Shared_memory and Using Float4
# (points of s2_tiled_rb.cu), Increase Work Per Thread (s4_strided.cu), Register Outer
# Product (s4_outer4x4.cu), A Shared Memory Transpose (s4_smem_transpose.cu).
#
# Every grid has x over column tiles (cdiv(N, BN)) and y over row tiles (cdiv(M, BM)).
# Constraints mirror the kernels' static_asserts; the thread count (<= 1024) and the static
# shared memory (<= 48 KiB) are checked through `threads` and `smem_bytes`.
# ================================================================================================

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
        positive("TS", "BK", "RM", "RN"),
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
    constraints=(positive("D", "BK", "S"),),
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
        positive("DM", "DN", "BK"),
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
        positive("DM", "DN", "BK", "TM", "TN"),
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

# ================================================================================================
# Rungs 7, 8, 9 and 11
# Specs of SGEMM rungs 7, 8, 9 and 11 (seed 001 kernels 7-9 and 11; seed 000's tuning grid).
#
# Every kernel has rung 6's signature and row-major layout, is correct for every M, N, K >= 1
# (zero-filled edge tiles, float4 only on 16-byte aligned in-bounds rows) and launches a 1-D
# block per BM x BN tile of C, grid x over column tiles and y over row tiles. Constraints
# mirror the kernels' static_asserts.
# ================================================================================================

def _rung6_tile_constraints() -> tuple[Constraint, ...]:
    """Rung 6's static_asserts, which rungs 7 and 8 keep."""
    return (
        positive("BM", "BN", "BK", "TM", "TN"),
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
                 Constraint("PAD must be a positive multiple of 4 (16-byte aligned float4 shared accesses)",
                            lambda v: v["PAD"] > 0 and v["PAD"] % 4 == 0)),
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
        positive("BM", "BN", "BK", "TM", "TN", "NUM_THREADS"),
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

# ================================================================================================
# Rungs 10, 12 and 13
# Specs of rungs 10, 12 and 13: warptiling, cp.async pipelines, gemmlab's own Hopper kernel.
# ================================================================================================

def _wmiter(v) -> int:
    return (v["WM"] * v["WN"]) // (32 * v["TM"] * v["TN"] * v["WNITER"])


def _warptile_constraints() -> tuple[Constraint, ...]:
    """The mirror of rung 10's static_asserts (also used by the rungs built on it)."""
    return (
        positive("BM", "BN", "BK", "WM", "WN", "WNITER", "TM", "TN", "NT"),
        Constraint("NT must be whole warps", lambda v: v["NT"] % 32 == 0),
        Constraint("warp tiles must divide the block tile", lambda v: v["BM"] % v["WM"] == 0 and v["BN"] % v["WN"] == 0),
        Constraint("(BM/WM)*(BN/WN) must equal the warp count NT/32",
                   lambda v: (v["BM"] // v["WM"]) * (v["BN"] // v["WN"]) == v["NT"] // 32),
        Constraint("WMITER = WM*WN/(32*TM*TN*WNITER) must be a whole number >= 1",
                   lambda v: (v["WM"] * v["WN"]) % (32 * v["TM"] * v["TN"] * v["WNITER"]) == 0 and _wmiter(v) >= 1),
        Constraint("WMITER must divide WM and WNITER divide WN",
                   lambda v: v["WM"] % _wmiter(v) == 0 and v["WN"] % v["WNITER"] == 0),
        Constraint("a warp's 32 threads must tile one WSUBM x WSUBN sub-tile",
                   lambda v: (v["WM"] // _wmiter(v)) % v["TM"] == 0 and (v["WN"] // v["WNITER"]) % v["TN"] == 0
                   and ((v["WM"] // _wmiter(v)) // v["TM"]) * ((v["WN"] // v["WNITER"]) // v["TN"]) == 32),
        Constraint("TM, TN, BK and BN must be multiples of 4 (float4)",
                   lambda v: all(v[p] % 4 == 0 for p in ("TM", "TN", "BK", "BN"))),
        Constraint("the threads must split the A tile evenly in float4s", lambda v: (v["BM"] * v["BK"] // 4) % v["NT"] == 0),
        Constraint("the threads must split the B tile evenly in float4s", lambda v: (v["BN"] * v["BK"] // 4) % v["NT"] == 0),
        Constraint("at most 255 registers: accumulators WMITER*TM*WNITER*TN must be <= 128",
                   lambda v: _wmiter(v) * v["TM"] * v["WNITER"] * v["TN"] <= 128),
    )


def _grid(p: GemmProblem, v) -> Launch:
    return Launch(grid=(cdiv(p.N, v["BN"]), cdiv(p.M, v["BM"]), 1), block=(v["NT"], 1, 1))


WARPTILING = KernelSpec(
    name="warptiling", op="sgemm", rung=10, title="Warptiling",
    idea="a warp level between block and thread: each warp walks a WMxWN tile in compact sub-tiles",
    source="sgemm/10_warptiling.cu", entry="gemmlab::sgemm_warptiling", seed="001 kernel 10",
    # Defaults: the best of a 90-point random sweep at 4096^3 on an H200 (docs/ladder.md).
    params=(Param("BM", 128, (64, 128, 256)), Param("BN", 128, (64, 128, 256)), Param("BK", 8, (8, 16, 32)),
            Param("WM", 32, (32, 64, 128)), Param("WN", 64, (32, 64, 128)), Param("WNITER", 1, (1, 2, 4, 8)),
            Param("TM", 8, (4, 8)), Param("TN", 4, (4, 8)), Param("NT", 256, (128, 256))),
    constraints=_warptile_constraints(),
    threads=lambda v: v["NT"], smem_bytes=lambda v: 4 * v["BK"] * (v["BM"] + v["BN"]),
    geometry=_grid,
)


def _pipeline_smem(v) -> int:
    return 4 * v["STAGES"] * v["BK"] * (v["BM"] + v["PADA"] + v["BN"])


MAX_DYNAMIC_SMEM = 227 * 1024  # sm_90's opt-in limit per block


def _pipeline_grid(p: GemmProblem, v) -> Launch:
    return Launch(grid=(cdiv(p.N, v["BN"]), cdiv(p.M, v["BM"]), 1), block=(v["NT"], 1, 1), shmem=_pipeline_smem(v))


_warptile_rules = tuple(c for c in _warptile_constraints() if "A tile" not in c.why)

ASYNC_PIPELINE = KernelSpec(
    name="async_pipeline", op="sgemm", rung=12, title="Multi-stage cp.async pipeline",
    idea="warptiling fed by a STAGES-deep ring of tiles filled with cp.async; one barrier per K-tile",
    source="sgemm/12_async_pipeline.cu", entry="gemmlab::sgemm_async_pipeline", seed="001 kernel 12",
    # Defaults: the best of a 90-point random sweep at 4096^3 on an H200 (docs/ladder.md).
    params=(Param("BM", 128, (64, 128, 256)), Param("BN", 256, (64, 128, 256)), Param("BK", 8, (8, 16, 32)),
            Param("WM", 64, (32, 64, 128)), Param("WN", 64, (32, 64, 128)), Param("WNITER", 2, (1, 2, 4)),
            Param("TM", 4, (4, 8)), Param("TN", 4, (4, 8)), Param("NT", 256, (128, 256)),
            Param("STAGES", 2, (2, 3, 4)), Param("PADA", 4, (0, 4, 8))),
    constraints=_warptile_rules + (
        Constraint("the threads must split the A tile evenly", lambda v: (v["BM"] * v["BK"]) % v["NT"] == 0),
        Constraint("PADA must be a multiple of 4 (16-byte rows)", lambda v: v["PADA"] % 4 == 0),
        Constraint("STAGES must be >= 2", lambda v: v["STAGES"] >= 2),
        Constraint(f"dynamic shared memory must be <= {MAX_DYNAMIC_SMEM} B",
                   lambda v: _pipeline_smem(v) <= MAX_DYNAMIC_SMEM),
    ),
    threads=lambda v: v["NT"],
    geometry=_pipeline_grid,
)


_sm_count: list[int] = []  # device 0's, once read: it does not change while the process runs


def sm_count() -> int:
    """The GPU's SM count, or an H100/H200's 132 when there is no GPU (compile-only use).

    Remembered once read (not the stand-in): the dispatch's refit asks for it at every candidate
    of a new shape, and each read asked the driver for the device's properties and memory."""
    if _sm_count:
        return _sm_count[0]
    try:
        from ...cuda.device import info

        count = info().sm_count
    except Exception:
        return 132
    _sm_count[:] = [count]
    return count


def split_k_slices(p: GemmProblem, v, sm_count: int) -> int:
    """SPLITK > 0 as given; 0 = automatic: when the output tiles cannot fill the SMs, cut K
    into as many slices as fit in one wave, keeping at least 4 K-tiles per slice."""
    if v["SPLITK"] > 0:
        return min(v["SPLITK"], cdiv(p.K, v["BK"]))
    tiles = cdiv(p.M, v["BM"]) * cdiv(p.N, v["BN"])
    if tiles * 2 > sm_count:
        return 1
    return max(1, min(sm_count // tiles, cdiv(p.K, v["BK"]) // 4, 16))


def _swizzled_grid(p: GemmProblem, v) -> Launch:
    """A 1-D grid of tiles (the kernel swizzles it in GROUP-row bands), times split-K slices."""
    tiles = cdiv(p.M, v["BM"]) * cdiv(p.N, v["BN"])
    return Launch(grid=(tiles, 1, split_k_slices(p, v, sm_count())), block=(v["NT"], 1, 1),
                  shmem=_pipeline_smem(v))


SPLITK_REDUCE = KernelSpec(
    name="splitk_reduce", op="internal", title="split-K reduction", idea="sum the K-slices' partial planes",
    source="sgemm/13_hopper_simt.cu", entry="gemmlab::sgemm_splitk_reduce",
    geometry=lambda p, v: Launch((1, 1, 1), (256, 1, 1)),
)


HOPPER_SIMT = KernelSpec(
    name="hopper_simt", op="sgemm", rung=13, title="gemmlab Hopper SIMT kernel",
    idea="cp.async ring + warptiles + fragment double buffering + L2-friendly block swizzle",
    source="sgemm/13_hopper_simt.cu", entry="gemmlab::sgemm_hopper_simt", seed="gemmlab",
    # Defaults: the best of a 120-point random sweep at 4096^3 on an H200 (docs/ladder.md).
    params=tuple(replace(p, default=d) for p, d in zip(ASYNC_PIPELINE.params, (128, 256, 16, 64, 64, 1, 4, 8, 256, 4, 4)))
    + (Param("GROUP", 8, (1, 4, 8, 16)),
                                    Param("SPLITK", 0, (0, 1, 2, 4), "K slices; 0 = automatic", template=False)),
    constraints=ASYNC_PIPELINE.constraints + (Constraint("GROUP must be >= 1", lambda v: v["GROUP"] >= 1),
                                              Constraint("SPLITK must be >= 0", lambda v: v["SPLITK"] >= 0)),
    splitk_reduce=SPLITK_REDUCE,
    threads=lambda v: v["NT"],
    block_tile=lambda v: (v["BM"], v["BN"]),
    geometry=_swizzled_grid,
)



# ================================================================================================
# Rung 14
# ================================================================================================

def _bigtile_lanes(v) -> int:
    return (v["WM"] // v["TM"]) * (v["WN"] // v["TN"])


def stream_k_blocks(p: GemmProblem, v, sm_count: int) -> int:
    """Stream-K's grid: one wave (MINB blocks an SM), never more blocks than K-iterations to
    deal out, so every block's range is non-empty (the fix-up counts on it)."""
    tiles = cdiv(p.M, v["BM"]) * cdiv(p.N, v["BN"])
    return max(1, min(sm_count * v["MINB"], tiles * cdiv(p.K, v["BK"])))


def _bigtile_grid(p: GemmProblem, v) -> Launch:
    if v["STREAMK"]:
        return Launch(grid=(stream_k_blocks(p, v, sm_count()), 1, 1), block=(v["NT"], 1, 1),
                      shmem=_pipeline_smem(v))
    return _swizzled_grid(p, v)


def _bigtile_flags(p: GemmProblem, v) -> int:
    """Stream-K's tile flags at the head of its workspace, one a tile rounded to 32 (stream_k.cuh's
    flag_floats); 0 without stream-K."""
    return cdiv(cdiv(p.M, v["BM"]) * cdiv(p.N, v["BN"]), 32) * 32 if v["STREAMK"] else 0


def _bigtile_workspace(p: GemmProblem, v) -> int | None:
    """Stream-K (stream_k.cuh): the tiles' flags and two partial-tile slots a block; otherwise
    None, the split-K planes of any kernel with a reduction."""
    if not v["STREAMK"]:
        return None
    return _bigtile_flags(p, v) + 2 * stream_k_blocks(p, v, sm_count()) * v["BM"] * v["BN"]


BIGTILE = KernelSpec(
    name="bigtile", op="sgemm", rung=14, title="cuBLAS-class SIMT kernel",
    idea="cuBLAS's FP32 kernel shape (128x256x8 or 256x128x8 tiles, 8x16 outputs a thread in strided float4 "
         "chunks, 3 stages): straight-line predicated copies, A loaded a tile ahead, the barrier inside the last K-step",
    source="sgemm/14_bigtile.cu", entry="gemmlab::sgemm_bigtile", seed="gemmlab",
    # Defaults: the fastest of 40 configurations measured at 4096^3 on an H100 (docs/ladder.md):
    # cuBLAS's 3-stage, BK = 8, 8-warp shape turned to 128x256, with snaking-column FFMA order.
    params=(Param("BM", 128, (64, 128, 256)), Param("BN", 256, (64, 128, 256)), Param("BK", 8, (8, 16)),
            Param("WM", 64, (32, 64, 128)), Param("WN", 64, (32, 64, 128)),
            Param("TM", 8, (4, 8, 16), "a thread's rows, in float4 chunks strided across the warp tile"),
            Param("TN", 16, (4, 8, 16), "a thread's columns, likewise"), Param("NT", 256, (128, 256)),
            Param("STAGES", 3, (2, 3, 4)), Param("PADA", 4, (4, 12), "A rows padded to 4 (mod 8) floats"),
            Param("GROUP", 8, (1, 4, 8, 16)),
            Param("MINB", 1, (1, 2), "blocks per SM the register allocation must leave room for"),
            Param("ORDER", 3, (0, 1, 2, 3), "FFMA order: rows, columns, snaking rows, snaking columns"),
            Param("STREAMK", 0, (0, 1, 2), "0 a tile a block; 1 stream-K; 2 whole waves data-parallel, the rest stream-K"),
            Param("SPLITK", 0, (0, 1, 2, 4), "K slices; 0 = automatic (ignored with STREAMK)", template=False)),
    constraints=(
        positive("BM", "BN", "BK", "WM", "WN", "TM", "TN", "NT"),
        Constraint("NT must be one warp per warp tile: (BM/WM)*(BN/WN)*32",
                   lambda v: v["BM"] % v["WM"] == 0 and v["BN"] % v["WN"] == 0
                   and (v["BM"] // v["WM"]) * (v["BN"] // v["WN"]) * 32 == v["NT"]),
        Constraint("a warp's 32 lanes must tile its warp tile: (WM/TM)*(WN/TN) == 32",
                   lambda v: v["WM"] % v["TM"] == 0 and v["WN"] % v["TN"] == 0 and _bigtile_lanes(v) == 32),
        Constraint("TM, TN, BK, BN and PADA must be multiples of 4 (float4)",
                   lambda v: all(v[p] % 4 == 0 for p in ("TM", "TN", "BK", "BN", "PADA"))),
        Constraint("the threads must split the A tile evenly in float4s, whole rows at a time",
                   lambda v: (v["BM"] * v["BK"] // 4) % v["NT"] == 0 and v["NT"] % (v["BK"] // 4) == 0),
        # the kernel keeps a bit per A float4 of a thread (which rows lie inside M) in 32 bits
        Constraint("a thread must bring at most 32 float4s of A a K-tile: BM*BK/4/NT <= 32",
                   lambda v: v["BM"] * v["BK"] // 4 <= 32 * v["NT"]),
        Constraint("the threads must split the B tile evenly in float4s, whole rows at a time",
                   lambda v: (v["BN"] * v["BK"] // 4) % v["NT"] == 0 and v["NT"] % (v["BN"] // 4) == 0),
        Constraint("at most 255 registers: TM*TN accumulators must be <= 128", lambda v: v["TM"] * v["TN"] <= 128),
        # ~72 registers beyond the accumulators hold the double-buffered fragments and addresses
        # (8x8 with MINB=2, i.e. 128 registers, spills: measured with `gemmlab compile`).
        Constraint("MINB blocks of NT threads must leave TM*TN + 72 registers a thread",
                   lambda v: v["MINB"] >= 1 and v["TM"] * v["TN"] + 72 <= 65536 // (v["NT"] * v["MINB"])),
        Constraint("STAGES must be >= 2", lambda v: v["STAGES"] >= 2),
        Constraint("GROUP must be >= 1", lambda v: v["GROUP"] >= 1),
        Constraint("ORDER must be 0..3", lambda v: 0 <= v["ORDER"] <= 3),
        Constraint("SPLITK must be >= 0", lambda v: v["SPLITK"] >= 0),
        Constraint("STREAMK must be 0, 1 or 2", lambda v: v["STREAMK"] in (0, 1, 2)),
        Constraint(f"dynamic shared memory must be <= {MAX_DYNAMIC_SMEM} B",
                   lambda v: _pipeline_smem(v) <= MAX_DYNAMIC_SMEM),
    ),
    splitk_reduce=SPLITK_REDUCE,
    workspace=_bigtile_workspace, workspace_flags=_bigtile_flags,
    threads=lambda v: v["NT"],
    block_tile=lambda v: (v["BM"], v["BN"]),
    geometry=_bigtile_grid,
)


# ================================================================================================
# Rung 15
# ================================================================================================

def tma_ffma_smem(v) -> int:
    """STAGES stages of an A tile (BM rows of BK floats) and a B tile (BK x BN), plus the slack
    that aligns them to the swizzle's 1024 bytes."""
    return 4 * v["STAGES"] * (v["BM"] * v["BK"] + v["BK"] * v["BN"]) + 1024


def tma_ffma_boxes(v) -> dict[str, tuple[int, int, int]]:
    """Rung 15's tensor maps: (box rows, box columns, swizzle bytes) of A (BM rows of one K tile,
    the swizzle spanning one row, BK * 4 bytes: the bank spread its fragment reads rely on) and
    of B (one K tile of BN columns, unswizzled)."""
    return {"A": (v["BM"], v["BK"], 4 * v["BK"]), "B": (v["BK"], v["BN"], 0)}


def tma_ffma_maps_fit(M: int, N: int, K: int, a_ptr: int, b_ptr: int) -> bool:
    """Whether tensor maps can describe A (MxK) and B (KxN) as they lie: TMA's row rule for
    rows of K and N floats, and 16-byte aligned bases (cuTensorMapEncodeTiled's rules). Else the
    kernel's producer copies element by element (its `maps` argument 0)."""
    from ..hgemm.tma_rows import ROW_ALIGN, tma_row

    return tma_row(K, 4) and tma_row(N, 4) and a_ptr % ROW_ALIGN == 0 and b_ptr % ROW_ALIGN == 0


def _tma_ffma_slow_path(p: GemmProblem) -> str:
    """Rows no tensor map can describe: the producer's element-wise copy, a tenth of the speed."""
    if tma_ffma_maps_fit(p.M, p.N, p.K, 0, 0):
        return ""
    return "K and N must be multiples of 4 for its tensor maps (else a slow element-wise copy)"


def _tma_ffma_grid(p: GemmProblem, v) -> Launch:
    """A 1-D grid of tiles in swizzled order, times split-K slices, as rungs 13-14; 384 threads:
    a producer warpgroup and two math warpgroups."""
    tiles = cdiv(p.M, v["BM"]) * cdiv(p.N, v["BN"])
    return Launch(grid=(tiles, 1, split_k_slices(p, v, sm_count())), block=(384, 1, 1), shmem=tma_ffma_smem(v))


TMA_FFMA = KernelSpec(
    name="tma_ffma", op="sgemm", rung=15, title="copy engine + warp-specialised FFMA core (Hopper)",
    idea="one producer thread brings each stage with two TMA tensor copies (A swizzled, B) onto mbarriers; "
         "two math warpgroups (232 registers, setmaxnreg) only read fragments and multiply 8x16 outputs a thread",
    source="sgemm/15_tma_ffma.cu", entry="gemmlab::sgemm_tma_ffma", seed="gemmlab",
    # Defaults: cuBLAS's 256x128 block tile and rung 14's FFMA order (docs/ladder.md, rung 15).
    # Signature: (tensor map A, tensor map B, M, N, K, alpha, A, B, beta, C, W, maps) - the maps
    # first (tma_ffma_boxes), `maps` last: 1 when the host encoded them (tma_ffma_maps_fit).
    params=(Param("BM", 256, (128, 256)), Param("BN", 128, (128, 256)), Param("BK", 16, (8, 16, 32)),
            Param("STAGES", 4, (2, 3, 4, 5, 6)), Param("GROUP", 8, (1, 4, 8, 16)),
            Param("ORDER", 3, (0, 1, 2, 3), "FFMA order: rows, columns, snaking rows, snaking columns"),
            Param("SPLITK", 0, (0, 1, 2, 4), "K slices; 0 = automatic", template=False)),
    constraints=(
        Constraint("BM x BN must be 8 warp tiles of 64 x 64 (256x128 or 128x256)",
                   lambda v: v["BM"] % 64 == 0 and v["BN"] % 64 == 0 and (v["BM"] // 64) * (v["BN"] // 64) == 8),
        Constraint("BK must be 8, 16 or 32 (a row of A spans one TMA swizzle: 32, 64 or 128 bytes)",
                   lambda v: v["BK"] in (8, 16, 32)),
        Constraint("STAGES must be >= 2", lambda v: v["STAGES"] >= 2),
        Constraint("GROUP must be >= 1", lambda v: v["GROUP"] >= 1),
        Constraint("ORDER must be 0..3", lambda v: 0 <= v["ORDER"] <= 3),
        Constraint("SPLITK must be >= 0", lambda v: v["SPLITK"] >= 0),
        Constraint(f"dynamic shared memory must be <= {MAX_DYNAMIC_SMEM} B (with the barriers)",
                   lambda v: tma_ffma_smem(v) + 16 * v["STAGES"] <= MAX_DYNAMIC_SMEM),
    ),
    splitk_reduce=SPLITK_REDUCE,
    threads=lambda v: 384, smem_bytes=lambda v: 16 * v["STAGES"],  # static: full + empty mbarriers
    block_tile=lambda v: (v["BM"], v["BN"]),
    geometry=_tma_ffma_grid, arch="sm_90a", tags=("tma_maps",), slow_path=_tma_ffma_slow_path,
)

register(WARPTILING, ASYNC_PIPELINE, HOPPER_SIMT, BIGTILE, TMA_FFMA)
