"""Problem shapes and the work they imply: FLOPs and the fewest bytes moved."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import BadArgumentError


@dataclass(frozen=True)
class GemmProblem:
    """C (MxN) = alpha * A (MxK) @ B (KxN) + beta * C, all row-major and contiguous."""

    M: int
    N: int
    K: int
    alpha: float = 1.0
    beta: float = 0.0
    dtype: str = "fp32"

    def __post_init__(self) -> None:
        for dim in ("M", "N", "K"):
            value = getattr(self, dim)
            if isinstance(value, bool) or not isinstance(value, int):
                raise BadArgumentError(f"{dim} must be an integer, got {value!r}")
            if value < 1:
                raise BadArgumentError(f"{dim} must be >= 1, got {value}")

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


def parse_shape(text: str) -> tuple[int, int, int]:
    """'4096' -> (4096, 4096, 4096); '1000x3000x2000' -> (1000, 3000, 2000)."""
    parts = text.lower().replace("^3", "").split("x")
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        raise BadArgumentError(f"size {text!r} is not an integer or MxNxK") from None
    if len(dims) == 1:
        dims = dims * 3
    if len(dims) != 3:
        raise BadArgumentError(f"size {text!r} must be N or MxNxK")
    if min(dims) < 1:
        raise BadArgumentError(f"size {text!r} must have every dimension >= 1")
    return dims[0], dims[1], dims[2]
