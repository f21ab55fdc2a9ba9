"""What earlier sweeps recorded: points already tried (for --resume) and the best
parameters per (GPU, kernel, input dtype, shape), which bench and the API use by default."""
from __future__ import annotations

import json
import math
from typing import Any

from ..problem import GemmProblem

# rows of databases older than the dtype column (sgemm only then) count as fp32
_TRIALS = """SELECT r.params, r.status, r.gflops, r.M, r.N, r.K FROM results r JOIN runs u ON r.run_id = u.id
             WHERE u.kind = 'tune' AND u.gpu IS ? AND r.impl = ? AND IFNULL(r.dtype, 'fp32') = ?"""


def canonical(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def tried_points(store: Any, gpu: str | None, impl: str, problem: GemmProblem) -> set[str]:
    """Parameter sets already recorded for this GPU, kernel and shape, whatever their status."""
    rows = store.query(_TRIALS + " AND r.M = ? AND r.N = ? AND r.K = ?",
                       (gpu, impl, _dtype(problem), problem.M, problem.N, problem.K))
    return {canonical(json.loads(r["params"])) for r in rows if r["params"]}


def _dtype(problem: Any) -> str:
    return getattr(problem, "dtype", None) or "fp32"


def _distance(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    return sum(abs(math.log(x) - math.log(y)) for x, y in zip(a, b))


def best_params(store: Any, gpu: str | None, impl: str, problem: GemmProblem) -> tuple[dict, str, float] | None:
    """The fastest verified parameters at the tuned shape nearest to `problem` (log distance).

    Returns (params, 'MxNxK' of the tuned shape, its GFLOP/s), or None when nothing was tuned.
    """
    rows = [r for r in store.query(_TRIALS + " AND r.status = 'PASS' AND r.gflops IS NOT NULL", (gpu, impl, _dtype(problem)))]
    if not rows:
        return None
    target = (problem.M, problem.N, problem.K)
    nearest = min({(r["M"], r["N"], r["K"]) for r in rows}, key=lambda s: (_distance(s, target), s))
    best = max((r for r in rows if (r["M"], r["N"], r["K"]) == nearest), key=lambda r: r["gflops"])
    return json.loads(best["params"]), "x".join(map(str, nearest)), best["gflops"]


def usable_best(store: Any, gpu: str | None, spec: Any, problem: GemmProblem) -> dict | None:
    """best_params for a kernel spec, or None when nothing was tuned or the spec refuses them now."""
    hit = best_params(store, gpu, spec.name, problem)
    if hit is None or spec.failed_constraints({**spec.defaults, **hit[0]}):
        return None
    return hit[0]
