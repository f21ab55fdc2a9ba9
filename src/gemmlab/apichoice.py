"""The resolver behind `gemmlab bench --impl dispatch`: what a call with no implementation named
(gemmlab.sgemm(A, B), hgemm, bgemm, reduce_sum) runs for a bench problem on a given GPU; and
behind `gemmlab profile --from-table`: the parameters the shipped table ranks best for one kernel.

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


def table_params(problem: Any, impl: str, gpu: str, arch: str) -> tuple[dict, str]:
    """(parameters, where from) of kernel `impl` that the dispatch table ranks best for `problem`'s
    op and dtype at the measured shape nearest to it on `gpu`, without the flags the problem sets;
    ({}, why) where the table has no entry of that kernel there."""
    from . import ops, registry
    from .api import dispatch

    op = ops.of(problem)
    spec = registry.get(impl, op.name)
    choice = dispatch.choose(op.name, problem.dtype, dims(problem), gpu, arch,
                             accepts=lambda name: "" if name == impl else "not the kernel asked for",
                             out_dtype=getattr(problem, "out_dtype", "fp32"))
    if choice.impl != impl:
        return {}, f"the table for {gpu} has no {impl} entry near {problem.shape}: its defaults"
    fixed = op.fixed_params(spec, problem.dtype)  # the flags the problem sets, not the table
    return {k: v for k, v in choice.params.items() if k in spec.defaults and k not in fixed}, choice.reason
