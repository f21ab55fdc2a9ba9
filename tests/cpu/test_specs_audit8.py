"""Tests that could not fail, eighth audit: hand-made mutants of the kernels' specs
(kernels/sgemm/specs.py, kernels/hgemm/specs.py, kernels/reduce/specs.py) and of the reduce pass
plan (ops/reduce_passes.py) that every other CPU test let through, each pinned here by what a
launch or a user would see: a grid that leaves rows or columns of C without a block for an odd
shape, a block of the wrong shape, dynamic shared memory smaller than the kernel's tiles, a
constraint that lets a tile the kernel's static_asserts refuse (or refuses one they take), a
workspace or a pass plan of the wrong size, a refusal's words. The expectations are worked out
by hand from each kernel's tiling as its .cu file writes it (the arrays it declares, the threads
it indexes), never by calling the formula under test. No GPU, no NVRTC."""
from __future__ import annotations

import pytest

from gemmlab import registry
from gemmlab.errors import ConstraintError
from gemmlab.kernels.hgemm import specs as hg
from gemmlab.kernels.reduce import specs as rd
from gemmlab.kernels.sgemm import specs as sg
from gemmlab.ops import reduce_passes
from gemmlab.problem import GemmProblem, ReduceProblem


def _p(M, N, K=64, dtype="fp32"):
    return GemmProblem(M, N, K, 1.0, 0.0, dtype)


def _refused(spec, params, words):
    with pytest.raises(ConstraintError, match=words):
        spec.resolve(params)


@pytest.fixture(autouse=True)
def h100_sms(monkeypatch):
    """132 SMs (an H100 SXM), whatever machine runs the tests."""
    for module in (sg, hg, rd):
        monkeypatch.setattr(module, "sm_count", lambda: 132)


# ---- sgemm rungs 1-6 --------------------------------------------------------------------------

@pytest.mark.parametrize("name,params", [
    ("blocktiling_1d", {"BK": 0}),  # float As[BM * BK]: a zero-sized shared array
    ("blocktiling_2d", {"BK": 0}),
    ("vectorize", {"BK": 0}),
    ("tiled", {"BK": 0}),
    ("s4_work_per_thread", {"BK": 0}),
])
def test_a_zero_tile_size_is_refused_as_such(name, params):
    """BK = 0 passes every divisibility rule (0 % t == 0); the kernels' arrays of BM * BK floats
    would be empty: refused, naming the rule."""
    _refused(registry.get(name), params, "must be >= 1")


@pytest.mark.parametrize("name", ["naive", "coalescing", "smem_blocking"])
def test_the_square_rungs_take_power_of_two_blocks_only(name):
    _refused(registry.get(name), {"BLOCK": 24}, "BLOCK must be a power of two")
    assert registry.get(name).resolve({"BLOCK": 16})["BLOCK"] == 16


@pytest.mark.parametrize("name", ["coalescing", "smem_blocking", "s4_baseline"])
def test_rungs_2_and_3_launch_a_one_dimensional_block(name):
    """02_coalescing.cu: row = threadIdx.x / BLOCK, col = threadIdx.x % BLOCK, a 1-D block of
    BLOCK*BLOCK threads (a BLOCK x BLOCK block would leave threadIdx.x < BLOCK: one row)."""
    spec = registry.get(name)
    for block in (8, 16, 32):
        launch = spec.launch(_p(100, 70), spec.resolve({"BLOCK": block}))
        assert launch.block == (block * block, 1, 1)
        assert launch.grid == (-(-70 // block), -(-100 // block), 1)


@pytest.mark.parametrize("name", ["blocktiling_1d", "blocktiling_2d", "vectorize", "bank_linearize"])
def test_rectangular_tiles_put_column_tiles_on_x_and_row_tiles_on_y(name):
    """Block (x, y) computes rows y*BM.. and columns x*BN.. (blockRow = blockIdx.y * BM,
    blockCol = blockIdx.x * BN in rungs 4-7): with BM != BN an odd shape needs cdiv(N, BN)
    blocks on x and cdiv(M, BM) on y."""
    spec = registry.get(name)
    extra = {"BK": 16, "TM": 16} if name == "blocktiling_1d" else {}  # 512 threads, not 1024
    v = spec.resolve({"BM": 64, "BN": 128, **extra})
    assert spec.launch(_p(1000, 3000), v).grid == (24, 16, 1)  # 3000/128 -> 24, 1000/64 -> 16
    assert spec.launch(_p(129, 127), v).grid == (1, 3, 1)
    v = spec.resolve({"BM": 128, "BN": 64, **extra})
    assert spec.launch(_p(1000, 3000), v).grid == (47, 8, 1)


def test_rung_5_threads_are_thread_rows_times_thread_columns():
    """05_blocktiling_2d.cu: NT = (BM / TM) * (BN / TN). A 72 x 64 tile of 8 x 16 thread tiles is
    9 x 4 = 36 threads, which split the 72 x 9 A tile (648) and the 9 x 64 B tile (576) evenly."""
    spec = registry.get("blocktiling_2d")
    v = spec.resolve({"BM": 72, "BN": 64, "BK": 9, "TM": 8, "TN": 16})
    assert spec.launch(_p(100, 100), v).block == (36, 1, 1)
    _refused(spec, {"BM": 72, "BN": 64, "BK": 8, "TM": 8, "TN": 16}, "split the B tile")  # 512 % 36


# Static shared memory at points other than the defaults (which test_compile checks against
# ptxas), in bytes, from the arrays each kernel declares: 4 bytes a float.
@pytest.mark.parametrize("name,params,floats", [
    ("smem_blocking", {"BLOCK": 16}, 16 * 16 + 16 * 16),  # As[BLOCK*BLOCK], Bs[BLOCK*BLOCK]
    ("blocktiling_1d", {"BM": 64, "BN": 128, "BK": 16, "TM": 16}, 64 * 16 + 16 * 128),  # As[BM*BK], Bs[BK*BN]
    ("blocktiling_2d", {"BM": 64, "BN": 128, "BK": 8}, 64 * 8 + 8 * 128),
    ("vectorize", {"BM": 64, "BN": 128, "BK": 8}, 8 * 64 + 8 * 128),  # As[BK*BM] (transposed), Bs[BK*BN]
    ("bank_linearize", {"BM": 64, "BN": 128, "BK": 8}, 8 * 64 + 8 * 128),
    # As[BK*(BM+PAD)], Bs[BK*(BN + (BN/32)*PAD)]: 8*68 + 8*144
    ("bank_padding", {"BM": 64, "BN": 128, "BK": 8, "PAD": 4}, 8 * 68 + 8 * 144),
    ("tiled", {"TS": 16, "BK": 8, "RM": 2, "RN": 4}, 32 * 8 + 8 * 64),  # As[BM][BK], Bs[BK][BN]; BM=32, BN=64
    ("s4_work_per_thread", {"D": 8, "BK": 16, "S": 2}, 16 * 16 + 16 * 16),  # As[L][BK], Bs[BK][L]; L=16
    ("s4_outer_product", {"DM": 8, "DN": 16, "BK": 8}, 32 * 8 + 8 * 64),  # BM = 4*DM, BN = 4*DN
    ("s4_smem_transpose", {"DM": 8, "DN": 16, "BK": 8, "TM": 4, "TN": 8}, 8 * 32 + 8 * 128),  # BM=32, BN=128
])
def test_static_shared_memory_is_the_kernels_arrays(name, params, floats):
    spec = registry.get(name)
    assert spec.smem_bytes(spec.resolve(params)) == 4 * floats


# Launches of the seeds' variants at 1000 x 3000: grid x over cdiv(N, BN), y over cdiv(M, BM),
# and the 2-D thread blocks their .cu files index (tx = threadIdx.x, ty = threadIdx.y).
@pytest.mark.parametrize("name,params,grid,block", [
    ("tiled", {"TS": 16, "RM": 2, "RN": 4}, (47, 32, 1), (16, 16, 1)),  # BM = TS*RM = 32, BN = TS*RN = 64
    ("tiled", {"TS": 8, "RM": 4, "RN": 1}, (375, 32, 1), (8, 8, 1)),  # BM = 32, BN = 8
    ("s4_work_per_thread", {"D": 8, "S": 2}, (188, 63, 1), (8, 8, 1)),  # L = S*D = 16
    ("s4_outer_product", {"DM": 8, "DN": 16}, (47, 32, 1), (16, 8, 1)),  # x: DN columns, y: DM rows
    ("s4_smem_transpose", {"DM": 8, "DN": 16, "TM": 4, "TN": 8}, (24, 32, 1), (16, 8, 1)),  # 32 x 128 tiles
    ("s4_smem_transpose", {"DM": 16, "DN": 16, "TM": 8, "TN": 4}, (47, 8, 1), (16, 16, 1)),  # 128 x 64 tiles
])
def test_seed_variants_cover_an_odd_shape_with_2d_blocks(name, params, grid, block):
    spec = registry.get(name)
    launch = spec.launch(_p(1000, 3000), spec.resolve(params))
    assert (launch.grid, launch.block) == (grid, block)


@pytest.mark.parametrize("name,params,words", [
    # 04_blocktiling_1d.cu: static_assert(BM % TM == 0); 36 x 64 tiles of 8 rows, 288 threads,
    # split both tiles of BK = 72 evenly: only that rule is broken
    ("blocktiling_1d", {"BM": 36, "BN": 64, "BK": 72, "TM": 8}, "TM must divide BM"),
    # 05: BN % TN == 0; 64 x 36 in 8 x 8 thread tiles: 8 x 4 = 32 threads split both tiles
    ("blocktiling_2d", {"BM": 64, "BN": 36, "BK": 8, "TM": 8, "TN": 8}, "TN must divide BN"),
])
def test_a_thread_tile_that_does_not_divide_the_block_tile_is_refused(name, params, words):
    _refused(registry.get(name), params, words)


def test_rung_9_loaders_must_bring_whole_k_rows():
    """09_autotuned.cu: static_assert((NT * 4) % BK == 0). BK = 48 keeps every other rule at
    64 x 64 tiles of 4 x 4 thread sub-tiles (A and B tiles of 64 x 48 floats: 3 float4s a thread)
    but the 256 threads' 1024 floats a load are not whole rows of 48."""
    _refused(registry.get("autotuned"), {"BM": 64, "BN": 64, "BK": 48, "TM": 4, "TN": 4},
             r"loaders\*4 must be a multiple of BK")


# ---- sgemm rungs 10-13 --------------------------------------------------------------------------

# A 64 x 128 block tile of four 32 x 64 warp tiles (128 threads), 8 x 4 thread tiles, one WNITER:
# WMITER = 32*64 / (32*8*4*1) = 2, sub-tiles 16 x 64 of 2 x 16 threads.
RECT = {"BM": 64, "BN": 128, "BK": 8, "WM": 32, "WN": 64, "WNITER": 1, "TM": 8, "TN": 4, "NT": 128}


@pytest.mark.parametrize("name", ["warptiling", "async_pipeline"])
def test_warptile_rungs_cover_an_odd_shape_with_rectangular_tiles(name):
    spec = registry.get(name)
    launch = spec.launch(_p(1000, 3000), spec.resolve(RECT))
    assert launch.grid == (24, 16, 1) and launch.block == (128, 1, 1)


def test_the_pipeline_asks_for_its_stages_of_padded_a_and_b_tiles():
    """12_async_pipeline.cu: extern smem holds STAGES x [BK][BM + PADA] of A, then STAGES x
    [BK][BN] of B: 2 * 8 * (64 + 4) + 2 * 8 * 128 floats."""
    spec = registry.get("async_pipeline")
    launch = spec.launch(_p(1000, 3000), spec.resolve({**RECT, "STAGES": 2, "PADA": 4}))
    assert launch.shmem == 4 * (2 * 8 * 68 + 2 * 8 * 128)
    launch = spec.launch(_p(1000, 3000), spec.resolve({**RECT, "STAGES": 3, "PADA": 8}))
    assert launch.shmem == 4 * (3 * 8 * 72 + 3 * 8 * 128)


def test_warp_count_must_match_the_block_threads():
    """12_async_pipeline.cu: (BM / WM) * (BN / WN) == NT / 32: four warp tiles for 8 warps refused."""
    for name in ("warptiling", "async_pipeline"):
        _refused(registry.get(name), {**RECT, "NT": 256}, r"must equal the warp count NT/32")


def test_warptiles_keep_at_most_128_accumulators_a_thread():
    """A warp's 32 lanes hold WM x WN outputs: 128 x 64 warp tiles are 256 accumulators a thread,
    past the 255 registers one may have (every other rule holds: 4 warps, 4 x 1 sub-tiles of 8 x 8)."""
    for name in ("warptiling", "async_pipeline", "hopper_simt"):
        _refused(registry.get(name), {"BM": 256, "BN": 128, "BK": 8, "WM": 128, "WN": 64, "WNITER": 1, "TM": 8,
                                      "TN": 8, "NT": 128}, "at most 255 registers")


def test_the_pipeline_splits_a_in_floats_and_b_in_float4s():
    """warptile.cuh's loaders: (BM * BK) % NT == 0 (A element by element, transposed into
    As), (BN * BK / 4) % NT == 0 (B in float4s). A 64 x 8 A tile for 256 threads is 2 floats
    each (taken); a 32 x 4 one is half a float each (refused)."""
    spec = registry.get("async_pipeline")
    ok = {"BM": 64, "BN": 256, "BK": 8, "WM": 32, "WN": 64, "WNITER": 2, "TM": 4, "TN": 4, "NT": 256, "STAGES": 2}
    assert spec.resolve(ok)["BM"] == 64
    bad = {"BM": 32, "BN": 256, "BK": 4, "WM": 32, "WN": 32, "WNITER": 1, "TM": 4, "TN": 4, "NT": 256, "STAGES": 2}
    _refused(spec, bad, "split the A tile evenly")
    # B: 64 columns x 8 rows in float4s is 128, not a multiple of 256 threads
    _refused(spec, {**ok, "BM": 256, "BN": 64, "WM": 64, "WN": 32}, "split the B tile evenly in float4s")


@pytest.mark.parametrize("name", ["async_pipeline", "hopper_simt"])
def test_dynamic_shared_memory_stops_at_227_kib(name):
    """sm_90 lets a block opt in to 227 KiB (232448 B) of shared memory. 7 stages of a 64 x 32 A
    (rows padded by 4) and a 32 x 192 B are 7 * 32 * 260 floats = 232960 B: refused, though under
    228 KiB; without the padding, 229376 B: taken."""
    spec = registry.get(name)
    v = {"BM": 64, "BN": 192, "BK": 32, "WM": 32, "WN": 96, "WNITER": 1, "TM": 4, "TN": 12, "NT": 128, "STAGES": 7}
    _refused(spec, {**v, "PADA": 4}, "dynamic shared memory must be <= 232448 B")
    assert spec.launch(_p(64, 192, 1024), spec.resolve({**v, "PADA": 0})).shmem == 229376


HOPPER_SIMT = registry.get("hopper_simt")  # defaults: 128 x 256 tiles, BK = 16


@pytest.mark.parametrize("M,N,K,splitk,grid", [
    (129, 257, 64, 1, (4, 1, 1)),  # 2 x 2 tiles of 128 x 256 for one row and one column past a tile
    (128, 256, 16, 4, (1, 1, 1)),  # one K tile: 4 slices asked for, 1 given (no empty slice)
    (128, 256, 40, 4, (1, 1, 3)),  # 3 K tiles of 16
    (128, 256, 4096, 4, (1, 1, 4)),
    (128, 256, 128, 0, (1, 1, 2)),  # automatic: 1 tile, 8 K tiles, at least 4 a slice: 2
    (128, 256, 1024, 0, (1, 1, 16)),  # 64 K tiles: 16 slices (the cap) of 4
    (1024, 1024, 4096, 0, (32, 1, 4)),  # 32 tiles for 132 SMs: 132 // 32 = 4 slices fill a wave
    (1280, 1280, 4096, 0, (50, 1, 2)),  # 50 tiles: 2 slices (100 blocks) still fit a wave
    (1536, 1536, 4096, 0, (72, 1, 1)),  # 72 tiles: more than half the SMs, whole tiles
])
def test_rung_13_grid_is_its_tiles_times_the_k_slices(M, N, K, splitk, grid):
    v = HOPPER_SIMT.resolve({"SPLITK": splitk})
    assert HOPPER_SIMT.launch(_p(M, N, K), v).grid == grid
    slices = grid[2]
    assert HOPPER_SIMT.workspace_floats(_p(M, N, K), v) == (slices * M * N if slices > 1 else 0)


def test_rung_13_names_its_twelve_template_arguments_and_not_splitk():
    """13_hopper_simt.cu: template <BM, BN, BK, WM, WN, WNITER, TM, TN, NT, STAGES, PADA, GROUP>;
    SPLITK is a launch choice (gridDim.z)."""
    assert HOPPER_SIMT.name_expression(HOPPER_SIMT.resolve({"SPLITK": 2})) == \
        "gemmlab::sgemm_hopper_simt<128, 256, 16, 64, 64, 1, 4, 8, 256, 4, 4, 8>"


# ---- hgemm ------------------------------------------------------------------------------------

@pytest.fixture
def h100_clusters(monkeypatch):
    """No cluster count learnt from a driver (cluster slots: 132 // cluster size)."""
    monkeypatch.setattr(hg, "_driver_slots", {})


def test_mma_sync_threads_must_split_the_a_tile_in_16_byte_chunks():
    """02_mma_sync.cu: (BM * CPA) % NT == 0, CPA = BK / 8 chunks a row. 64 x 16 A is 128 chunks,
    16 warps (64/32 x 256/32) are 512 threads: refused; the 16 x 256 B tile is 512 chunks."""
    spec = registry.get("mma_sync", "hgemm")
    _refused(spec, {"BM": 64, "BN": 256, "BK": 16, "WM": 32, "WN": 32}, "split the A tile evenly in 16-byte chunks")
    assert spec.resolve({"BM": 128, "BN": 256, "BK": 64, "WM": 32, "WN": 32})["BM"] == 128  # 1024 chunks, 1024 threads


@pytest.mark.parametrize("params,static,dynamic,threads", [
    # full[STAGES] and empty[STAGES] mbarriers (8 bytes each) and last_of[4] ints; dynamic: STAGES x
    # (BM + BN rows of 128 bytes), 1024 bytes of alignment slack, 2 C buffers of 64 x 128 bytes a consumer
    ({"BM": 128, "BN": 256, "STAGES": 4, "CONSUMERS": 2}, 16 * 4 + 16, 4 * (128 + 256) * 128 + 1024 + 2 * 2 * 8192, 384),
    ({"BM": 64, "BN": 128, "STAGES": 6, "CONSUMERS": 1}, 16 * 6 + 16, 6 * (64 + 128) * 128 + 1024 + 1 * 2 * 8192, 256),
    ({"BM": 256, "BN": 128, "STAGES": 3, "CONSUMERS": 2}, 16 * 3 + 16, 3 * (256 + 128) * 128 + 1024 + 2 * 2 * 8192, 384),
])
def test_rung_5_shared_memory_and_threads(h100_clusters, params, static, dynamic, threads):
    spec = registry.get("persistent", "hgemm")
    v = spec.resolve(params)
    launch = spec.launch(_p(4096, 4096, 4096, "bf16"), v)
    assert spec.smem_bytes(v) == static
    assert launch.shmem == dynamic
    assert launch.block == (threads, 1, 1)


def test_rung_5_launches_clusters_of_its_ctas(h100_clusters):
    """4096^3 in 128 x 256 tiles, 2 x 1 clusters: 256 cluster tiles of whole K on 66 cluster slots
    take 4 rounds, which 64 clusters do as well as 66: 128 CTAs in clusters of 2."""
    spec = registry.get("persistent", "hgemm")
    launch = spec.launch(_p(4096, 4096, 4096, "bf16"), spec.resolve({}))
    assert launch.grid == (128, 1, 1) and launch.cluster == (2, 1, 1)
    launch = spec.launch(_p(4096, 4096, 4096, "bf16"), spec.resolve({"CM": 2, "CN": 2, "BN": 128}))
    assert launch.cluster == (4, 1, 1) and launch.grid[0] % 4 == 0


@pytest.mark.parametrize("name,params,grid,shmem", [
    # 03: 128-row tiles, STAGES x (128 x 64 A + 64 x BN B) 16-bit elements, 1024 bytes of slack
    ("tma_wgmma", {"BN": 64, "STAGES": 3}, (47, 8, 1), 3 * (128 * 128 + 64 * 128) + 1024),
    ("tma_wgmma", {"BN": 128, "STAGES": 2}, (24, 8, 1), 2 * (128 * 128 + 128 * 128) + 1024),
    ("warp_specialized", {"BN": 256, "STAGES": 4}, (12, 8, 1), 4 * (128 * 128 + 256 * 128) + 1024),
])
def test_rungs_3_and_4_cover_an_odd_shape_in_128_row_tiles(name, params, grid, shmem):
    spec = registry.get(name, "hgemm")
    launch = spec.launch(_p(1000, 3000, 512, "bf16"), spec.resolve(params))
    assert (launch.grid, launch.shmem) == (grid, shmem)
    assert launch.block == ((128, 1, 1) if name == "tma_wgmma" else (384, 1, 1))


def test_an_m_major_a_in_place_needs_m_rows_of_16_bytes():
    p = GemmProblem(1001, 64, 64, dtype="bf16", layout="tn")
    assert "M % 8 == 0" in hg.mnmajor_a_rule(p) and "M = 1001" in hg.mnmajor_a_rule(p)
    assert hg.mnmajor_a_rule(GemmProblem(1000, 64, 63, dtype="bf16", layout="tn")) == ""  # K does not matter
    assert "M % 4 == 0" in hg.mnmajor_a_rule(GemmProblem(1001, 64, 64, dtype="tf32", layout="tn"))


# ---- sgemm rungs 14-15 --------------------------------------------------------------------------

BIGTILE = registry.get("bigtile")


@pytest.mark.parametrize("params,words", [
    # 4 warp tiles of 64 x 64 (128 threads' worth) for NT = 256: 14_bigtile.cu gives a warp its tile by warp id
    ({"BM": 128, "BN": 128}, "NT must be one warp per warp tile"),
    # 64 lanes' worth of 4 x 16 thread tiles in a 64 x 64 warp tile
    ({"TM": 4, "TN": 16, "WM": 64, "WN": 64}, "a warp's 32 lanes must tile its warp tile"),
    # 128 x 24 A: 768 float4s split over 256 threads, but 6 float4s a row do not divide 256 threads
    ({"BK": 24}, "split the A tile evenly in float4s, whole rows at a time"),
    # B: 16 x 192 is 768 float4s, 48 a row: 256 threads are not whole rows of it
    ({"BN": 192, "BK": 16, "WM": 32, "WN": 96, "TM": 4, "TN": 24}, "split the B tile evenly in float4s, whole rows"),
    # 16 x 16 accumulators on 128 threads: 256 + 72 registers fit 65536 / 128, not the 255 a thread may have
    ({"BM": 128, "BN": 256, "WM": 64, "WN": 128, "TM": 16, "TN": 16, "NT": 128}, "at most 255 registers"),
])
def test_bigtile_refuses_tilings_its_kernel_cannot_run(params, words):
    _refused(BIGTILE, params, words)


def test_stream_k_flags_are_one_a_tile_rounded_up_to_32():
    """stream_k.cuh's flag_floats: 129 x 257 is 2 x 2 tiles of 128 x 256: 32 flags, then two partial
    tiles a block; 4 tiles x 9 K-iterations (K = 72, BK = 8) deal out to 36 blocks."""
    v = BIGTILE.resolve({"STREAMK": 1})
    p = _p(129, 257, 72)
    assert BIGTILE.launch(p, v).grid == (36, 1, 1)
    assert BIGTILE.workspace_flag_floats(p, v) == 32
    assert BIGTILE.workspace_floats(p, v) == 32 + 2 * 36 * 128 * 256


TMA_FFMA = registry.get("tma_ffma")


def test_rung_15_tensor_map_boxes():
    """15_tma_ffma.cu: A's box is BM rows of one K tile, swizzled over its row of 4 * BK bytes
    (a_chunk_xor's ROW_BYTES); B's is BK x BN, unswizzled."""
    assert sg.tma_ffma_boxes({"BM": 256, "BN": 128, "BK": 16}) == {"A": (256, 16, 64), "B": (16, 128, 0)}
    assert sg.tma_ffma_boxes({"BM": 128, "BN": 256, "BK": 8}) == {"A": (128, 8, 32), "B": (8, 256, 0)}


@pytest.mark.parametrize("M,N,K,a,b,fit", [
    (64, 64, 64, 0, 0, True),
    (64, 64, 66, 0, 0, False),  # a row of A: 66 floats, not a multiple of 16 bytes
    (64, 66, 64, 0, 0, False),  # a row of B
    (63, 64, 64, 0, 0, True),  # M is no row pitch
    (64, 64, 64, 8, 0, False),  # A's base 8 bytes past a 16-byte boundary
    (64, 64, 64, 0, 8, False),
    (64, 64, 64, 32, 48, True),
])
def test_rung_15_maps_need_16_byte_rows_and_bases(M, N, K, a, b, fit):
    assert sg.tma_ffma_maps_fit(M, N, K, a, b) is fit


def test_rung_15_names_its_slow_path():
    assert TMA_FFMA.slow_path(_p(64, 64, 64)) == ""
    assert "K and N must be multiples of 4" in TMA_FFMA.slow_path(_p(64, 66, 64))
    assert "element-wise copy" in TMA_FFMA.slow_path(_p(64, 64, 66))


def test_rung_6_has_a_producer_and_two_consumer_warpgroups(h100_clusters):
    """persistent.cuh: tf32 through registers takes two consumers of 64 (static_assert), so rung 6
    (no CONSUMERS parameter) runs 3 warpgroups and stages C for two: STAGES x (128 + BN rows of
    128 bytes) + 1024 bytes of slack + 2 x 2 buffers of 64 x 128 bytes."""
    spec = registry.get("tf32_wgmma", "hgemm")
    for params in ({}, {"BN": 128, "STAGES": 6}):
        v = spec.resolve(params)
        launch = spec.launch(_p(4096, 4096, 4096, "tf32"), v)
        assert launch.block == (384, 1, 1)
        assert launch.shmem == v["STAGES"] * (128 + v["BN"]) * 128 + 1024 + 2 * 2 * 8192


# ---- reduce -----------------------------------------------------------------------------------

def _reduce(name):
    return registry.get(name, "reduce")


@pytest.mark.parametrize("name,threads,smem", [
    ("interleaved", 128, 4 * 128),  # rungs 1-5: __shared__ float s[THREADS]
    ("unroll_last_warp", 64, 4 * 64),
    ("shuffle", 1024, 4 * 32),  # warp_sums[32], whatever the block
    ("complete_unroll", 512, 4 * 16),  # block_sum's sums[THREADS / 32]
    ("complete_unroll", 32, 0),  # one warp: block_sum declares no array (if constexpr (WARPS > 1))
    ("grid_stride_vec4", 128, 4 * 4),
    ("single_pass", 128, 4 * 4 + 4),  # and the last block's is_last word
    ("tile_queue", 128, 4 * 4 + 4 + 8),  # and next[2]
])
def test_reduce_static_shared_memory_is_the_kernels_arrays(name, threads, smem):
    spec = _reduce(name)
    params = {"THREADS": threads, **({"BLOCKS_PER_SM": 1} if "BLOCKS_PER_SM" in spec.defaults else {})}
    assert spec.smem_bytes(spec.resolve(params)) == smem


@pytest.mark.parametrize("name,low", [("interleaved", 32), ("unroll_last_warp", 64), ("shuffle", 32),
                                      ("complete_unroll", 32)])
def test_reduce_threads_from_the_lowest_power_of_two_the_kernel_takes(name, low):
    """05_unroll_last_warp.cu unrolls the last 32 steps over s[tid + 32]: 64 threads at least."""
    spec = _reduce(name)
    assert spec.resolve({"THREADS": low})["THREADS"] == low
    _refused(spec, {"THREADS": low // 2}, f"THREADS must be a power of two in {low}..1024")


@pytest.mark.parametrize("name", ["grid_stride_vec4", "single_pass", "tile_queue"])
def test_a_full_sm_of_resident_blocks_is_taken_and_none_is_refused(name):
    """2048 threads an SM (sm_80, sm_90): 8 blocks of 256 fit exactly; 0 blocks an SM is no grid."""
    spec = _reduce(name)
    assert spec.resolve({"THREADS": 256, "BLOCKS_PER_SM": 8})["BLOCKS_PER_SM"] == 8
    assert spec.resolve({"THREADS": 1024, "BLOCKS_PER_SM": 2})["BLOCKS_PER_SM"] == 2
    _refused(spec, {"THREADS": 512, "BLOCKS_PER_SM": 0}, "BLOCKS_PER_SM blocks of THREADS must fit one SM")


@pytest.mark.parametrize("name,n,blocks", [
    ("add_during_load", 1000, 2),  # 256 threads x 2 elements: 512 a block
    ("add_during_load", 512, 1),
    ("add_during_load", 513, 2),
    ("complete_unroll", 1 << 20, 256),  # 256 x 16: 4096 a block
    ("complete_unroll", 4097, 2),
    ("shuffle", 1 << 20, 2048),
])
def test_contiguous_rungs_give_a_block_threads_times_elems_elements(name, n, blocks):
    spec = _reduce(name)
    assert spec.launch(ReduceProblem(n), spec.defaults).grid == (blocks, 1, 1)


def test_the_tile_queue_launches_a_block_a_tile_at_most():
    """10_tile_queue.cu: a tile is THREADS x UNROLL float4s (256 x 8 = 8 KiB floats): 2^20 floats
    are 128 tiles, so 128 blocks (not the 528 of one resident wave)."""
    spec = _reduce("tile_queue")
    assert spec.launch(ReduceProblem(1 << 20), spec.defaults).grid == (128, 1, 1)
    assert spec.launch(ReduceProblem(1 << 28), spec.defaults).grid == (4 * 132, 1, 1)
    assert spec.launch(ReduceProblem(8193), spec.defaults).grid == (2, 1, 1)


# ---- the reduce passes (ops/reduce_passes.py), over a CuPy stand-in -----------------------------

class _Buf:
    """A device array stand-in: a size and an address of its own."""
    _next = [0x10000]

    def __init__(self, size):
        self.size = size
        self.data = type("Ptr", (), {"ptr": _Buf._next[0]})()
        _Buf._next[0] += 0x10000

    def fill(self, value):
        pass

    def reshape(self, *shape):
        return ("reshaped", self)

    def __getitem__(self, index):
        return ("view", self, index)


class SimpleStream:
    """A cuda.core Stream stand-in on CuPy's current stream (handle 7): nothing to wait for."""
    handle = 7


@pytest.fixture
def passes(monkeypatch):
    """A ReduceRunner over a CuPy stand-in; returns (make, launches): make(name) builds a runner of
    that rung with its defaults, launches records (grid, args) of every launch."""
    import sys
    from types import SimpleNamespace

    import numpy as np

    from gemmlab.cuda import launch as launch_module

    made = []
    stream = SimpleNamespace(ptr=7, synchronize=lambda: None)
    fake = SimpleNamespace(empty=lambda size, dtype=None: made.append(_Buf(size if size != () else 1)) or made[-1],
                           zeros=lambda size, dtype=None: made.append(_Buf(size)) or made[-1],
                           float32=np.float32, uint32=np.uint32,
                           cuda=SimpleNamespace(get_current_stream=lambda: stream))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    launches = []
    monkeypatch.setattr(launch_module, "launch_kernel",
                        lambda ck, launch, stream, *args: launches.append((launch.grid[0], args)))

    def make(name):
        runner = reduce_passes.ReduceRunner.__new__(reduce_passes.ReduceRunner)
        spec = _reduce(name)
        runner.impl, runner.compiled, runner.params = spec, SimpleNamespace(name=name), spec.defaults
        runner._bufs, runner._counter, runner._scratch, runner._out = [], None, None, None
        return runner

    return make, launches


def test_passes_chain_through_two_buffers_each_big_enough(passes):
    """interleaved (256 elements a block) at 2^28: 2^20 partials, then 4096, then 16, then the sum.
    Pass k reads what pass k-1 wrote and writes buffer k % 2 (the last pass: out); buffer 0 holds
    the 2^20 partials, buffer 1 the 4096."""
    make, launches = passes
    runner = make("interleaved")
    x, out = _Buf(1 << 28), _Buf(1)
    assert runner.enqueue(x, SimpleStream(), out) is out
    assert [grid for grid, _ in launches] == [1 << 20, 1 << 12, 16, 1]
    b0, b1 = runner._bufs
    assert b0.size >= 1 << 20 and b1.size >= 1 << 12
    srcs = [args[0] for _, args in launches]
    ms = [int(args[1]) for _, args in launches]
    dsts = [args[2] for _, args in launches]
    assert srcs == [x.data.ptr, b0.data.ptr, b1.data.ptr, b0.data.ptr]
    assert dsts == [b0.data.ptr, b1.data.ptr, b0.data.ptr, out.data.ptr]
    assert ms == [1 << 28, 1 << 20, 1 << 12, 16]


def test_pass_buffers_grow_for_a_larger_n(passes):
    make, launches = passes
    runner = make("interleaved")
    runner.enqueue(_Buf(1 << 16), SimpleStream(), _Buf(1))  # 256 partials, then the sum
    runner.enqueue(_Buf(1 << 24), SimpleStream(), _Buf(1))  # 65536, 256, 1
    assert runner._bufs[0].size >= 1 << 16 and runner._bufs[1].size >= 256


def test_a_single_pass_takes_its_partials_then_its_two_counters(passes):
    """09_single_pass.cu: (x, n, out, partials, counters); counters are two words (tickets, next
    tile) the kernel leaves at zero."""
    make, launches = passes
    runner = make("single_pass")
    x, out = _Buf(1 << 24), _Buf(1)
    runner.enqueue(x, SimpleStream(), out)
    [(grid, args)] = launches
    assert grid == 4 * 132
    assert args[0] == x.data.ptr and int(args[1]) == 1 << 24 and args[2] == out.data.ptr
    assert args[3] == runner._bufs[0].data.ptr and runner._bufs[0].size >= grid
    assert args[4] == runner._counter.data.ptr and runner._counter.size == 2
    with pytest.raises(ValueError, match="single_pass has no block-partials pass"):
        runner.enqueue_first_pass(x, SimpleStream())


def test_the_first_pass_of_one_block_writes_out(passes):
    make, launches = passes
    runner = make("shuffle")  # 512 elements a block
    x = _Buf(500)
    assert runner.enqueue_first_pass(x, SimpleStream()) == ("reshaped", runner._out)
    assert launches[0][1][2] == runner._out.data.ptr
    x = _Buf(5000)  # 10 partials
    assert runner.enqueue_first_pass(x, SimpleStream()) == ("view", runner._bufs[0], slice(None, 10))


def test_round_fill_counts_uniform_split_k_slices_as_short_rounds(h100_clusters):
    """512 x 512 x 8192 in 256 x 256 cluster tiles (128 x 256, CM = 2): 4 tiles on 66 cluster slots
    are cut into 8 slices each (128 K tiles, at least 16 a slice): 32 units, one round an eighth
    of a tile long. The work is 4 tiles; the round holds 66 slots x 1/8: 4 / 8.25 of it is used."""
    spec = registry.get("persistent", "hgemm")
    p, v = _p(512, 512, 8192, "bf16"), spec.resolve({})
    assert hg.persistent_schedule(p, v) == (0, 8)
    assert spec.round_fill(p, v) == pytest.approx(4 / (66 / 8))
    # whole tiles: 4096 x 4224 is 16 x 17 = 272 cluster tiles' room for 264 tiles' worth, in 5 rounds of 66
    assert spec.round_fill(_p(4096, 4224, 4096, "bf16"), v) == pytest.approx((4096 * 4224 / (256 * 256)) / (5 * 66))


def test_an_explicit_tail_split_leaves_whole_waves_alone(h100_clusters):
    """TAILK slices the tiles of a partial last wave only: 3072 x 2816 is 12 x 11 = 132 cluster tiles
    of 256 x 256, two full waves of 66: nothing to slice, (132 whole, 1). 3328 x 2816 is 13 x 11 =
    143: 11 tiles in the last wave, sliced in 2."""
    spec = registry.get("persistent", "hgemm")
    v = spec.resolve({"TAILK": 2})
    assert hg.persistent_schedule(_p(3072, 2816, 4096, "bf16"), v) == (132, 1)
    assert spec.workspace_floats(_p(3072, 2816, 4096, "bf16"), v) == 0
    assert hg.persistent_schedule(_p(3328, 2816, 4096, "bf16"), v) == (132, 2)


def test_rungs_1_to_7_say_their_blocks_take_contiguous_sections(passes):
    """Block b of rungs 1-7 sums x[b * THREADS * ELEMS:(b + 1) * THREADS * ELEMS] (08's grid-stride
    share and the single passes' are not sections): what lets verify_sum check each block's
    partial against its own slice of x."""
    make, _ = passes
    contiguous = [k.name for k in registry.kernels("reduce") if rd.CONTIGUOUS in k.tags]
    assert contiguous == ["interleaved", "no_divergence", "sequential", "add_during_load", "unroll_last_warp",
                          "shuffle", "complete_unroll"]
    assert make("shuffle").contiguous and not make("grid_stride_vec4").contiguous
    assert make("single_pass").single_pass and not make("shuffle").single_pass
