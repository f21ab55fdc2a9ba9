"""`--impl dispatch`: what the public API would run for each problem of a bench run (gemmlab.sgemm
with no implementation named), measured under the name `dispatch` beside the others, same run,
same inputs, same options.

The API sits above the harness (the layers), so the harness cannot ask it: the caller injects a
resolver, problem, GPU name and architecture -> (implementation, parameters, where the choice came
from). Each problem's choice becomes a stand-in named `dispatch`: a kernel's variant with the
chosen parameters as its defaults, or the library's baseline itself under the new name (so a
cuBLAS choice times cuBLAS). One `Slot` holds them all and stands in the run's implementation list
at the place `dispatch` was named, so the run keeps one progress bar, one stored run, one table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .. import registry
from ..errors import BadArgumentError
from .ui import fmt_params

DISPATCH = "dispatch"
# (problem, GPU name, architecture) -> (implementation name, parameters, where the choice came from)
Resolver = Callable[[Any, str, str], tuple[str, Mapping[str, int], str]]
PARAMS_REFUSED = ("--params is for a named kernel: dispatch runs the parameters the API would choose "
                  "(its table, or the database named by GEMMLAB_DB)")


def split(names: str) -> tuple[str, tuple[str, ...] | None]:
    """--impl text without `dispatch`, and the names given after it (None: dispatch not named)."""
    given = [n.strip() for n in names.split(",")]
    if DISPATCH not in given:
        return names, None
    at = given.index(DISPATCH)
    rest = [n for n in given if n != DISPATCH]
    return ",".join(rest), tuple(n for n in given[at + 1:] if n != DISPATCH)


def stand_in(op_name: str, name: str, params: Mapping[str, int]) -> Any:
    """Implementation `name` of `op_name` under the name `dispatch`: a kernel with `params` as its
    defaults (checked like --params), a library as it is."""
    impl = registry.get(name, op_name)
    title, idea = f"{impl.title} (the API's choice)", f"what the dispatch runs here: {name}"
    if impl.kind != "kernel":
        return impl.variant(DISPATCH, title, idea)
    return impl.variant(DISPATCH, title, idea, **impl.resolve(params))


@dataclass(frozen=True)
class Pick:
    """The dispatch's choice at one problem: its stand-in, and what it is for the output."""

    impl: Any
    chosen: str
    params: dict
    where: str

    def line(self, label: str) -> str:
        params = f" {fmt_params(self.params)}" if self.params else ""
        return f"{DISPATCH} at {label}: {self.chosen}{params} ({self.where})"

    @property
    def record(self) -> dict:
        """What a result row keeps of the choice (its `extra`): the implementation and why."""
        return {"impl": self.chosen, "where": self.where}


class Slot:
    """`dispatch` in a run's implementation list: each problem's pick, looked up by its shape."""

    name = DISPATCH
    kind = "dispatch"

    def __init__(self, picks: Mapping[str, Pick]):
        self.picks = dict(picks)

    def unavailable_reason(self) -> str:
        return ""

    def at(self, problem) -> Pick:
        return self.picks[problem.shape]


def slot(problems: list, resolve: Resolver | None, gpu: str, arch: str) -> Slot:
    """Every problem's pick (before any GPU work: a bad choice is one line, not a failed run)."""
    if resolve is None:
        raise BadArgumentError("--impl dispatch: this caller gives no dispatch resolver (gemmlab bench does)")
    picks = {}
    for problem in problems:
        name, params, where = resolve(problem, gpu, arch)
        impl = stand_in(problem.op, name, params)
        picks[problem.shape] = Pick(impl, name, dict(impl.defaults), where)
    return Slot(picks)


def place(impls: list, found: Slot, after: tuple[str, ...]) -> list:
    """The run's list with the slot where `dispatch` was named: before the first of the names the
    user gave after it (the op's added references stay where they were)."""
    at = next((k for k, i in enumerate(impls) if i.name in after), len(impls))
    return impls[:at] + [found] + impls[at:]
