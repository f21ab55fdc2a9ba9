"""Search strategies: which points of the kept space to try, in which order."""
from __future__ import annotations

import random
from typing import Sequence


def exhaustive(points: Sequence[dict], budget: int | None = None, seed: int = 0) -> list[dict]:
    return list(points)[: budget or None]


def random_sample(points: Sequence[dict], budget: int | None = None, seed: int = 0) -> list[dict]:
    points = list(points)
    random.Random(seed).shuffle(points)
    return points[: budget or None]


STRATEGIES = {"exhaustive": exhaustive, "random": random_sample}
