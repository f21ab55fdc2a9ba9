"""The reduction problem: the fp32 sum of n elements, and the bytes that must move."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import BadArgumentError

# `gemmlab bench --op reduce` without --n: the sizes (2^10, 2^16, 2^20, 2^24, 2^28).
DEFAULT_BENCH_SIZES = "1024,65536,1048576,16777216,268435456"
# `gemmlab verify --op reduce` without --n: every edge of the launch geometry of the default
# configurations (1 element, a warp +- 1, a block +- 1, 2^20 + 7 with a 3-element tail).
EDGE_SIZES = (1, 2, 3, 4, 5, 31, 32, 33, 255, 256, 257, 1000, 1023, 1024, 1025, 2047, 2048, 2049, 4095, 4097,
              65537, (1 << 20) + 7)


@dataclass(frozen=True)
class ReduceProblem:
    """sum(x) for a contiguous fp32 array x of n >= 1 elements."""

    n: int
    dtype: str = "fp32"

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int):
            raise BadArgumentError(f"n must be an integer, got {self.n!r}")
        if self.n < 1:
            raise BadArgumentError(f"n must be >= 1, got {self.n}")

    @property
    def shape(self) -> str:
        return size_label(self.n)

    @property
    def bytes_read(self) -> int:
        """The fewest bytes a sum must move: every element read once (the scalar is noise)."""
        return 4 * self.n


def size_label(n: int) -> str:
    """1048576 -> '2^20', 1048583 -> '2^20+7', 1000 -> '1000'."""
    for k in range(62, 3, -1):
        base = 1 << k
        if base == n:
            return f"2^{k}"
        if 0 < abs(n - base) < 64 and base >= 4096:
            return f"2^{k}{n - base:+d}"
    return str(n)


_POW = re.compile(r"^(\d+)\s*(?:\^|\*\*)\s*(\d+)\s*(?:([+-])\s*(\d+))?$")


def parse_size(text: str) -> int:
    """'1024' | '2^20' | '2**20' | '2^20+7' | '1<<20' -> an element count >= 1."""
    t = text.strip().replace("_", "")
    m = _POW.match(t)
    try:
        if m:
            value = int(m.group(1)) ** int(m.group(2))
            if m.group(3):
                value += int(m.group(4)) * (1 if m.group(3) == "+" else -1)
        elif "<<" in t:
            a, b = t.split("<<")
            value = int(a) << int(b)
        else:
            value = int(t)
    except ValueError:
        raise BadArgumentError(f"size {text!r} is not an element count (e.g. 1024, 2^20, 2^20+7)") from None
    if value < 1:
        raise BadArgumentError(f"size {text!r} must be >= 1 element")
    if value >= 1 << 40:
        raise BadArgumentError(f"size {text!r} is too large")
    return value


def parse_sizes(text: str | None, default: str | tuple[int, ...]) -> list[int]:
    if text is None:
        return [parse_size(s) for s in default.split(",")] if isinstance(default, str) else list(default)
    sizes = [parse_size(s) for s in text.split(",") if s.strip()]
    if not sizes:
        raise BadArgumentError("--n is empty")
    return sizes
