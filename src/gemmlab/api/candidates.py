"""What the dispatch asks of each candidate in a table entry before it ranks them: can it run the
problem on this GPU (refusal), only on a slow path (slow_path), and how full its tile rounds are at
the call's own shape (round_fill, for dispatch.refit)."""
from __future__ import annotations

from dataclasses import fields, replace
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
# (op, name, id(params), shape, the problem's other fields) -> (params, the spec it was computed
# with, its fill); (op, name, id(params)) -> (params, the spec, its parameters resolved, read-only)
_fills: dict = {}
_NO_PARAMS: Mapping[str, int] = MappingProxyType({})  # one object for every candidate without params


def round_fill(op_name: str, problem):
    """fill(name, params, shape) for dispatch.refit: the share of the GPU the kernel's tile rounds
    fill at `shape` (the problem with those dimensions), None where its spec has no model.

    Remembered (_fills, bounded): a call's first use of a shape refits every candidate of its
    table entry at the call's shape and at the entry's, and each fill resolved its parameters
    against every constraint again. A program whose shapes change paid that at every new shape:
    1.3 ms a decision for bf16 (M x 4096) @ (4096 x 4096) until session 37 (CPU, `core.decide`).
    A fill is keyed by its parameters' object, the table's own (a table is not changed once read,
    as dispatch._pool has it; the entry keeps that object, so its id is not reused while kept), by
    the shape, and by the problem's other fields, taken once per decision. Keyed by the parameters
    sorted and by the problem at the shape (session 37), the key cost more than the lookup saved:
    most of a decision's fills are found, two for each of the entry's candidates (session 40).
    Only the fills at other shapes than the problem's own (the entries') are remembered: a shape's
    first call decides once per thread, and its own fills, two tuples each, were most of the
    objects a first call left to Python's collector (18 of 58, session 41, H100), which paid a
    full pass over the heap every few hundred first calls."""
    from .. import registry

    others = None  # the problem's fields but its dimensions: taken at the first modelled candidate
    own_shape = tuple(getattr(problem, d, None) for d in "MNK")
    problems: dict = {}  # shape -> the problem with those dimensions, made once per decision

    def fill(name: str, params: Mapping[str, int], shape: tuple) -> float | None:
        nonlocal others
        try:
            spec = registry.get(name, op_name)
            model = getattr(spec, "round_fill", None)
            if model is None or len(shape) != 3:
                return None
            if others is None:
                others = (type(problem),) + tuple(getattr(problem, f.name) for f in fields(problem) if f.name not in _DIMS)
            params = params or _NO_PARAMS
            own = shape == own_shape  # the call's own shape: computed, not remembered (docstring)
            key = None if own else (op_name, name, id(params), shape, others)
            known = None if own else _fills.get(key)
            if known is not None and known[0] is params and known[1] is spec:  # a spec registered again is asked again
                return known[2]
            held = (op_name, name, id(params))  # the parameters checked once, not per shape
            resolved = _fills.get(held)
            if resolved is None or resolved[0] is not params or resolved[1] is not spec:
                resolved = (params, spec, MappingProxyType(spec.resolve(params)))
            at = problem if own else problems.get(shape)
            if at is None:
                at = problems[shape] = replace(problem, M=shape[0], N=shape[1], K=shape[2])
            value = model(at, resolved[2])
            if len(_fills) >= FILLS_KEPT:
                _fills.clear()
            _fills[held] = resolved
            if not own:
                _fills[key] = (params, spec, value)
            return value
        except Exception:  # a stale or foreign table entry: no model, the figure stands
            return None

    return fill


_DIMS = frozenset("MNK")
