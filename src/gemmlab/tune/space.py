"""A kernel's search space: the product of its parameters' declared values, filtered by
its constraints, with the points dropped counted by the first constraint they break."""
from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..errors import BadArgumentError
from ..problem import comma_items, is_integer_text
from ..registry import KernelSpec


@dataclass
class SpaceReport:
    total: int
    kept: list[dict[str, int]]
    dropped: Counter = field(default_factory=Counter)  # reason -> count


def axes(spec: KernelSpec, overrides: Mapping[str, Sequence[int]] | None = None) -> dict[str, tuple[int, ...]]:
    """Values per parameter: the spec's space (or its default alone), replaced by overrides."""
    values = {p.name: tuple(p.space) or (p.default,) for p in spec.params}
    for name, choice in (overrides or {}).items():
        if name not in values:
            raise BadArgumentError(f"{spec.name} has no parameter {name!r} (parameters: {', '.join(values)})")
        if not choice:
            raise BadArgumentError(f"--param {name} has no values")
        values[name] = tuple(int(v) for v in choice)
    return values


# enumerated one by one: bigtile's default space, 6.7 million points, takes 100 s (session 35); a
# space ten times that would not finish in a quarter of an hour
MAX_POINTS = 10_000_000


def enumerate_space(spec: KernelSpec, overrides: Mapping[str, Sequence[int]] | None = None) -> SpaceReport:
    grid = axes(spec, overrides)
    names = list(grid)
    points = math.prod(len(v) for v in grid.values())
    if points > MAX_POINTS:
        raise BadArgumentError(f"the search space of {spec.name} has {points:,} points, past the {MAX_POINTS:,} "
                               "that are enumerated: list fewer values with --param")
    report = SpaceReport(total=0, kept=[])
    for combo in itertools.product(*(grid[n] for n in names)):
        report.total += 1
        point = dict(zip(names, combo))
        failed = spec.failed_constraints(point)
        if failed:
            report.dropped[failed[0]] += 1
        else:
            report.kept.append(point)
    return report


def parse_param_axes(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """['BK=8,16', 'TM=4'] -> {'BK': (8, 16), 'TM': (4,)}."""
    out: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not name.strip():
            raise BadArgumentError(f"--param {item!r} is not NAME=V1,V2,...")
        if name.strip() in out:  # the last would win silently
            raise BadArgumentError(f"--param {name.strip()} is given twice: list its values once, {name.strip()}=V1,V2")
        listed = comma_items(values, f"--param {name.strip()}")
        if not all(is_integer_text(v) for v in listed):
            raise BadArgumentError(f"--param {item!r} has a value that is not an integer")
        out[name.strip()] = tuple(dict.fromkeys(int(v) for v in listed))  # a value listed twice is one point
    return out
