"""Specs of the tensor-core GEMM ladder (issue 7): fp16 or bf16 A and B, fp32 accumulation, fp32 C.
(Over 300 lines on purpose: every hgemm rung's spec, geometry and workspace in one place, the
convention for an op's specs.)

Rungs 1-2 have the SGEMM signature with 16-bit inputs,
    (int M, int N, int K, float alpha, const bits16* A, const bits16* B, float beta, float* C),
row-major contiguous A (MxK), B (KxN), C (MxN); rungs 3-6 (the second section) take TMA tensor
maps instead of A and B pointers. The first template parameter, DTYPE, is the input type (0:
fp16, 1: bf16; the tf32 rung has none); the harness sets it from the problem's dtype, it is not tuned.
Rung 5's second, third and fourth, B_KMAJOR, OUT16 and A_MNMAJOR, are likewise set from the
problem's layout (nn: A is MxK and B KxN; nt: B given as its NxK transpose; tn: A given as its KxM
transpose; tt: both - read in place) and output dtype (fp32, or the 16-bit input type); rungs
tagged "layout_nt" take a transposed B, "layout_tn" a transposed A, "out16" a 16-bit C.
Constraints mirror the kernels' static_asserts; `problem_check` states the shapes a rung
refuses (rung 2: K % 8 and N % 8, for 16-byte cp.async chunks).
"""
from __future__ import annotations

from ...problem import GemmProblem
from ...registry import Constraint, KernelSpec, Launch, Param, cdiv, register
from ..sgemm.specs import positive, sm_count
from .tma_rows import row_rule

DTYPES = ("fp16", "bf16", "tf32")  # tf32: fp32 inputs multiplied as tf32 (rung 6 only)
HALF_DTYPES = ("fp16", "bf16")
MAX_DYNAMIC_SMEM = 227 * 1024  # sm_90's opt-in limit per block (sm_80: 163 KB; launch refuses clearly)


def dtype_flag(dtype: str) -> int:
    """The DTYPE template argument of a problem dtype (0 fp16, 1 bf16, 2 tf32)."""
    if dtype not in DTYPES:
        raise ValueError(f"hgemm dtype must be one of {DTYPES}, not {dtype!r}")
    return DTYPES.index(dtype)


def input_itemsize(p: GemmProblem) -> int:
    """Bytes of one A or B element: 2 for fp16 and bf16, 4 for tf32 (fp32 storage)."""
    return 4 if p.dtype == "tf32" else 2


def _threads(v) -> int:
    return (v["BM"] // v["WM"]) * (v["BN"] // v["WN"]) * 32


def dtype_constraint() -> Constraint:
    """The 16-bit rungs' DTYPE flag: 0 fp16, 1 bf16."""
    return Constraint("DTYPE must be 0 (fp16) or 1 (bf16)", lambda v: v["DTYPE"] in (0, 1))


def _common_constraints() -> tuple[Constraint, ...]:
    return (
        dtype_constraint(),
        positive("BM", "BN", "BK", "WM", "WN"),  # BK = 0 passes BK % 16 == 0
        Constraint("warp tiles must divide the block tile", lambda v: v["BM"] % v["WM"] == 0 and v["BN"] % v["WN"] == 0),
        Constraint("WM and WN must be multiples of 16", lambda v: v["WM"] % 16 == 0 and v["WN"] % 16 == 0),
    )


def dtype_param() -> Param:
    return Param("DTYPE", 0, (0, 1), "input type, set from the problem's dtype (0 fp16, 1 bf16)")


# -- rung 1: wmma --------------------------------------------------------------------------

def _wmma_smem(v) -> int:
    warps = (v["BM"] // v["WM"]) * (v["BN"] // v["WN"])
    return 2 * (v["BM"] * (v["BK"] + 8) + v["BK"] * (v["BN"] + 8)) + 4 * 256 * warps


def _grid(p: GemmProblem, v, shmem: int = 0) -> Launch:
    return Launch(grid=(cdiv(p.N, v["BN"]), cdiv(p.M, v["BM"]), 1), block=(_threads(v), 1, 1), shmem=shmem)


WMMA = KernelSpec(
    name="wmma", op="hgemm", rung=1, title="WMMA 16x16x16 on shared-memory tiles",
    idea="warps multiply 16x16x16 fp16/bf16 fragments on the tensor cores (nvcuda::wmma), fp32 accumulate; "
         "any shape (vector loads where aligned, zero-filled edges)",
    source="hgemm/01_wmma.cu", entry="gemmlab::hgemm_wmma",
    params=(dtype_param(), Param("BM", 128, (64, 128, 256)), Param("BN", 128, (64, 128, 256)),
            Param("BK", 32, (16, 32, 64)), Param("WM", 64, (32, 64)), Param("WN", 32, (32, 64))),
    constraints=_common_constraints() + (
        Constraint("BK must be a multiple of 16", lambda v: v["BK"] % 16 == 0),
        Constraint("at most 128 fp32 accumulators per thread: (WM/16)*(WN/16)*8 <= 128",
                   lambda v: (v["WM"] // 16) * (v["WN"] // 16) * 8 <= 128),
    ),
    threads=_threads, smem_bytes=_wmma_smem, dtypes=HALF_DTYPES,
    geometry=lambda p, v: _grid(p, v),
)


# -- rung 2: mma.sync + ldmatrix + swizzle + cp.async pipeline ------------------------------

def mma_sync_smem(v) -> int:
    return 2 * v["STAGES"] * v["BK"] * (v["BM"] + v["BN"])


def aligned_rows(p: GemmProblem) -> str:
    """Rung 2's shape rule: 16-byte chunks of a row lie wholly inside or outside the matrix."""
    bad = [f"{name} = {value}" for name, value in (("K", p.K), ("N", p.N)) if value % 8]
    if bad:
        return (f"needs K % 8 == 0 and N % 8 == 0 (16-byte rows for cp.async); {p.shape} has "
                + " and ".join(bad) + " - use wmma for this shape")
    return ""


MMA_SYNC = KernelSpec(
    name="mma_sync", op="hgemm", rung=2, title="mma.sync m16n8k16, ldmatrix, swizzle, cp.async pipeline",
    idea="the PTX under wmma: ldmatrix(.trans) from XOR-swizzled unpadded tiles, a STAGES-deep cp.async "
         "ring, fp32 accumulators in registers",
    source="hgemm/02_mma_sync.cu", entry="gemmlab::hgemm_mma_sync",
    params=(dtype_param(), Param("BM", 128, (64, 128, 256)), Param("BN", 128, (64, 128, 256)),
            Param("BK", 32, (16, 32, 64)), Param("WM", 64, (32, 64)), Param("WN", 64, (32, 64)),
            Param("STAGES", 4, (2, 3, 4, 5))),
    constraints=_common_constraints() + (
        Constraint("BK must be 16, 32 or 64 (the A swizzle)", lambda v: v["BK"] in (16, 32, 64)),
        Constraint("BN must be a multiple of 64 (the B swizzle)", lambda v: v["BN"] % 64 == 0),
        Constraint("the threads must split the A tile evenly in 16-byte chunks",
                   lambda v: (v["BM"] * v["BK"] // 8) % _threads(v) == 0),
        Constraint("the threads must split the B tile evenly in 16-byte chunks",
                   lambda v: (v["BK"] * v["BN"] // 8) % _threads(v) == 0),
        Constraint("STAGES must be >= 2", lambda v: v["STAGES"] >= 2),
        Constraint("at most 128 fp32 accumulators per thread: (WM/16)*(WN/8)*4 <= 128",
                   lambda v: (v["WM"] // 16) * (v["WN"] // 8) * 4 <= 128),
        Constraint(f"dynamic shared memory must be <= {MAX_DYNAMIC_SMEM} B",
                   lambda v: mma_sync_smem(v) <= MAX_DYNAMIC_SMEM),
    ),
    threads=_threads, smem_bytes=lambda v: 0,
    geometry=lambda p, v: _grid(p, v, mma_sync_smem(v)),
    problem_check=aligned_rows, dtypes=HALF_DTYPES,
)

register(WMMA, MMA_SYNC)

# ================================================================================================
# Hopper rungs 3-6 (sm_90a: wgmma, TMA, setmaxnreg, clusters)
# Specs of the Hopper tensor-core rungs 3-6 (sm_90a: wgmma, TMA, setmaxnreg, clusters).
#
# Their kernels take TMA tensor maps, not A and B pointers: (tmA, tmB, M, N, K, alpha, beta, C)
# for rungs 3-4 and (tmA, tmB, tmC, M, N, K, alpha, beta, C, ldc, W, whole, splits) for rungs 5-6, built by
# gemmlab.ops.hgemm_tma, which reads the box shapes from `tma_boxes` below. Block tiles are 128 x BN,
# K tiles one 128-byte swizzled row (64 16-bit or 32 tf32 elements), as the kernels' static_asserts
# say; the constraints mirror them.
# ================================================================================================

BM = 128  # rungs 3-4; rungs 5-6 take their rows from tile_rows(v)
ALIGN_SLACK = 1024  # the kernels align their tiles to 1024 bytes inside dynamic shared memory
C_STAGING = 2 * 64 * 128  # rungs 5-6: 2 buffers of 64 x 32 fp32 per consumer warpgroup


def tile_rows(v) -> int:
    """BM of rungs 3-6: 128, or a persistent rung's BM parameter (64, 128 or 256)."""
    return v.get("BM", BM)


def consumers(v) -> int:
    """Consumer warpgroups of rungs 4-6: two (each 64 rows of a 128-row tile), or a persistent
    rung's CONSUMERS parameter (1: one warpgroup computes every 64-row block of the tile)."""
    return v.get("CONSUMERS", 2)


def consumer_blocks(v) -> int:
    """64-row wgmma blocks one consumer warpgroup computes per tile: its share of the tile's
    BM / 64, or all of them (a lone consumer, or ping-pong: whole tiles each)."""
    blocks = tile_rows(v) // 64
    return blocks if v.get("PINGPONG", 0) else blocks // consumers(v)


def persistent_threads(v) -> int:
    """A producer warpgroup and the consumer warpgroups."""
    return 128 * (1 + consumers(v))


def stage_bytes(v) -> int:
    """One pipeline stage: a BM x 128-byte A tile and a BN x 128-byte B tile."""
    return tile_rows(v) * 128 + v["BN"] * 128


def pipeline_smem(v) -> int:
    return v["STAGES"] * stage_bytes(v) + ALIGN_SLACK


def persistent_smem(v) -> int:
    return pipeline_smem(v) + consumers(v) * C_STAGING


def _stage_constraints(smem) -> tuple[Constraint, ...]:
    return (
        Constraint("STAGES must be >= 2", lambda v: v["STAGES"] >= 2),
        Constraint(f"shared memory (dynamic + the barriers) must be <= {MAX_DYNAMIC_SMEM} B",
                   lambda v: smem(v) + 16 * v["STAGES"] <= MAX_DYNAMIC_SMEM),
    )


def cluster_size(v) -> int:
    """CTAs per cluster of a persistent rung: CM along M times CN along N."""
    return v["CM"] * v.get("CN", 1)


# cluster size -> how many clusters of one-block-per-SM CTAs the driver runs at once, where that is
# fewer than SMs / cluster size: a cluster's CTAs share a GPC, and a GPC whose SM count is not a
# multiple of the cluster size leaves SMs over (H100, session 31: 30 clusters of 4, not 33; 66 of
# 2 and 132 of 1, as counted). Learnt from cuOccupancyMaxActiveClusters by the launches
# (ops/hgemm_tma.max_active_clusters), which ask it before they plan a schedule.
_driver_slots: dict[int, int] = {}


def note_cluster_slots(cs: int, count: int) -> None:
    """Record the driver's count of co-resident clusters of `cs` CTAs for cluster_slots. A count
    above SMs / cs means more than one block per SM fits (a small kernel): not a slot count. The
    first count noted stays (setdefault): the count is the GPU's, the same for every kernel of one
    block per SM, and a value that never changes once set cannot change between the reads of one
    launch's workspace and schedule in another thread."""
    if 0 < count < sm_count() // cs:
        _driver_slots.setdefault(cs, count)


def cluster_slots(cs: int) -> int:
    """How many clusters of `cs` one-block-per-SM CTAs run at once: the driver's count once a
    launch has asked for it (note_cluster_slots), else the SM count over cs. The schedule's waves,
    its tail split and the split-K workspace are planned on it, so they line up with the clusters
    the launch gets."""
    return _driver_slots.get(cs) or max(1, sm_count() // cs)


def tf32_rs(tf32: bool, v) -> bool:
    """Whether rung 6 computes the transposed product, B from registers (persistent.cuh "RS"): tf32
    with a row-major MxK A and KxN B (layout nn), B being what wgmma cannot read N-major from shared
    memory. With A given as KxM (tn, tt) A goes through registers instead, in the plain product."""
    return tf32 and not v.get("B_KMAJOR", 0) and not v.get("A_MNMAJOR", 0)


def transposes_b(tf32: bool, v) -> bool:
    """Whether rung 6 transposes each stage's B tile in shared memory (persistent.cuh "TRANSB"):
    layout tn, where A (KxM) goes through registers and B (KxN) lands N-major, which tf32 wgmma
    cannot read from shared memory."""
    return tf32 and bool(v.get("A_MNMAJOR", 0)) and not v.get("B_KMAJOR", 0)


def cta_tile(v, rs: bool) -> tuple[int, int]:
    """(rows, columns) of C one CTA of a persistent rung computes: BM x BN, or BN x BM for tf32's
    transposed product (`rs`: the wgmma's N runs along M there)."""
    return (v["BN"], BM) if rs else (tile_rows(v), v["BN"])


def cluster_tiles(p: GemmProblem, v) -> int:
    """Output tiles of a persistent rung in clusters: CM CTA tiles along M by CN along N."""
    rows, cols = cta_tile(v, tf32_rs(p.dtype == "tf32", v))
    return cdiv(p.M, rows * v["CM"]) * cdiv(p.N, cols * v.get("CN", 1))


def k_tiles(p: GemmProblem) -> int:
    """K tiles of a TMA rung: one 128-byte row, 64 16-bit or 32 tf32 elements."""
    return cdiv(p.K, 32 if p.dtype == "tf32" else 64)


SPLITK_WORKSPACE_CAP = 64 * 1024 * 1024  # floats (256 MiB): split-K beyond this is for problems with tiles to spare


def _uniform_splits(v, tiles: int, ktiles: int, slots: int) -> int:
    """Uniform split-K's slices: SPLITK > 0 as given, 0 = automatic (when the cluster tiles fill
    less than half the cluster slots, as many slices as fill one wave with at least 16 K tiles
    each, at most 8: measured on an H100, 1024^3 in two slices of 8 K tiles ran at 61% of cuBLAS
    against 73% whole, 512x512x8192 in 8 slices of 16 at 79-83% against 37%)."""
    if v["SPLITK"] > 0:
        return v["SPLITK"]
    return 1 if tiles * 2 > slots else max(1, min(slots // tiles, ktiles // 16, 8))


TAIL_MIN_KTILES = 8  # the automatic tail split's slices keep at least this many K tiles each


def _tail_splits(v, tiles: int, ktiles: int, slots: int) -> int:
    """Slices for the tiles of a partial last wave (the tail split; 1: none). TAILK > 1 as given;
    0 = automatic under SPLITK = 0: when the last wave is at most half full, as many slices as
    fill the cluster slots it leaves idle, with at least TAIL_MIN_KTILES K tiles each, at most 8.
    SPLITK = 1 means whole tiles, so only an explicit TAILK slices the tail there."""
    rem = tiles % slots
    if tiles <= slots or rem == 0:
        return 1
    tailk = v.get("TAILK", 1)
    if tailk > 1:
        return tailk
    if tailk == 1 or v["SPLITK"] != 0 or rem * 2 > slots:
        return 1
    return max(1, min(slots // rem, ktiles // TAIL_MIN_KTILES, 8))


def persistent_schedule(p: GemmProblem, v) -> tuple[int, int]:
    """(whole, splits) for persistent.cuh: the first `whole` cluster tiles run whole, the others
    in `splits` K slices each. Uniform split-K (whole = 0) for problems with few tiles (SPLITK,
    `_uniform_splits`); otherwise whole tiles, with the tiles of a partial last wave sliced
    (TAILK, `_tail_splits`): 3072^3 in 128x256 tiles on 66 two-CTA cluster slots is 2 full waves
    and 12 tiles, which whole would hold 54 clusters idle for a third of the run. Slices never
    outnumber the K tiles (none is empty), nor pass SPLITK_WORKSPACE_CAP floats of partials;
    splits = 1 always comes with whole = tiles."""
    return _schedule(v, cluster_tiles(p, v), k_tiles(p), cluster_slots(cluster_size(v)))


def _schedule(v, tiles: int, ktiles: int, slots: int) -> tuple[int, int]:
    """persistent_schedule from what it depends on: the problem's cluster tiles and K tiles, and
    the GPU's cluster slots (counted once by the caller: the refit asks this of every candidate at
    each new shape, where each count cost a lookup of the GPU)."""
    splits = _uniform_splits(v, tiles, ktiles, slots)
    whole = 0
    if splits == 1:
        splits = _tail_splits(v, tiles, ktiles, slots)
        whole = tiles - tiles % slots if splits > 1 else tiles
    slot_floats = (tiles - whole) * cluster_size(v) * tile_rows(v) * v["BN"]
    splits = max(1, min(splits, ktiles, SPLITK_WORKSPACE_CAP // max(1, slot_floats)))
    return (tiles, 1) if splits == 1 else (whole, splits)


def persistent_splits(p: GemmProblem, v) -> int:
    """K slices of each sliced tile (1: every tile whole): persistent_schedule's second half."""
    return persistent_schedule(p, v)[1]


def _sliced_cta_tiles(p: GemmProblem, v) -> tuple[int, int]:
    """(CTA tiles cut into K slices, slices each); (0, 1) when every tile is whole."""
    whole, splits = persistent_schedule(p, v)
    return (0, 1) if splits == 1 else ((cluster_tiles(p, v) - whole) * cluster_size(v), splits)


def _flag_floats(sliced: int) -> int:
    """Two ints per sliced CTA tile, rounded to 32 (persistent.cuh's splitk_flag_floats)."""
    return cdiv(2 * sliced, 32) * 32


def persistent_flag_floats(p: GemmProblem, v) -> int:
    """The split-K flags at the head of the workspace: two ints per sliced CTA tile, rounded to 32
    (0 when the tiles are whole). They must be zero before a launch; a launch leaves them so."""
    return _flag_floats(_sliced_cta_tiles(p, v)[0])


def persistent_workspace(p: GemmProblem, v) -> int:
    """Floats of workspace for split-K (0 when the tiles are whole): the flags, then a BM x BN
    fp32 partial per sliced CTA tile and slice (persistent.cuh)."""
    sliced, splits = _sliced_cta_tiles(p, v)
    return _flag_floats(sliced) + sliced * splits * tile_rows(v) * v["BN"]


def persistent_static_smem(v) -> int:
    """Static shared memory of rungs 5-6: full + empty mbarriers, and the split-K arrival words."""
    return 16 * v["STAGES"] + 16


def layout_defaults(dtype: str, layout: str) -> dict[str, int]:
    """Parameters whose kernel default does not fit a layout, and what runs instead unless they are
    given: tf32 in layout tn has its consumers transpose B (transposes_b), holding the blocks in
    registers, so rung 6's default 128 x 256 tile is refused there (BN <= 128). 128 x 128 in 6 stages:
    H100, 4096^3, 615 us against 653 in 4 (session 13)."""
    return {"BN": 128, "STAGES": 6} if dtype == "tf32" and layout == "tn" else {}


BALANCE_MIN_KTILES = 16  # units of fewer K tiles keep every cluster slot (persistent_clusters)


def persistent_clusters(p: GemmProblem, v, slots: int) -> int:
    """Clusters of a persistent launch on `slots` cluster slots: never more than the work units
    (whole cluster tiles, plus the sliced ones times their K slices), and, where the units are of
    one size (every tile whole, or uniform split-K) and long (BALANCE_MIN_KTILES), no more than
    their rounds need. 256 cluster tiles on 66 slots take 4 rounds either way, and 64 clusters of
    4 each ran 0.6-2% faster than 66 of 3 or 4 (H100, 16-bit inputs, fp32 and 16-bit C, at
    3072^3 to 8192^3, 6144x2048x4096, 16384x1024x4096; session 14): every cluster works to the
    end, and four SMs fewer draw power. Short units are bound by latency and memory rather than
    by rounds: 8192x8192x256 (4 K tiles a tile) lost 1.3% on 128 CTAs against 132, so they keep
    every slot, and so does a tail split, whose short slices are what fill the slots. BALANCE = 0
    keeps every slot always (the launch before session 14)."""
    whole, splits = persistent_schedule(p, v)
    units = whole + (cluster_tiles(p, v) - whole) * splits
    clusters = max(1, min(units, slots))
    if v.get("BALANCE", 1) and (splits == 1 or whole == 0) and k_tiles(p) // splits >= BALANCE_MIN_KTILES:
        clusters = cdiv(units, cdiv(units, clusters))
    return clusters


def persistent_round_fill(p: GemmProblem, v) -> float:
    """The share of a persistent launch's rounds that does work: cluster tiles' worth of C (a
    partial tile counts for its part) over the rounds of whole cluster tiles times the cluster
    slots. 4096^3 in 128x256 tiles, 2x1 clusters: 256 tiles in 4 rounds of 66, 0.97; 4096x4224x4096:
    264 tiles' worth in 5 rounds (272 tiles), 0.80. Rounds, not the tail split: the split's short
    slices do not buy back what they should (4096x4224x4096 ran 12% longer than 4096^3, not 3%:
    results/h200-rung5-4096-tune-skew-session19.md). Uniform split-K counts its slices as units."""
    rows, cols = cta_tile(v, tf32_rs(p.dtype == "tf32", v))
    tile_elems = rows * v["CM"] * cols * v.get("CN", 1)
    tiles, slots = cluster_tiles(p, v), cluster_slots(cluster_size(v))
    whole, splits = _schedule(v, tiles, k_tiles(p), slots)  # with the counts above, not again
    units = tiles * splits if whole == 0 else tiles
    rounds = cdiv(units, slots) / (splits if whole == 0 else 1)
    return (p.M * p.N / tile_elems) / (rounds * slots)


def persistent_launch(p: GemmProblem, v) -> Launch:
    """One CTA per SM (in clusters of CM x CN, one-dimensional: rank = rm + CM * rn), as many
    clusters as persistent_clusters gives for the GPU's cluster slots."""
    cs = cluster_size(v)
    clusters = persistent_clusters(p, v, cluster_slots(cs))
    return Launch(grid=(clusters * cs, 1, 1), block=(persistent_threads(v), 1, 1), shmem=persistent_smem(v),
                  cluster=(cs, 1, 1))


def b_kmajor(spec: KernelSpec, v) -> bool:
    """Whether the kernel reads B K-major, from an NxK array (B^T): when its B_KMAJOR flag is set
    (layout nt; rungs 5 and 6)."""
    return bool(v.get("B_KMAJOR", 0))


def tma_boxes(spec: KernelSpec, v) -> dict[str, tuple[int, int]]:
    """(rows, columns) of each operand's TMA box: A the CTA tile's rows x one K tile (half of them
    with CN = 2: each CTA of a cluster row loads one half); A^T (KxM, read M-major: A_MNMAJOR) one
    K tile x 128 bytes (64 16-bit, one box per 64-row half; 32 tf32); B (KxN, read N-major) chunks of one K tile x 128 bytes
    (64 x 64 16-bit, 32 x 32 tf32); B^T (NxK, read K-major: B_KMAJOR) BN/CM rows x one K tile; C
    64 x 32 staged chunks (rungs 5-6; 64 x 64 for a 16-bit C)."""
    tf32 = "tf32" in spec.dtypes
    k_tile = 32 if tf32 else 64
    rows = cta_tile(v, tf32_rs(tf32, v))[0]
    boxes = {"A": (k_tile, 128 // (4 if tf32 else 2)) if v.get("A_MNMAJOR", 0) else (rows // v.get("CN", 1), k_tile),
             "B": (v["BN"] // v.get("CM", 1), k_tile) if b_kmajor(spec, v) else (k_tile, 128 // (4 if tf32 else 2))}
    if "tma_store" in spec.tags:  # 64 rows x 128 bytes: 32 fp32 columns, or 64 of a 16-bit C (OUT16)
        boxes["C"] = (64, 64) if v.get("OUT16", 0) else (64, 32)
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
    threads=lambda v: 128, smem_bytes=lambda v: 8 * v["STAGES"],  # static: the full mbarriers
    block_tile=lambda v: (BM, v["BN"]),
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
    threads=lambda v: 384, smem_bytes=lambda v: 16 * v["STAGES"],  # static: full + empty mbarriers
    block_tile=lambda v: (BM, v["BN"]),
    geometry=lambda p, v: Launch(grid=(cdiv(p.N, v["BN"]), cdiv(p.M, BM), 1), block=(384, 1, 1),
                                 shmem=pipeline_smem(v)),
    problem_check=aligned_rows, arch="sm_90a", dtypes=HALF_DTYPES, tags=("tma",),
)


# -- operand layouts ------------------------------------------------------------------------------
# A problem's layout is two letters, op(A) op(B) as BLAS names them, for row-major arrays: "n" the
# operand as the product uses it (A MxK, B KxN), "t" given as its transpose (B as NxK: x @ W.T,
# torch.nn.functional.linear's weight). Rungs that read layout nt in place carry the tag
# "layout_nt"; the others refuse it (ops/hgemm.py).

def out16_param() -> Param:
    """Rung 5's C type flag: set from the problem's output dtype (fp32: 0; the input type: 1), not tuned."""
    return Param("OUT16", 0, (), "C type, set from the problem (0: fp32, 1: the 16-bit input type)")


def b_kmajor_param() -> Param:
    """Rungs 5-6's B layout flag: set from the problem's layout (nn: 0, nt: 1), never tuned (no space)."""
    return Param("B_KMAJOR", 0, (), "B layout, set from the problem (0: KxN row-major, 1: given as NxK, nt)")


def b_kmajor_constraint() -> Constraint:
    return Constraint("B_KMAJOR must be 0 (B is KxN) or 1 (B given as NxK)", lambda v: v["B_KMAJOR"] in (0, 1))


def a_mnmajor_param() -> Param:
    """Rungs 5-6's A layout flag: set from the problem's layout (nn/nt: 0, tn/tt: 1), never tuned."""
    return Param("A_MNMAJOR", 0, (), "A layout, set from the problem (0: MxK row-major, 1: given as KxM, tn/tt)")


def a_mnmajor_constraint() -> Constraint:
    return Constraint("A_MNMAJOR must be 0 (A is MxK) or 1 (A given as KxM)", lambda v: v["A_MNMAJOR"] in (0, 1))


def mnmajor_a_rule(p: GemmProblem) -> str:
    """The TMA rule for reading an M-major A (A^T, KxM row-major) in place: its row pitch, M
    elements, must be a multiple of 16 bytes (M % 8 == 0 for 16-bit inputs). "" when it holds,
    else why (the padding rungs then copy A^T into padded rows, in the timed work)."""
    reason = row_rule(p, "M", input_itemsize(p))
    return f"reads an M-major A (given as KxM) in place only when {reason}" if reason else ""


def kmajor_b_rule(p: GemmProblem) -> str:
    """The TMA rule for reading a K-major B (B^T, NxK row-major) in place: its row pitch, K elements,
    must be a multiple of 16 bytes (K % 8 == 0 for 16-bit inputs, K % 4 for tf32). "" when it
    holds, else why (the padding rungs then copy B^T into padded rows, in the timed work)."""
    reason = row_rule(p, "K", input_itemsize(p))
    return f"reads a K-major B (given as NxK) in place only when {reason}" if reason else ""


def _persistent_params(first: tuple[Param, ...], cm: int) -> tuple[Param, ...]:
    return first + (
        # 64: twice the tiles of 128 for problems with too few (1024^3: 128 tiles of 128x64 on 132
        # SMs, cuBLAS's own choice there, against 64 of 128x128). 192: waves that fill the SMs
        # where 256 leaves a partial one (3072^3: 384 tiles of 128x192, 2.9 waves of 132;
        # 1000x3000x2000: 128 tiles, one wave 97% full, against 48 cluster tiles of 256x256 on 66)
        Param("BN", 256, (64, 128, 192, 256), "block tile columns (wgmma N)"),
        # 7 and 8 fit shared memory only with BN = 64 (24 KB a stage)
        Param("STAGES", 4, (2, 3, 4, 5, 6, 7, 8), "tiles in flight"),
        # defaults as measured on the H200 (docs/tensor-cores.md): the 2-CTA multicast cluster
        # leads for 16-bit inputs (102.5% of cuBLAS at 8192^3 against 100.3% with CM = 1), one CTA
        # for tf32 (91.2% against 87.1%; reading B in place, H100: 98.5% / 96.5% at 4096^3 / 8192^3
        # against 97.4% / 96.2%)
        Param("CM", cm, (1, 2), "CTAs per cluster along M (2: B multicast to both)"),
        # along N: A multicast, which cuBLAS pairs with 128x64 tiles at 1024^3 (a 1x2 cluster); it
        # measured slower than CN = 1 on every shape tried (session 9, docs/tensor-cores.md), so
        # it is a choice for the tuner, not a default
        Param("CN", 1, (1, 2), "CTAs per cluster along N (2: A multicast to both)"),
        Param("GROUP_M", 8, (1, 4, 8, 16), "cluster-tile rows per group of the tile order"),
        # split-K for problems with fewer tiles than SMs; a launch argument, not a template one.
        # Default 0 (automatic): measured on an H100 (bf16, 7 shapes x 4 tile/cluster shapes,
        # session 6) it never lost more than 0.4% to whole tiles and won 2.3x at 512x512x8192 and
        # 1.3x at 128x4096x4096 (docs/tensor-cores.md, split-K).
        Param("SPLITK", 0, (0, 1, 2, 3, 4, 6, 8), "K slices per tile (split-K); 0 = automatic", template=False),
        # the tail split: whole tiles for the full waves, K slices for the tiles of a partial last
        # wave only (persistent_schedule); a launch argument too
        Param("TAILK", 0, (0, 1, 2, 4), "K slices for the tiles of a partial last wave; 0 = automatic, "
              "1 = whole", template=False),
        # how many clusters the launch takes (persistent_clusters); a launch argument too
        Param("BALANCE", 1, (0, 1), "1: no more clusters than the rounds of long units need; 0: one per "
              "cluster slot", template=False),
    )


def _persistent_constraints() -> tuple[Constraint, ...]:
    return (
        Constraint("BN must be 64, 128, 192 or 256", lambda v: v["BN"] in (64, 128, 192, 256)),
        Constraint("CM must be 1 or 2", lambda v: v["CM"] in (1, 2)),
        Constraint("CN must be 1 or 2", lambda v: v["CN"] in (1, 2)),
        Constraint("GROUP_M must be >= 1", lambda v: v["GROUP_M"] >= 1),
        Constraint("SPLITK must be 0 (automatic) to 16", lambda v: 0 <= v["SPLITK"] <= 16),
        Constraint("TAILK must be 0 (automatic) to 16", lambda v: 0 <= v["TAILK"] <= 16),
        Constraint("BALANCE must be 0 or 1", lambda v: v.get("BALANCE", 1) in (0, 1)),
    ) + _stage_constraints(persistent_smem)


def _consumer_params() -> tuple[Param, ...]:
    # Rung 5 only (rung 6's transposed product keeps two consumers of 64 columns). A lone consumer
    # is cuBLAS's own choice at 1024^3 (its 128x64 kernel issues both 64-row blocks of the tile
    # from one warpgroup, two accumulator sets); 64-row tiles double the tiles of a problem again
    # with one wgmma of the full BN a K step (docs/tensor-cores.md, session 11).
    # Ping-pong: each of the two consumer warpgroups computes tiles of its own, alternately, so one's
    # epilogue runs under the other's wgmmas (CUTLASS's pingpong schedule against its cooperative one).
    return (
        # 256: cuBLAS's tile at 4096^3 bf16 (256x128 in 1x2 clusters, A multicast along N: `nvjet_sm90_tss_
        # 256x128_64x4_1x2_h_bz_coopA`), two 64-row blocks per consumer at BN = 128, 128 accumulators each
        Param("BM", 128, (64, 128, 256), "block tile rows: 1, 2 or 4 64-row wgmma blocks"),
        Param("CONSUMERS", 2, (1, 2), "consumer warpgroups: 2 (64 rows each) or 1 (every 64-row block of the tile)"),
        Param("PINGPONG", 0, (0, 1), "1: the two consumer warpgroups take alternate BM x BN tiles (ping-pong), "
              "0: they share each tile (cooperative)"),
    )


def _consumer_constraints() -> tuple[Constraint, ...]:
    return (
        Constraint("BM must be 64, 128 or 256", lambda v: v["BM"] in (64, 128, 256)),
        Constraint("CONSUMERS must be 1 or 2", lambda v: v["CONSUMERS"] in (1, 2)),
        Constraint("a 64-row tile (BM = 64) has one consumer warpgroup (CONSUMERS = 1) or two in ping-pong",
                   lambda v: v["BM"] != 64 or v["CONSUMERS"] == 1 or v.get("PINGPONG", 0)),
        Constraint("a consumer thread holds at most 128 accumulators: its 64-row blocks x BN / 2 <= 128",
                   lambda v: consumer_blocks(v) * v["BN"] // 2 <= 128),
        Constraint("PINGPONG must be 0 or 1", lambda v: v.get("PINGPONG", 0) in (0, 1)),
        Constraint("ping-pong (PINGPONG = 1) takes two consumer warpgroups (CONSUMERS = 2)",
                   lambda v: not v.get("PINGPONG", 0) or v["CONSUMERS"] == 2),
        Constraint("an M-major A (A_MNMAJOR = 1) shared along N (CN = 2) needs BM >= 128 (whole 64-column boxes per CTA)",
                   lambda v: not (v["A_MNMAJOR"] and v["CN"] == 2 and v["BM"] == 64)),
    )


PERSISTENT = KernelSpec(
    name="persistent", op="hgemm", rung=5, title="persistent + clusters + TMA multicast + TMA store",
    idea="one CTA per SM loops over tiles in grouped order; clusters share B (along M) and A (along N) by TMA multicast; "
         "C leaves through swizzled shared memory by TMA stores; any shape; A and B as given or transposed "
         "(nt, tn, tt: read in place)",
    source="hgemm/05_persistent_cluster.cu", entry="gemmlab::hgemm_persistent",
    params=_persistent_params((dtype_param(), b_kmajor_param(), out16_param(), a_mnmajor_param()), cm=2)
    + _consumer_params(),
    constraints=(dtype_constraint(),
                 b_kmajor_constraint(),
                 Constraint("OUT16 must be 0 (fp32 C) or 1 (C in the input type)", lambda v: v["OUT16"] in (0, 1)),
                 a_mnmajor_constraint())
    + _persistent_constraints() + _consumer_constraints(),
    threads=persistent_threads, smem_bytes=persistent_static_smem,
    block_tile=lambda v: (tile_rows(v), v["BN"]),
    geometry=persistent_launch, workspace=persistent_workspace, workspace_flags=persistent_flag_floats,
    round_fill=persistent_round_fill,
    arch="sm_90a", dtypes=HALF_DTYPES, tags=("tma", "tma_store", "pads", "persistent", "layout_nt", "layout_tn", "out16"),
)

TF32_WGMMA = KernelSpec(
    name="tf32_wgmma", op="hgemm", rung=6, title="tf32 wgmma for fp32 inputs (lower precision)",
    idea="fp32 A and B multiplied as tf32 (10-bit mantissa) by wgmma.m64nNk8 in rung 5's pipeline; "
         "a KxN B is read in place through registers (the transposed product, BN x 128 tiles), a "
         "B given as NxK K-major, an A given as KxM through registers (B, if KxN, transposed in "
         "shared memory); compare with cuBLAS TF32",
    source="hgemm/06_tf32_wgmma.cu", entry="gemmlab::hgemm_tf32_wgmma",
    params=_persistent_params((b_kmajor_param(), a_mnmajor_param()), cm=1),
    constraints=(b_kmajor_constraint(),
                 a_mnmajor_constraint(),
                 # wider: the consumers hold the accumulators, two fragment sets and the blocks they
                 # transpose, and ptxas spills (at 192: 16 words; at 256: 296)
                 Constraint("layout tn (B transposed in shared memory) needs BN <= 128",
                            lambda v: not transposes_b(True, v) or v["BN"] <= 128))
    + _persistent_constraints(),
    threads=persistent_threads, smem_bytes=persistent_static_smem,
    block_tile=lambda v: cta_tile(v, tf32_rs(True, v)),
    geometry=persistent_launch, workspace=persistent_workspace, workspace_flags=persistent_flag_floats,
    round_fill=persistent_round_fill,
    arch="sm_90a", dtypes=("tf32",),
    tags=("tma", "tma_store", "pads", "persistent", "layout_nt", "layout_tn"),
)

register(TMA_WGMMA, WARP_SPECIALIZED, PERSISTENT, TF32_WGMMA)
