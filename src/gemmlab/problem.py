"""Problem shapes and the work they imply: FLOPs and the fewest bytes moved.

The problem types are the bottom of the stack: kernel specs compute launch geometry from them,
the ops parse, generate and check them, and each one names its op (`problem.op`)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import BadArgumentError


# How A and B are given, as BLAS names it for row-major arrays: op(A) op(B), "n" the operand as
# the product uses it (A MxK, B KxN), "t" given as its transpose (A as KxM, B as NxK). "nt" is
# x @ W.T, the layout of torch.nn.functional.linear. Which ops and kernels take which: their own
# rule (hgemm: nn and nt; the others nn).
LAYOUTS = ("nn", "nt", "tn", "tt")
# The type of C: fp32 (every op's default), or a 16-bit type (hgemm: the input type, as torch.mm
# writes it for 16-bit inputs).
OUT_DTYPES = ("fp32", "fp16", "bf16")
# The kernels (and cuBLAS's classic entry points) take M, N, K and batch as 32-bit ints, and round
# them up to whole tiles in 32 bits ((K + BK - 1) / BK, a cluster tile's rows) or step past them
# (k0 += BK, a batch loop's b += gridDim.z): a margin of 2^16 keeps every such sum below 2^31.
MAX_DIM = 2**31 - 2**16
MAX_DIM_TEXT = "2^31 - 65536"


@dataclass(frozen=True)
class GemmProblem:
    """C (MxN) = alpha * op(A) @ op(B) + beta * C, row-major and contiguous: A MxK and B KxN as
    given with layout "nn" (the default); layout "nt" gives B as its transpose, an NxK array,
    "tn" A as its transpose, a KxM array, "tt" both.
    C is `out_dtype` (fp32 unless an op offers another)."""

    M: int
    N: int
    K: int
    alpha: float = 1.0
    beta: float = 0.0
    dtype: str = "fp32"
    layout: str = "nn"
    out_dtype: str = "fp32"

    def __post_init__(self) -> None:
        for dim in ("M", "N", "K"):
            value = getattr(self, dim)
            if isinstance(value, bool) or not isinstance(value, int):
                raise BadArgumentError(f"{dim} must be an integer, got {value!r}")
            if value < 1:
                raise BadArgumentError(f"{dim} must be >= 1, got {value}")
            if value > MAX_DIM:
                raise BadArgumentError(f"{dim} = {value}: the kernels take dimensions up to {MAX_DIM_TEXT}")
        if self.layout not in LAYOUTS:
            raise BadArgumentError(f"layout {self.layout!r} must be one of {', '.join(LAYOUTS)} (op(A) op(B): "
                                   "n as given, t transposed)")
        if self.out_dtype not in OUT_DTYPES:
            raise BadArgumentError(f"out_dtype {self.out_dtype!r} must be one of {', '.join(OUT_DTYPES)}")

    @property
    def a_transposed(self) -> bool:
        """A is given as its transpose: a KxM row-major array (M-major A; layouts tn and tt)."""
        return self.layout[0] == "t"

    @property
    def b_transposed(self) -> bool:
        """B is given as its transpose: an NxK row-major array (K-major B)."""
        return self.layout[1] == "t"

    @property
    def op(self) -> str:
        """The op this problem belongs to: fp32 inputs are SGEMM, 16-bit (or tf32) ones hgemm."""
        return "sgemm" if self.dtype == "fp32" else "hgemm"

    @property
    def shape(self) -> str:
        return f"{self.M}x{self.N}x{self.K}"

    @property
    def flops(self) -> int:
        """2*M*N*K: one multiply and one add per term of every dot product.

        The alpha/beta epilogue (3*M*N more when beta != 0) is deliberately not counted,
        as cuBLAS, CUTLASS and the seed worklogs do, so GFLOP/s compare across tools.
        """
        return 2 * self.M * self.N * self.K

    @property
    def min_bytes(self) -> int:
        """Each input read once and C written once (read too when beta != 0), fp32."""
        elems = self.M * self.K + self.K * self.N + self.M * self.N
        if self.beta != 0.0:
            elems += self.M * self.N
        return 4 * elems


@dataclass(frozen=True)
class BatchedGemmProblem(GemmProblem):
    """C[i] (MxN) = alpha * A[i] (MxK) @ B[i] (KxN) + beta * C[i] for i < batch (strided batches).

    Each matrix is row-major and contiguous; the kernels take each operand's batch stride in
    elements, so packed batches (stride M*K for A) and broadcast operands (stride 0) both run."""

    batch: int = 1

    op = "bgemm"

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < 1:
            raise BadArgumentError(f"batch must be an integer >= 1, got {self.batch!r}")
        if self.batch > MAX_DIM:
            raise BadArgumentError(f"batch = {self.batch}: the kernels take a batch count up to {MAX_DIM_TEXT}")

    @property
    def shape(self) -> str:
        return f"{self.batch}x{self.M}x{self.N}x{self.K}"

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.M * self.N * self.K

    @property
    def min_bytes(self) -> int:
        return self.batch * GemmProblem.min_bytes.fget(self)


@dataclass(frozen=True)
class ReduceProblem:
    """sum(x) for a contiguous fp32 array x of n >= 1 elements."""

    n: int
    dtype: str = "fp32"

    op = "reduce"

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int):
            raise BadArgumentError(f"n must be an integer, got {self.n!r}")
        if self.n < 1:
            raise BadArgumentError(f"n must be >= 1, got {self.n}")
        if self.n >= 1 << 40:  # the kernels index with 64-bit integers; no GPU holds 2^40 floats
            raise BadArgumentError(f"n = {self.n} is too large (at most 2^40 - 1 elements)")

    @property
    def shape(self) -> str:
        return size_label(self.n)

    @property
    def bytes_read(self) -> int:
        """The fewest bytes a sum must move: every element read once (the scalar is noise)."""
        return 4 * self.n


def problem_to_dict(problem) -> dict:
    """A problem as plain data (its fields and its op), for another process: `gemmlab profile`
    hands the problem to the target process ncu runs this way."""
    from dataclasses import asdict

    return {"op": problem.op, **asdict(problem)}


def problem_from_dict(data: dict):
    """The problem problem_to_dict() wrote; a wrong field is one line (BadArgumentError)."""
    fields = dict(data)
    op = fields.pop("op", "sgemm")
    cls = {"bgemm": BatchedGemmProblem, "reduce": ReduceProblem}.get(op, GemmProblem)
    try:
        problem = cls(**fields)
    except TypeError as exc:  # an unknown or missing field
        raise BadArgumentError(f"not a {op} problem: {exc}") from None
    if problem.op != op:  # e.g. {"op": "hgemm"} without a 16-bit or tf32 dtype
        raise BadArgumentError(f"a {problem.op} problem was given as {op}")
    return problem


def is_integer_text(text: str) -> bool:
    """An optional sign and ASCII digits, spaces around: int() alone also takes '1_6' and
    full-width digits, which a typo or a pasted value can bring in unseen."""
    return re.fullmatch(r"\s*[+-]?[0-9]+\s*", text) is not None


def comma_items(text: str, option: str) -> list[str]:
    """'1024, 4096' -> ['1024', '4096'] for a comma-separated option. An empty item ('1024,,2048', a
    trailing comma) is refused rather than skipped: it is more often a value lost than one meant."""
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise BadArgumentError(f"{option} is empty")
    if not all(items):
        raise BadArgumentError(f"{option} {text!r} has an empty item")
    return items


def size_label(n: int) -> str:
    """1048576 -> '2^20', 1048583 -> '2^20+7', 1000 -> '1000'."""
    for k in range(62, 3, -1):
        base = 1 << k
        if base == n:
            return f"2^{k}"
        if 0 < abs(n - base) < 64 and base >= 4096:
            return f"2^{k}{n - base:+d}"
    return str(n)


_ASCII_INTEGER = re.compile(r"[+-]?[0-9]+")


def parse_shape(text: str) -> tuple[int, int, int]:
    """'4096' or '4096^3' -> (4096, 4096, 4096); '1000x3000x2000' -> (1000, 3000, 2000). Digits
    are ASCII and unseparated (int() would take '1_024' and full-width digits), and '^3' only
    ends a single N ('40^396' was read as 4096)."""
    body = text.strip().lower()
    cube = body.endswith("^3")
    parts = (body[:-2] if cube else body).split("x")
    if not all(_ASCII_INTEGER.fullmatch(p.strip()) for p in parts):
        raise BadArgumentError(f"size {text!r} is not an integer or MxNxK")
    dims = [int(p) for p in parts]
    if len(dims) == 1:
        dims = dims * 3
    if len(dims) != 3 or (cube and len(parts) != 1):
        raise BadArgumentError(f"size {text!r} must be N, N^3 or MxNxK")
    if min(dims) < 1:
        raise BadArgumentError(f"size {text!r} must have every dimension >= 1")
    if max(dims) > MAX_DIM:
        raise BadArgumentError(f"size {text!r} has a dimension past {MAX_DIM_TEXT}")
    return dims[0], dims[1], dims[2]
