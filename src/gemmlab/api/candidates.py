"""What the dispatch asks of each candidate in a table entry before it ranks them: can it run the
problem on this GPU (refusal), only on a slow path (slow_path), and how full its tile rounds are at
the call's own shape (round_fill, for dispatch.refit)."""
from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Mapping

from ..errors import UnknownKernelError


def refusal(op_name: str, name: str, problem, arch: str) -> str:
    """Why implementation `name` cannot run `problem` on this GPU ("" when it can)."""
    from .. import ops, registry

    try:
        impl = registry.get(name, op_name)
    except UnknownKernelError:
        return "not registered here"
    if impl.kind != "kernel":
        return impl.unavailable_reason() or ""
    try:
        impl.arch_for(arch)
    except Exception as exc:
        return str(exc)
    if op_name == "reduce":
        return ""
    return ops.get(op_name).refusal(impl, problem)


def slow_path(op_name: str, name: str, problem) -> str:
    """Why the dispatch passes over an implementation that can run `problem`, but only on a slow
    path (its spec's `slow_path`; "" when it does not). A caller who names it still gets it."""
    from .. import registry

    check = getattr(registry.get(name, op_name), "slow_path", None)
    return check(problem) if check else ""


FILLS_KEPT = 4096
# (op, name, params, problem) -> (the spec it was computed with, its fill); (op, name, params) ->
# (the spec, its parameters resolved, read-only)
_fills: dict = {}


def round_fill(op_name: str, problem):
    """fill(name, params, shape) for dispatch.refit: the share of the GPU the kernel's tile rounds
    fill at `shape` (the problem with those dimensions), None where its spec has no model.

    Remembered (_fills, bounded): a call's first use of a shape refits every candidate of its
    table entry at the call's shape and at the entry's, and each fill resolved its parameters
    against every constraint again. A program whose shapes change paid that at every new shape:
    1.3 ms a decision for bf16 (M x 4096) @ (4096 x 4096) until session 37 (CPU, `core.decide`)."""
    from .. import registry

    problems: dict = {}  # shape -> the problem with those dimensions, made once per decision

    def fill(name: str, params: Mapping[str, int], shape: tuple) -> float | None:
        try:
            spec = registry.get(name, op_name)
            if getattr(spec, "round_fill", None) is None or len(shape) != 3:
                return None
            at = problems.get(shape)
            if at is None:
                at = problems[shape] = replace(problem, M=shape[0], N=shape[1], K=shape[2])
            given = tuple(sorted(params.items()))
            key = (op_name, name, given, at)
            known = _fills.get(key)
            if known is not None and known[0] is spec:  # a spec registered again is asked again
                return known[1]
            resolved = _fills.get((op_name, name, given))  # the parameters checked once, not per shape
            if resolved is None or resolved[0] is not spec:
                resolved = (spec, MappingProxyType(spec.resolve(params)))
            value = spec.round_fill(at, resolved[1])
            if len(_fills) >= FILLS_KEPT:
                _fills.clear()
            _fills[(op_name, name, given)] = resolved
            _fills[key] = (spec, value)
            return value
        except Exception:  # a stale or foreign table entry: no model, the figure stands
            return None

    return fill
