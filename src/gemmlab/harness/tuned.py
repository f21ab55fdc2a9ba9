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


def tried_points(store: Any, gpu: str | None, impl: str, problem: GemmProblem) -> dict[str, float | None]:
    """Parameter sets already recorded for this GPU, kernel and shape, whatever their status (a
    canonical key each), with the best GFLOP/s any of their PASS rows measured (None: none passed)."""
    rows = store.query(_TRIALS + " AND r.M = ? AND r.N = ? AND r.K = ?",
                       (gpu, impl, _dtype(problem), problem.M, problem.N, problem.K))
    tried: dict[str, float | None] = {}
    for r in rows:
        if r["params"]:
            key = canonical(json.loads(r["params"]))
            measured = r["gflops"] if r["status"] == "PASS" else None
            best = tried.get(key)
            tried[key] = measured if best is None else max(best, measured or best)
    return tried


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
    """best_params for a kernel spec, or None: nothing tuned; a problem of another layout or C type
    than the tune measured (it times layout nn with an fp32 C, and the layout and C flags it
    recorded would override the problem's own: tn's B, a 16-bit C); or parameters the spec no
    longer has or now refuses (a database from another gemmlab)."""
    if getattr(problem, "layout", "nn") != "nn" or getattr(problem, "out_dtype", "fp32") != "fp32":
        return None
    hit = best_params(store, gpu, spec.name, problem)
    if hit is None or set(hit[0]) - set(spec.defaults) or spec.failed_constraints({**spec.defaults, **hit[0]}):
        return None
    return hit[0]
