"""What the dispatch asks of each candidate in a table entry before it ranks them: can it run the
problem on this GPU (refusal), only on a slow path (slow_path), and how full its tile rounds are at
the call's own shape (round_fill, for dispatch.refit)."""
from __future__ import annotations

from dataclasses import replace
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


def round_fill(op_name: str, problem):
    """fill(name, params, shape) for dispatch.refit: the share of the GPU the kernel's tile rounds
    fill at `shape` (the problem with those dimensions), None where its spec has no model."""
    from .. import registry

    def fill(name: str, params: Mapping[str, int], shape: tuple) -> float | None:
        try:
            spec = registry.get(name, op_name)
            model = getattr(spec, "round_fill", None)
            if model is None or len(shape) != 3:
                return None
            return model(replace(problem, M=shape[0], N=shape[1], K=shape[2]), spec.resolve(params))
        except Exception:  # a stale or foreign table entry: no model, the figure stands
            return None

    return fill
