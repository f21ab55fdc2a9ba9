"""The resolver behind `gemmlab bench --impl dispatch`: what a call with no implementation named
(gemmlab.sgemm(A, B), hgemm, bgemm, reduce_sum) runs for a bench problem on a given GPU.

It asks the API's own decision (api.core.decide: the shipped table, the refusals and slow paths,
the tuning database named by GEMMLAB_DB, cuBLAS for transposed operands), so the bench times
exactly what a call would run. It lives above the API because the harness may not import it
(the layers); `gemmlab bench` hands it to harness.session.bench.
"""
from __future__ import annotations

from typing import Any


def dims(problem: Any) -> tuple[int, ...]:
    """A problem's dimensions as the API's dispatch reads them: (n,), (M, N, K) or (M, N, K, batch)."""
    if problem.op == "reduce":
        return (problem.n,)
    if problem.op == "bgemm":
        return (problem.M, problem.N, problem.K, problem.batch)
    return (problem.M, problem.N, problem.K)


def resolve(problem: Any, gpu: str, arch: str) -> tuple[str, dict, str]:
    """(implementation, parameters, where the choice came from) of a call on `problem` on GPU
    `gpu` of architecture `arch` (named, so no GPU is needed to ask)."""
    from .api import core, tuning

    choice, spec, params = core.decide(problem.op, problem, dims(problem), None, None, gpu, arch)
    if choice.source in ("", "fallback"):  # no table entry decided: its reason says what did
        where = choice.reason
    else:
        where = f"table: {choice.source}" + "".join(f"; skipped {s}" for s in choice.skipped)
    if core.TUNED_NOTE in choice.reason:
        where += f"; parameters from the tuning database {tuning.database()}"
    return spec.name, dict(params), where
