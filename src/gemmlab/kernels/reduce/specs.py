"""Specs of the reduction ladder (seed 004's six rungs, Harris's last two steps, two single passes).

Kernel signatures (all fp32, x contiguous, n >= 1 elements, `long long` so n may pass 2^31):

    block-partials rungs 1-8:   (const float* x, long long n, float* out)
        block b writes out[b], the sum of its share of x; the launch has gridDim.x partials.
        Rungs 1-7 ("contiguous" tag): block b's share is x[b*THREADS*ELEMS : (b+1)*THREADS*ELEMS]
        (zero past n). Rung 8: a grid-stride share (see 08_grid_stride_vec4.cu).
    single pass, rungs 9-10:    (const float* x, long long n, float* out, float* partials,
                                 unsigned int* counters)
        out[0] = sum(x); partials holds gridDim.x floats, counters two zero-initialised words
        (tickets; rung 10's next tile) that the kernel leaves at zero again.

A full scalar sum from a block-partials rung takes passes: the same kernel on its own
partials until one value is left (gemmlab.ops.reduce_passes.plan). Constraints
mirror the kernels' static_asserts so a bad configuration is refused before NVRTC runs.
Template parameters: THREADS (threads per block), ELEMS (elements per thread, rungs 1-7),
UNROLL (float4 loads in flight per thread) and BLOCKS_PER_SM (grid = BLOCKS_PER_SM x SMs, and
the __launch_bounds__ minimum that makes the grid one resident wave) for rungs 8-10.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Mapping

from ...registry import Constraint, KernelSpec, Launch, Param, cdiv, is_pow2, register

# The SM count the grid-stride rungs size their grid for when no GPU can be asked (compile
# checks and CPU tests): an H100 SXM's.
SM_COUNT_WITHOUT_GPU = 132
MAX_THREADS_PER_SM = 2048  # sm_80 and sm_90

CONTIGUOUS = "contiguous"  # tag: block b reduces x[b*THREADS*ELEMS : (b+1)*THREADS*ELEMS]
SINGLE_PASS = "single_pass"  # tag: one launch writes the scalar (partials + counter workspace)

THREADS_SPACE = (32, 64, 128, 256, 512, 1024)


@lru_cache(maxsize=1)
def sm_count() -> int:
    """SMs of the current GPU, or SM_COUNT_WITHOUT_GPU where there is none."""
    from ...errors import NoGPUError

    try:
        from ...cuda.device import info

        return info().sm_count
    except NoGPUError:
        return SM_COUNT_WITHOUT_GPU


def section(values: Mapping[str, int]) -> int:
    """Elements one block of a contiguous rung reduces."""
    return values["THREADS"] * values["ELEMS"]


def _contiguous_geometry(problem, v) -> Launch:
    return Launch(grid=(max(1, cdiv(problem.n, section(v))), 1, 1), block=(v["THREADS"], 1, 1))


def grid_stride_blocks(n: int, v: Mapping[str, int], sms: int | None = None) -> int:
    """Blocks of a grid-stride rung: one float4 per thread at most, and one resident wave."""
    sms = sm_count() if sms is None else sms
    return max(1, min(cdiv(cdiv(n, 4), v["THREADS"]), v["BLOCKS_PER_SM"] * sms))


def _grid_stride_geometry(problem, v) -> Launch:
    return Launch(grid=(grid_stride_blocks(problem.n, v), 1, 1), block=(v["THREADS"], 1, 1))


def _pow2_threads(low: int) -> tuple[Constraint, ...]:
    return (Constraint(f"THREADS must be a power of two in {low}..1024",
                       lambda v: is_pow2(v["THREADS"]) and low <= v["THREADS"] <= 1024),)


ELEMS_OK = Constraint("ELEMS must be in 1..64", lambda v: 1 <= v["ELEMS"] <= 64)
UNROLL_OK = Constraint("UNROLL must be in 1..16", lambda v: 1 <= v["UNROLL"] <= 16)
FITS_SM = Constraint(f"BLOCKS_PER_SM blocks of THREADS must fit one SM ({MAX_THREADS_PER_SM} threads)",
                     lambda v: v["BLOCKS_PER_SM"] >= 1 and v["THREADS"] * v["BLOCKS_PER_SM"] <= MAX_THREADS_PER_SM)


def _threads(v) -> int:
    return v["THREADS"]


def _warp_sums_smem(v) -> int:  # block_sum's shared array (none for a one-warp block)
    warps = v["THREADS"] // 32
    return 4 * warps if warps > 1 else 0


def _contiguous(name, rung, title, idea, source, entry, seed, threads, elems, low=32, elems_space=(1, 2, 4, 8),
                smem=None) -> KernelSpec:
    return KernelSpec(
        name=name, op="reduce", rung=rung, title=title, idea=idea, source=source, entry=entry, seed=seed,
        params=(Param("THREADS", threads, tuple(t for t in THREADS_SPACE if t >= low), "threads per block"),
                Param("ELEMS", elems, elems_space, "elements per thread (a block reduces THREADS*ELEMS)")),
        constraints=(*_pow2_threads(low), ELEMS_OK),
        threads=_threads, smem_bytes=smem or (lambda v: 4 * v["THREADS"]),
        geometry=_contiguous_geometry, tags=(CONTIGUOUS,),
    )


INTERLEAVED = _contiguous(
    "interleaved", 1, "Interleaved addressing, divergent branch",
    "step i: threads with tid % 2i == 0 add s[tid + i]; modulo and scattered active threads",
    "reduce/01_interleaved.cu", "gemmlab::reduce_interleaved", "004 reduce baseline", 256, 1)

NO_DIVERGENCE = _contiguous(
    "no_divergence", 2, "No divergent branch (strided index)",
    "step i: the first THREADS/2i threads work on index 2*i*tid; whole warps idle, bank conflicts appear",
    "reduce/02_no_divergence.cu", "gemmlab::reduce_no_divergence", "004 reduce no divergence branch", 256, 1)

SEQUENTIAL = _contiguous(
    "sequential", 3, "No bank conflict (sequential addressing)",
    "halve the stride: thread t adds s[t + i]; a warp reads 32 consecutive words",
    "reduce/03_sequential.cu", "gemmlab::reduce_sequential", "004 reduce no bank conflict", 256, 1)

ADD_DURING_LOAD = _contiguous(
    "add_during_load", 4, "Add during load",
    "each thread adds ELEMS elements while loading; one tree per THREADS*ELEMS elements",
    "reduce/04_add_during_load.cu", "gemmlab::reduce_add_during_load", "004 reduce add during load", 256, 2,
    elems_space=(1, 2, 4, 8, 16))

UNROLL_LAST_WARP = _contiguous(
    "unroll_last_warp", 5, "Unroll the last warp (volatile + __syncwarp)",
    "the last six steps in one warp without block barriers, race-free under independent thread scheduling",
    "reduce/05_unroll_last_warp.cu", "gemmlab::reduce_unroll_last_warp", "004 reduce unroll last warp", 256, 2,
    low=64, elems_space=(1, 2, 4, 8, 16))

SHUFFLE = _contiguous(
    "shuffle", 6, "Warp shuffle",
    "__shfl_down_sync sums a warp in registers; shared memory only for the warps' sums",
    "reduce/06_shuffle.cu", "gemmlab::reduce_shuffle", "004 reduce shuffle", 256, 2,
    elems_space=(1, 2, 4, 8, 16), smem=lambda v: 4 * 32)

COMPLETE_UNROLL = _contiguous(
    "complete_unroll", 7, "Completely unrolled with templates",
    "block size and loads per thread are compile-time: ELEMS independent loads, no loop, no bounds checks",
    "reduce/07_complete_unroll.cu", "gemmlab::reduce_complete_unroll", "Harris step 6 (completely unrolled)",
    # ELEMS=16: 100.0-100.2% of cupy.sum at 2^28 in four tuning points on an H200 (8: 99.2-99.4%)
    256, 16, elems_space=(1, 2, 4, 8, 16, 32), smem=_warp_sums_smem)


def _grid_stride(name, rung, title, idea, source, entry, seed, tags=(), unroll=4, extra_smem=0,
                 geometry=None) -> KernelSpec:
    return KernelSpec(
        name=name, op="reduce", rung=rung, title=title, idea=idea, source=source, entry=entry, seed=seed,
        params=(Param("THREADS", 256, (128, 256, 512, 1024), "threads per block"),
                Param("UNROLL", unroll, (1, 2, 4, 8), "float4 loads in flight per thread"),
                Param("BLOCKS_PER_SM", 4, (1, 2, 4, 8), "resident blocks per SM; grid = this x SM count")),
        constraints=(*_pow2_threads(32), UNROLL_OK, FITS_SM),
        threads=_threads, smem_bytes=lambda v: _warp_sums_smem(v) + extra_smem,
        geometry=geometry or _grid_stride_geometry, tags=tags,
    )


def tile_queue_blocks(n: int, v: Mapping[str, int], sms: int | None = None) -> int:
    """Blocks of the tile-queue rung: at most one per tile, and one resident wave."""
    sms = sm_count() if sms is None else sms
    return max(1, min(cdiv(cdiv(n, 4), v["THREADS"] * v["UNROLL"]), v["BLOCKS_PER_SM"] * sms))


def _tile_queue_geometry(problem, v) -> Launch:
    return Launch(grid=(tile_queue_blocks(problem.n, v), 1, 1), block=(v["THREADS"], 1, 1))


GRID_STRIDE_VEC4 = _grid_stride(
    "grid_stride_vec4", 8, "Grid-stride loop, float4 loads",
    "one resident wave of blocks walks the array with 16-byte loads, UNROLL in flight per thread",
    "reduce/08_grid_stride_vec4.cu", "gemmlab::reduce_grid_stride_vec4", "Harris step 7 (multiple elements per thread)")

SINGLE_PASS_RUNG = _grid_stride(
    "single_pass", 9, "Single pass (last block done)",
    "rung 8 plus an acquire-release ticket: the last block sums the partials; one launch, self-resetting counter",
    "reduce/09_single_pass.cu", "gemmlab::reduce_single_pass", "threadFenceReduction", tags=(SINGLE_PASS,),
    extra_smem=4)

TILE_QUEUE = _grid_stride(
    "tile_queue", 10, "Dynamic tiles from an atomic queue (single pass)",
    "the resident grid draws contiguous THREADS*UNROLL-float4 tiles from a counter: fast SMs take more; rung 9's finish",
    "reduce/10_tile_queue.cu", "gemmlab::reduce_tile_queue", "beyond the seed (dynamic scheduling)",
    tags=(SINGLE_PASS,), unroll=8, extra_smem=4 + 8, geometry=_tile_queue_geometry)

LADDER = (INTERLEAVED, NO_DIVERGENCE, SEQUENTIAL, ADD_DURING_LOAD, UNROLL_LAST_WARP, SHUFFLE, COMPLETE_UNROLL,
          GRID_STRIDE_VEC4, SINGLE_PASS_RUNG, TILE_QUEUE)

register(*LADDER)
