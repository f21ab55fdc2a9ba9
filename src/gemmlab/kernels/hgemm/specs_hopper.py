"""Specs of the Hopper tensor-core rungs 3-6 (sm_90a: wgmma, TMA, setmaxnreg, clusters).

Their kernels take TMA tensor maps, not A and B pointers: (tmA, tmB, M, N, K, alpha, beta, C)
for rungs 3-4 and (tmA, tmB, tmC, M, N, K, alpha, beta, C, ldc) for rungs 5-6, built by
gemmlab.hgemm.tma, which reads the box shapes from `tma_boxes` below. Block tiles are 128 x BN,
K tiles one 128-byte swizzled row (64 16-bit or 32 tf32 elements), as the kernels' static_asserts
say; the constraints mirror them.
"""
from __future__ import annotations

from ...problem import GemmProblem
from ...registry import Constraint, KernelSpec, Launch, Param, cdiv, register
from .specs import HALF_DTYPES, MAX_DYNAMIC_SMEM, aligned_rows, dtype_constraint, dtype_param

BM = 128
ALIGN_SLACK = 1024  # the kernels align their tiles to 1024 bytes inside dynamic shared memory
C_STAGING = 4 * 64 * 128  # rungs 5-6: 2 consumers x 2 buffers of 64 x 32 fp32


def stage_bytes(v) -> int:
    """One pipeline stage: a 128 x 128-byte A tile and a BN x 128-byte B tile."""
    return BM * 128 + v["BN"] * 128


def pipeline_smem(v) -> int:
    return v["STAGES"] * stage_bytes(v) + ALIGN_SLACK


def persistent_smem(v) -> int:
    return pipeline_smem(v) + C_STAGING


def _stage_constraints(smem) -> tuple[Constraint, ...]:
    return (
        Constraint("STAGES must be >= 2", lambda v: v["STAGES"] >= 2),
        Constraint(f"shared memory (dynamic + the barriers) must be <= {MAX_DYNAMIC_SMEM} B",
                   lambda v: smem(v) + 16 * v["STAGES"] <= MAX_DYNAMIC_SMEM),
    )


def cluster_slots(cm: int) -> int:
    """How many clusters of `cm` one-block-per-SM CTAs run at once: the SM count over cm
    (132 SMs, the H100/H200 count, where no GPU can be asked)."""
    try:
        from ...cuda.device import info

        sms = info().sm_count
    except Exception:  # no GPU (CPU tests, dry runs): the geometry is still defined
        sms = 132
    return max(1, sms // cm)


def persistent_launch(p: GemmProblem, v) -> Launch:
    """One CTA per SM (in clusters of CM along M), never more clusters than cluster tiles."""
    cm = v["CM"]
    tiles = cdiv(p.M, BM * cm) * cdiv(p.N, v["BN"])
    clusters = min(tiles, cluster_slots(cm))
    return Launch(grid=(clusters * cm, 1, 1), block=(384, 1, 1), shmem=persistent_smem(v), cluster=(cm, 1, 1))


def tma_boxes(spec: KernelSpec, v) -> dict[str, tuple[int, int]]:
    """(rows, columns) of each operand's TMA box: A 128 x one K tile; B (16-bit, KxN) 64 x 64
    chunks; B^T (tf32, NxK) BN/CM rows; C 64 x 32 staged chunks (rungs 5-6)."""
    tf32 = "tf32" in spec.dtypes
    k_tile = 32 if tf32 else 64
    boxes = {"A": (BM, k_tile), "B": (v["BN"] // v.get("CM", 1), k_tile) if tf32 else (64, 64)}
    if "tma_store" in spec.tags:
        boxes["C"] = (64, 32)
    return boxes


TMA_WGMMA = KernelSpec(
    name="tma_wgmma", op="hgemm", rung=3, title="TMA + wgmma, multi-stage (sm_90a)",
    idea="one thread loads 128x64 and 64xBN tiles with the copy engine (TMA, 128-byte swizzle) onto "
         "mbarriers; a warpgroup multiplies them from shared memory with wgmma.m64nBNk16",
    source="hgemm/03_tma_wgmma.cu", entry="gemmlab::hgemm_tma_wgmma",
    params=(dtype_param(), Param("BN", 128, (64, 128), "block tile columns (wgmma N)"),
            Param("STAGES", 4, (2, 3, 4, 5, 6), "tiles in flight")),
    constraints=(dtype_constraint(),
                 Constraint("BN must be 64 or 128 (two m64 halves of BN/2 accumulators each)",
                            lambda v: v["BN"] in (64, 128)))
    + _stage_constraints(pipeline_smem),
    threads=lambda v: 128, smem_bytes=lambda v: 8 * v["STAGES"],  # static: the full mbarriers block_tile=lambda v: (BM, v["BN"]),
    geometry=lambda p, v: Launch(grid=(cdiv(p.N, v["BN"]), cdiv(p.M, BM), 1), block=(128, 1, 1),
                                 shmem=pipeline_smem(v)),
    problem_check=aligned_rows, arch="sm_90a", dtypes=HALF_DTYPES, tags=("tma",),
)

WARP_SPECIALIZED = KernelSpec(
    name="warp_specialized", op="hgemm", rung=4, title="warp specialisation: producer + 2 consumers, setmaxnreg",
    idea="a producer warpgroup (40 registers) only issues TMA copies; two consumer warpgroups (232 registers) "
         "multiply 64xBN halves of a 128xBN tile; full/empty mbarriers, one wgmma group in flight",
    source="hgemm/04_warp_specialized.cu", entry="gemmlab::hgemm_warp_specialized",
    params=(dtype_param(), Param("BN", 256, (128, 256), "block tile columns (wgmma N)"),
            Param("STAGES", 4, (2, 3, 4, 5, 6), "tiles in flight")),
    constraints=(dtype_constraint(),
                 Constraint("BN must be 128 or 256", lambda v: v["BN"] in (128, 256)))
    + _stage_constraints(pipeline_smem),
    threads=lambda v: 384, smem_bytes=lambda v: 16 * v["STAGES"],  # static: full + empty mbarriers block_tile=lambda v: (BM, v["BN"]),
    geometry=lambda p, v: Launch(grid=(cdiv(p.N, v["BN"]), cdiv(p.M, BM), 1), block=(384, 1, 1),
                                 shmem=pipeline_smem(v)),
    problem_check=aligned_rows, arch="sm_90a", dtypes=HALF_DTYPES, tags=("tma",),
)


def _persistent_params(first: tuple[Param, ...], cm: int) -> tuple[Param, ...]:
    return first + (
        Param("BN", 256, (128, 256), "block tile columns (wgmma N)"),
        Param("STAGES", 4, (2, 3, 4, 5, 6), "tiles in flight"),
        # defaults as measured on the H200 (docs/tensor-cores.md): the 2-CTA multicast cluster
        # leads for 16-bit inputs (102.5% of cuBLAS at 8192^3 against 100.3% with CM = 1), one CTA
        # for tf32 (91.2% against 87.1%)
        Param("CM", cm, (1, 2), "CTAs per cluster along M (2: B multicast to both)"),
        Param("GROUP_M", 8, (1, 4, 8, 16), "cluster-tile rows per group of the tile order"),
    )


def _persistent_constraints() -> tuple[Constraint, ...]:
    return (
        Constraint("BN must be 128 or 256", lambda v: v["BN"] in (128, 256)),
        Constraint("CM must be 1 or 2", lambda v: v["CM"] in (1, 2)),
        Constraint("GROUP_M must be >= 1", lambda v: v["GROUP_M"] >= 1),
    ) + _stage_constraints(persistent_smem)


PERSISTENT = KernelSpec(
    name="persistent", op="hgemm", rung=5, title="persistent + clusters + TMA multicast + TMA store",
    idea="one CTA per SM loops over tiles in grouped order; 2-CTA clusters share B by TMA multicast; "
         "C leaves through swizzled shared memory by TMA stores; any shape",
    source="hgemm/05_persistent_cluster.cu", entry="gemmlab::hgemm_persistent",
    params=_persistent_params((dtype_param(),), cm=2),
    constraints=(dtype_constraint(),)
    + _persistent_constraints(),
    threads=lambda v: 384, smem_bytes=lambda v: 16 * v["STAGES"],  # static: full + empty mbarriers block_tile=lambda v: (BM, v["BN"]),
    geometry=persistent_launch, arch="sm_90a", dtypes=HALF_DTYPES, tags=("tma", "tma_store", "pads", "persistent"),
)

TF32_WGMMA = KernelSpec(
    name="tf32_wgmma", op="hgemm", rung=6, title="tf32 wgmma for fp32 inputs (lower precision)",
    idea="fp32 A and B multiplied as tf32 (10-bit mantissa) by wgmma.m64nNk8 in rung 5's pipeline; "
         "B transposed to K-major first (in the timed work); compare with cuBLAS TF32",
    source="hgemm/06_tf32_wgmma.cu", entry="gemmlab::hgemm_tf32_wgmma",
    params=_persistent_params((), cm=1),
    constraints=_persistent_constraints(),
    threads=lambda v: 384, smem_bytes=lambda v: 16 * v["STAGES"],  # static: full + empty mbarriers block_tile=lambda v: (BM, v["BN"]),
    geometry=persistent_launch, arch="sm_90a", dtypes=("tf32",), tags=("tma", "tma_store", "pads", "persistent", "b_transposed"),
)

register(TMA_WGMMA, WARP_SPECIALIZED, PERSISTENT, TF32_WGMMA)
