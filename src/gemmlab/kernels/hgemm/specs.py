"""Specs of the tensor-core GEMM ladder (issue 7): fp16 or bf16 A and B, fp32 accumulation, fp32 C.

Rungs 1-2 have the SGEMM signature with 16-bit inputs,
    (int M, int N, int K, float alpha, const bits16* A, const bits16* B, float beta, float* C),
row-major contiguous A (MxK), B (KxN), C (MxN); rungs 3-6 (specs_hopper.py) take TMA tensor
maps instead of A and B pointers. The first template parameter, DTYPE, is the input type (0:
fp16, 1: bf16; the tf32 rung has none); the harness sets it from the problem's dtype, it is not tuned.
Constraints mirror the kernels' static_asserts; `problem_check` states the shapes a rung
refuses (rung 2: K % 8 and N % 8, for 16-byte cp.async chunks).
"""
from __future__ import annotations

from ...problem import GemmProblem
from ...registry import Constraint, KernelSpec, Launch, Param, cdiv, register

DTYPES = ("fp16", "bf16", "tf32")  # tf32: fp32 inputs multiplied as tf32 (rung 6 only)
HALF_DTYPES = ("fp16", "bf16")
MAX_DYNAMIC_SMEM = 227 * 1024  # sm_90's opt-in limit per block (sm_80: 163 KB; launch refuses clearly)


def dtype_flag(dtype: str) -> int:
    """The DTYPE template argument of a problem dtype (0 fp16, 1 bf16, 2 tf32)."""
    if dtype not in DTYPES:
        raise ValueError(f"hgemm dtype must be one of {DTYPES}, not {dtype!r}")
    return DTYPES.index(dtype)


def _threads(v) -> int:
    return (v["BM"] // v["WM"]) * (v["BN"] // v["WN"]) * 32


def dtype_constraint() -> Constraint:
    """The 16-bit rungs' DTYPE flag: 0 fp16, 1 bf16."""
    return Constraint("DTYPE must be 0 (fp16) or 1 (bf16)", lambda v: v["DTYPE"] in (0, 1))


def _common_constraints() -> tuple[Constraint, ...]:
    return (
        dtype_constraint(),
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

from . import specs_hopper  # noqa: E402,F401  rungs 3-6 register after these, in ladder order
