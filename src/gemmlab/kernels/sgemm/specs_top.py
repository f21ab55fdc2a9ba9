"""Specs of rungs 10, 12 and 13: warptiling, cp.async pipelines, gemmlab's own Hopper kernel."""
from __future__ import annotations

from dataclasses import replace

from ...problem import GemmProblem
from ...registry import Constraint, KernelSpec, Launch, Param, cdiv, register


def _wmiter(v) -> int:
    return (v["WM"] * v["WN"]) // (32 * v["TM"] * v["TN"] * v["WNITER"])


def _warptile_constraints() -> tuple[Constraint, ...]:
    """The mirror of rung 10's static_asserts (also used by the rungs built on it)."""
    return (
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



def _sm_count() -> int:
    """The GPU's SM count, or an H100/H200's 132 when there is no GPU (compile-only use)."""
    try:
        from ...cuda.device import info

        return info().sm_count
    except Exception:
        return 132


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
    return Launch(grid=(tiles, 1, split_k_slices(p, v, _sm_count())), block=(v["NT"], 1, 1),
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

register(WARPTILING, ASYNC_PIPELINE, HOPPER_SIMT)
